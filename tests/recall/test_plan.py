"""How `query_facts` reads trigram candidates: judged by tenant and liveness from facts_seq_scope
(migration 0037) before any fact row is read, and the chosen matches re-read by their own seqs, not
through the whole candidate list again."""

from __future__ import annotations

from pathlib import Path

from cruxsql.facts.store import Store, StoreRequest
from cruxsql.recall.facade import Recall


def _store(tmp_path: Path) -> tuple[Store, dict[str, str]]:
    store = Store(tmp_path)
    store.store_batch([StoreRequest(f"svc{i}", "note", f"deploy canary {i}", tenant_hash="acme") for i in range(40)])
    store.store_batch([StoreRequest(f"svc{i}", "note", f"deploy canary {i}", tenant_hash="other") for i in range(40)])
    kept = store.store("svc-kept", "owner", "deploy owner kept", tenant="acme")
    gone = store.store("svc-gone", "owner", "deploy owner deleted", tenant="acme")
    store.delete(gone.fact_id, tenant="acme")
    old = store.store("svc-chain", "owner", "deploy owner old", tenant="acme")
    new = store.store("svc-chain", "owner", "deploy owner new", tenant="acme")
    return store, {"kept": kept.fact_id, "gone": gone.fact_id, "old": old.fact_id, "new": new.fact_id}


def test_candidates_are_judged_from_the_scope_index(tmp_path: Path) -> None:
    store, ids = _store(tmp_path)
    with store:
        recall = Recall(store)
        res = recall.query_facts("owner", tenant="acme", top_k=10, record_access=False)
        assert sorted(r["fact_id"] for r in res.rows) == sorted([ids["kept"], ids["new"]])
        assert res.matched == 2
        sql, params = recall.last_sql
        assert "carray(:cand)" in sql  # the trigram path, not a scan
        plan = [row[3] for row in store.db.execute("EXPLAIN QUERY PLAN " + sql, params)]
        searches = [step for step in plan if step.startswith("SEARCH f ")]
        assert searches and all("facts_seq_scope (seq=? AND tenant_hash=?" in step for step in searches), plan


def test_the_chosen_matches_are_read_again_by_their_own_seqs(tmp_path: Path) -> None:
    store, ids = _store(tmp_path)
    with store:
        recall = Recall(store)
        statements: list[str] = []
        store.db.set_profile(lambda sql, _ns: statements.append(sql))
        try:
            res = recall.query_facts("canary", tenant="other", top_k=3, record_access=False)
        finally:
            store.db.set_profile(None)
        assert len(res.rows) == 3 and res.matched == 40
        rereads = [sql for sql in statements if "carray(:picked)" in sql]
        assert len(rereads) == 1
        assert "carray(:cand)" not in rereads[0]
        assert "carray(:cand)" in recall.last_sql[0]


def test_an_entity_filter_keeps_driving_the_plan(tmp_path: Path) -> None:
    # beside an entity or entity-prefix filter the tenant stays out of the index choice: the planner
    # otherwise walked the tenant's whole entity range in facts_chain (10x slower at 100k facts)
    store, ids = _store(tmp_path)
    with store:
        recall = Recall(store)
        for filters in ({"entity_prefix": "svc-"}, {"entity": "svc-chain"}, {"entity_prefix": "svc-", "agent": "a1"}):
            res = recall.query_facts("owner", tenant="acme", top_k=10, record_access=False, **filters)
            expected = {ids["new"]} if "entity" in filters else {ids["kept"], ids["new"]}
            assert {r["fact_id"] for r in res.rows} == expected, filters
            sql, params = recall.last_sql
            plan = [row[3] for row in store.db.execute("EXPLAIN QUERY PLAN " + sql, params)]
            searches = [step for step in plan if step.startswith("SEARCH f ")]
            assert searches and not any("tenant_hash=?" in step for step in searches), (filters, plan)
