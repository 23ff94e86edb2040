"""What the server offers besides tools: a usage-guide prompt and two resources.

* prompt `memory_guide`: which tool for which need, naming only the tools this server lists;
* resource `cruxsql://stats`: what this connection can see (its agent, tenant, visible entities, tools);
* resource template `cruxsql://entity/{name}`: an entity's facts, as `memory_view` shows them to this
  connection (the same visibility, budget and accounting as the tool: it is run through `call`).
"""

from __future__ import annotations

import json
from typing import Callable
from urllib.parse import quote, unquote

import mcp_types as types

from ..recall.entities import list_entities
from .identity import Identity

GUIDE = "memory_guide"
STATS_URI = "cruxsql://stats"
ENTITY_PREFIX = "cruxsql://entity/"
# (need, tools): the guide's lines, each kept when its first tool is listed
NEEDS = [
    ("answer a question from memory (ranked, best first)", ("recall",)),
    ("remember one thing (entity, key, value)", ("store_fact",)),
    ("remember many things in one write", ("store_facts",)),
    ("what memory holds about one entity", ("memory_view", "list_entities")),
    ("start a session with what matters", ("get_bootstrap",)),
    ("search or read documents", ("query", "query_expand")),
    ("correct a fact, or pin it", ("memory_edit", "memory_pin")),
    ("remove one fact", ("delete_fact",)),
    ("forget a scope (preview first)", ("memory_forget_dry_run", "memory_forget")),
    ("how old or trusted a fact is", ("memory_freshness", "memory_history")),
]


def prompts() -> list[types.Prompt]:
    return [types.Prompt(name=GUIDE, title="How to use this memory",
                         description="Which cruxsql tool to use for which need (a short guide).")]


def guide(listed: set[str]) -> types.GetPromptResult:
    lines = [f"- {need}: {' / '.join(t for t in tools if t in listed)}" for need, tools in NEEDS
             if tools[0] in listed]
    text = ("This server is your long-term memory. Ask it before asking the user; store what you learn.\n"
            "Which tool for which need:\n" + "\n".join(lines) +
            "\nTimes (recall's stored_after, ...) may be written as yesterday, last week, 3 days ago or RFC 3339.")
    return types.GetPromptResult(description="Which cruxsql tool to use for which need", messages=[
        types.PromptMessage(role="user", content=types.TextContent(type="text", text=text))])


def resources() -> list[types.Resource]:
    return [types.Resource(name="stats", title="Memory statistics", uri=STATS_URI, mime_type="application/json",
                           description="What this connection can see: its agent, tenant, entities and tools.")]


def templates() -> list[types.ResourceTemplate]:
    return [types.ResourceTemplate(name="entity", title="An entity's facts", uri_template=ENTITY_PREFIX + "{name}",
                                   mime_type="text/plain",
                                   description="The facts of one entity this connection can see (memory_view).")]


def entity_uri(name: str) -> str:
    return ENTITY_PREFIX + quote(name, safe="")


def read(uri: str, identity: Identity, store: object, tools: int,
         view: Callable[[str], tuple[str, bool]]) -> types.ReadResourceResult:
    """The resource at `uri` for `identity`; `view(entity)` runs memory_view for it -> (text, is_error)."""
    if uri == STATS_URI:
        entities = list_entities(store, identity.tenant, identity.agent)  # type: ignore[arg-type]
        text = json.dumps({"agent": identity.agent, "tenant": identity.tenant, "entities": len(entities),
                           "tools": tools, "prompts": [GUIDE]})
        return _contents(uri, text, "application/json")
    if uri.startswith(ENTITY_PREFIX) and len(uri) > len(ENTITY_PREFIX):
        text, failed = view(unquote(uri[len(ENTITY_PREFIX):]))
        if failed:
            raise ValueError(text)
        return _contents(uri, text, "text/plain")
    raise ValueError(f"unknown resource {uri!r}: read {STATS_URI} or {ENTITY_PREFIX}<entity>")


def _contents(uri: str, text: str, mime: str) -> types.ReadResourceResult:
    return types.ReadResourceResult(contents=[types.TextResourceContents(uri=uri, mime_type=mime, text=text)])
