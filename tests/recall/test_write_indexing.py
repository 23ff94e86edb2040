"""Recall's indexes follow the acknowledged write (text_index.INDEX_EVERY): a read right after a write
finds it, in this process and in another, scanning the unindexed tail itself (beside a writer too) with
the answers the index gives once caught up; a crash between a write and its indexing loses nothing."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import apsw
import pytest

import cruxsql
from support.cli_process import run_cruxsql
from cruxsql.facts.faults import CRASH_ENV
from cruxsql.facts.store import StoreRequest
from cruxsql.recall import text_index
from cruxsql.recall.text_index import INDEX_EVERY, TextIndex

WORDS = ("deploy canary rollout payments ledger owner alice bob region europe asia cache queue latency "
         "budget incident pager runbook schema migration").split()


def _fill(store: cruxsql.Store, n: int, start: int = 0) -> None:
    """`n` facts in one batch (indexed by its own write)."""
    store.store_batch([StoreRequest(f"svc{i % 13}", f"k{i % 5}",
                                    " ".join(WORDS[(i * j) % len(WORDS)] for j in range(1, 5)) + f" n{i}")
                       for i in range(start, start + n)])


def _single_writes(store: cruxsql.Store, n: int) -> list[str]:
    return [store.store(f"svc{i % 7}", "note", f"payments ledger {WORDS[i % len(WORDS)]} single{i}").fact_id
            for i in range(n)]


def _answers(store: cruxsql.Store) -> list:
    recall = cruxsql.Recall(store)
    out = []
    for text in ("payments ledger", "canary europe", "single3", "owner alice", "ledger"):
        found = recall.search(text, top_k=20, token_budget=1_000_000)
        out.append([(h.fact_id, h.score, h.all_terms) for h in found.hits])
        rows = recall.query_facts(text, top_k=20, contract="legacy", record_access=False).rows
        out.append([r["fact_id"] for r in rows])
    return out


@pytest.fixture
def write_lock_held(tmp_path: Path):
    """Another connection holding SQLite's write lock (a writer mid-transaction, a compaction's rewrite)."""
    def hold(data: Path) -> apsw.Connection:
        other = apsw.Connection(str(data / "cruxsql.db"))
        other.execute("BEGIN IMMEDIATE")
        held.append(other)
        return other

    held: list[apsw.Connection] = []
    yield hold
    for other in held:
        other.execute("ROLLBACK")
        other.close()


def test_single_writes_leave_their_postings_and_a_read_scans_them(tmp_path: Path) -> None:
    with cruxsql.open(tmp_path) as store:
        _fill(store, 300)
        assert TextIndex(store.db).is_current()  # a batch of INDEX_EVERY or more indexes itself
        ids = _single_writes(store, 5)
        index = TextIndex(store.db)
        assert not index.is_current()
        # the write's own transaction wrote the facts' text rows, not their postings
        assert store.db.execute("SELECT count(*) FROM recall_text WHERE seq > (SELECT last_seq FROM "
                                "recall_index_state)").get == 5
        recall = cruxsql.Recall(store)
        assert [h.fact_id for h in recall.search("single3").hits] == [ids[3]]
        assert [r["fact_id"] for r in recall.query_facts("single3", contract="legacy").rows] == [ids[3]]
        # the read scanned them, the lock free: it wrote nothing
        assert recall.index.tail is not None and len(recall.index.tail) == 5 and not index.is_current()


@pytest.mark.slow
def test_the_write_that_finds_index_every_facts_unindexed_indexes_them_all(tmp_path: Path) -> None:
    with cruxsql.open(tmp_path) as store:
        _fill(store, 10)
        _single_writes(store, INDEX_EVERY - 1)
        assert not TextIndex(store.db).is_current()
        store.store("svc", "note", "the one that tips it")
        assert TextIndex(store.db).is_current()


def test_a_read_beside_a_writer_scans_the_unindexed_tail_with_the_same_answers(tmp_path: Path,
                                                                             write_lock_held) -> None:
    with cruxsql.open(tmp_path) as store:
        _fill(store, 400)
        private = store.store("svc", "note", "payments ledger private to ana", agent="ana").fact_id
        _single_writes(store, 40)
        other = write_lock_held(tmp_path)
        store.db.setbusytimeout(0)  # a read that waited for the lock would fail at once instead
        scanned = _answers(store)
        assert not TextIndex(store.db).is_current()  # answered from the tail, nothing written
        recall = cruxsql.Recall(store)
        assert [h.fact_id for h in recall.search("payments ledger private", agent="ana", top_k=1).hits] == [private]
        assert recall.index.tail is not None and len(recall.index.tail) == 41
        other.execute("ROLLBACK")
        other.execute("BEGIN")
        TextIndex(store.db).sync()
        indexed = _answers(store)
        assert TextIndex(store.db).is_current()
        assert scanned == indexed and all(scanned[:2])


READ_AFTER_WRITE = r"""
import sys, cruxsql
with cruxsql.open(sys.argv[1]) as store:
    recall = cruxsql.Recall(store)
    print(" ".join(h.fact_id for h in recall.search(sys.argv[2]).hits))
    print(" ".join(r["fact_id"] for r in recall.query_facts(sys.argv[2], contract="legacy").rows))
"""


@pytest.mark.slow
def test_a_write_is_found_right_after_by_another_process_and_by_this_one(tmp_path: Path) -> None:
    with cruxsql.open(tmp_path) as store:
        _fill(store, 300)
        mine = store.store("svc", "note", "zanzibar written here").fact_id
        read = subprocess.run([sys.executable, "-c", READ_AFTER_WRITE, str(tmp_path), "zanzibar"],
                              capture_output=True, text=True, check=True, timeout=120)
        assert read.stdout.split("\n")[:2] == [mine, mine]
        written = run_cruxsql(tmp_path, "store", "svc", "other", "quokka written by another process")
        assert "quokka written by another process" in run_cruxsql(tmp_path, "query", "quokka").stdout
        assert written.stdout.split()[0] in run_cruxsql(tmp_path, "recall", "quokka").stdout
        written = run_cruxsql(tmp_path, "store", "svc", "other", "wombat written by another process")
        theirs = written.stdout.split()[0]
        recall = cruxsql.Recall(store)
        assert [h.fact_id for h in recall.search("wombat").hits] == [theirs]
        assert [r["fact_id"] for r in recall.query_facts("wombat", contract="legacy").rows] == [theirs]


@pytest.mark.slow
def test_sigkill_between_the_acknowledged_write_and_its_indexing_loses_nothing(tmp_path: Path) -> None:
    with cruxsql.open(tmp_path) as store:
        _fill(store, 300)
        _single_writes(store, INDEX_EVERY - 2)
    written = run_cruxsql(tmp_path, "store", "svc", "note", "okapi acknowledged")
    assert written.returncode == 0
    fact_id = written.stdout.split()[0]
    assert fact_id in run_cruxsql(tmp_path, "recall", "okapi").stdout   # scanned, not indexed
    # the next write finds INDEX_EVERY facts unindexed and is killed while it indexes them
    crashed = run_cruxsql(tmp_path, "store", "svc2", "other", "tipping write", env={CRASH_ENV: "text-index-catch-up"})
    assert crashed.returncode == -signal.SIGKILL and crashed.stdout == ""
    assert fact_id in run_cruxsql(tmp_path, "recall", "okapi").stdout
    assert "okapi acknowledged" in run_cruxsql(tmp_path, "query", "okapi").stdout
    verified = run_cruxsql(tmp_path, "verify", "--strict")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    with cruxsql.open(tmp_path) as store:
        recall = cruxsql.Recall(store)
        assert [h.fact_id for h in recall.search("okapi").hits] == [fact_id]
        assert recall.index.tail is None or len(recall.index.tail) < INDEX_EVERY  # the tail left is scanned


def test_a_batch_pays_for_its_indexes_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    sync_locked = text_index.TextIndex._sync_locked

    def counted(self: TextIndex) -> int:
        calls.append(1)
        return sync_locked(self)

    with cruxsql.open(tmp_path) as store:
        _fill(store, 10)
        monkeypatch.setattr(text_index.TextIndex, "_sync_locked", counted)
        _fill(store, 2 * INDEX_EVERY, start=10)
        assert len(calls) == 1 and TextIndex(store.db).is_current()
        calls.clear()
        _fill(store, 20, start=10 + 2 * INDEX_EVERY)  # a small batch: its postings are left to the next read
        assert calls == [] and not TextIndex(store.db).is_current()
