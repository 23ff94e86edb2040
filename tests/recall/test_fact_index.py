"""The recall trigram index on its own: appends, catch-up after a rewrite, a new generation."""

from __future__ import annotations

import pytest

from pathlib import Path

import numpy as np

import cruxsql
from cruxsql.governance import compaction
from cruxsql.recall.text_index import TextIndex
from cruxsql.recall.trigrams import term_grams
from support.journal_files import journal_bytes

# these test the text index's own sync: writes leave indexing to it here (conftest.py)
pytestmark = pytest.mark.usefixtures("lazy_text_index")


def _expected(store, term: str) -> list[int]:
    """Brute force: seqs whose value, key or entity contains `term` (all ASCII here, so no lowering)."""
    return sorted(seq for seq, e, k, v in store.db.execute("SELECT seq, entity, key, value FROM facts")
                  if term in v.lower() or term in k.lower() or term in e.lower())


def _state(store) -> tuple:
    return store.db.execute("SELECT generation, last_seq FROM recall_index_state").fetchone()


def test_sync_indexes_new_facts_by_appending_to_their_block(tmp_path: Path) -> None:
    with cruxsql.open(tmp_path) as store:
        for i in range(5):
            store.store(f"svc{i}", "owner", f"team alpha {i}")
        index = TextIndex(store.db)
        assert index.sync() == 5
        assert index.sync() == 0  # nothing new
        assert index.term_candidates("alpha").tolist() == _expected(store, "alpha") == [1, 2, 3, 4, 5]
        gram = int(term_grams("alp")[0])
        before = store.db.execute("SELECT seqs FROM recall_grams WHERE gram = ?", (gram,)).fetchone()[0]
        for i in range(3):
            store.store(f"svc{i}", "owner", f"team alphabet {i}")  # new versions: seqs 6..8
        assert index.sync() == 3
        after = store.db.execute("SELECT seqs FROM recall_grams WHERE gram = ?", (gram,)).fetchall()
        assert len(after) == 1 and after[0][0] == before + np.array([6, 7, 8], dtype="<u2").tobytes()
        assert index.term_candidates("alpha").tolist() == _expected(store, "alpha") == list(range(1, 9))
        assert index.term_candidates("alphabet").tolist() == [6, 7, 8]
        assert index.term_candidates("nothing-like-it").tolist() == []
        assert index.term_candidates("al") is None  # under three characters: a scan
        generation = store.db.execute("SELECT generation FROM journal_checkpoint").fetchone()[0]
        assert _state(store) == (generation, 8)


def test_a_compaction_rewrite_carries_the_index_over(tmp_path: Path) -> None:
    with cruxsql.open(tmp_path) as store:
        facts = [store.store(f"e{i}", "k", f"value gamma {i}") for i in range(6)]
        for f in facts[:3]:
            store.delete(f.fact_id)
        index = TextIndex(store.db)
        assert index.sync() == 6
        old_generation = _state(store)[0]
        report = compaction.compact(store)
        assert report.seq_renumbered is False
        new_generation = store.db.execute("SELECT generation FROM journal_checkpoint").fetchone()[0]
        # the deleted facts' seqs (1..3) left the index with them; the rest is kept, nothing to re-index
        assert new_generation != old_generation and index.is_current()
        assert index.sync() == 0
        assert _state(store) == (new_generation, 6)
        assert [r[0] for r in store.db.execute("SELECT seq FROM recall_text ORDER BY seq")] == [4, 5, 6]
        assert index.term_candidates("gamma").tolist() == _expected(store, "gamma") == [4, 5, 6]


def test_a_rebuild_starts_a_new_generation_and_a_full_reindex(tmp_path: Path) -> None:
    with cruxsql.open(tmp_path) as store:
        for i in range(4):
            store.store(f"e{i}", "k", f"delta {i}")
        index = TextIndex(store.db)
        assert index.sync() == 4
        first = _state(store)
        store.rebuild()
        assert not index.is_current()
        assert index.sync() == 4  # everything again, not zero
        second = _state(store)
        assert second[0] != first[0] and second[1] == first[1] == 4
        assert index.term_candidates("delta").tolist() == [1, 2, 3, 4]
        assert store.db.execute("SELECT count(*) FROM recall_text").fetchone()[0] == 4


def test_timeline_event_times_are_the_parsed_event_times_by_either_route(tmp_path: Path, monkeypatch) -> None:
    """Store lines take their time from the stored fact in SQL (by fact id for a few new lines, by a
    scan of facts for many): both give exactly what parsing each line's event_at gives."""
    from cruxsql.facts import timestamps
    from cruxsql.recall import timeline

    store = cruxsql.open(tmp_path)
    a = store.store("svc", "owner", "alice")
    b = store.store("svc", "owner", "bob")
    store.set_validity(a.fact_id, valid_from=a.stored_at)
    store.delete(b.fact_id)
    store.store_batch([cruxsql.StoreRequest(f"e{i}", "k", f"v{i}") for i in range(3)])
    store.reverify(a.fact_id)
    db = store.db
    expected = sorted((line, timestamps.parse_ns(at)) for line, at in db.execute(
        "SELECT line_no, event_at FROM journal_events"))
    for threshold in (0, 10**9):
        monkeypatch.setattr(timeline, "_SCAN_FACTS_PAST", threshold)
        with db:
            for t in ("recall_event_times", "recall_changes", "recall_timeline_state"):
                db.execute(f"DELETE FROM {t}")
            timeline.Timeline(db, store.journal).catch_up()
        assert sorted(db.execute("SELECT line_no, at_ns FROM recall_event_times")) == expected
        assert db.execute("SELECT count(*) FROM recall_changes WHERE attr = 'deleted' AND v_int = 1").fetchone()[0] == 1
    store.close()


def test_a_bulk_rebuild_and_a_long_tail_leave_the_index_current(tmp_path: Path, monkeypatch) -> None:
    # the first read after either used to index every fact it brought in (~15 s at 1M facts)
    from cruxsql.facts import replay
    monkeypatch.setattr(replay, "ROW_PATH_MAX_BYTES", 0)  # every replay takes the bulk path
    with cruxsql.open(tmp_path / "a") as store:
        for i in range(40):
            store.store(f"svc{i}", "owner", f"team delta {i}")
        assert not TextIndex(store.db).is_current()  # a store() leaves indexing to the next read
        store.rebuild()
        assert TextIndex(store.db).is_current()
        assert TextIndex(store.db).term_candidates("delta").tolist() == _expected(store, "delta")
        journal = journal_bytes(tmp_path / "a")
    half = journal.index(b"\n", len(journal) // 2) + 1
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "facts.jsonl").write_bytes(journal[:half])
    with cruxsql.open(tmp_path / "b") as store:
        assert TextIndex(store.db).is_current()
        with open(tmp_path / "b" / "facts.jsonl", "ab") as fh:
            fh.write(journal[half:])
        assert store.refresh().events > 10
        assert TextIndex(store.db).is_current()
        assert TextIndex(store.db).term_candidates("delta").tolist() == _expected(store, "delta")


def test_an_index_built_in_many_batches_equals_one_built_in_one(tmp_path: Path) -> None:
    # many batches: each batch's postings are computed on a worker thread while the next one is read,
    # and must still be appended to their blocks in seq order
    with cruxsql.open(tmp_path) as store:
        store.store_batch([cruxsql.StoreRequest(f"svc{i % 7}", f"k{i % 3}", f"team Épsilon {i} ΣΑΣ {i * i}")
                           for i in range(120)])
        tables = []
        for batch in (7, 1000):
            store.db.execute("DELETE FROM recall_index_state")
            assert TextIndex(store.db, batch=batch).sync() == 120
            tables.append([store.db.execute(f"SELECT * FROM {t} ORDER BY 1, 2").fetchall()
                           for t in ("recall_text", "recall_grams")])
        assert tables[0] == tables[1] and len(tables[0][1]) > 100
        # candidates are a superset (recall re-checks them): every fact holding the term is among them
        candidates = set(TextIndex(store.db).term_candidates("épsilon 11").tolist())
        holding = {seq for seq, value in store.db.execute("SELECT seq, value FROM facts")
                   if "épsilon 11" in value.lower()}
        assert len(holding) == 11 and holding <= candidates
