"""The store's write path: the journal's fsync overlaps the view transaction but precedes its commit;
WAL checkpoints run off the write path; the catch-up before a write is a stat when nothing changed."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import apsw
import pytest

import cruxsql
from cruxsql.facts import journal as journal_mod
from cruxsql.facts import codec, view_file
from cruxsql.facts.codec import Fact
from cruxsql.facts.journal import Journal
from cruxsql.facts.checkpointer import INLINE_FACTOR


def _visible_elsewhere(data_dir: Path, value: str) -> int:
    reader = apsw.Connection(str(data_dir / view_file.DB_NAME), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return reader.execute("SELECT count(*) FROM facts WHERE value = ?", (value,)).fetchone()[0]
    finally:
        reader.close()


@pytest.mark.parametrize("on_thread", [True, False])
def test_nothing_is_visible_in_the_view_until_the_journal_fsync_returns(tmp_path: Path, monkeypatch,
                                                                         on_thread: bool) -> None:
    monkeypatch.setattr(journal_mod, "BACKGROUND_SYNC_ABOVE_S", -1.0 if on_thread else float("inf"))
    store = cruxsql.open(tmp_path)
    store.store("svc", "owner", "alice")
    real_fsync = os.fsync
    seen: list[tuple[str, int]] = []

    def slow_fsync(fd: int) -> None:
        # on the sync thread, the store prepares the view transaction meanwhile
        time.sleep(0.3)
        seen.append((threading.current_thread().name, _visible_elsewhere(tmp_path, "bob")))
        real_fsync(fd)

    monkeypatch.setattr(journal_mod.os, "fsync", slow_fsync)
    fact = store.store("svc", "owner", "bob")
    monkeypatch.setattr(journal_mod.os, "fsync", real_fsync)
    assert len(seen) == 1 and seen[0][1] == 0
    assert seen[0][0].startswith("cruxsql-journal-fsync") == on_thread
    assert _visible_elsewhere(tmp_path, "bob") == 1 and fact.version == 2
    store.close()


def test_the_fsync_moves_to_the_sync_thread_only_while_fsyncs_are_slow(tmp_path: Path, monkeypatch) -> None:
    store = cruxsql.open(tmp_path)
    store.store("e", "k", "first")  # creates the journal (whose directory is fsynced too)
    threads: list[bool] = []
    delay = {"s": 0.0}

    def timed_fsync(fd: int) -> None:
        # only the delay: a real fsync on a disk other processes load can itself pass the threshold
        threads.append(threading.current_thread().name.startswith("cruxsql-journal-fsync"))
        time.sleep(delay["s"])

    monkeypatch.setattr(journal_mod.os, "fsync", timed_fsync)
    monkeypatch.setattr(journal_mod, "BACKGROUND_SYNC_ABOVE_S", 0.005)
    # the first store's real fsync (on a disk other processes load: up to ~100 ms) is in the average
    store.journal.recent_fsync_s = 0.0
    for i in range(3):
        store.store("e", "k", f"fast{i}")
    assert threads == [False] * 3 and store.journal.recent_fsync_s < 0.005
    delay["s"] = 0.05
    for i in range(12):
        store.store("e", "k", f"slow{i}")
    assert threads[3] is False and threads[-1] is True  # once the average passes the threshold
    delay["s"] = 0.0
    for i in range(40):
        store.store("e", "k", f"fast again {i}")
    assert threads[-1] is False
    assert len(store.history("e", "k")) == 56 and store.verify().ok
    store.close()


def test_one_large_commit_leaves_its_checkpoint_to_the_background(tmp_path: Path) -> None:
    # a store_batch of many facts writes far more pages than the inline bound by itself: the WAL held
    # nothing before it, so its only sync is the journal's and the thread checkpoints the pages
    store = cruxsql.open(tmp_path)
    checkpointer = store.checkpointer
    checkpointer._pages = 10
    wal = tmp_path / (view_file.DB_NAME + "-wal")
    page = store.db.execute("PRAGMA page_size").fetchone()[0] + 24
    store.store_batch([cruxsql.StoreRequest(f"svc{i}", "owner", f"team {i}") for i in range(600)])
    assert wal.stat().st_size > INLINE_FACTOR * checkpointer._pages * page  # the commit alone passed the bound
    assert checkpointer.inline_checkpoints == 0
    deadline = time.monotonic() + 10
    while checkpointer.checkpoints == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert checkpointer.checkpoints >= 1
    store.close()


@pytest.mark.slow
def test_wal_checkpoints_run_in_the_background_and_keep_the_wal_bounded(tmp_path: Path) -> None:
    store = cruxsql.open(tmp_path)
    checkpointer = store.checkpointer
    checkpointer._pages = 40  # a small threshold so a few hundred stores cross it many times
    wal = tmp_path / (view_file.DB_NAME + "-wal")
    sizes = []
    for i in range(300):
        store.store(f"e{i % 7}", "k", f"v{i}")
        sizes.append(wal.stat().st_size)
    deadline = time.monotonic() + 10
    while checkpointer.checkpoints == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert checkpointer.checkpoints >= 1
    assert checkpointer._thread is not None and checkpointer._thread.name == "cruxsql-wal-checkpoint"
    # the WAL restarts from its beginning after a complete checkpoint (at worst the committing connection
    # completes one at INLINE_FACTOR x the threshold): it never grows with the number of commits
    page = store.db.execute("PRAGMA page_size").fetchone()[0] + 24
    assert max(sizes) < 2 * INLINE_FACTOR * checkpointer._pages * page
    store.close()
    assert checkpointer._thread is None
    with cruxsql.open(tmp_path) as again:
        assert again.counts()["live_facts"] == 7 and again.verify().ok


@pytest.mark.slow
def test_the_checkpoint_thread_is_woken_per_threshold_of_pages_added_not_per_commit(tmp_path: Path) -> None:
    # a steady stream of stores rarely lets the WAL restart: waking the thread on every commit while the
    # WAL is past the threshold had it checkpointing (two fsyncs) after almost every store. A reader
    # holding a snapshot keeps the WAL from restarting here, so every run sees the same WAL lengths.
    store = cruxsql.open(tmp_path)
    checkpointer = store.checkpointer
    checkpointer._pages = 200
    lengths = []

    def committed(db, name, pages):
        lengths.append(pages)
        return checkpointer._committed(db, name, pages)

    store.db.set_wal_hook(committed)
    store.store("e", "k", "first")
    reader = apsw.Connection(str(tmp_path / view_file.DB_NAME))
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM facts").fetchall()
    for i in range(300):
        store.store(f"e{i % 7}", "k", f"v{i}")
    assert lengths == sorted(lengths)  # never restarted
    past_threshold = sum(1 for n in lengths if checkpointer._pages <= n < checkpointer._pages * INLINE_FACTOR)
    assert past_threshold > 50  # commits the old rule woke the thread on, each one
    assert 1 <= checkpointer.wakeups <= lengths[-1] // checkpointer._pages
    reader.execute("COMMIT")
    reader.close()
    store.close()
    with cruxsql.open(tmp_path) as again:
        assert again.counts()["live_facts"] == 8 and again.verify().ok


def test_a_short_lived_store_starts_no_checkpoint_thread(tmp_path: Path) -> None:
    with cruxsql.open(tmp_path) as store:
        store.store("svc", "owner", "alice")
        assert store.checkpointer._thread is None


def test_the_catch_up_before_a_write_sees_lines_another_writer_appended(tmp_path: Path) -> None:
    """The cheap catch-up (a stat when nothing changed) still sees a line appended by another writer
    that did not touch the view (a Crux daemon sharing the directory), so the chain stays right."""
    first = cruxsql.open(tmp_path)
    alice = first.store("svc", "owner", "alice")
    bob = Fact(fact_id="f_" + "b" * 32, tenant_hash="default", entity="svc", key="owner", value="bob", confidence=1.0,
               stored_at=alice.stored_at + 1, tokens=codec.token_cost("bob"), version=2, supersedes=alice.fact_id,
               horizon_class=alice.horizon_class)
    daemon = Journal(tmp_path)
    with daemon.lock():
        daemon.append([codec.encode_event(codec.StoreEvent(bob)),
                       codec.encode_event(codec.SupersedeEvent(alice.fact_id, bob.fact_id, "2026-11-30T12:00:00Z"))])
    daemon.close()
    carol = first.store("svc", "owner", "carol")
    assert (carol.version, carol.supersedes) == (3, bob.fact_id)
    assert [f.value for f in first.history("svc", "owner")] == ["alice", "bob", "carol"]
    assert first.verify().ok
    first.close()


class _SyncCounter(apsw.VFS):
    """The default VFS, counting the syncs SQLite asks of it per thread (registered before a store opens)."""

    def __init__(self) -> None:
        self.base = apsw.vfs_names()[0]
        self.syncs: dict[str, int] = {}
        super().__init__("test-sync-counter", base=self.base, makedefault=True)

    def xOpen(self, name, flags):  # noqa: N802 (apsw's name)
        return _SyncCountingFile(self, name, flags)


class _SyncCountingFile(apsw.VFSFile):
    def __init__(self, vfs: _SyncCounter, name, flags) -> None:
        self.vfs = vfs
        super().__init__(vfs.base, name, flags)

    def xSync(self, flags: int) -> None:  # noqa: N802
        thread = threading.current_thread().name
        self.vfs.syncs[thread] = self.vfs.syncs.get(thread, 0) + 1
        super().xSync(flags)


def test_after_a_complete_background_checkpoint_a_write_makes_no_sqlite_sync(tmp_path: Path) -> None:
    # The first commit after a complete checkpoint restarts the WAL, and SQLite fsyncs the new WAL header
    # even with synchronous=NORMAL: that was a second sync in a store() or store_batch after a pause. The
    # checkpoint thread now restarts the WAL itself once it has copied all of it.
    counter = _SyncCounter()
    try:
        store = cruxsql.open(tmp_path)
        store.checkpointer._pages = 20
        store.store_batch([cruxsql.StoreRequest(f"svc{i}", "owner", f"team {i}") for i in range(300)])
        deadline = time.monotonic() + 20
        while store.checkpointer.wal_restarts == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        restarts = store.checkpointer.wal_restarts
        counter.syncs.clear()
        store.store("svc1", "owner", "team one")
        in_the_call = counter.syncs.get(threading.current_thread().name, 0)
        store.close()
    finally:
        counter.unregister()
    assert restarts >= 1
    assert in_the_call == 0  # the journal's fsync is os.fsync, not SQLite's: SQLite made none
    with cruxsql.open(tmp_path) as again:
        assert again.counts()["live_facts"] == 300 and again.verify().ok


def test_the_wal_restart_skips_while_a_writer_holds_the_lock(tmp_path: Path) -> None:
    # It is housekeeping: while a writer holds the writer lock the checkpoint thread skips it (the writer's
    # own commit restarts the WAL), so it can never land inside that writer's transaction.
    store = cruxsql.open(tmp_path)
    store.store_batch([cruxsql.StoreRequest(f"svc{i}", "owner", f"team {i}") for i in range(50)])
    conn = store.checkpointer._connect()
    seen = conn.execute("PRAGMA data_version").fetchone()[0]
    conn.wal_checkpoint(mode=apsw.SQLITE_CHECKPOINT_PASSIVE)  # all copied: no reader, no writer

    def restart_on_another_thread() -> tuple[bool, int]:
        done: list[bool] = []
        thread = threading.Thread(target=lambda: done.append(store.checkpointer._restart_wal(conn, seen)))
        thread.start()
        thread.join()
        return done[0], store.checkpointer.wal_restarts

    with store.writer_lock():
        while_held = restart_on_another_thread()
    after = restart_on_another_thread()
    conn.close()
    store.close()
    assert (while_held, after) == ((False, 0), (True, 1))


def _wal_frames(path: Path) -> int:
    probe = apsw.Connection(str(path))
    try:
        probe.execute("SELECT 1 FROM sqlite_schema LIMIT 1").fetchall()  # opens the WAL
        return probe.wal_checkpoint(mode=apsw.SQLITE_CHECKPOINT_PASSIVE)[0]
    finally:
        probe.close()


def test_the_wal_restart_writes_nothing_while_a_reader_still_reads_from_the_wal(tmp_path: Path) -> None:
    # A reader whose snapshot is in the WAL keeps SQLite from restarting it: a commit then would only
    # append a frame, and that frame would keep the next writer from restarting the WAL as well.
    store = cruxsql.open(tmp_path)
    store.store("svc", "owner", "alice")
    store.store("svc", "owner", "bob")
    reader = apsw.Connection(str(tmp_path / view_file.DB_NAME))
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM facts").fetchall()  # its snapshot ends at the WAL's last frame
    before = _wal_frames(tmp_path / view_file.DB_NAME)  # and every frame is copied: only the reader holds it
    conn = store.checkpointer._connect()
    done = store.checkpointer._restart_wal(conn, conn.execute("PRAGMA data_version").fetchone()[0])
    after = _wal_frames(tmp_path / view_file.DB_NAME)
    reader.execute("COMMIT")
    reader.close()
    conn.close()
    store.close()
    assert before > 0
    assert (done, after, store.checkpointer.wal_restarts) == (True, before, 0)


def test_the_wal_restart_copies_nothing_under_the_lock_after_another_commit(tmp_path: Path) -> None:
    # Another connection (another process's writer) committed after the thread's checkpoint: that writer
    # restarted the WAL, or left frames for a later checkpoint. Copying them here would sync the WAL and
    # the database while holding the writer lock, the wait this restart exists to take off the write path.
    counter = _SyncCounter()
    try:
        store = cruxsql.open(tmp_path)
        store.store("svc", "owner", "alice")
        conn = store.checkpointer._connect()
        seen = conn.execute("PRAGMA data_version").fetchone()[0]
        checkpointed = conn.wal_checkpoint(mode=apsw.SQLITE_CHECKPOINT_PASSIVE)
        store.store("svc", "owner", "bob")  # a commit on another connection, after the checkpoint
        done: list[bool] = []
        thread = threading.Thread(target=lambda: done.append(store.checkpointer._restart_wal(conn, seen)),
                                  name="restart-under-test")
        counter.syncs.clear()
        thread.start()
        thread.join()
        syncs = counter.syncs.get("restart-under-test", 0)
        conn.close()
        store.close()
    finally:
        counter.unregister()
    assert checkpointed[0] == checkpointed[1] > 0
    assert (done, syncs, store.checkpointer.wal_restarts) == ([True], 0, 0)


def test_a_compaction_checkpoints_the_wal_only_after_releasing_the_writer_lock(tmp_path: Path, monkeypatch) -> None:
    # a compaction's view commit follows its snapshot phase's commits: the WAL is long before it, and an
    # inline checkpoint there (1.1 s at 1M facts) kept every writer waiting; `compact` checkpoints itself
    # once the lock is released
    from cruxsql.governance import compaction

    store = cruxsql.open(tmp_path)
    checkpointer = store.checkpointer
    checkpointer._pages = 1  # every commit after a long enough WAL would checkpoint inline
    monkeypatch.setattr(checkpointer, "_wake_thread", lambda: None)  # no background thread: inline ones only
    facts = store.store_batch([cruxsql.StoreRequest(f"svc{i}", "owner", f"team {i}") for i in range(200)])
    for fact in facts[:50]:
        store.delete(fact.fact_id)
    inline_under_lock = []

    def committed(db, name: str, pages: int) -> int:
        before = checkpointer.inline_checkpoints
        rc = checkpointer._committed(db, name, pages)
        if checkpointer.inline_checkpoints > before:
            inline_under_lock.append(store.journal._lock_depth > 0)
        return rc

    store.db.set_wal_hook(committed)
    report = compaction.compact(store)
    assert report.facts_dropped == 50 and report.wal_checkpointed
    assert True not in inline_under_lock  # (those of the snapshot phase, if any, are outside the lock)
    assert checkpointer._inline_paused == 0
    store.close()
