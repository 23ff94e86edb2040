"""CLI of the workspace index and the ctx_* verbs: `cruxsql workspace index|status|ledger`, `cruxsql ctx ...`.

They call only `cruxsql.workspace.Workspace`. The session (who is calling, for the ledger and the
ConvergenceGovernor) comes from --session / CRUXSQL_SESSION, set by the operator.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Callable, Optional

import click

from ..workspace import Workspace
from ..workspace.doc import DOC_VIEWS
from ..workspace.ranking import SWITCHES
from ..workspace.schema import DB_NAME as WORKSPACE_DB
from ..workspace.search import SEARCH_MODES
from .common import COUNT, echo_json, echo_rows, fails_cleanly, progress_callback
from .data_dir import DataDirError, check_directory, data_dir_state
from .options import (
    create_option,
    data_dir_option,
    json_flag,
    limit_option,
    offset_option,
    output_options,
    token_budget_option,
)

SESSION_ENV = "CRUXSQL_SESSION"


def _verb_options(fn: Callable) -> Callable:
    fn = json_flag("Print the structured result as JSON.")(fn)
    fn = click.option("--session", envvar=SESSION_ENV, default="cli", show_default=True, show_envvar=True,
                      help="Session the call is logged under (ledger, convergence nudges).")(fn)
    return data_dir_option(fn)


def _off_option(fn: Callable) -> Callable:
    return click.option("--off", "off", multiple=True, type=click.Choice(SWITCHES), metavar="SIGNAL",
                        help=f"Switch a ranking signal off (repeatable): {', '.join(SWITCHES)}.")(fn)


def _indexed(data_dir: Path) -> Path:
    """The data directory of an existing workspace index (read commands never create one)."""
    check_directory(data_dir)
    if not (data_dir / WORKSPACE_DB).is_file():
        raise DataDirError(f"no workspace is indexed in {data_dir}: run `cruxsql workspace index PATH` first")
    return data_dir


def _run(data_dir: Path, session: str, as_json: bool, verb: str, **args: Any) -> None:
    with Workspace(_indexed(data_dir)) as ws:
        reply = ws.call(session, verb, **args)
    if as_json:
        echo_json(reply.data)
    else:
        click.echo(reply.text)


@click.group("workspace")
def workspace_group() -> None:
    """Index a code workspace into DATA_DIR/workspace.db (a derived view: delete it and reindex)."""


@workspace_group.command("index")
@click.argument("path", type=click.Path(file_okay=False, path_type=Path))
@json_flag("Print the report as JSON.")
@data_dir_option
@create_option
@fails_cleanly
def index(path: Path, as_json: bool, data_dir: Path, create: bool) -> None:
    """Index (or incrementally reindex) the folder PATH: files, symbols, imports, sections, BM25.

    Unchanged files (same mtime and size) are not read; a changed mtime rehashes; an equal hash
    reindexes nothing. .gitignore is honoured; lockfiles, binaries and files over 1 MB are skipped.
    """
    check_directory(data_dir)
    if not path.is_dir():  # before the data directory is created
        raise DataDirError(f"workspace path '{path}' is not a directory")
    if not (data_dir / WORKSPACE_DB).is_file():     # a first index: into a store, or a new one with --create
        data_dir_state(data_dir, create)
    with Workspace(data_dir) as ws:
        report = ws.index(path, progress_callback("indexing workspace"))
    if as_json:
        echo_json(dataclasses.asdict(report))
        return
    skipped = ", ".join(f"{n} {reason}" for reason, n in sorted(report.skipped.items())) or "none"
    click.echo(f"indexed {report.root}: {report.files} files ({report.added} added, {report.changed} changed, "
               f"{report.rehashed_unchanged} touched but unchanged, {report.unchanged} unchanged, "
               f"{report.removed} removed) in {report.seconds:.2f}s; skipped: {skipped}")


@workspace_group.command("status")
@json_flag("Print the status as JSON.")
@data_dir_option
@fails_cleanly
def status(as_json: bool, data_dir: Path) -> None:
    """What the workspace index holds: files per class, symbols, imports, sections, skips."""
    with Workspace(_indexed(data_dir)) as ws:
        info = ws.status()
    if as_json:
        echo_json(info)
        return
    for key, value in info.items():
        if isinstance(value, dict):
            value = ", ".join(f"{k} {v}" for k, v in value.items()) or "-"
        click.echo(f"{key}: {value if value is not None else '-'}")


@workspace_group.command("ledger")
@output_options()
@data_dir_option
@fails_cleanly
def ledger_command(fmt: str, data_dir: Path) -> None:
    """Tokens returned per session against full reads of the same files (the `ledger_savings` view)."""
    columns = ["session", "calls", "returned_tokens", "full_read_tokens", "saved_tokens", "saved_share", "nudges"]
    with Workspace(_indexed(data_dir)) as ws:
        rows = list(ws.db.execute(f"SELECT {', '.join(columns)} FROM ledger_savings ORDER BY session"))
    echo_rows(columns, rows, fmt)


@click.group("ctx")
def ctx_group() -> None:
    """Bounded, task-shaped retrieval over the indexed workspace (the ctx_* verbs; docs/workspace.md).

    Output is plain grouped lines with one header line, `+N more … offset=N` tails and a footer
    naming the next verb; --json prints the structured result for scripts.
    """


@ctx_group.command("search")
@click.argument("query")
@click.option("--mode", type=click.Choice(SEARCH_MODES), default="content", show_default=True,
              help="content: grouped lines; paths: one line per file; count: totals only.")
@offset_option("Skip this many ranked files.")
@limit_option("Files per page (default 5; 20 with --mode paths).", default=0, show_default=False)
@click.option("--per-file", type=COUNT, default=5, show_default=True, help="Lines shown per file.")
@click.option("--exhaustive", is_flag=True, help="Every matching line of every file, in path order.")
@_off_option
@_verb_options
@fails_cleanly
def search(query: str, mode: str, offset: int, limit: int, per_file: int, exhaustive: bool, off: tuple[str, ...],
           session: str, as_json: bool, data_dir: Path) -> None:
    """Search file contents for QUERY, ranked (defining files first), grouped per file."""
    _run(data_dir, session, as_json, "ctx_search", off=frozenset(off), query=query, mode=mode, offset=offset,
         limit=limit, per_file=per_file, exhaustive=exhaustive)


@ctx_group.command("read")
@click.argument("path")
@click.option("--mode", help="full | lines:START-END | signatures | map | sections | auto (default: auto — "
                             "signatures for larger code, full for markdown, docs, config and small files).")
@click.option("--if-hash", metavar="SHA", help="Reply `unchanged:<sha8>` only if the file still has this sha.")
@_verb_options
@fails_cleanly
def read(path: str, mode: Optional[str], if_hash: Optional[str], session: str, as_json: bool, data_dir: Path) -> None:
    """Read PATH in a mode; `full` is the file verbatim, summaries say `mode=<m> (full ≈ N tok)`."""
    _run(data_dir, session, as_json, "ctx_read", path=path, mode=mode, if_hash=if_hash)


@ctx_group.command("doc")
@click.argument("path")
@click.option("--outline", "view", flag_value="outline", default=True, help="Headings with lines and sizes.")
@click.option("--section", metavar="PATTERN",
              help="One section (title, slug, part of one, or L<line> of its heading), verbatim; past ~2 KB "
                   "its subsections come as one line each.")
@click.option("--code", is_flag=False, flag_value="*", default=None, metavar="[LANG]",
              help="Fenced code blocks, optionally only LANG.")
@click.option("--links", "view", flag_value="links", help="Links with line numbers; local targets checked.")
@click.option("--skeleton", "view", flag_value="skeleton", help="Headings with each section's first sentence.")
@_verb_options
@fails_cleanly
def doc(path: str, view: str, section: Optional[str], code: Optional[str], session: str, as_json: bool,
        data_dir: Path) -> None:
    """Markdown views of PATH; files under ~2 KB come back whole."""
    pattern = None
    if section is not None:
        view, pattern = "section", section
    elif code is not None:
        view, pattern = "code", None if code == "*" else code
    assert view in DOC_VIEWS
    _run(data_dir, session, as_json, "ctx_doc", path=path, view=view, pattern=pattern)


@ctx_group.command("impact")
@click.argument("target")
@click.option("--depth", type=COUNT, default=3, show_default=True, help="Transitive dependents depth (1-6).")
@_verb_options
@fails_cleanly
def impact(target: str, depth: int, session: str, as_json: bool, data_dir: Path) -> None:
    """Deps, dependents, transitive dependents and affected tests of a file or symbol (approximate)."""
    _run(data_dir, session, as_json, "ctx_impact", target=target, depth=depth)


@ctx_group.command("context")
@click.argument("task")
@token_budget_option("Upper bound of the block (≥ 100).", default=1500)
@_off_option
@_verb_options
@fails_cleanly
def context(task: str, token_budget: int, off: tuple[str, ...], session: str, as_json: bool, data_dir: Path) -> None:
    """One budget-packed block for a natural-language TASK: definitions, callers, files, snippets."""
    _run(data_dir, session, as_json, "ctx_context", off=frozenset(off), task=task, token_budget=token_budget)


@ctx_group.command("expand")
@click.argument("handle")
@_verb_options
@fails_cleanly
def expand(handle: str, session: str, as_json: bool, data_dir: Path) -> None:
    """Dereference a handle a verb issued: @h:<sha8> or PATH#QUALNAME@L<line>."""
    _run(data_dir, session, as_json, "ctx_expand", handle=handle)


COMMANDS = (workspace_group, ctx_group)
