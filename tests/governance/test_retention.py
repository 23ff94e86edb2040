"""Retention (Crux's mark_retention_eligible): eligibility rules, the report, apply; cutoff parsing."""

from __future__ import annotations

import hashlib

import pytest
from support.journal_files import journal_bytes
from support.retention_builders import all_file_bytes, append_events, now_text

from cruxsql.errors import InvalidInput
from cruxsql.facts import codec, timestamps
from cruxsql.facts.store import Store
from cruxsql.governance import durations, erasure_proof, legal_holds, retention

DAY = 86_400 * 10**9


def test_durations_and_cutoffs():
    now = 1_800_000_000 * 10**9
    assert durations.parse_cutoff("90d", now) == now - 90 * DAY
    assert durations.parse_cutoff("12h", now) == now - 12 * 3600 * 10**9
    assert durations.parse_cutoff("2w", now) == now - 14 * DAY
    assert durations.parse_cutoff(" 30m ", now) == now - 1800 * 10**9
    assert durations.parse_cutoff("45s", now) == now - 45 * 10**9
    assert durations.parse_cutoff("2026-01-01T00:00:00Z", now) == timestamps.parse_ns("2026-01-01T00:00:00Z")
    assert durations.parse_cutoff("2026-01-01T01:00:00+01:00", now) == timestamps.parse_ns("2026-01-01T00:00:00Z")
    for bad in ("", "90", "d90", "9 0d", "1y", "2026-13-01T00:00:00Z"):
        with pytest.raises(InvalidInput):
            durations.parse_cutoff(bad, now)


def _old_fact(store: Store, entity: str, value: str, days_ago: int, **kw) -> codec.Fact:
    """Store a fact with an old stored_at (a raw journal line, as a daemon would have written it)."""
    fact = codec.Fact(fact_id="f_" + hashlib.blake2b(f"{entity}|{value}|{days_ago}".encode(), digest_size=16).hexdigest(),
                      entity=entity, key=kw.pop("key", "k"), value=value, confidence=1.0,
                      stored_at=timestamps.now_ns() - days_ago * DAY, tokens=codec.token_cost(value), **kw)
    append_events(store, [codec.StoreEvent(fact)])
    return store.get(fact.fact_id)


def _fixture(store: Store) -> dict[str, codec.Fact]:
    f = {
        "old": _old_fact(store, "user:1", "OLD_ELIGIBLE_VALUE_1 " + "a" * 3000, 200),
        "old2": _old_fact(store, "user:2", "OLD_ELIGIBLE_VALUE_2 " + "b" * 3000, 100),
        "recent": _old_fact(store, "user:3", "RECENT_VALUE_KEPT", 10),
        "private": _old_fact(store, "user:4", "OLD_PRIVATE_VALUE", 200, private=True),
        "born_private": _old_fact(store, "decisions::x", "OLD_BORN_PRIVATE", 200),
        "tombstone": _old_fact(store, "__sync_tombstone__::a", "OLD_SYNC_TOMBSTONE", 200),
        "held": _old_fact(store, "held:1", "OLD_HELD_VALUE", 200, tenant_hash="acme"),
        "src1": _old_fact(store, "proj", "OLD_SOURCE_1", 200, key="a"),
        "src2": _old_fact(store, "proj", "OLD_SOURCE_2", 200, key="b"),
    }
    canonical = codec.Fact(fact_id="f_" + "c" * 32, entity="proj", key="a", value="canonical", confidence=0.8,
                           stored_at=timestamps.now_ns() - 150 * DAY, tokens=3, version=2)
    append_events(store, [codec.ConsolidateEvent(canonical, [f["src1"].fact_id, f["src2"].fact_id], now_text())])
    f["hold"] = legal_holds.place_hold(store, "acme", "case", ["held:"])[0]
    return f


def test_classification_rules(tmp_path):
    store = Store(tmp_path)
    f = _fixture(store)
    c = retention.classify(store, timestamps.now_ns() - 90 * DAY)
    assert sorted(e["fact_id"] for e in c.eligible) == sorted([f["old"].fact_id, f["old2"].fact_id])
    reasons = {p["fact_id"]: p["reason"] for p in c.protected}
    assert reasons[f["private"].fact_id] == "private"
    assert reasons[f["born_private"].fact_id] == "private"
    assert reasons[f["tombstone"].fact_id] == "private"  # __sync_tombstone__:: is born private too
    assert reasons[f["held"].fact_id] == "legal hold"
    assert reasons[f["src1"].fact_id] == reasons["f_" + "c" * 32] == "consolidation member"
    assert f["recent"].fact_id not in reasons
    held = [p for p in c.protected if p["fact_id"] == f["held"].fact_id][0]
    assert held["hold_ids"] == [f["hold"].hold_id]


def test_report_then_apply(tmp_path):
    store = Store(tmp_path)
    f = _fixture(store)
    report = retention.retention_report(store, "90d")
    assert report["counts"]["eligible"] == 2
    assert report["counts"]["protected_by_reason"] == {"private": 3, "legal hold": 1, "consolidation member": 3}
    assert report["bytes"]["reclaimable_estimate"] > 5000
    assert report["bytes"]["journal_now"] == len(journal_bytes(tmp_path))
    # the oldest fact not yet eligible (stored 10 days ago) becomes due 90 days after it was stored
    assert report["next_due"] == timestamps.format_fact_time(f["recent"].stored_at + 90 * DAY)
    assert [h["hold_id"] for h in report["holds"]] == [f["hold"].hold_id]
    assert journal_bytes(tmp_path).count(b"OLD_ELIGIBLE_VALUE") == 2  # a report changes nothing

    applied = retention.apply(store, "90d", actor="cron")
    assert applied["kind"] == "retention" and applied["selection"]["older_than"] == "90d"
    assert applied["counts"]["facts_deleted_now"] == 2
    assert applied["held_back"] == [{"fact_id": f["held"].fact_id, "hold_ids": [f["hold"].hold_id]}]
    assert applied["verification"]["ok"]
    data = b"".join(all_file_bytes(tmp_path).values())
    assert b"OLD_ELIGIBLE_VALUE" not in data
    for kept in (b"RECENT_VALUE_KEPT", b"OLD_PRIVATE_VALUE", b"OLD_HELD_VALUE", b"OLD_SOURCE_1", b"OLD_SYNC_TOMBSTONE"):
        assert kept in data, kept
    # the predicted size is what the compaction inside apply produced, to within the tombstones' timestamp
    # digits (chrono drops trailing zeros of the fraction: 0 to 8 bytes shorter each)
    diff = report["bytes"]["journal_after_apply_estimate"] - applied["stores"]["journal"]["bytes_after"]
    assert 0 <= diff <= 8 * applied["stores"]["journal"]["tombstones"], diff
    assert store.verify().ok
    assert erasure_proof.verify_erasure(store)["ok"]


def test_mark_retention_eligible_only_deletes(tmp_path):
    store = Store(tmp_path)
    f = _fixture(store)
    deleted = retention.mark_retention_eligible(store, timestamps.now_ns() - 90 * DAY)
    assert sorted(deleted) == sorted([f["old"].fact_id, f["old2"].fact_id])
    assert store.get(f["old"].fact_id).deleted
    assert b"OLD_ELIGIBLE_VALUE_1" in journal_bytes(tmp_path)  # content stays until compaction
