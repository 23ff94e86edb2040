"""No side channels between agents: every registered MCP tool answers another agent's private fact (its id,
its entity, a word of its value) byte for byte as it answers a fact that does not exist.

Each tool is called by bob twice, on two identical copies of one store in which alice keeps a private
fact: once naming alice's fact, once naming a fact nobody stored. The replies, with the two names swapped
for one placeholder (and fresh ids and clocks masked), must be identical. A new tool is walked as soon as
it is registered: its arguments are built from its input schema.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from cruxsql.facts.store import Store
from cruxsql.mcp.identity import Identity
from cruxsql.mcp.registry import discover
from cruxsql.mcp.server import CruxServer

PRIVATE = {"id": None, "entity": "secretproj", "word": "zebulon"}
MISSING = {"id": "f_0123456789abcdef0123456789abcdef", "entity": "nosuchproj", "word": "quixotic"}
ID_ARGS = {"fact_id", "canonical_fact_id"}
ID_LIST_ARGS = {"target_fact_ids", "protected_fact_ids", "source_fact_ids", "fact_ids", "supersedes"}
WORD_ARGS = {"query", "task", "new_value", "canonical_value", "value", "target", "handle"}
_FRESH = re.compile(r"\b[0-9a-f]{32}\b|\b[0-9a-f]{64}\b|f_[0-9a-f]{32}|rev_[0-9a-f]{32}|mcp-[0-9a-f-]{36}|\d{4}-\d\d-\d\d[T ][0-9:.]+(Z|\+00:00| UTC)?"
                    r"|\"(age_hours|elapsed_ms|took_ms)\":[0-9.]+")


def _value(arg: str, prop: dict[str, Any], names: dict[str, Any]) -> Any:
    """The argument naming `names`' fact (its id, entity or a word of it), else None."""
    if arg in ID_ARGS:
        return names["id"]
    if arg in ID_LIST_ARGS:
        return [names["id"]]
    if arg == "entity":
        return names["entity"]
    if arg in WORD_ARGS or arg == "topic":
        return names["word"]
    if arg == "scope":
        return {"type": "entity", "value": names["entity"]}
    return None


def variants(schema: dict[str, Any], names: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool's required arguments (naming the fact where they can), then once more with each optional
    argument that can name it, alone: an `entity` filter must not hide what a `query` would leak."""
    base: dict[str, Any] = {}
    optional = []
    required = set(schema.get("required", []))
    for arg, prop in schema["properties"].items():
        named = _value(arg, prop, names)
        if arg == "explain":
            base[arg] = True
        elif arg == "key":
            base[arg] = "codename"
        elif arg in required:
            base[arg] = named if named is not None else {
                "string": "x", "array": ["x"], "integer": 1, "number": 0.5, "boolean": False,
                "object": {}}[prop.get("type", "string")]
        elif named is not None:
            optional.append((arg, named))
    return [base] + [{**base, arg: named} for arg, named in optional]


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("side")
    with Store(root) as store:
        old = store.store("secretproj", "codename", "zebulon draft", private=True, agent="alice", actor="alice")
        store.delete(old.fact_id)
        fact = store.store("secretproj", "codename", "zebulon", private=True, agent="alice", actor="alice")
        store.store("shared", "note", "everyone sees this", actor="bob")
        PRIVATE["id"] = fact.fact_id
    return root


def reply(template: Path, tmp: Path, tool: str, names: dict[str, Any]) -> list[str]:
    replies = []
    for i, args in enumerate(variants(discover()[tool].input_schema, names)):
        copy = tmp / f"store{i}"
        shutil.copytree(template, copy)
        with Store(copy) as store:
            wire = CruxServer(store, identity=Identity("bob")).call(tool, args)
        text = json.dumps(wire.model_dump(mode="json", by_alias=True, exclude_none=True), sort_keys=True)
        text = text.replace(str(copy), "<DIR>")
        for placeholder, value in (("<ID>", names["id"]), ("<ENTITY>", names["entity"]), ("<WORD>", names["word"])):
            text = text.replace(value, placeholder)
        replies.append(_FRESH.sub("<fresh>", text))
    return replies


# Every feature flag on (those off by default included): a gated tool is walked doing its work, not
# answering "feature disabled" to both names alike.
FLAGS_ON = {"CORECRUXD_FEATURE_MEMORY_ACK": "1", "CORECRUXD_FEATURE_MEMORY_PANEL": "1",
            "CORECRUXD_FEATURE_SCOPED_FORGET": "1", "CORECRUXD_FEATURE_CONSOLIDATION": "1"}


@pytest.mark.slow
@pytest.mark.parametrize("tool", sorted(discover()))
def test_a_private_fact_answers_as_a_missing_one(template: Path, tmp_path: Path, tool: str, monkeypatch) -> None:
    for flag, value in FLAGS_ON.items():
        monkeypatch.setenv(flag, value)
    private = reply(template, tmp_path / "a", tool, PRIVATE)
    missing = reply(template, tmp_path / "b", tool, MISSING)
    assert private == missing


def test_every_feature_flag_of_the_tools_is_on_in_the_walk() -> None:
    import cruxsql.curation.contradictions as contradictions
    import cruxsql.curation.forget as forget
    import cruxsql.curation.memory_panel as panel
    assert {contradictions.CONSOLIDATION_FLAG, forget.FLAG, panel.PANEL_FLAG, panel.ACK_FLAG} == set(FLAGS_ON)


def test_the_walk_names_the_private_fact_in_every_tool_that_takes_a_fact(template: Path) -> None:
    """The walk is only as good as its arguments: every argument that can name a fact names it in one call."""
    for name, spec in discover().items():
        naming = {arg for arg, prop in spec.input_schema["properties"].items() if _value(arg, prop, PRIVATE)}
        called = [set(args) for args in variants(spec.input_schema, PRIVATE)]
        assert all(any(arg in args for args in called) for arg in naming), name
    assert {arg for spec in discover().values() for arg in spec.input_schema["properties"]} >= ID_ARGS | {"entity"}
