"""Crux's contradiction scan and consolidation (corecrux-memory/src/fact_store.rs) on real data directories."""

from __future__ import annotations

from pathlib import Path

import pytest

from cruxsql.curation.consolidation import (ConsolidationError, ConsolidationRequest, canonical_hash,
                                            consolidate_facts_v1, consolidate_undo_v1)
from cruxsql.curation.contradictions import contradiction_candidates_v1, memory_contradictions
from cruxsql.curation.polarity import polarity_class_v1
from cruxsql.facts.privacy import NamespaceOwner
from cruxsql.facts.store import Store, StoreRequest


def both(store: Store, entity: str, key: str, *values: str, tenant: str = "default", owner=None, **kw) -> list[str]:
    """Store several live facts of one (entity, key) at once (a batch never supersedes within itself)."""
    facts = store.store_batch([StoreRequest(entity, key, v, tenant, **kw) for v in values], owner=owner,
                               chain=False)
    return [f.fact_id for f in facts]


@pytest.mark.parametrize("value,expected", [
    ("yes", "positive"), ("  YES!! ", "positive"), ("✅ Enabled.", "positive"), ("(n)", "negative"),
    ("Off\n", "negative"), ("_on_", None), ("not yes", None), ("yes no", None), ("", None), ("truee", None),
    ("Completed", "positive"), ("absent", "negative"), ("ｙｅｓ", None), ("«Failed»", "negative"),
])
def test_polarity_class(value: str, expected) -> None:
    assert polarity_class_v1(value) == expected


def test_candidates_group_order_bucket_order_and_filters(store: Store) -> None:
    b_pos, b_neg = both(store, "svc:b", "enabled", "true", "false")
    a_ids = both(store, "svc:a", "deployed", "yes", "No", "n", "maybe")
    both(store, "svc:c", "ok", "true", "true")                       # one bucket only
    both(store, "svc:d", "ok", "true", "false", tenant="other")       # other tenant
    priv = both(store, "svc:e", "ok", "true")[0]
    store.store_batch([StoreRequest("svc:e", "ok", "false", private=True)])  # private: not considered
    deleted = both(store, "svc:f", "ok", "on", "off")
    store.delete(deleted[1])
    got = [c.to_dict() for c in contradiction_candidates_v1(store.db, "default")]
    neg = sorted(a_ids[1:3])
    assert got == [
        {"entity": "svc:a", "key": "deployed", "reason": "opposite_polarity_same_entity_key",
         "polarity_a": "negative", "polarity_b": "positive", "fact_ids": neg + [a_ids[0]],
         "values": [{a_ids[1]: "No", a_ids[2]: "n"}[i] for i in neg] + ["yes"]},
        {"entity": "svc:b", "key": "enabled", "reason": "opposite_polarity_same_entity_key",
         "polarity_a": "negative", "polarity_b": "positive", "fact_ids": [b_neg, b_pos], "values": ["false", "true"]},
    ]
    assert priv
    assert [c.entity for c in contradiction_candidates_v1(store.db, "default", limit=1)] == ["svc:a"]
    assert [c.entity for c in contradiction_candidates_v1(store.db, "other")] == ["svc:d"]


def test_memory_contradictions_payload_budget_and_clamp(store: Store) -> None:
    for i in range(3):
        both(store, f"svc:{i}", "up", "true", "false")
    full = memory_contradictions(store.db)
    assert full["structuredContent"]["count"] == 3 and full["structuredContent"]["limit"] == 50
    assert full["structuredContent"]["dry_run"] is True
    assert full["content"][0]["text"].startswith("3 contradiction candidate(s) detected; see structured `candidates`")
    one = memory_contradictions(store.db, token_budget=1)   # the first row always goes in
    assert one["structuredContent"]["count"] == 1
    assert memory_contradictions(store.db, limit=9999)["structuredContent"]["limit"] == 500
    empty = memory_contradictions(store.db, tenant="nobody")
    assert empty["content"][0]["text"] == \
        "no contradiction candidates (no active opposite-polarity facts sharing entity+key)"


def _request(targets, **kw) -> ConsolidationRequest:
    base = dict(consolidation_id="c1", entity="svc", key="status", canonical_value="green", target_fact_ids=targets)
    base.update(kw)
    return ConsolidationRequest(**base)


def test_consolidate_and_undo_round_trip(store: Store) -> None:
    a, b = both(store, "svc", "status", "green", "GREEN ", confidence=0.5)
    before = {f.fact_id: f for f in store.history("svc", "status")}
    report = consolidate_facts_v1(store, _request([b, a], actor="ops"))
    receipt = report["receipt"]
    assert report["status"] == "consolidated"
    assert receipt["superseded_fact_ids"] == [b, a] == receipt["source_fact_ids"]
    assert receipt["canonical_hash"] == canonical_hash("green") and canonical_hash("green").startswith("blake3:")
    cid = receipt["canonical_fact_id"]
    canonical = store.get(cid)
    assert (canonical.value, canonical.source_receipt, canonical.actor, canonical.confidence) == \
        ("green", "consolidation:c1", "ops", 1.0)
    assert canonical.version == 2 and canonical.supersedes in (a, b)
    assert store.get(a).superseded_by == cid == store.get(b).superseded_by
    assert [tuple(r) for r in store.db.execute(
        "SELECT canonical_fact_id, source_fact_id FROM consolidation_sources ORDER BY position")] == [(cid, b), (cid, a)]
    undo = consolidate_undo_v1(store, cid, [a, b])
    assert undo == {"status": "undone", "canonical_fact_id": cid, "restored_fact_ids": sorted([a, b])}
    after = {f.fact_id: f for f in store.history("svc", "status") if f.fact_id != cid}
    assert after == before
    assert store.get(cid).deleted
    size = store.journal.path.stat().st_size
    again = consolidate_undo_v1(store, cid, [b, a])
    assert again == {"status": "already_undone", "canonical_fact_id": cid, "restored_fact_ids": []}
    assert store.journal.path.stat().st_size == size


def guard_case(store: Store, name: str):
    """(request, expected kind, expected message) for each guard."""
    t1, t2 = both(store, "svc", "status", "a", "b", confidence=0.5)
    if name == "NoTargets":
        return _request([]), "consolidation requires at least one target fact"
    if name == "MissingConsolidationId":
        return _request([t1], consolidation_id="  "), "consolidation_id must not be empty"
    if name == "DuplicateTarget":
        return _request([t1, t2, t1]), f"duplicate target fact id: {t1}"
    if name == "TargetNotFound":
        other = both(store, "svc", "status", "x", tenant="t2")[0]
        return _request([t1, other]), f"target fact not found: {other}"
    if name == "TargetDeleted":
        store.delete(t2)
        return _request([t1, t2]), f"target fact is deleted: {t2}"
    if name == "TargetAlreadySuperseded":
        store.supersede(t2, t1)
        return _request([t1, t2]), f"target fact is already superseded: {t2}"
    if name == "TargetPinned":
        return _request([t1, t2], protected_fact_ids=[t2]), f"target fact is protected by caller: {t2}"
    if name == "TargetDaemonOwned":
        d = both(store, "__work__::x", "status", "a", confidence=0.5, owner=NamespaceOwner("test", ("__work__::",)))[0]
        return _request([d], entity="__work__::x"), f"target fact belongs to daemon-owned namespace '__work__::': {d}"
    extra = {"TargetPrivate": dict(private=True), "TargetReceiptLinked": dict(source_receipt="rcpt"),
             "TargetHighConfidence": dict(confidence=0.995)}.get(name)
    if extra is not None:   # a third live version of the chain, stored in the same batch
        x = store.store_batch([StoreRequest("svc", "status", "x", **{"confidence": 0.5, **extra})])[0].fact_id
        store.clear_supersede(t2)
        return _request([t1, t2, x]), {
            "TargetPrivate": f"target fact is private: {x}", "TargetReceiptLinked": f"target fact is receipt-linked: {x}",
            "TargetHighConfidence": f"target fact confidence is protected: {x} confidence=0.995"}[name]
    if name == "TargetOutsideEntityKey":
        o = both(store, "svc", "other", "o", confidence=0.5)[0]
        return _request([t1, t2, o]), f"target fact is outside requested entity/key: {o}"
    if name == "ImplicitPriorNotTarget":
        head = store.store("svc", "status", "c", confidence=0.5)   # supersedes t2, is the chain head
        return _request([t1]), f"current prior version must be an explicitly validated target: {head.fact_id}"
    raise AssertionError(name)


GUARDS = ["NoTargets", "MissingConsolidationId", "DuplicateTarget", "TargetNotFound", "TargetDeleted",
          "TargetAlreadySuperseded", "TargetPinned", "TargetDaemonOwned", "TargetPrivate", "TargetReceiptLinked",
          "TargetHighConfidence", "TargetOutsideEntityKey", "ImplicitPriorNotTarget"]


@pytest.mark.parametrize("name", GUARDS)
def test_each_guard_refuses_with_crux_text_and_changes_nothing(store: Store, name: str) -> None:
    request, message = guard_case(store, name)
    journal = store.journal.path.read_bytes()
    with pytest.raises(ConsolidationError) as err:
        consolidate_facts_v1(store, request)
    assert (err.value.kind, str(err.value)) == (name, message)
    assert store.journal.path.read_bytes() == journal


def test_guard_order_first_failure_wins(store: Store) -> None:
    t1, t2 = both(store, "svc", "status", "a", "b", confidence=0.995)
    store.delete(t2)
    # t2 is deleted *and* high-confidence: deleted comes first; t1 fails before t2 is looked at
    with pytest.raises(ConsolidationError) as err:
        consolidate_facts_v1(store, _request([t2, t1]))
    assert err.value.kind == "TargetDeleted"
    with pytest.raises(ConsolidationError) as err:
        consolidate_facts_v1(store, _request([t1, t2]))
    assert err.value.kind == "TargetHighConfidence" and err.value.reason == "target_high_confidence"


@pytest.mark.parametrize("case", ["NoUndoSources", "TargetNotFound", "NotConsolidationCanonical",
                                  "CanonicalSuperseded", "UndoSourceMismatch"])
def test_undo_guards(store: Store, case: str) -> None:
    a, b = both(store, "svc", "status", "a", "b", confidence=0.5)
    cid = consolidate_facts_v1(store, _request([a, b], confidence=0.5))["receipt"]["canonical_fact_id"]
    args = {"NoUndoSources": (cid, []), "TargetNotFound": ("f_missing", [a]), "NotConsolidationCanonical": (a, [b]),
            "CanonicalSuperseded": (cid, [a, b]), "UndoSourceMismatch": (cid, [a])}[case]
    if case == "CanonicalSuperseded":
        store.store("svc", "status", "newer")
    journal = store.journal.path.read_bytes()
    with pytest.raises(ConsolidationError) as err:
        consolidate_undo_v1(store, *args)
    assert err.value.kind == case
    assert store.journal.path.read_bytes() == journal


def test_members_refuse_generic_delete_and_supersede(store: Store) -> None:
    from cruxsql.errors import Conflict
    a, b = both(store, "svc", "status", "a", "b", confidence=0.5)
    cid = consolidate_facts_v1(store, _request([a, b]))["receipt"]["canonical_fact_id"]
    for call in (lambda: store.delete(cid), lambda: store.delete(a), lambda: store.clear_supersede(b)):
        with pytest.raises(Conflict):
            call()


def test_consolidation_survives_rebuild_and_compaction(store: Store, tmp_path: Path) -> None:
    from cruxsql.governance.compaction import compact
    a, b = both(store, "svc", "status", "a", "b", confidence=0.5)
    cid = consolidate_facts_v1(store, _request([a, b]))["receipt"]["canonical_fact_id"]
    edges = lambda s: [tuple(r) for r in s.db.execute(  # noqa: E731
        "SELECT canonical_fact_id, position, source_fact_id FROM consolidation_sources ORDER BY 1, 2")]
    expected = edges(store)
    store.rebuild()
    assert edges(store) == expected
    compact(store)
    assert edges(store) == expected and store.get(a).superseded_by == cid
    store.close()
    with Store(tmp_path / "data") as again:
        assert edges(again) == expected
        assert consolidate_undo_v1(again, cid, [b, a])["status"] == "undone"
        assert again.get(a).superseded_by is None and again.get(cid).deleted


def test_concurrent_consolidations_of_one_chain_one_wins(tmp_path: Path) -> None:
    with Store(tmp_path / "data") as first:
        a, b = both(first, "svc", "status", "a", "b", confidence=0.5)
        with Store(tmp_path / "data") as second:
            consolidate_facts_v1(first, _request([a, b], consolidation_id="one"))
            with pytest.raises(ConsolidationError) as err:
                consolidate_facts_v1(second, _request([a, b], consolidation_id="two"))
            assert err.value.kind == "TargetAlreadySuperseded"
            assert str(err.value) == f"target fact is already superseded: {a}"


def test_memory_consolidate_tool_payload_and_errors(store: Store) -> None:
    from cruxsql.curation.consolidation import memory_consolidate
    from cruxsql.errors import ToolError
    a, b = both(store, "svc", "status", "a", "b", confidence=0.5)
    args = {"entity": "svc", "key": "status", "canonical_value": "ok", "target_fact_ids": [a, b, 7],
            "consolidation_id": "c9", "horizon_class": "weekly"}
    out = memory_consolidate(store, args, agent="agent-1")
    cid = out["structuredContent"]["receipt"]["canonical_fact_id"]
    assert out["content"][0]["text"] == f"consolidated 2 target(s) into canonical fact {cid} (receipt c9); history preserved"
    assert store.get(cid).actor == "agent-1" and store.get(cid).horizon_class == "none"  # "weekly" dropped: entity default
    cases = [
        (dict(agent=None), args, -32030, "memory_consolidate requires an authenticated passport (anonymous calls rejected)"),
        (dict(agent="x"), {**args, "target_fact_ids": ["f_1", 2][1:]}, -32602, "target_fact_ids must be a non-empty array"),
        (dict(agent="x"), {"entity": "svc"}, -32602, "missing required param: key"),
        (dict(agent="x"), {**args, "target_fact_ids": [a]}, -32030, f"target fact is already superseded: {a}"),
        (dict(agent="x", env={"CORECRUXD_FEATURE_CONSOLIDATION": "no"}), args, -32030,
         "consolidation feature explicitly disabled (unset CORECRUXD_FEATURE_CONSOLIDATION to re-enable; it is on by default)"),
    ]
    for kwargs, arguments, code, message in cases:
        with pytest.raises(ToolError) as err:
            memory_consolidate(store, arguments, **kwargs)
        assert (err.value.code, str(err.value)) == (code, message)
    with pytest.raises(ToolError) as err:
        memory_consolidate(store, {**args, "target_fact_ids": ["f_none"]}, agent="x")
    assert err.value.data == {"reason": "target_not_found", "protected": True}
    with pytest.raises(ToolError):
        memory_contradictions(store.db, env={"CORECRUXD_FEATURE_CONSOLIDATION": "0"})
