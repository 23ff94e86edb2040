"""Every MCP tool carries the spec's ToolAnnotations (title and the four hints), read back by the SDK client
from a real `cruxsql mcp`: clients auto-approve reads and ask before destructive calls by them."""

from __future__ import annotations

from pathlib import Path

import pytest

from cruxsql.mcp.registry import ACCOUNTING, READ, WRITE, discover
from support.mcp_clients import stdio

# the calls that hide or remove what an agent stored: a client should confirm them
DESTRUCTIVE = {"delete_fact", "memory_forget", "memory_consolidate", "memory_consolidate_undo"}
HINTS = ("read_only_hint", "destructive_hint", "idempotent_hint", "open_world_hint")


def test_every_discovered_tool_declares_a_title_and_all_four_hints() -> None:
    specs = discover()
    missing = [name for name, spec in specs.items()
               if spec.annotations is None or not spec.annotations.title
               or any(getattr(spec.annotations, hint) is None for hint in HINTS)]
    assert missing == [], f"tools without complete annotations (declare hints=reads(...)/writes(...)): {missing}"


def test_the_hints_follow_what_each_tool_does() -> None:
    for name, spec in discover().items():
        hints = spec.annotations
        assert hints is not None
        assert hints.read_only_hint is (spec.kind in (READ, ACCOUNTING)), name
        assert hints.destructive_hint is (name in DESTRUCTIVE), name
        assert hints.open_world_hint is False, name     # a tool only ever reaches this store
        if spec.kind == READ:
            assert hints.idempotent_hint is True, name
    assert {n for n, s in discover().items() if s.kind == WRITE} >= DESTRUCTIVE


@pytest.mark.slow
def test_the_sdk_client_reads_the_annotations_back(portal, tmp_path: Path) -> None:
    client = stdio(portal, tmp_path / "store", "--agent", "alice", "--tenant", "acme")
    try:
        listed = {t.name: t.annotations for t in client.tools()}
    finally:
        client.close()
    declared = discover()
    assert set(listed) == set(declared)
    for name, hints in listed.items():
        assert hints is not None, name
        assert hints.model_dump() == declared[name].annotations.model_dump(), name
    assert listed["delete_fact"].destructive_hint is True
    assert listed["recall"].read_only_hint is True and listed["recall"].title == "Recall facts"
    assert listed["store_fact"].read_only_hint is False and listed["store_fact"].destructive_hint is False


@pytest.mark.parametrize("tool", ["delete_fact", "memory_forget"])
def test_a_destructive_tool_is_not_marked_idempotent_by_accident(tool: str) -> None:
    hints = discover()[tool].annotations
    assert hints is not None
    # delete_fact: a second delete of the same id changes nothing more; a forget writes a new receipt each time
    assert hints.idempotent_hint is (tool == "delete_fact")
