"""A write replays the lines it appended from the events in hand (facts/appended.py): the view must hold
exactly what replaying those lines gives, and store_batch returns exactly what the view holds."""

from __future__ import annotations

from pathlib import Path

import pytest

import cruxsql
from cruxsql.facts import codec, line_decoder, timestamps
from cruxsql.facts.codec import Fact
from cruxsql.facts.privacy import NamespaceOwner

REGISTRY = NamespaceOwner("test registry", ("__repo_registry__::",))


def _matches_a_fresh_replay(store: cruxsql.Store, skipped: tuple[str, ...] = ()) -> None:
    report = store.verify()
    assert report.differences == [] and report.view_matches_replay
    assert report.corrupt_lines == [] and tuple(e["reason"] for e in report.skipped_events) == skipped


def test_a_mixed_batch_equals_a_fresh_replay_and_returns_what_the_view_holds(tmp_path: Path) -> None:
    store = cruxsql.open(tmp_path)
    store.store("svc", "owner", "alice", tenant="t1")
    store.store("__repo_registry__::r1", "content", "v1", private=True, owner=REGISTRY)
    requests = [
        cruxsql.StoreRequest("svc", "owner", "bob", tenant_hash="t1", confidence=0.3, actor="ops",
                             source_receipt="rcpt-1"),
        cruxsql.StoreRequest("svc", "owner", "carol", tenant_hash="", horizon_class="Volatile"),
        cruxsql.StoreRequest("notes", "secret", "mine", private=True, agent="agent-a"),
        cruxsql.StoreRequest("__repo_registry__::r1", "content", "v2", private=True),
        # text the fast decoder hands to the codec: escapes, a quote followed by a space, non-ASCII
        cruxsql.StoreRequest("svc", "quote", 'he said "no" then \x01 left\ttab — Straße ✓'),
        cruxsql.StoreRequest("bench:x", "k", ""),
    ]
    returned = store.store_batch(requests, owner=REGISTRY)
    assert [store.get(f.fact_id) for f in returned] == returned
    assert [(f.tenant_hash, f.version, f.horizon_class) for f in returned] == [
        ("t1", 2, "none"), ("default", 1, "volatile"), ("default", 1, "none"), ("default", 2, "none"),
        ("default", 1, "none"), ("default", 1, "stable")]
    assert returned[2].entity == "__agent::agent-a::notes" and returned[2].private
    assert returned[0].confidence == codec.to_f32(0.3) and returned[0].actor == "ops"
    one = store.store("svc", "owner", "dave", tenant="t1")
    store.delete(one.fact_id, tenant="t1")
    store.set_validity(returned[0].fact_id, valid_from=1_000, valid_to=2_000_000_123)
    store.set_horizon(returned[0].fact_id, "stable")
    store.reverify(returned[0].fact_id)
    store.clear_supersede(store.history("svc", "owner", "t1")[0].fact_id, tenant="t1")
    # the registry's v2 removed its chain (v1 with it), so the batch's supersede of v1 is skipped
    _matches_a_fresh_replay(store, skipped=("unknown fact_id",))
    store.close()


def test_a_plain_batch_is_replayed_without_decoding_its_lines(tmp_path: Path, monkeypatch) -> None:
    store = cruxsql.open(tmp_path)
    store.store_batch([cruxsql.StoreRequest(f"svc{i}", "owner", f"first {i}") for i in range(50)])

    def no_decoding(*_: object) -> None:
        raise AssertionError("a line this writer just encoded was decoded again")

    monkeypatch.setattr(line_decoder, "decode_fast", no_decoding)
    monkeypatch.setattr(codec, "decode_event", no_decoding)
    facts = store.store_batch([cruxsql.StoreRequest(f"svc{i}", "owner", f"second {i}") for i in range(50)])
    monkeypatch.undo()
    assert [f.version for f in facts] == [2] * 50
    assert store.counts() == {"journal_events": 52, "facts": 100, "live_facts": 50}
    _matches_a_fresh_replay(store)
    store.close()


@pytest.mark.parametrize("confidence, stored_at", [
    (0.1, timestamps.now_ns()),  # not an f32: the line reads back as the nearest f32
    (0.5, timestamps.MAX_NS + 1),  # outside the `*_ns` columns' range: held clamped, with its exact text
])
def test_an_event_whose_values_would_read_back_differently_is_decoded(tmp_path: Path, confidence: float,
                                                                      stored_at: int) -> None:
    store = cruxsql.open(tmp_path)
    store.store("svc", "owner", "alice")
    fact = Fact(fact_id="f_" + "a" * 32, entity="svc", key="k", value="v", confidence=confidence,
                stored_at=stored_at, tokens=1)
    store.commit(lambda: [codec.StoreEvent(fact)])
    report = store.verify()
    assert report.differences == [] and report.view_matches_replay
    rows = store.db.execute("SELECT confidence FROM facts WHERE fact_id = ?", (fact.fact_id,)).fetchall()
    assert rows == [(codec.to_f32(confidence),)]
    assert store.get(fact.fact_id).stored_at == stored_at
    store.close()
