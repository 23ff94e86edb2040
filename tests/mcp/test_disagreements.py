"""cruxsql's curation reaches agents: `memory_disagreements` (numeric, phrase polarity, actor flip-flops,
with reasons and evidence, within its token budget) and superseded versions marked in `memory_view`."""

from __future__ import annotations

from pathlib import Path

import pytest

from cruxsql.facts.store import Store, StoreRequest
from cruxsql.mcp.identity import Identity
from cruxsql.mcp.server import CruxServer
from cruxsql.recall.tokens import estimate_tokens


@pytest.fixture
def server(tmp_path: Path):
    with Store(tmp_path / "data") as store:
        store.store_batch([StoreRequest("svc", "latency", "120 ms", actor="alice"),
                           StoreRequest("svc", "latency", "95ms", actor="bob")], chain=False)
        store.store_batch([StoreRequest("deploy", "state", "deployed to prod", actor="alice"),
                           StoreRequest("deploy", "state", "not deployed", actor="bob")], chain=False)
        first = store.store("cfg", "replicas", "3", actor="alice")
        second = store.store("cfg", "replicas", "7", actor="bob")
        store.store("notes", "plan", "3 things", private=True, agent="alice", actor="alice")
        yield CruxServer(store, identity=Identity("carol")), first, second


def test_disagreements_with_reasons_and_evidence(server) -> None:
    server, first, second = server
    result = server.call("memory_disagreements", {"token_budget": 2000})
    assert not result.is_error
    found = result.structured_content["findings"]
    assert [(f["reason"], f["entity"], f["key"]) for f in found] == [
        ("actor_flip_flop", "cfg", "replicas"), ("phrase_polarity", "deploy", "state"),
        ("numeric_disagreement", "svc", "latency")]
    flip = found[0]
    assert flip["fact_ids"] == [first.fact_id, second.fact_id] and flip["values"] == ["3", "7"]
    assert flip["evidence"]["actors"] == ["alice", "bob"] and flip["evidence"]["change"] == "numeric_disagreement"
    assert result.structured_content["pointers"] == [] and result.structured_content["count"] == 3
    lines = result.content[0].text.splitlines()
    assert lines[0] == (f"actor_flip_flop [cfg] replicas: {first.fact_id} '3' vs {second.fact_id} '7' "
                        "(confidence 0.80; actors alice, bob)")
    assert len(lines) == 3
    only = server.call("memory_disagreements", {"reasons": ["numeric_disagreement"]}).structured_content
    assert [f["reason"] for f in only["findings"]] == ["numeric_disagreement"]


@pytest.mark.parametrize("budget", [125, 140, 155])
def test_disagreements_fit_the_budget_in_the_whole_answer(server, budget: int) -> None:
    server, *_ = server
    result = server.call("memory_disagreements", {"token_budget": budget})
    assert estimate_tokens(result.model_dump(mode="json", by_alias=True, exclude_none=True)) <= budget  # the whole
    structured = result.structured_content
    assert len(structured["findings"]) + len(structured["pointers"]) + structured["left_out"] == 3
    assert structured["pointers"] and set(structured["pointers"][0]) == {"reason", "entity", "key", "fact_ids"}
    lines = result.content[0].text.splitlines()           # no values past the budget, and counts for the rest
    assert lines[-1] == f"-- {structured['left_out']} more left out (token_budget={budget}, limit=50)"
    assert lines[-2].startswith(f"+{len(structured['pointers'])} more as pointers")
    limited = server.call("memory_disagreements", {"limit": 1})
    assert limited.content[0].text.endswith("-- 2 more left out (token_budget=500, limit=1)")
    bad = server.call("memory_disagreements", {"reasons": ["gossip"]})
    assert bad.is_error and bad.content[0].text.startswith("memory_disagreements: `reasons.0`: Input should be")


def test_memory_view_marks_superseded_versions(server) -> None:
    server, first, second = server
    view = server.call("memory_view", {"entity": "cfg"})
    assert view.content[0].text.splitlines() == [
        f"[cfg] replicas = 7 (id={second.fact_id}, v2)",
        f"[cfg] replicas = 3 (id={first.fact_id}, v1) [superseded]"]
    rows = {f["id"]: f["superseded_by"] for f in view.structured_content["facts"]}
    assert rows == {second.fact_id: None, first.fact_id: second.fact_id}
