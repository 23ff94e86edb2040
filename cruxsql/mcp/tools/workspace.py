"""Workspace retrieval tools: the six ctx_* verbs (docs/workspace.md) over the indexed workspace (`workspace.db`).

The workspace is the data directory's (`cruxsql workspace index PATH --data-dir DATA_DIR`), shared by
every agent and tenant of the server. The session the ledger and the ConvergenceGovernor count under
is the connection's: tenant, agent and this server process, never a tool argument. The index is opened
per call, so a reindex or a deleted and rebuilt `workspace.db` is seen at once.
"""

from __future__ import annotations

import os
import time
from typing import Any, Literal, Optional

from ...workspace import Workspace
from ...workspace.context import MIN_BUDGET
from ...workspace.schema import DB_NAME
from ..call import Call
from ..registry import READ, ToolError, ToolResult, reads, shape, tool

PROCESS = f"{os.getpid()}.{int(time.time())}"     # pid and start second: a reused pid is another session


def session_of(call: Call) -> str:
    """`mcp:<tenant>/<agent>/<pid>.<start>`: one session per agent per server process."""
    return f"mcp:{call.tenant}/{call.agent or '__anon__'}/{PROCESS}"


def _run(call: Call, verb: str, **args: Any) -> ToolResult:
    data_dir = call.store.data_dir
    if not (data_dir / DB_NAME).is_file():
        raise ToolError(f"no workspace is indexed in {data_dir}: run `cruxsql workspace index PATH` first")
    with Workspace(data_dir) as ws:
        reply = ws.call(session_of(call), verb, **args)
    return ToolResult(reply.text, reply.data)


@tool(kind=READ, hints=reads("Search the workspace"),
      output=shape(query="string", mode="string", files_total="integer", occurrences_total="integer",
                   ranked="boolean", missing_terms="array", offset="integer", files="array"))
def ctx_search(call: Call, query: str, mode: Literal["content", "paths", "count"] = "content", offset: int = 0,
               limit: Optional[int] = None, per_file: int = 5, exhaustive: bool = False) -> ToolResult:
    """Search the workspace's files for a query, ranked (defining files first), lines grouped per file."""
    return _run(call, "ctx_search", query=query, mode=mode, offset=offset, limit=limit, per_file=per_file,
                exhaustive=exhaustive)


@tool(kind=READ, hints=reads("Read a workspace file"),
      output=shape(path="string", sha="string", mode="string", lines="integer", full_tokens="integer",
                   content="string"))
def ctx_read(call: Call, path: str, mode: Optional[str] = None, if_hash: Optional[str] = None) -> ToolResult:
    """Read a workspace file in a mode (full, lines:START-END, signatures, map, sections; default auto)."""
    return _run(call, "ctx_read", path=path, mode=mode, if_hash=if_hash)


@tool(kind=READ, hints=reads("Read a document view"),
      output=shape(path="string", sha="string", view="string", full_tokens="integer", whole="boolean",
                   content="string"))
def ctx_doc(call: Call, path: str, view: Literal["outline", "section", "code", "links", "skeleton"] = "outline",
            pattern: Optional[str] = None) -> ToolResult:
    """A view of a markdown file; pattern names the section (view=section) or the code language (view=code)."""
    if view == "section" and not pattern:
        raise ToolError("ctx_doc view=section needs a pattern (a heading title, slug or part of one)")
    if pattern is not None and view not in ("section", "code"):
        raise ToolError(f"ctx_doc pattern applies to view=section or view=code, not view={view}")
    return _run(call, "ctx_doc", path=path, view=view, pattern=pattern)


@tool(kind=READ, hints=reads("Impact of a change"),
      output=shape(target="string", approximate="boolean", defined_in="array", deps="array",
                   external="array", dependents="array", transitive="array", tests="array", uses="array",
                   depth="integer"))
def ctx_impact(call: Call, target: str, depth: int = 3) -> ToolResult:
    """Deps, dependents, transitive dependents and affected tests of a file or symbol (approximate)."""
    return _run(call, "ctx_impact", target=target, depth=depth)


@tool(kind=READ, hints=reads("Context for a task"),
      output=shape(task="string", terms="array", budget="integer", used_tokens="integer",
                   definitions="array", files="array", omitted="array"))
def ctx_context(call: Call, task: str, token_budget: int = 1500) -> ToolResult:
    """One block packed under token_budget for a task: definitions, callers, files, snippets."""
    shaped = call.budget(token_budget)
    if token_budget >= MIN_BUDGET > shaped:      # shaped near the session limit below the packer's floor
        call.notes[-1] = call.notes[-1].replace(f"token_budget={shaped}", f"token_budget={MIN_BUDGET} (its minimum)")
        shaped = MIN_BUDGET
    return _run(call, "ctx_context", task=task, token_budget=shaped)


@tool(kind=READ, hints=reads("Expand a handle"),
      output=shape(handle="string", kind="string", path="string", qualname="string", start="integer",
                   end="integer", moved="boolean", content="string"))
def ctx_expand(call: Call, handle: str) -> ToolResult:
    """The text behind a handle a ctx_* tool issued (@h:<sha8> or PATH#QUALNAME@L<line>)."""
    return _run(call, "ctx_expand", handle=handle)
