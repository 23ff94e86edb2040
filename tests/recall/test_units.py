"""Recall building blocks against hand-computed values: estimators, budget tiers, content_hash,
epitome cut, CRC-v1 envelope, freshness/decay/salience, Rust text rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from cruxsql.facts import codec
from cruxsql.recall import crc_v1, freshness, scope, tokens
from cruxsql.recall.freshness import DecayPolicy, freshness_at, parse_freshness_horizon, salience_factor

H = freshness.HOUR_MS
D = freshness.DAY_MS


# --- token estimators (token_estimate.rs) -----------------------------------------------------------

def test_estimators_fixtures():
    assert tokens.estimate_tokens(None) == 1
    assert tokens.estimate_tokens("") == 1
    assert tokens.estimate_tokens("a" * 400) == 100  # 402 bytes of JSON
    assert tokens.estimate_tokens({"entity": "project-x", "key": "status", "value": "done"}) == 13  # 53 bytes
    assert tokens.estimate_tokens_str("") == 1
    assert tokens.estimate_tokens_str("héllo wörld!") == 3  # 14 bytes
    assert codec.token_cost("") == 0
    assert codec.token_cost("hello world") == 3
    assert tokens.crc_full_cost("hello world") == 2
    assert codec.token_cost("é" * 3) == 2  # 6 bytes


def test_budget_tiers_fixtures():
    assert tokens.pointers_within_budget(500) == 12
    assert tokens.pointers_within_budget(2000) == 50
    assert tokens.pointers_within_budget(0) == 1
    assert tokens.pointers_within_budget(10) == 1
    assert tokens.fact_full_within_budget([100, 100, 100, 100], 250) == 2
    assert tokens.fact_full_within_budget([500, 80, 80], 100) == 1
    assert tokens.fact_full_within_budget([], 100) == 0
    assert tokens.fact_emit_within_budget([300] * 30, 1000) == (3, 5)
    assert tokens.fact_emit_within_budget([10, 10, 10], 1000) == (3, 3)
    assert tokens.fact_emit_within_budget([500, 80, 80], 100) == (1, 1)
    assert tokens.fact_emit_within_budget([], 100) == (0, 0)


def test_legacy_fill():
    assert tokens.legacy_fill([5, 5, 5], 10) == 2      # stops once used >= budget
    assert tokens.legacy_fill([50, 1], 10) == 1        # the first fact always admitted
    assert tokens.legacy_fill([3, 9, 1], 10) == 1      # stops before the first that does not fit
    assert tokens.legacy_fill([0, 0, 4], 0) == 1       # used >= budget after the first
    assert tokens.legacy_fill([], 10) == 0


def test_content_hash_fixtures():
    assert tokens.content_hash("status = green") == "05f15bfd8fbcf267"
    assert tokens.content_hash("status = red") == "0bd86bb2f9af640b"
    assert tokens.content_hash("beta") == "d52d02a283d31cb1"
    assert tokens.content_hash("") == "c3817c016ba4ff30"


def test_epitome_cut_on_multibyte_characters():
    # "e k = " is 6 bytes; 73 'a' make 79; 'é' (2 bytes) would straddle byte 80: Crux panics, we cut before it
    ep = tokens.epitome("e", "k", "a" * 73 + "é" + "tail")
    assert ep == "e k = " + "a" * 73
    assert len(ep.encode()) == 79
    # a 4-byte character starting at byte 78
    ep = tokens.epitome("e", "k", "a" * 72 + "😀" + "x")
    assert ep == "e k = " + "a" * 72 and len(ep.encode()) == 78
    # exactly 80 bytes ending on a 2-byte character: kept whole
    ep = tokens.epitome("e", "k", "a" * 72 + "é")
    assert len(ep.encode()) == 80 and ep.endswith("é")
    assert tokens.cut_utf8("ΣΣΣ", 5) == "ΣΣ"
    assert tokens.cut_utf8("short", 80) == "short"


def _row(fid, value, eff=0.9, entity="proj", key="k"):
    return {"fact_id": fid, "entity": entity, "key": key, "value": value, "confidence": 1.0,
            "effective_confidence": eff, "horizon_class": "none", "freshness": "fresh", "age_hours": 3,
            "superseded_by": None, "actor": None}


def test_crc_envelope_tiered_hand_computed():
    rows = [_row("f1", "a" * 40), _row("f2", "b" * 41, 0.8), _row("f3", "status = green", 0.7)]
    env = crc_v1.wrap_facts_tiered(rows[:2], None, "q", 1, 3)
    assert env["hydrate_tier"] == "mixed"
    assert [p["reason"] for p in env["pointers"]] == ["Exact", "Demoted"]
    assert "content_hash" not in env["pointers"][0]
    assert env["pointers"][1]["content_hash"] == tokens.content_hash("b" * 41)
    assert env["content"] == [{"id": "f1", "text": "a" * 40}]
    assert env["cost_estimate"] == {"pointer": 80, "summary": 300, "full": 10 + 10}
    assert env["meta"] == {"resolved_by": "query", "ranked": True, "demoted": 1, "total_candidates": 3,
                           "emitted_full": 1, "capped": 1}
    assert env["envelope"]["freshness"] == {"effective_confidence": 0.9, "age_hours": 3, "horizon_class": "none",
                                            "superseded_by": None}
    assert env["envelope"]["memories_used"][1] == {"fact_id": "f2", "topic": "proj", "freshness": "fresh"}
    assert env["next"] == {"canonical_slug": "proj", "resolution_pointer": None, "expand": None}
    assert list(env) == ["contract", "kind", "hydrate_tier", "pointers", "content", "cost_estimate",
                         "agent_decision", "envelope", "next", "meta"]


def test_crc_envelope_full_and_entity():
    env = crc_v1.wrap_facts([_row("f1", "hello world")], "svc", None)
    assert env["hydrate_tier"] == "full"
    assert env["meta"] == {"resolved_by": "entity+key", "ranked": False}
    assert env["next"]["canonical_slug"] == "svc"
    assert env["cost_estimate"]["full"] == 2
    empty = crc_v1.wrap_facts([], None, None)
    assert empty["envelope"]["freshness"]["effective_confidence"] is None and empty["next"]["canonical_slug"] is None
    assert crc_v1.enabled(None) and crc_v1.enabled("crc-v1") and crc_v1.enabled("anything")
    assert not crc_v1.enabled(" Legacy ") and not crc_v1.enabled("off") and not crc_v1.enabled("v0")


# --- freshness (corecrux-projections decay.rs)--------------------------------------------------------

def test_freshness_thresholds_and_boundaries():
    p = DecayPolicy()
    now = 1_000 * D
    assert freshness_at("none", 0, 0, 0, p) == "fresh"
    assert freshness_at("volatile", 0, now, 0, p) == "unknown"
    assert freshness_at("volatile", now + 1, now, 0, p) == "unknown"
    assert freshness_at("volatile", now - 24 * H, now, 0, p) == "fresh"       # equality is fresh
    assert freshness_at("volatile", now - 24 * H - 1, now, 0, p) == "stale"
    assert freshness_at("medium", now - 35 * D - 1, now, 0, p) == "stale"
    assert freshness_at("stable", now - 365 * D, now, 0, p) == "fresh"
    # salience stretches the threshold: n = 3 -> 1 + 0.25 ln 4 = 1.3465735902799727
    assert salience_factor(0) == 1.0
    assert salience_factor(3) == pytest.approx(1.3465735902799727, abs=0)
    assert salience_factor(10**9) == 4.0
    thr = int(24 * H * salience_factor(3))
    assert freshness_at("volatile", now - thr, now, 3, p) == "fresh"
    assert freshness_at("volatile", now - thr - 1, now, 3, p) == "stale"
    assert freshness.effective_confidence(0.8, "stale") == 0.4
    assert freshness.effective_confidence(0.8, "unknown") == 0.8
    assert freshness.age_hours((now - 5 * H - 1) * 10**6, now * 10**6) == 5
    assert freshness.age_hours((now + H) * 10**6, now * 10**6) == 0
    assert freshness.age_days(now - 3 * D, now) == 3 and freshness.age_days(0, now) is None


def test_decay_policy_env_overrides():
    p = DecayPolicy.from_env({"CORECRUXD_DECAY_VOLATILE_HOURS": " 2 ", "CORECRUXD_DECAY_MEDIUM_DAYS": "0",
                              "CORECRUXD_DECAY_STABLE_DAYS": "x"})
    assert (p.volatile_hours, p.medium_days, p.stable_days) == (2, 35, 365)
    assert freshness.salience_enabled({"CORECRUXD_MEMORY_SALIENCE": " ON "})
    assert not freshness.salience_enabled({"CORECRUXD_MEMORY_SALIENCE": "2"})
    assert not freshness.salience_enabled({})


@pytest.mark.parametrize("text,expected", [
    ("3 hours", "volatile"), ("Hourly", "volatile"), ("historical record", "stable"), ("1 YEAR", "stable"),
    ("6 months", "medium"), ("two weeks", "medium"), ("2 days", "volatile"), ("day 7", "medium"),
    ("a day or so", "medium"), ("0 days", "volatile"), ("whenever", "none"), ("architecture", "stable"),
    ("99999999999999999999999 days 1", "volatile"),
])
def test_parse_freshness_horizon(text, expected):
    assert parse_freshness_horizon(text) == expected


# --- Rust text rules -------------------------------------------------------------------------------

def test_rust_lowercase_and_whitespace():
    assert scope.rust_lower("ΟΔΥΣΣΕΥΣ") == "οδυσσευς"          # Final_Sigma
    assert scope.rust_lower("A" * 20 + "Σ") == "a" * 20 + "ς"  # Rust >= 1.80 looks past the ASCII prefix
    assert scope.rust_lower("ΑΣ:Β") == "ασ:β"                  # ':' is case-ignorable, 'Β' cased -> medial
    assert scope.rust_lower("İ") == "i\u0307"                  # full SpecialCasing mapping
    assert scope.rust_lower("\U00010D50") == "\U00010D70"      # Unicode 16 Garay pair
    assert scope.split_terms("Deploy\u3000STATUS \x1cX") == ["deploy", "status", "\x1cx"]  # U+001C is not White_Space
    assert scope.split_terms(" \t\n ") == []
    assert scope.split_private_entity("__agent::bob::notes::x") == ("bob", "notes::x")
    assert scope.split_private_entity("__agent::bob") is None
    assert scope.visible_entity("__agent::bob::n", True, "bob") == "n"
    assert scope.visible_entity("__agent::bob::n", True, "alice") is None
    assert scope.visible_entity("github::x", True, "bob") is None
    assert scope.visible_entity("svc", False, None) == "svc"
    assert scope.prefix_upper_bound("ab") == "ac"
    assert scope.prefix_upper_bound("a\U0010ffff") == "b"
    assert scope.prefix_upper_bound("") is None


@pytest.mark.parametrize("query", ["de", "deploy"])  # a scan (under 3 characters), trigram candidates
def test_ties_across_the_top_k_boundary_are_ranked_by_fact_id(tmp_path: Path, query: str, monkeypatch) -> None:
    from cruxsql.facts import timestamps
    from cruxsql.facts.store import Store, StoreRequest
    from cruxsql.recall.facade import Recall

    with Store(tmp_path) as store:
        older = store.store("svc", "old", "deploy older but surer", confidence=1.0)
        frozen = timestamps.now_ns()  # one stored_at for the batch: a clock that does not move
        with monkeypatch.context() as m:
            m.setattr(timestamps, "now_ns", lambda: frozen)
            batch = store.store_batch([StoreRequest("svc", f"k{i}", f"deploy batch {i}", confidence=0.8)
                                       for i in range(7)])
        store.store("svc", "other", "unrelated words")
        later = store.store("svc", "newest", "deploy newest, less sure", confidence=0.5)
        ranked = [older.fact_id] + sorted(f.fact_id for f in batch) + [later.fact_id]
        recall = Recall(store)
        for top_k in range(0, 11):
            res = recall.query_facts(query, top_k=top_k, contract="legacy", record_access=False)
            assert [r["fact_id"] for r in res.rows] == ranked[:top_k], top_k
            assert res.matched == 9
