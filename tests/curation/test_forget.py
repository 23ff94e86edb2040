"""Scoped forgetting (dry run and forget) on a real data directory, with real legal holds."""

from __future__ import annotations


import cbor2
import pytest

from cruxsql.curation.forget import ForgetScope, memory_forget, memory_forget_dry_run
from cruxsql.curation.memory_panel import memory_pin
from cruxsql.errors import ToolError
from cruxsql.facts.store import Store
from cruxsql.governance import legal_holds


def holds_of(store: Store):
    def check(tenant: str, entity: str) -> list[dict]:
        return [{"hold_id": h.hold_id, "tenant_id": h.tenant_id, "entity_prefixes": list(h.entity_prefixes),
                 "reason": h.reason} for h in legal_holds.active_holds(store.db) if h.covers(tenant, entity)]
    return check


def seed(store: Store) -> dict[str, str]:
    ids = {}
    ids["a1"] = store.store("proj:x", "note", "first note").fact_id
    ids["a2"] = store.store("proj:x", "owner", "alice").fact_id
    ids["b"] = store.store("proj:y", "note", "other").fact_id
    ids["mine"] = store.store("proj:x", "note", "private", private=True, agent="a1").fact_id   # forget-reserved
    ids["t2"] = store.store("proj:x", "note", "other tenant", tenant="t2").fact_id
    return ids


def test_scope_matching_and_errors() -> None:
    from cruxsql.facts.codec import Fact
    f = Fact(fact_id="f", tenant_hash="default", entity="tenant:acme::crm", key="deal.amount", value="1", confidence=1.0,
             stored_at=1_000, tokens=1, version=1)
    assert ForgetScope("key_glob", "deal.*").matches(f) and not ForgetScope("key_glob", "deal").matches(f)
    assert ForgetScope("tenant_id", "acme").matches(f) and ForgetScope("before_timestamp", "2026-01-01T00:00:00Z").matches(f)
    assert not ForgetScope("before_timestamp", "garbage").matches(f)
    with pytest.raises(ToolError, match="missing required param: scope"):
        ForgetScope.parse(None)
    with pytest.raises(ToolError, match="invalid scope: unknown variant `everything`") as err:
        ForgetScope.parse({"type": "everything", "value": ""})
    assert err.value.data["accepted_types"][0] == "entity_prefix"


def test_dry_run_lists_without_writing_and_respects_pins_and_budget(store: Store) -> None:
    ids = seed(store)
    memory_pin(store, ids["a2"], agent="a1")
    journal = store.journal.path.read_bytes()
    out = memory_forget_dry_run(store, {"type": "entity_prefix", "value": "proj:x"}, agent="a1")
    assert [r["fact_id"] for r in out["structuredContent"]["facts_that_would_be_affected"]] == [ids["a1"]]
    assert out["content"][0]["text"] == ("dry-run: 1 facts would be forgotten (entity_prefix=proj:x); see structured "
                                         "`facts_that_would_be_affected`")
    pinned = memory_forget_dry_run(store, {"type": "entity_prefix", "value": "proj:"}, include_pinned=True, agent="a1")
    assert [r["fact_id"] for r in pinned["structuredContent"]["facts_that_would_be_affected"]] == \
        [ids["a1"], ids["a2"], ids["b"]]
    cut = memory_forget_dry_run(store, {"type": "entity_prefix", "value": "proj:"}, token_budget=1, agent=None)
    assert cut["structuredContent"]["count"] == 1
    own = memory_forget_dry_run(store, {"type": "passport_id", "value": "a1"}, agent="a1")   # __agent:: is reserved
    assert own["content"][0]["text"] == "dry-run: no facts match scope (passport_id=a1)"
    assert store.journal.path.read_bytes() == journal


def test_forget_deletes_in_one_append_and_returns_receipt(store: Store) -> None:
    ids = seed(store)
    before = store.journal.path.read_bytes()
    out = memory_forget(store, {"type": "entity_prefix", "value": "proj:x"}, "gdpr request", agent="a1",
                        holds_covering=holds_of(store), env={})
    assert out["facts_affected"] == 2 and out["forget_receipt_id"].startswith("r_forget_")
    body = cbor2.loads(bytes.fromhex(out["receipt_body_cbor_hex"]))
    assert [f["fact_id"] for f in body["facts_affected"]] == [ids["a1"], ids["a2"]] and body["reason"] == "gdpr request"
    assert store.get(ids["a1"]).deleted and store.get(ids["a2"]).deleted and not store.get(ids["t2"]).deleted
    added = store.journal.path.read_bytes()[len(before):].splitlines()
    assert len(added) == 2 and all(b'"op":"delete"' in line for line in added)


def test_forget_refusals_change_nothing(store: Store) -> None:
    ids = seed(store)
    legal_holds.place_hold(store, "default", "litigation", ["proj:x"])
    journal = store.journal.path.read_bytes()
    scope = {"type": "entity_prefix", "value": "proj:"}
    with pytest.raises(ToolError) as err:
        memory_forget(store, scope, "cleanup", agent="a1", holds_covering=holds_of(store), env={})
    assert err.value.code == -32044 and err.value.data["facts_blocked"] == 2
    assert str(err.value) == "memory_forget refused: 1 active legal hold(s) cover the requested facts"
    for kwargs, code in ((dict(agent=None), -32602), (dict(agent="a1", env={"CORECRUXD_FEATURE_SCOPED_FORGET": "yes"}), -32601)):
        with pytest.raises(ToolError) as err:
            memory_forget(store, scope, "cleanup", holds_covering=holds_of(store), **{"env": {}, **kwargs})
        assert err.value.code == code
    with pytest.raises(ToolError, match="requires a non-empty `reason`"):
        memory_forget(store, scope, "  ", agent="a1", holds_covering=holds_of(store), env={})
    assert store.journal.path.read_bytes() == journal and not store.get(ids["b"]).deleted

