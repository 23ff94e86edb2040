"""Legal holds (legal_hold.rs) and the compaction guard / override receipt (`compact_journal`)."""

from __future__ import annotations

import json

import pytest
from support.journal_files import journal_bytes

from cruxsql.errors import Conflict, InvalidInput, NotFound
from cruxsql.facts import privacy, timestamps
from cruxsql.facts.store import Store
from cruxsql.governance import compaction, erasure, legal_holds


def _hold_rows(store, hold_id):
    return store.db.execute(
        "SELECT tenant_hash, key, value, source_receipt, confidence, private, horizon_class, actor, version "
        "FROM facts WHERE entity = ? ORDER BY version", (legal_holds.LEGAL_HOLD_ENTITY_PREFIX + hold_id,)).fetchall()


def test_place_stores_the_hold_as_crux_does(tmp_path):
    store = Store(tmp_path)
    hold, receipt = legal_holds.place_hold(store, " acme ", " litigation 42 ", [" user:", "", "proj:", "user:"],
                                           actor="counsel")
    assert hold.hold_id.startswith("lh_") and len(hold.hold_id) == 35
    assert receipt.receipt_id.startswith("r_legal_hold_place_") and receipt.kind == "legal_hold_placed"
    assert hold.entity_prefixes == ("proj:", "user:") and hold.tenant_id == "acme" and hold.reason == "litigation 42"
    [(tenant, key, value, source, confidence, private, horizon, actor, version)] = _hold_rows(store, hold.hold_id)
    assert (tenant, key, source, confidence, private, horizon, actor, version) == (
        "acme", "state", receipt.receipt_id, 1.0, 1, "none", "counsel", 1)
    placed = timestamps.format_fact_time(hold.placed_at)
    assert value == (
        '{"schema":"crux.legal_hold.v1","hold_id":"%s","tenant_id":"acme","entity_prefixes":["proj:","user:"],'
        '"reason":"litigation 42","placed_at":"%s","placed_by":"counsel","place_receipt_id":"%s"}'
        % (hold.hold_id, placed, receipt.receipt_id))
    assert list(json.loads(receipt.to_json())) == ["schema", "receipt_id", "kind", "hold_ids", "tenant_id",
                                                   "entity_prefixes", "reason", "actor", "recorded_at"]
    assert [h.hold_id for h in legal_holds.list_holds(store)] == [hold.hold_id]
    assert hold.covers("acme", "user:1") and hold.covers("acme", "proj:x")
    assert not hold.covers("acme", "other") and not hold.covers("default", "user:1")


def test_place_validates_input(tmp_path):
    store = Store(tmp_path)
    with pytest.raises(InvalidInput, match="tenant_id is required"):
        legal_holds.place_hold(store, "  ", "why")
    with pytest.raises(InvalidInput, match="reason is required"):
        legal_holds.place_hold(store, "t", " ")
    hold, _ = legal_holds.place_hold(store, "t", "why")
    assert hold.placed_by == "operator" and hold.entity_prefixes == ()


def test_two_phase_release(tmp_path):
    store = Store(tmp_path)
    hold, _ = legal_holds.place_hold(store, "default", "audit", ["user:"])
    prepared = legal_holds.prepare_release(store, hold.hold_id, actor="judge")
    assert legal_holds.list_holds(store)[0].active  # phase one writes nothing
    # the state changes between the phases: the prepared release is refused
    store.store(hold.entity, "state", hold.to_json(), private=True, source_receipt=hold.place_receipt_id,
                owner=legal_holds.OWNER)
    with pytest.raises(Conflict, match="changed since the release was prepared"):
        legal_holds.release_hold(store, prepared, "r_legal_hold_release_" + "0" * 32)
    released, receipt = legal_holds.release(store, hold.hold_id, actor="judge", reason="case closed")
    assert not released.active and released.released_by == "judge"
    assert released.release_receipt_id == receipt.receipt_id and receipt.kind == "legal_hold_released"
    rows = _hold_rows(store, hold.hold_id)
    assert [r[8] for r in rows] == [1, 2, 3]
    latest = json.loads(rows[-1][2])
    assert list(latest)[-3:] == ["released_at", "released_by", "release_receipt_id"]
    assert latest["release_receipt_id"] == receipt.receipt_id
    # the durable receipt exists as a fact
    assert store.db.execute("SELECT count(*) FROM facts WHERE entity = ?",
                            (legal_holds.LEGAL_HOLD_RECEIPT_ENTITY_PREFIX + receipt.receipt_id,)).fetchone()[0] == 1
    assert legal_holds.list_holds(store, active_only=True) == []
    with pytest.raises(Conflict, match="already released"):
        legal_holds.release(store, hold.hold_id)
    with pytest.raises(NotFound, match="lh_nope"):
        legal_holds.release(store, "lh_nope")


def test_unparsable_state_fails_closed_over_the_whole_tenant(tmp_path):
    store = Store(tmp_path)
    store.store("__legal_hold__::lh_broken", "state", "{not json", tenant="acme", private=True, owner=legal_holds.OWNER,
                source_receipt="r_x", actor="someone")
    [hold] = legal_holds.list_holds(store)
    assert hold.unparsable and hold.active and hold.tenant_id == "acme" and hold.entity_prefixes == ()
    assert hold.reason == legal_holds.UNPARSABLE_REASON and hold.placed_by == "someone"
    assert hold.place_receipt_id == "r_x"
    assert hold.covers("acme", "anything")
    f = store.store("anything", "k", "value", tenant="acme")
    store.delete(f.fact_id)
    with pytest.raises(compaction.LegalHoldBlocked, match="lh_broken"):
        compaction.compact(store)
    with pytest.raises(Conflict, match="unparsable"):
        legal_holds.release(store, "lh_broken")
    # an older parsable version wins over a newer unparsable one
    good, _ = legal_holds.place_hold(store, "acme", "real")
    store.store(good.entity, "state", "garbage", tenant="acme", private=True, owner=legal_holds.OWNER)
    resolved = [h for h in legal_holds.list_holds(store) if h.hold_id == good.hold_id][0]
    assert not resolved.unparsable and resolved.reason == "real"


def test_compaction_refused_naming_the_holds_then_override(tmp_path):
    store = Store(tmp_path)
    h1, _ = legal_holds.place_hold(store, "default", "case 1", ["user:"])
    h2, _ = legal_holds.place_hold(store, "default", "case 2")
    a = store.store("user:1", "k", "HELD_VALUE_A")
    b = store.store("other", "k", "HELD_VALUE_B")
    c = store.store("user:2", "k", "x", tenant="t2")  # other tenant: not covered
    for f in (a, b, c):
        store.delete(f.fact_id)
    before = journal_bytes(tmp_path)
    with pytest.raises(compaction.LegalHoldBlocked) as info:
        compaction.compact(store)
    assert str(info.value) == "hard erasure blocked by active legal hold(s): " + ",".join(sorted([h1.hold_id, h2.hold_id]))
    assert info.value.covered == sorted([(a.fact_id, sorted([h1.hold_id, h2.hold_id])), (b.fact_id, [h2.hold_id])])
    assert journal_bytes(tmp_path) == before  # nothing written

    covered = compaction.blocked_by_holds(store)
    full = legal_holds.build_override_receipt(covered, "court order 9", "dpo")
    # missing one fact: refused
    partial = legal_holds.LegalHoldReceipt(**{**full.__dict__, "fact_ids": full.fact_ids[:1]})
    with pytest.raises(compaction.LegalHoldBlocked, match="does not cover every blocked fact and hold"):
        compaction.compact(store, override_receipt=partial)
    # missing one hold: refused
    partial = legal_holds.LegalHoldReceipt(**{**full.__dict__, "hold_ids": full.hold_ids[:1]})
    with pytest.raises(compaction.LegalHoldBlocked, match="missing holds"):
        compaction.compact(store, override_receipt=partial)
    # wrong kind: refused
    wrong = legal_holds.LegalHoldReceipt(**{**full.__dict__, "kind": "legal_hold_placed"})
    with pytest.raises(InvalidInput, match="requires a legal_hold_overridden receipt"):
        compaction.compact(store, override_receipt=wrong)
    assert journal_bytes(tmp_path) == before

    report = compaction.compact(store, override_receipt=full)
    assert report.override_receipt_id == full.receipt_id and report.facts_dropped == 3
    data = journal_bytes(tmp_path)
    assert b"HELD_VALUE_A" not in data and b"HELD_VALUE_B" not in data
    row = store.db.execute("SELECT value, private, source_receipt FROM facts WHERE entity = ?",
                           ("__legal_hold_receipt__::" + full.receipt_id,)).fetchone()
    assert row[1] == 1 and row[2] == full.receipt_id
    stored = json.loads(row[0])
    assert stored["kind"] == "legal_hold_overridden" and stored["fact_ids"] == sorted([a.fact_id, b.fact_id])
    assert stored["hold_ids"] == sorted([h1.hold_id, h2.hold_id])
    assert store.verify().ok


def test_released_hold_no_longer_blocks_but_its_deleted_state_row_does(tmp_path):
    store = Store(tmp_path)
    hold, _ = legal_holds.place_hold(store, "default", "case")
    f = store.store("user:1", "k", "v")
    store.delete(f.fact_id)
    with pytest.raises(compaction.LegalHoldBlocked):
        compaction.compact(store)
    legal_holds.release(store, hold.hold_id)
    compaction.compact(store)  # released: proceeds
    # deleting the hold's own state row is itself blocked
    state_id = store.db.execute("SELECT fact_id FROM facts WHERE entity = ? AND superseded_by IS NULL",
                                (hold.entity,)).fetchone()[0]
    with pytest.raises(privacy.ReservedTarget):
        store.delete(state_id)  # only the legal-holds code may touch its namespace
    store.delete(state_id, owner=legal_holds.OWNER)
    with pytest.raises(compaction.LegalHoldBlocked, match=hold.hold_id):
        compaction.compact(store)


def test_erasure_and_retention_refuse_before_deleting_when_held_deletions_exist(tmp_path):
    store = Store(tmp_path)
    hold, _ = legal_holds.place_hold(store, "default", "case", ["user:"])
    held = store.store("user:1", "k", "held and deleted")
    store.delete(held.fact_id)
    other = store.store("misc", "k", "would be erased")
    with pytest.raises(compaction.LegalHoldBlocked, match=hold.hold_id):
        erasure.erase(store, erasure.Selection(fact_ids=(other.fact_id,)), reason="x")
    assert store.get(other.fact_id).deleted is False  # nothing was deleted

