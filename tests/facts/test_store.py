"""The store's write API: version chains, privacy, validation, journaled horizon and reverify."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

import cruxsql
from cruxsql.facts import privacy
from cruxsql.governance import compaction, legal_holds
from cruxsql.facts.store import StoreRequest
from support.journal_files import journal_lines


def test_a_new_version_writes_store_then_supersede(tmp_path: Path) -> None:
    with cruxsql.open(tmp_path) as store:
        v1 = store.store("deployment", "strategy", "canary", confidence=0.95, source_receipt="crx_1", actor="ops")
        v2 = store.store("deployment", "strategy", "blue-green")
        assert (v1.version, v2.version, v2.supersedes) == (1, 2, v1.fact_id)
        assert store.get(v1.fact_id).superseded_by == v2.fact_id
    ops = [(e["op"], e.get("fact", {}).get("fact_id", e.get("fact_id"))) for e in journal_lines(tmp_path)]
    assert ops == [("store", v1.fact_id), ("store", v2.fact_id), ("supersede", v1.fact_id)]
    first = journal_lines(tmp_path)[0]["fact"]
    assert first["confidence"] == 0.95 and first["source_receipt"] == "crx_1" and first["actor"] == "ops"
    assert first["tokens"] == 2 and first["fact_id"].startswith("f_") and len(first["fact_id"]) == 34
    assert first["stored_at"].endswith("Z")
    assert journal_lines(tmp_path)[2]["superseded_at"].endswith("+00:00")


def test_chains_are_per_tenant(tmp_path: Path) -> None:
    with cruxsql.open(tmp_path) as store:
        a = store.store("svc", "owner", "alice", tenant="t1")
        b = store.store("svc", "owner", "bob", tenant="t2")
        c = store.store("svc", "owner", "carol", tenant="  ")
        assert (a.version, b.version, b.supersedes, c.tenant_hash) == (1, 1, None, "default")
        assert [f.value for f in store.history("svc", "owner", tenant="t1")] == ["alice"]


def test_a_deleted_head_is_skipped_by_the_chain(tmp_path: Path) -> None:
    with cruxsql.open(tmp_path) as store:
        v1 = store.store("e", "k", "1")
        v2 = store.store("e", "k", "2")
        store.delete(v2.fact_id)
        v3 = store.store("e", "k", "3")
        # Crux walks back to the newest non-deleted fact: the version number repeats (fact_store.rs's build_fact)
        assert (v3.version, v3.supersedes) == (2, v1.fact_id)


def test_a_batch_chains_repeated_requests_in_request_order(tmp_path: Path) -> None:
    # Crux builds every fact of a batch from the chain heads before it, so two requests for one
    # (entity, key) both become version 2 and both current; cruxsql chains them: v2, v3, one head.
    with cruxsql.open(tmp_path) as store:
        v1 = store.store("e", "k", "0")
        facts = store.store_batch([StoreRequest("e", "k", "a"), StoreRequest("e", "k", "b"),
                                   StoreRequest("other", "k", "c", tenant_hash="t9", confidence=0.25)])
        assert [f.version for f in facts] == [2, 3, 1]
        assert [f.supersedes for f in facts] == [v1.fact_id, facts[0].fact_id, None]
        assert facts[2].tenant_hash == "t9" and facts[2].confidence == 0.25
        # each fact stamped as it is built (as Crux's try_store_bulk does); a chain's later version at least 1 ns on
        assert facts[0].stored_at < facts[1].stored_at <= facts[2].stored_at
        heads = store.db.execute("SELECT value FROM live_facts WHERE entity = 'e' AND key = 'k'").fetchall()
        assert heads == [("b",)]
        assert [(f.value, f.superseded_by) for f in store.history("e", "k")] == [
            ("0", facts[0].fact_id), ("a", facts[1].fact_id), ("b", None)]
        assert store.verify().ok
        events = journal_lines(tmp_path)
        assert [e["op"] for e in events] == ["store", "store_batch", "supersede", "supersede"]
        assert [(e["fact_id"], e["by_fact_id"]) for e in events[2:]] == [
            (v1.fact_id, facts[0].fact_id), (facts[0].fact_id, facts[1].fact_id)]
        compaction.compact(store)  # orders by stored_at: the chain keeps its order and its one head
        assert store.store("e", "k", "c").version == 4
        assert [f.value for f in store.history("e", "k")] == ["0", "a", "b", "c"]
        assert store.verify().ok


def test_born_private_prefixes_and_env_overrides(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(privacy.ALWAYS_PRIVATE_ENV, "hr::")
    monkeypatch.setenv(privacy.SHARE_OVERRIDE_ENV, "github::public/, __legal_hold__::")
    privacy.install_global(None)
    with cruxsql.open(tmp_path) as store:
        assert store.store("github::org/repo", "k", "v").private
        assert not store.store("github::public/repo", "k", "v").private
        # daemon-owned: no override (written by its owner; anyone else is refused, see test_reserved_namespaces)
        assert store.store("__legal_hold__::x", "state", "{}", owner=legal_holds.OWNER).private
        assert store.store("hr::alice", "salary", "1").private
        assert not store.store("notes", "k", "v").private
        assert store.store("notes", "k2", "v", private=True).private


@pytest.mark.parametrize("confidence", [math.nan, math.inf, -0.01, 1.01, 2])
def test_confidence_must_be_finite_and_within_0_and_1(tmp_path: Path, confidence: float) -> None:
    with cruxsql.open(tmp_path) as store:
        with pytest.raises(cruxsql.InvalidInput, match="confidence"):
            store.store("e", "k", "v", confidence=confidence)
        assert store.counts()["journal_events"] == 0


def test_errors_name_the_bad_input(tmp_path: Path) -> None:
    with cruxsql.open(tmp_path) as store:
        a = store.store("e", "k", "v", tenant="t1")
        b = store.store("e2", "k", "v", tenant="t2")
        with pytest.raises(cruxsql.NotFound, match="f_nope"):
            store.delete("f_nope")
        with pytest.raises(cruxsql.NotFound, match="tenant 't2'"):
            store.delete(a.fact_id, tenant="t2")
        with pytest.raises(cruxsql.Conflict, match="different tenants"):
            store.supersede(a.fact_id, b.fact_id)
        with pytest.raises(cruxsql.InvalidInput, match="'sometimes'"):
            store.set_horizon(a.fact_id, "sometimes")
        with pytest.raises(cruxsql.InvalidInput, match="valid_to"):
            store.set_validity(a.fact_id, 10, 5)
        with pytest.raises(cruxsql.Conflict, match="not superseded"):
            store.clear_supersede(a.fact_id)
        store.delete(a.fact_id)
        with pytest.raises(cruxsql.Conflict, match="already deleted"):
            store.delete(a.fact_id)
        assert store.counts()["journal_events"] == 3


def test_supersede_clear_and_validity_round_trip(tmp_path: Path) -> None:
    with cruxsql.open(tmp_path) as store:
        a, b = store.store("e", "a", "1"), store.store("e", "b", "2")
        store.supersede(a.fact_id, b.fact_id)
        assert store.get(a.fact_id).superseded_by == b.fact_id
        store.clear_supersede(a.fact_id)
        assert store.get(a.fact_id).superseded_by is None
        store.set_validity(a.fact_id, 1_000_000_000, None)
        assert (store.get(a.fact_id).valid_from, store.get(a.fact_id).valid_to) == (1_000_000_000, None)
        store.set_validity(a.fact_id)
        assert store.get(a.fact_id).valid_from is None
    set_validity = [e for e in journal_lines(tmp_path) if e["op"] == "set_validity"]
    assert set_validity[0]["valid_from"] == "1970-01-01T00:00:01Z" and "valid_to" not in set_validity[0]
    assert list(set_validity[1]) == ["op", "fact_id", "set_at"]


def test_horizon_and_reverify_survive_a_restart(tmp_path: Path) -> None:
    with cruxsql.open(tmp_path) as store:
        fact = store.store("incident:42", "status", "open")
        assert fact.horizon_class == "medium"
        store.set_horizon(fact.fact_id, " VOLATILE ")
        reverified = store.reverify(fact.fact_id).reverified_at
    with cruxsql.open(tmp_path) as store:
        again = store.get(fact.fact_id)
        assert again.horizon_class == "volatile" and again.reverified_at == reverified
    # facts.jsonl holds only what a Crux daemon replays; the two changes are in cruxsql's own file
    assert [e["op"] for e in journal_lines(tmp_path)] == ["store"]
    own = [json.loads(line) for line in (tmp_path / "cruxsql-fact-events.jsonl").read_text().splitlines()]
    assert [(e["op"], e["fact_id"]) for e in own] == [("set_horizon", fact.fact_id), ("reverify", fact.fact_id)]
    (tmp_path / "cruxsql.db").unlink()
    with cruxsql.open(tmp_path) as store:  # rebuilt from both files
        again = store.get(fact.fact_id)
        assert again.horizon_class == "volatile" and again.reverified_at == reverified


def test_store_request_validation_names_the_key() -> None:
    with pytest.raises(cruxsql.InvalidInput, match="line 3: `value`"):
        StoreRequest.from_obj({"entity": "e", "key": "k"}, where="line 3")
    with pytest.raises(cruxsql.InvalidInput, match="unknown key"):
        StoreRequest.from_obj({"entity": "e", "key": "k", "value": "v", "colour": "red"})
    with pytest.raises(cruxsql.InvalidInput, match="confidence"):
        StoreRequest.from_obj({"entity": "e", "key": "k", "value": "v", "confidence": True})
    req = StoreRequest.from_obj({"entity": "e", "key": "k", "value": "v", "confidence": 1, "private": True})
    assert (req.tenant_hash, req.confidence, req.private) == ("default", 1.0, True)
