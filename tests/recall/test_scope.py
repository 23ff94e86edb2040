"""One test per visibility and tenant rule, plus get_bootstrap, memory_view, salience and known_at."""

from __future__ import annotations

from pathlib import Path

import pytest

from cruxsql.errors import InvalidInput
from cruxsql.facts import codec, timestamps
from cruxsql.facts.codec import Fact
from cruxsql.facts.store import Store
from cruxsql.recall import crc_v1, tokens
from cruxsql.recall.facade import Recall, normalize_topic
from support.journal_files import journal_bytes

T0 = timestamps.parse_ns("2026-06-01T00:00:00Z")
H = 3_600_000_000_000


def fact(i: int, entity: str, key: str, value: str, **kw) -> Fact:
    kw.setdefault("stored_at", T0 + i * H)
    return Fact(fact_id=f"f_{i:03d}", entity=entity, key=key, value=value, confidence=kw.pop("confidence", 1.0),
                tokens=codec.token_cost(value), **kw)


def journal(tmp_path: Path, events: list) -> Store:
    with open(tmp_path / "facts.jsonl", "w", encoding="utf-8") as fh:
        for e in events:
            fh.write(codec.encode_event(e if not isinstance(e, Fact) else codec.StoreEvent(e)) + "\n")
    return Store(tmp_path)


def ids(result) -> list[str]:
    return [r["fact_id"] for r in result.rows]


@pytest.fixture
def scoped(tmp_path):
    store = journal(tmp_path, [
        fact(1, "svc", "owner", "alice owns deploy"),
        fact(2, "__agent::bob::svc", "note", "bob thinks deploy is risky", private=True),
        fact(3, "__agent::alice::svc", "note", "alice secret deploy plan", private=True),
        fact(4, "github::repo", "token", "deploy key", private=False),  # born private by prefix
        fact(5, "svc", "status", "explicitly private deploy", private=True),
        fact(6, "svc", "owner", "tenant t1 deploy owner", tenant_hash="t1"),
        fact(7, "svc", "owner", "tenant t2 deploy owner", tenant_hash="t2"),
    ])
    yield Recall(store)
    store.close()


def test_anonymous_caller_sees_no_private_fact(scoped):
    assert ids(scoped.query_facts("deploy", contract="legacy")) == ["f_001"]
    assert ids(scoped.query_facts("deploy", agent="", contract="legacy")) == ["f_001"]  # blank = anonymous


def test_other_tenants_never_appear(scoped):
    assert ids(scoped.query_facts("owner", contract="legacy")) == ["f_001"]          # default tenant
    assert ids(scoped.query_facts("owner", tenant="t1", contract="legacy")) == ["f_006"]
    assert ids(scoped.query_facts("owner", tenant="  ", contract="legacy")) == ["f_001"]
    assert ids(scoped.query_facts("t2", tenant="t1", contract="legacy")) == []


def test_agent_sees_own_agent_facts_under_logical_entity(scoped):
    res = scoped.query_facts("deploy", agent="bob", contract="legacy")
    assert ids(res) == ["f_002", "f_001"]
    assert res.rows[0]["entity"] == "svc"                                          # logical, not __agent::bob::svc
    assert ids(scoped.query_facts(None, entity="svc", agent="bob")) == ["f_002", "f_001"]
    assert ids(scoped.query_facts(None, entity="__agent::bob::svc", agent="bob")) == ["f_002"]
    assert ids(scoped.query_facts(None, entity_prefix="sv", agent="bob")) == ["f_002", "f_001"]


def test_agent_never_sees_another_agents_facts(scoped):
    assert "f_003" not in ids(scoped.query_facts("secret", agent="bob"))
    assert ids(scoped.query_facts("secret", agent="alice")) == ["f_003"]
    assert ids(scoped.query_facts(None, entity="__agent::alice::svc", agent="bob")) == []


def test_born_private_and_explicitly_private_hidden_even_from_agents(scoped):
    for agent in (None, "bob", "alice"):
        got = ids(scoped.query_facts("deploy", agent=agent, top_k=50))
        assert "f_004" not in got and "f_005" not in got


def test_match_uses_the_visible_entity_not_the_agent_prefix(scoped):
    assert ids(scoped.query_facts("__agent", agent="bob")) == []
    assert ids(scoped.query_facts("bob::", agent="bob")) == []


def test_bad_arguments_name_the_argument(scoped):
    with pytest.raises(InvalidInput, match="min_effective_confidence"):
        scoped.query_facts("x", min_effective_confidence=1.5)
    with pytest.raises(InvalidInput, match="token_budget"):
        scoped.query_facts("x", token_budget=-1)
    with pytest.raises(InvalidInput, match="as_of"):
        scoped.query_facts("x", as_of="2026-13-01")
    with pytest.raises(InvalidInput, match="known_at"):
        scoped.query_facts("x", known_at="yesterday")
    with pytest.raises(InvalidInput, match="top_k"):
        scoped.query_facts("x", top_k=-2)


def test_budget_disclosure_legacy_and_crc(tmp_path):
    # tokens 40, 100, 100; confidences rank them f_001 > f_002 > f_003
    store = journal(tmp_path, [fact(1, "e", "k1", "alpha " + "a" * 154, confidence=0.9),
                               fact(2, "e", "k2", "alpha " + "b" * 394, confidence=0.8),
                               fact(3, "e", "k3", "alpha " + "c" * 394, confidence=0.7)])
    r = Recall(store)
    legacy = r.query_facts("alpha", token_budget=3, contract="legacy", min_effective_confidence=0.75)
    assert ids(legacy) == ["f_001"] and legacy.filtered_below_threshold == 1
    assert (legacy.matched, legacy.left_out, legacy.total_tokens) == (3, 1, 40)
    # the lines count in full against the budget (Crux counts only the values: 40 + 100 fit 140)
    assert ids(r.query_facts("alpha", token_budget=140, contract="legacy")) == ["f_001"]
    two = r.query_facts("alpha", token_budget=200, contract="legacy")
    assert ids(two) == ["f_001", "f_002"] and tokens.estimate_tokens_str(two.text()) <= 200
    crc = r.query_facts("alpha", token_budget=90, contract="crc-v1")
    # reversible: rows cut by top_k only; Crux's tiers: 1 full (40), (90 - 40) // 40 = 1 epitome, 1 dropped
    assert ids(crc) == ["f_001", "f_002", "f_003"]
    assert tokens.fact_emit_within_budget([40, 100, 100], 90) == (1, 2)
    env = crc_v1.wrap_facts_tiered(crc.rows[:2], None, "alpha", 1, 3)
    assert [p["reason"] for p in env["pointers"]] == ["Exact", "Demoted"]
    assert env["pointers"][1]["content_hash"] == tokens.content_hash("alpha " + "b" * 394)
    assert env["pointers"][1]["epitome"] == "e k2 = alpha " + "b" * 67
    assert env["meta"]["total_candidates"] == 3 and env["meta"]["capped"] == 1 and env["meta"]["demoted"] == 1
    # but the envelope's own text counts against the budget (cruxsql's): 90 is below even one fact's
    # envelope, so the answer is compact lines and a footer naming the budget the envelope needs
    assert crc.crc_v1 is None and crc.compact is not None
    least = crc.compact.envelope_tokens
    assert crc.text() == (f"e · k1: alpha {'a' * 154} · f_001\n"
                          f"+2 more · compact: the CRC-v1 envelope needs token_budget ≥ {least}")
    assert tokens.estimate_tokens(crc.text()) <= 90 < least
    assert crc.crux_payload()["content"][0]["text"] == crc.text()
    structured = crc.crux_payload()["structuredContent"]      # budgeted on its own: the row does not fit
    assert (structured["rows"], structured["pointers"], structured["left_out"]) == ([], [{"fact_id": "f_001"}], 2)
    cut = r.query_facts("alpha", token_budget=30, contract="crc-v1")
    assert cut.text().startswith("e · k1: alpha aaa") and "…" in cut.text() and tokens.estimate_tokens(cut.text()) <= 30
    assert cut.crux_payload()["structuredContent"]["rows"] == []     # the value is cut: a pointer only
    # at the least envelope's budget only the first fact fits, the smallest envelope; at 600 the Crux
    # tiers fit as they are
    smallest = r.query_facts("alpha", token_budget=least, contract="crc-v1").crc_v1
    assert [p["reason"] for p in smallest["pointers"]] == ["Exact"] and smallest["meta"]["capped"] == 2
    roomy = r.query_facts("alpha", token_budget=600, contract="crc-v1").crc_v1
    assert tokens.estimate_tokens_str(tokens.compact_json(roomy)) <= 600
    assert [p["reason"] for p in roomy["pointers"]] == ["Exact", "Exact", "Exact"]
    first_only = r.query_facts("alpha", top_k=0)
    assert first_only.rows == [] and first_only.matched == 3 and first_only.left_out == 3
    assert r.query_facts("   ").matched == 0          # Crux: a blank query has no terms, matches nothing
    store.close()


def test_known_at_sees_what_the_store_believed(tmp_path):
    at = lambda h: timestamps.format_event_time(T0 + int(h * H))  # noqa: E731
    store = journal(tmp_path, [
        fact(1, "svc", "status", "green"),
        fact(2, "svc", "status", "amber", version=2, supersedes="f_001"),
        codec.SupersedeEvent("f_001", "f_002", at(2.5)),
        codec.DeleteEvent("f_002", at(4)),
        codec.SetValidityEvent("f_001", T0 + 10 * H, None, at(5)),
        codec.ClearSupersedeEvent("f_001", at(6)),
        codec.SetHorizonEvent("f_001", "volatile", at(7)),
    ])
    r = Recall(store)
    q = lambda t, **kw: ids(r.query_facts("svc", known_at=T0 + int(t * H), now=T0 + 8 * H, **kw))  # noqa: E731
    assert q(0.5) == []
    assert q(1.5) == ["f_001"]
    assert q(2.2) == ["f_002", "f_001"]         # stored, not yet superseded
    assert q(3) == ["f_002"]
    assert q(3, include_superseded=True) == ["f_002", "f_001"]
    assert q(4.5) == []                          # f_002 deleted, f_001 superseded
    assert q(5.5, include_superseded=True, as_of=T0) == []   # validity set at 5: not valid at T0
    assert q(4.5, include_superseded=True, as_of=T0) == ["f_001"]
    assert q(6.5) == ["f_001"]
    row = r.query_facts("svc", known_at=T0 + int(6.5 * H), now=T0 + 8 * H).rows[0]
    assert row["horizon_class"] == "none" and row["superseded_by"] is None
    now_row = r.query_facts("svc", now=T0 + 30 * H).rows[0]
    assert (now_row["horizon_class"], now_row["freshness"], now_row["effective_confidence"]) == ("volatile", "stale", 0.5)
    store.close()


def test_salience_counts_in_the_view_only(tmp_path, monkeypatch):
    store = journal(tmp_path, [fact(1, "cache", "k", "volatile hot fact", horizon_class="volatile")])
    r = Recall(store)
    now = T0 + H + 30 * H  # 30 h old: stale at factor 1
    assert r.query_facts("hot", now=now).rows[0]["freshness"] == "stale"
    before = journal_bytes(tmp_path)
    monkeypatch.setenv("CORECRUXD_MEMORY_SALIENCE", "on")
    for _ in range(3):
        r.query_facts("hot", now=now)           # factor 1 + 0.25 ln 4 = 1.35 -> 32.3 h
    assert r.access_counts() == {"f_001": 3}
    assert r.query_facts("hot", now=now).rows[0]["freshness"] == "fresh"
    assert journal_bytes(tmp_path) == before   # never journaled
    store.close()


def test_get_bootstrap_budget_tenant_visibility(tmp_path):
    store = journal(tmp_path, [
        fact(1, "__bootstrap__::doc:setup", "install", "pip install cruxsql", confidence=0.9),
        fact(2, "__bootstrap__::doc:cli", "query", "use cruxsql query", confidence=0.8),
        fact(3, "__bootstrap__::pattern:x", "p", "a pattern"),
        fact(4, "__bootstrap__::doc:other", "t", "other tenant doc", tenant_hash="t1"),
        fact(5, "__agent::bob::__bootstrap__::doc:mine", "k", "bob's own doc", private=True),
        fact(6, "__agent::alice::__bootstrap__::doc:hers", "k", "alice's doc", private=True),
    ])
    r = Recall(store)
    assert normalize_topic(" Docs ") == "doc" and normalize_topic("Errors") == "resolution"
    assert normalize_topic("Tool-Outputs") == "tool-output" and normalize_topic(" Custom ") == "Custom"
    res = r.get_bootstrap("docs")
    assert res.prefix == "__bootstrap__::doc:" and [f["fact_id"] for f in res.facts] == ["f_001", "f_002"]
    assert r.get_bootstrap("docs", agent="bob").facts[0]["entity"] == "__bootstrap__::doc:mine"
    assert "f_006" not in [f["fact_id"] for f in r.get_bootstrap("docs", agent="bob").facts]
    assert [f["fact_id"] for f in r.get_bootstrap("docs", tenant="t1").facts] == ["f_004"]
    capped = r.get_bootstrap("docs", token_budget=3)   # 5 tokens for the first: admitted alone
    assert [f["fact_id"] for f in capped.facts] == ["f_001"] and capped.left_out == 1 and capped.matched == 2
    assert r.get_bootstrap(None, "pattern").facts[0]["fact_id"] == "f_003"
    assert r.get_bootstrap("nothing").text() == "no bootstrap knowledge for topic 'nothing'"
    store.close()


def test_memory_view(tmp_path):
    store = journal(tmp_path, [
        fact(1, "svc", "owner", "alice", confidence=0.5),
        fact(2, "svc", "owner", "bob", version=2, supersedes="f_001"),
        codec.SupersedeEvent("f_001", "f_002", timestamps.format_event_time(T0 + 2 * H)),
        fact(3, "__ops::x", "k", "reserved"),
        fact(4, "__agent::bob::__work__::x", "k", "reserved logical"),
        fact(5, "__agent::bob::notes", "k", "bob note"),
        fact(6, "__memory_pin::bob::f_001", "pinned", "true"),
        fact(7, "svc", "other", "other tenant", tenant_hash="t1"),
    ])
    r = Recall(store)
    v = r.memory_view(agent="bob")
    assert [f["id"] for f in v.facts] == ["f_005", "f_002", "f_001"]          # newest first, superseded included
    assert v.facts[0]["entity"] == "notes" and v.facts[2]["pinned"] and not v.facts[1]["pinned"]
    assert v.facts[1]["stored_at"].endswith("+00:00")
    assert [f["id"] for f in r.memory_view("svc", "owner", top_k=1).facts] == ["f_002"]
    assert r.memory_view("svc", "owner", top_k=1).left_out == 1
    assert [f["id"] for f in r.memory_view(token_budget=0).facts] == ["f_002"]  # first always admitted
    assert [f["id"] for f in r.memory_view(tenant="t1").facts] == ["f_007"]
    assert r.memory_view(entity="nothing").text() == "no memory visible"
    store.close()


@pytest.mark.parametrize("view_update", ["direct", "rebuild"])
def test_compaction_drops_derived_copies_and_recall_stays_exact(tmp_path, view_update):
    from cruxsql.governance import compaction

    store = Store(tmp_path)
    keep = store.store("svc", "note", "keep this zebra")
    gone = store.store("svc", "other", "secret quokka text")
    r = Recall(store)
    assert ids(r.query_facts("quokka")) == [gone.fact_id]
    store.delete(gone.fact_id)
    compaction.compact(store, view_update=view_update)
    # nothing derived from the erased fact survives in the view, before any further read (the direct
    # path carries the kept fact's text row and postings over; a rebuild indexes the kept fact anew)
    import numpy as np
    kept = [1]
    assert [r[0] for r in store.db.execute("SELECT seq FROM recall_text")] == kept
    postings = {int(s) for (blob,) in store.db.execute("SELECT seqs FROM recall_grams")
                for s in np.frombuffer(blob, dtype="<u2")}
    assert postings == set(kept)
    assert ids(r.query_facts("quokka")) == []
    assert ids(r.query_facts("zebra")) == [keep.fact_id]
    later = store.store("svc", "third", "another zebra")
    assert ids(r.query_facts("zebra", contract="legacy")) == [later.fact_id, keep.fact_id]
    store.close()


def test_text_changed_in_place_is_reindexed(tmp_path):
    store = Store(tmp_path)
    f = store.store("svc", "note", "original walrus text")
    other = store.store("svc", "other", "walrus neighbour")
    r = Recall(store)
    assert set(ids(r.query_facts("walrus"))) == {f.fact_id, other.fact_id}
    with store.db:  # a redaction done in place by an operator tool
        store.db.execute("UPDATE facts SET value = 'REDACTED Pelican' WHERE fact_id = ?", (f.fact_id,))
    assert store.db.execute("SELECT count(*) FROM recall_text").fetchone()[0] == 1  # the old copy is gone
    assert ids(r.query_facts("walrus")) == [other.fact_id]
    assert ids(r.query_facts("pelican")) == [f.fact_id]
    store.close()


def test_recall_inside_a_callers_transaction(tmp_path):
    store = Store(tmp_path)
    f = store.store("svc", "note", "inside txn")
    r = Recall(store, refresh=False)
    with store.db:
        assert ids(r.query_facts("txn", known_at=timestamps.now_ns())) == [f.fact_id]
    store.close()


def test_salience_threshold_exact_boundary_in_sql(tmp_path):
    # access_count 3 carried by the journal: threshold = trunc(24 h * (1 + 0.25 ln 4)) = 116343958 ms
    thr_ms = int(24 * 3_600_000 * (1 + 0.25 * __import__("math").log(4)))
    assert thr_ms == 116343958
    now = T0 + 100 * H
    store = journal(tmp_path, [
        fact(1, "cache", "edge", "salient edge", horizon_class="volatile", access_count=3,
             stored_at=now - thr_ms * 1_000_000),
        fact(2, "cache", "past", "salient past", horizon_class="volatile", access_count=3,
             stored_at=now - (thr_ms + 1) * 1_000_000),
        fact(3, "cache", "plain", "plain past", horizon_class="volatile", stored_at=now - 25 * H),
    ])
    rows = {r["key"]: r for r in Recall(store).query_facts(None, entity="cache", now=now).rows}
    assert (rows["edge"]["freshness"], rows["edge"]["effective_confidence"]) == ("fresh", 1.0)
    assert (rows["past"]["freshness"], rows["past"]["effective_confidence"]) == ("stale", 0.5)
    assert rows["plain"]["freshness"] == "stale" and rows["plain"]["age_hours"] == 25
    assert [r["key"] for r in Recall(store).query_facts(None, entity="cache", now=now).rows] == ["edge", "plain", "past"]
    store.close()


def test_crux_payload_shapes(tmp_path):
    store = journal(tmp_path, [fact(1, "svc", "status", "green", confidence=0.5)])
    r = Recall(store)
    crc = r.query_facts("green", now=T0 + 2 * H).crux_payload()
    assert list(crc["structuredContent"]) == ["rows", "crc_v1", "filtered_below_threshold"]
    assert crc["content"][0]["text"].startswith('{"contract":"crc-v1","kind":"fact"')
    legacy = r.query_facts("green", contract="legacy", now=T0 + 2 * H).crux_payload()
    assert legacy["content"][0]["text"] == ("[svc] status = green (confidence=0.50, effective_confidence=0.50, "
                                            "freshness=fresh, age_hours=1)")
    empty = r.query_facts("green", min_effective_confidence=0.9).crux_payload()
    assert empty == {"content": [{"type": "text", "text": "no facts above confidence floor (1 below threshold)"}],
                     "structuredContent": {"rows": [], "filtered_below_threshold": 1}}
    view = r.memory_view().crux_payload()
    assert view["structuredContent"]["returned"] == 1 and view["content"][0]["text"].endswith("(id=f_001, v1)")
    store.close()
