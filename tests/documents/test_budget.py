"""A budgeted document `query` returns the best chunk's text within the budget, envelope included, with
the meta an agent acts on (no embedding profile twice over); without a budget it is Crux's envelope."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cruxsql.documents.lane import DocumentLane
from cruxsql.documents.sources import chunk_document
from cruxsql.facts.store import Store
from cruxsql.recall.tokens import compact_json, estimate_tokens_str

NOTES = {f"note-{i}.md": f"# Drill {i}\n\nThe failover drill of team {name} promotes the standby, then replays "
         f"the queue from offset zero and checks the ledger totals before reopening writes.\n"
         for i, name in enumerate(["orchid", "basalt", "heron"])}


@pytest.fixture
def lane(tmp_path: Path):
    with Store(tmp_path / "data") as store:
        lane = DocumentLane(store)
        for doc_id, text in NOTES.items():
            lane.ingest([chunk_document(doc_id, text, True)])
        yield lane


@pytest.mark.parametrize("budget", [130, 200, 400])
def test_the_best_chunk_within_the_budget(lane: DocumentLane, budget: int) -> None:
    answer = lane.query("orchid failover", token_budget=budget)
    assert estimate_tokens_str(compact_json(answer)) <= budget
    assert answer["pointers"][0]["id"] == "0:0"
    best = lane.expand(["0:0"])[0][0].text
    (content,) = answer["content"]
    assert content["id"] == "0:0" and best.startswith(content["text"]) and content["text"]
    assert content.get("truncated", False) == (content["text"] != best)
    assert set(answer["meta"]) <= {"total_candidates", "coverage", "score_space", "local_semantic_profile_id",
                                   "dense_segments_skipped", "left_out"}
    assert answer["meta"]["left_out"] == 3 - len(answer["pointers"])
    assert "embedding_fingerprint" not in json.dumps(answer)


def test_below_its_minimum_the_answer_is_one_pointer(lane: DocumentLane) -> None:
    answer = lane.query("orchid failover", token_budget=40)     # a pointer and its envelope: ~100 tokens
    assert [p["id"] for p in answer["pointers"]] == ["0:0"] and "content" not in answer
    assert answer["hydrate_tier"] == "pointer" and answer["meta"]["left_out"] == 2


def test_a_large_budget_carries_the_whole_chunk_and_every_pointer(lane: DocumentLane) -> None:
    answer = lane.query("orchid failover", token_budget=1000)
    assert answer["content"][0]["text"] == lane.expand(["0:0"])[0][0].text
    assert len(answer["pointers"]) == 3 and answer["meta"]["left_out"] == 0


def test_without_a_budget_it_is_cruxs_envelope(lane: DocumentLane) -> None:
    answer = lane.query("orchid failover")
    assert "content" not in answer and answer["hydrate_tier"] == "pointer"
    assert "local_semantic_profile" in answer["meta"] and "agent_decision" in answer
