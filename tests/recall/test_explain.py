"""`query --explain`: a hand-computed case for every part of the explanation."""

from __future__ import annotations

import json

import pytest

from cruxsql.errors import InvalidInput
from cruxsql.facts.store import Store
from cruxsql.recall import explain as recall_explain
from cruxsql.recall.facade import Recall

HOUR = 3_600_000_000_000


@pytest.fixture
def store(store: Store) -> Store:
    s = store
    s.store("incident:1", "status", "deploy rolled back", horizon_class="volatile", confidence=0.8)  # stale at +30h
    s.store("deploy", "owner", "platform team", horizon_class="stable")
    s.store("deploy", "window", "mondays")
    s.store("deploy", "window", "tuesdays")                              # supersedes `old`
    gone = s.store("deploy", "pager", "555-0100")
    s.delete(gone.fact_id)
    s.store("notes", "deploy", "my private deploy note", private=True, agent="bob")   # only bob sees it
    s.store("deploy", "weak", "low confidence deploy hint", confidence=0.2)
    s.store("deploy", "x", "other tenant's deploy", tenant="globex")
    return s


def test_explanation_of_a_hand_computed_case(store):
    recall = Recall(store)
    now = store.get(store.history("incident:1", "status")[0].fact_id).stored_at + 30 * HOUR
    result = recall.query_facts("deploy TEAM", top_k=2, min_effective_confidence=0.3, now=now, contract="legacy")
    why = recall_explain.explain(recall, result, "deploy TEAM")
    assert [r["entity"] + "/" + r["key"] for r in result.rows] == ["deploy/window", "deploy/owner"]  # tie: newest first
    assert why["terms"] == ["deploy", "team"]
    assert why["rows"][1]["matched_terms"] == {"deploy": ["entity"], "team": ["value"]}
    assert why["rows"][1]["horizon_class"] == "stable" and why["rows"][1]["horizon_hours"] == 8760
    assert why["rows"][0]["matched_terms"] == {"deploy": ["entity"]}
    # left out, by the first step that dropped each: the deleted pager, the superseded window, bob's
    # 0.2 hint below the floor, and the stale incident (0.8 x 0.5 = 0.4) cut by top_k; bob's private
    # note is not counted at all (a count would tell the caller it exists).
    assert why["left_out"] == {"deleted": 1, "superseded": 1, "below_floor": 1, "over_budget_or_top_k": 1}
    full = recall.query_facts("deploy", top_k=10, now=now, contract="legacy")
    at = [r["entity"] for r in full.rows].index("incident:1")
    explained = recall_explain.explain(recall, full, "deploy")["rows"][at]
    assert full.rows[at]["freshness"] == "stale"
    assert (explained["decay"], explained["effective_confidence"]) == (0.5, pytest.approx(0.4))
    assert explained["horizon_hours"] == 24
    assert recall_explain.explain_lines({"rows": [explained]}) == [
        '  why: "deploy" in value; 0.80 x 0.5 = 0.40 (stale, volatile 24h)']


def test_bob_sees_his_note_and_explain_refuses_known_at(store):
    recall = Recall(store)
    result = recall.query_facts("private", agent="bob", contract="legacy")
    assert recall_explain.explain(recall, result, "private", agent="bob")["rows"][0]["matched_terms"] == {
        "private": ["value"]}
    with pytest.raises(InvalidInput, match="does not combine with known_at"):
        recall_explain.explain(recall, result, "private", known_at="2026-01-01T00:00:00Z")


@pytest.mark.slow
def test_cli_explain(store, run_cli):
    out = run_cli("query", "team", "--explain", ok=True).stdout.splitlines()
    assert out[1] == '  why: "team" in value; 1.00 x 1 = 1.00 (fresh, stable 8760h)'
    assert out[-1] == "-- left out: nothing"
    data = json.loads(run_cli("query", "deploy", "--explain", "--json", ok=True).stdout)
    assert data["explain"]["left_out"] == {"deleted": 1, "superseded": 1}
