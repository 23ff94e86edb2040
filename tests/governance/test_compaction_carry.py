"""Derived tables a compaction carries over instead of starting over on its new generation:
`fact_norms` (curation.exact_duplicates) and the recall trigram text index (recall.text_index). After a
compaction, an erasure and a retention run (which compact), each must hold exactly what a from-scratch
build over the compacted view holds, without having been rebuilt."""

from __future__ import annotations

import time
from pathlib import Path

import apsw
import numpy as np
import pytest

from cruxsql.curation import exact_duplicates
from cruxsql.facts.store import Store, StoreRequest
from cruxsql.governance import compaction, erasure, retention
from cruxsql.recall import text_index
from cruxsql.recall.text_index import BLOCK_BITS, TextIndex
from cruxsql.recall.fact_terms import POSTING

# these test the text index's own sync: writes leave indexing to it here (conftest.py)
pytestmark = pytest.mark.usefixtures("lazy_text_index")

TERMS = ("same value", "ÉTÉ", "gone", "kept", "alpha", "agent", "dup", "xyz")


def populate(store: Store) -> None:
    for i, v in enumerate(("Same Value", "same value ", "DUP one", "dup ONE")):
        store.store("svc", f"a{i}", v)
    store.store("svc", "b", "Été à Paris")
    store.store("svc", "p", "same value", private=True)
    store.store("notes", "n", "private note of ALPHA", private=True, agent="bot")
    for i in range(30):
        store.store(f"kept:{i % 4}", f"k{i}", f"KEPT value {i} alpha {i * 7}")
    gone = [store.store("gone:x", f"g{i}", f"GONE_Marker_{i} alpha dup one").fact_id for i in range(8)]
    gone.append(store.store("gone:y", "g", "dup one").fact_id)  # its group keeps one member
    for fid in gone[:5]:
        store.delete(fid)
    store.store("old", "k", "v1")
    store.store("old", "k", "V1")  # supersedes the first


def postings(db: apsw.Connection) -> set[tuple[int, int]]:
    out = set()
    for gram, block, blob in db.execute("SELECT gram, block, seqs FROM recall_grams"):
        out.update((gram, int(s) + (block << BLOCK_BITS)) for s in np.frombuffer(blob, dtype="<u2"))
    return out


def word_postings(db: apsw.Connection) -> tuple[set, list]:
    """Every (tenant, owner, term, seq, tfs, lengths) of the ranked recall's word postings, and its stats."""
    out = set()
    for tenant, owner, term, block, blob in db.execute("SELECT tenant, owner, term, block, postings FROM recall_terms"):
        for rec in np.frombuffer(blob, dtype=POSTING):
            out.add((tenant, owner, term, int(rec["off"]) + (block << BLOCK_BITS), tuple(rec["tf"]), tuple(rec["len"])))
    stats = sorted(tuple(r) for r in db.execute("SELECT * FROM recall_term_stats WHERE facts > 0"))
    return out, stats


def index_snapshot(db: apsw.Connection) -> tuple:
    index = TextIndex(db)
    text = sorted(tuple(r) for r in db.execute("SELECT * FROM recall_text"))
    return text, postings(db), {t: index.candidates([t.lower()]).tolist() for t in TERMS}, word_postings(db)


def norms_snapshot(db: apsw.Connection) -> tuple:
    return (sorted(tuple(r) for r in db.execute("SELECT * FROM fact_norms")),
            [tuple(r) for r in db.execute("SELECT * FROM duplicate_candidates")])


def from_scratch(db: apsw.Connection) -> tuple:
    """The index and fact_norms built anew over the same view (then put back as they were)."""
    db.execute("SAVEPOINT scratch")
    try:
        for table in ("recall_text", "recall_grams", "recall_index_state"):
            db.execute(f"DELETE FROM {table}")
        TextIndex(db).sync()
        exact_duplicates.recompute(db)
        return index_snapshot(db), norms_snapshot(db)
    finally:
        db.execute("ROLLBACK TO scratch")
        db.execute("RELEASE scratch")


@pytest.fixture
def store(store: Store) -> Store:
    populate(store)
    TextIndex(store.db).sync()  # the index exists before the rewrite
    return store


def assert_carried(store: Store, monkeypatch) -> None:
    db = store.db
    generation = db.execute("SELECT generation FROM journal_checkpoint").fetchone()[0]
    assert db.execute("SELECT generation FROM recall_index_state").fetchone()[0] == generation
    assert db.execute("SELECT generation FROM fact_norms_state").fetchone()[0] == generation
    # the first read indexes only what was stored after the rewrite (an erasure's or retention's
    # report fact), it does not start over
    last_seq = db.execute("SELECT last_seq FROM recall_index_state").fetchone()[0]
    pending = db.execute("SELECT count(*) FROM facts WHERE seq > ?", (last_seq,)).fetchone()[0]
    assert pending <= 1 and TextIndex(db).sync() == pending
    assert index_snapshot(db) == from_scratch(db)[0]
    assert norms_snapshot(db) == from_scratch(db)[1]
    # only the facts still in the view keep their text and postings
    live = db.execute("SELECT seq, lower(value) FROM facts WHERE value LIKE 'GONE_Marker%' ORDER BY seq").fetchall()
    assert db.execute("SELECT seq, lc_value FROM recall_text WHERE lc_value LIKE 'gone_marker%' ORDER BY seq"
                      ).fetchall() == live
    assert TextIndex(db).candidates(["gone_marker"]).tolist() == [r[0] for r in live]
    assert {p[3] for p in word_postings(db)[0] if p[2] == "=gone-marker"} == {r[0] for r in live}
    # the carried state keeps up with what comes next, by replay as usual
    monkeypatch.setattr(exact_duplicates, "recompute", lambda db: pytest.fail("fact_norms recomputed"))
    store.store("svc", "z", "SAME VALUE")
    store.store("fresh", "f", "GONE_Marker_new")
    assert TextIndex(db).sync() == 2  # only the two new facts
    assert TextIndex(db).candidates(["gone_marker"]).size == len(live) + 1
    monkeypatch.undo()
    assert index_snapshot(db) == from_scratch(db)[0]
    assert norms_snapshot(db) == from_scratch(db)[1]


def _no_recompute(monkeypatch) -> list[int]:
    """Fail on a fact_norms recompute; count the facts the text index (re)indexes meanwhile."""
    monkeypatch.setattr(exact_duplicates, "recompute", lambda db: pytest.fail("fact_norms recomputed"))
    indexed: list[int] = []
    original = TextIndex._index_rows
    monkeypatch.setattr(TextIndex, "_index_rows", lambda self, rows, mode: (indexed.append(len(rows)),
                                                                            original(self, rows, mode))[1])
    return indexed


def test_compaction_carries_both_over(store: Store, monkeypatch) -> None:
    before = len(postings(store.db))
    indexed = _no_recompute(monkeypatch)
    report = compaction.compact(store)
    monkeypatch.undo()
    assert indexed == []
    assert report.facts_dropped == 5 and not report.seq_renumbered
    assert len(postings(store.db)) < before
    assert_carried(store, monkeypatch)


def test_erasure_carries_both_over(store: Store, monkeypatch) -> None:
    indexed = _no_recompute(monkeypatch)
    erasure.erase(store, erasure.Selection(entity_prefixes=("gone:x",)), reason="test")
    monkeypatch.undo()
    assert sum(indexed) <= 1  # erasure's own sync: at most its receipt, never the whole index
    assert store.db.execute("SELECT count(*) FROM facts WHERE entity = 'gone:x'").fetchone()[0] == 0
    assert_carried(store, monkeypatch)


@pytest.mark.slow
def test_retention_carries_both_over(store: Store, monkeypatch) -> None:
    time.sleep(1.1)
    store.store("recent", "r", "recent DUP one")
    indexed = _no_recompute(monkeypatch)
    applied = retention.apply(store, "1s")
    monkeypatch.undo()
    assert sum(indexed) <= 2  # the fact stored after the index was built, and a receipt at most
    assert applied["counts"]["facts_deleted_now"] > 0
    assert store.db.execute("SELECT count(*) FROM facts WHERE entity = 'recent'").fetchone()[0] == 1
    assert_carried(store, monkeypatch)


def test_renumbered_seqs_or_a_stale_index_start_the_index_over(store: Store, monkeypatch) -> None:
    # same stored_at for a batch (each fact is stamped when built, so a clock that does not move): a fresh
    # replay numbers it by fact id, so compaction renumbers
    from cruxsql.facts import timestamps
    frozen = timestamps.now_ns()
    with monkeypatch.context() as m:
        m.setattr(timestamps, "now_ns", lambda: frozen)
        stored = store.store_batch([StoreRequest("tie", f"t{i}", f"TIE value {i}") for i in range(20)])
    assert len({f.stored_at for f in stored}) == 1
    TextIndex(store.db).sync()
    rebuilt = []
    original = TextIndex._index_range
    monkeypatch.setattr(TextIndex, "_index_range", lambda self, *a: rebuilt.append(1) or original(self, *a))
    report = compaction.compact(store)
    assert report.seq_renumbered
    # started over (its seqs no longer name the same facts), inside the compaction, not by the first read
    assert rebuilt and TextIndex(store.db).sync() == 0
    assert index_snapshot(store.db) == from_scratch(store.db)[0]


def test_a_rebuild_still_recomputes_fact_norms(store: Store) -> None:
    calls = []
    original = exact_duplicates.recompute
    exact_duplicates.recompute = lambda db: (calls.append(1), original(db))[1]
    try:
        store.rebuild()
    finally:
        exact_duplicates.recompute = original
    assert calls
    assert norms_snapshot(store.db) == from_scratch(store.db)[1]


def test_drop_across_postings_blocks_leaves_what_a_fresh_index_of_the_rest_holds(tmp_path: Path,
                                                                                  monkeypatch) -> None:
    """`TextIndex.drop` (the carry-over's removal of dropped facts) over facts in several postings blocks,
    sharing trigrams across blocks and within one, with a postings row left empty, its trigrams computed
    in pieces: the index left equals one built from scratch over the remaining facts."""
    from cruxsql.facts import view_file
    monkeypatch.setattr(text_index, "_DROP_PIECE", 1)

    db = view_file.open_connection(tmp_path / view_file.DB_NAME)
    seqs = [1, 2, 3, 65535, 65536, 65537, 70000, 131072, 131073, 200000]
    values = ["alpha beta", "ALPHA gamma", "Été unique", "alpha beta", "beta only", "zzzuniq", "gamma alpha",
              "alpha", "qqqsolo", "beta gamma"]
    with db:
        db.execute("INSERT INTO journal_checkpoint (id, byte_offset, line_count, inode, tail_hash, next_seq, "
                   "generation, updated_at_ns) VALUES (1, 1, 1, 1, 'x', 1, 'g1', 0)")
        db.executemany(
            "INSERT INTO facts (fact_id, tenant_hash, entity, key, value, confidence, stored_at, stored_at_ns, tokens, "
            "deleted, version, private, horizon_class, seq, line_no) VALUES (?, 't', ?, 'k', ?, 1.0, 'x', 0, 1, 0, 1, "
            "0, 'none', ?, ?)", [(f"f{s}", f"e{s % 3}", v, s, i + 1) for i, (s, v) in enumerate(zip(seqs, values))])
    TextIndex(db).sync()
    gone = {2, 3, 65536, 65537, 131073, 200000}
    with db:
        TextIndex(db).drop(db.execute("SELECT seq, entity, key, value FROM facts WHERE seq IN carray(?) ORDER BY seq",
                                      (apsw.carray(np.array(sorted(gone), dtype=np.int64)),)).fetchall())
        db.execute("DELETE FROM facts WHERE seq IN carray(?)", (apsw.carray(np.array(sorted(gone), dtype=np.int64)),))
    dropped = sorted(tuple(r) for r in db.execute("SELECT * FROM recall_text")), postings(db)
    with db:
        for table in ("recall_text", "recall_grams", "recall_index_state"):
            db.execute(f"DELETE FROM {table}")
    TextIndex(db).sync()
    assert dropped == (sorted(tuple(r) for r in db.execute("SELECT * FROM recall_text")), postings(db))
    assert {s >> BLOCK_BITS for _, s in dropped[1]} == {0, 1, 2}
    assert db.execute("SELECT count(*) FROM recall_grams WHERE block = 3").fetchone()[0] == 0  # emptied rows go
    db.close()
