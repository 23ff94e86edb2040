"""The `duplicate_candidates` view answered from `fact_norms` (migration 0016), which replay keeps current
(`curation.exact_duplicates`): the same rows, in the same order, as migration 0009's self-join of every
live fact, on real stores through every path that changes a fact (store, batch, delete, supersede,
clear_supersede, consolidation and undo, Crux's replace_latest, a long tail, compaction, rebuild, the
migration of an existing view); and the first page read from the duplicated facts only."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import apsw
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import cruxsql
from cruxsql.curation.consolidation import ConsolidationRequest, consolidate_facts_v1, consolidate_undo_v1
from cruxsql.facts import view_file
from cruxsql.facts.store import Store, StoreRequest
from cruxsql.governance.compaction import compact
from support.journal_builders import fact_obj, line

_CURATION_SQL = (view_file.migrations_dir() / "0009_curation.sql").read_text(encoding="utf-8")
SELF_JOIN = _CURATION_SQL.split("CREATE VIEW duplicate_candidates AS")[1].split(";")[0]  # the formulation replaced


def rows(db: apsw.Connection) -> list[tuple]:
    return [tuple(r) for r in db.execute("SELECT * FROM duplicate_candidates")]


def self_join_rows(db: apsw.Connection) -> list[tuple]:
    return [tuple(r) for r in db.execute(SELF_JOIN)]


def _norm(value: str) -> str:
    """SQLite's lower(trim(value)): spaces trimmed, ASCII letters lowercased, nothing else."""
    return "".join(chr(ord(c) + 32) if "A" <= c <= "Z" else c for c in value.strip(" "))


def expected_norms(db: apsw.Connection) -> list[tuple[str, str, str, str, int]]:
    """Every live, non-private fact's (tenant, entity, normalised value, id, duplicated), computed in Python."""
    groups: dict[tuple[str, str, str], list[str]] = {}
    for fact_id, tenant, entity, value in db.execute(
            "SELECT fact_id, tenant_hash, entity, value FROM facts WHERE deleted = 0 AND superseded_by IS NULL "
            "AND private = 0"):
        groups.setdefault((tenant, entity, _norm(value)), []).append(fact_id)
    return sorted((*g, f, int(len(ids) > 1)) for g, ids in groups.items() for f in ids)


def norms(db: apsw.Connection) -> list[tuple[str, str, str, str, int]]:
    return sorted(tuple(r) for r in db.execute("SELECT tenant_hash, entity, norm, fact_id, duplicated FROM fact_norms"))


def members(db: apsw.Connection) -> set[str]:
    return {r[3] for r in norms(db) if r[4]}


def assert_current(db: apsw.Connection) -> list[tuple]:
    assert norms(db) == expected_norms(db)
    got = rows(db)
    assert got == self_join_rows(db)
    return got


def pairs(got: list[tuple]) -> list[tuple[str, str, str, str]]:
    """(tenant, entity, value_a, value_b) of each row, for readable expectations."""
    return [(r[0], r[1], r[7], r[8]) for r in got]


def ids(store: Store, entity: str, key: str, *values: str, **kw) -> list[str]:
    return [f.fact_id for f in store.store_batch([StoreRequest(entity, key, v, **kw) for v in values], chain=False)]


@pytest.fixture
def planted(tmp_path: Path):
    """A store holding every case the view must tell apart."""
    with Store(tmp_path / "data") as store:
        ids(store, "svc", "a", "Same Value", "same value ")                # exact, same key
        store.store("svc", "b", " SAME VALUE")                             # exact, another key: 3 pairs
        store.store("svc", "c", "same values")                             # near, not exact
        store.store("svc", "d", "same\tvalue")                             # a tab is not trimmed
        store.store("svc", "e", "SAME VALUÉ")                              # lower() is ASCII only
        store.store("svc", "p", "same value", private=True)                # private
        store.store("svc", "x", "same value", tenant="t2")                 # other tenant, alone there
        store.store("other", "x", "same value")                            # other entity
        gone = ids(store, "gone", "k", "twice", "TWICE")                   # one of them deleted
        store.delete(gone[0])
        store.store("old", "k", "v1")                                      # superseded by a new version
        store.store("old", "j", "V1 ")
        store.store("old", "k", "v2")
        yield store


def test_planted_duplicates_same_rows_as_the_self_join(planted: Store) -> None:
    got = assert_current(planted.db)
    assert len(got) == 3 and {frozenset(p[2:]) for p in pairs(got)} == {
        frozenset(("Same Value", " SAME VALUE")), frozenset(("Same Value", "same value ")),
        frozenset((" SAME VALUE", "same value "))}
    assert {(r[0], r[1], r[2]) for r in got} == {("default", "svc", "exact_duplicate")}
    assert all(r[3] < r[4] for r in got) and sorted(tuple(sorted(r[5:7])) for r in got) == [
        ("a", "a"), ("a", "b"), ("a", "b")]


def test_every_path_that_changes_a_fact_keeps_the_members_current(planted: Store) -> None:
    store = planted
    low = {"confidence": 0.5}
    g1, g2 = ids(store, "proj", "status", "Green", "green ", **low)
    owner = store.store("proj", "owner", "GREEN").fact_id
    assert len([p for p in assert_current(store.db) if p[1] == "proj"]) == 3

    receipt = consolidate_facts_v1(store, ConsolidationRequest("c1", "proj", "status", "green", [g1, g2]))
    canonical = receipt["receipt"]["canonical_fact_id"]
    assert [(p[3], p[4]) for p in assert_current(store.db) if p[1] == "proj"] == [tuple(sorted((canonical, owner)))]

    consolidate_undo_v1(store, canonical, [g1, g2])                       # canonical deleted, sources live again
    assert len([p for p in assert_current(store.db) if p[1] == "proj"]) == 3

    store.supersede(g1, g2)
    store.clear_supersede(g1)
    assert len([p for p in assert_current(store.db) if p[1] == "proj"]) == 3
    store.delete(owner)
    store.delete(g2)                                                      # g1 is left alone: no longer a member
    assert [p for p in assert_current(store.db) if p[1] == "proj"] == []
    assert g1 not in members(store.db)

    # Crux's replace_latest removes the replaced rows from the view (a hard delete, not a flag).
    first, second = ids(store, "crux", "k", "dup", "DUP")
    with open(store.journal.path, "a", encoding="utf-8") as fh:
        fh.write(line("replace_latest", fact=fact_obj("f_replacement", entity="crux", key="k", value="new",
                                                      version=2), replaced_fact_ids=[second]) + "\n")
    store.refresh()
    assert store.db.execute("SELECT count(*) FROM facts WHERE fact_id = ?", (second,)).fetchone()[0] == 0
    assert first not in members(store.db)
    before = assert_current(store.db)

    compact(store)                                                        # drops deleted facts in place
    assert assert_current(store.db) == before
    added = store.store("crux", "k2", " DUP").fact_id                     # first replay after it: a recount
    before = assert_current(store.db)
    assert [(r[3], r[4]) for r in before if added in r[3:5]] == [tuple(sorted((first, added)))]
    store.rebuild()
    assert assert_current(store.db) == before
    assert store.verify().ok

    # A long tail a Crux daemon appended (replayed in one go), duplicates and deletions in it.
    tail = [line("store", fact=fact_obj(f"f_tail{i:04d}", entity=f"tail{i % 40}", key=f"k{i % 3}",
                                         value=("Tail value " if i % 2 else "tail VALUE") + str(i % 80)))
            for i in range(1200)] + [line("delete", fact_id=f"f_tail{i:04d}", deleted_at="2026-05-27T11:00:00+00:00")
                                     for i in range(0, 1200, 7)]
    with open(store.journal.path, "a", encoding="utf-8") as fh:
        fh.write("".join(t + "\n" for t in tail))
    store.refresh()
    live = Counter(i % 80 for i in range(1200) if i % 7)                  # one group per i % 80
    assert len([p for p in assert_current(store.db) if p[1].startswith("tail")]) == \
        sum(n * (n - 1) // 2 for n in live.values()) == 6096


def test_a_replaced_journal_is_recounted_whole(planted: Store) -> None:
    """A journal rewritten under the view (a new file: the view is rebuilt) holds other facts."""
    data_dir = planted.data_dir
    planted.close()
    stores = [line("store", fact=fact_obj(f"f_{i}", entity="e", key=f"k{i}", value="same" if i < 3 else f"x{i}"))
              for i in range(5)]
    (data_dir / "facts.jsonl").write_text("".join(s + "\n" for s in stores), encoding="utf-8")
    with cruxsql.open(data_dir) as store:
        got = assert_current(store.db)
        assert [(r[3], r[4]) for r in got] == [("f_0", "f_1"), ("f_0", "f_2"), ("f_1", "f_2")]


def test_an_existing_view_gains_its_members_when_migrated(planted: Store, tmp_path: Path) -> None:
    expected = assert_current(planted.db)
    data_dir = planted.data_dir
    planted.close()
    db = apsw.Connection(str(data_dir / view_file.DB_NAME))
    with db:                                                               # the view as 0015 left it
        db.execute("DROP TABLE fact_norms")
        db.execute("DROP TABLE fact_norms_state")
        db.execute("DROP VIEW duplicate_candidates")
        db.execute(f"CREATE VIEW duplicate_candidates AS {SELF_JOIN}")
        db.execute("DELETE FROM schema_migrations WHERE version = 16")
    db.close()
    with cruxsql.open(data_dir) as store:
        assert store.db.execute("SELECT count(*) FROM schema_migrations WHERE version = 16").fetchone()[0] == 1
        assert assert_current(store.db) == expected


def test_the_first_page_reads_the_members_not_every_fact(planted: Store) -> None:
    plan = [r[3] for r in planted.db.execute("EXPLAIN QUERY PLAN SELECT * FROM duplicate_candidates")]
    assert plan == ["SCAN m USING COVERING INDEX fact_norms_duplicated",       # duplicated facts only, in order
                    "SEARCH p USING PRIMARY KEY (tenant_hash=? AND entity=? AND norm=? AND fact_id>?)",
                    "SEARCH a USING INDEX sqlite_autoindex_facts_1 (fact_id=?)",
                    "SEARCH b USING INDEX sqlite_autoindex_facts_1 (fact_id=?)",
                    "USE TEMP B-TREE FOR LAST TERM OF ORDER BY"]                 # each fact's partners only


_VALUES = st.sampled_from(["Same", "same ", " SAME", "same\t", "other", "Other", "x"])
_OPS = st.lists(st.one_of(
    st.tuples(st.just("store"), st.sampled_from(["e1", "e2"]), st.sampled_from(["k1", "k2", "k3"]), _VALUES,
              st.sampled_from(["default", "t2"]), st.booleans()),
    st.tuples(st.just("delete"), st.integers(0, 50)),
    st.tuples(st.just("clear_supersede"), st.integers(0, 50)),
    st.tuples(st.just("supersede"), st.integers(0, 50), st.integers(0, 50)),
), min_size=1, max_size=14)


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_OPS)
def test_random_histories_keep_members_exact(tmp_path_factory, ops) -> None:
    with Store(tmp_path_factory.mktemp("d")) as store:
        for op in ops:
            facts = [tuple(r) for r in store.db.execute(
                "SELECT fact_id, tenant_hash, deleted, superseded_by FROM facts ORDER BY seq")]
            if op[0] == "store":
                _, entity, key, value, tenant, private = op
                store.store(entity, key, value, tenant=tenant, private=private)
            elif op[0] == "delete" and facts:
                f = facts[op[1] % len(facts)]
                if not f[2]:
                    store.delete(f[0], tenant=f[1])
            elif op[0] == "clear_supersede" and facts:
                f = facts[op[1] % len(facts)]
                if f[3] is not None:
                    store.clear_supersede(f[0], tenant=f[1])
            elif op[0] == "supersede" and facts:
                f, by = facts[op[1] % len(facts)], facts[op[2] % len(facts)]
                if f[0] != by[0] and f[1] == by[1] and not f[2] and not by[2]:
                    store.supersede(f[0], by[0], tenant=f[1])
            assert_current(store.db)
        assert json.dumps(rows(store.db)) == json.dumps(self_join_rows(store.db))
