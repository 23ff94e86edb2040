"""WAL checkpoints of the view, taken off the write path by a background thread.

The view runs in WAL mode: a commit appends its pages to `cruxsql.db-wal`, and a checkpoint copies
them back into `cruxsql.db`, fsyncing the WAL before and the database after. SQLite's default
auto-checkpoint runs inside whichever commit pushes the WAL past 1,000 pages: about one `store()` in a
hundred paid for the copy and both fsyncs (at 1M facts that commit cost tens of milliseconds on a busy
disk, and it was most of the mean commit time).

Here the store's connection keeps auto-checkpoints off (its WAL hook replaces SQLite's) and, each time
commits have added `pages` to the WAL, wakes a thread that runs a PASSIVE checkpoint on its own
connection: PASSIVE never waits for or blocks a writer, and the next write transaction after a complete
checkpoint restarts the WAL from its beginning, so the file stays about as small as before.
Checkpoints are not a durability step for cruxsql (the journal is the truth and the view's checkpoint
row says how far it got), so a checkpoint that finds the WAL busy is simply left to the next wake-up.
The thread starts on the first wake-up, so a short-lived process (one CLI command) never starts it.

The thread is woken per `pages` *added*, not by every commit while the WAL is longer than `pages`: under
a steady stream of `store()` calls the WAL rarely restarts (a checkpoint completes only if no commit
lands while it runs), and waking on every commit past the threshold had the thread checkpointing after
almost every other `store()` at 1M facts, two fsyncs each, queued on the same disk as the journal's
fsync: the store's own latency paid for them.

After a checkpoint that copied the whole WAL, the thread also restarts the WAL itself (`_restart_wal`),
when the writer lock is free: otherwise the next write restarted it, and SQLite's fsync of the new WAL
header was a second sync in that `store()` or `store_batch`, after the journal's.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, ContextManager, Iterator, Optional

import apsw

WAL_CHECKPOINT_PAGES = 1000  # SQLite's own auto-checkpoint threshold
# A steady stream of commits can keep the background checkpoint from ever catching up with the WAL's
# end, and only a checkpoint that does lets the next write restart the WAL: when the WAL already held
# this many times the threshold before a commit, the committing connection checkpoints what is left
# itself (the thread copied the rest). Counting what was there before the commit, not after it, keeps
# one large commit (a store_batch of 1,000 facts writes ~7,000 pages) from paying for a checkpoint
# inline: its only sync stays the journal's, and the WAL stays bounded by this plus one commit.
INLINE_FACTOR = 10
# How often, and for how long, the thread retries a WAL restart that found the writer lock held.
RESTART_RETRY_S = 0.05
RESTART_RETRIES = 20


class WalCheckpointer:
    """Checkpoints `path`'s WAL in a background thread whenever a commit on `db` leaves it past `pages`."""

    def __init__(self, db: apsw.Connection, path: Path, lock_if_free: Callable[[], ContextManager[bool]],
                 pages: int = WAL_CHECKPOINT_PAGES) -> None:
        self._path = path
        self._lock_if_free = lock_if_free  # the writer lock, when free (Journal.lock_if_free)
        self._pages = pages
        self._wake = threading.Event()
        self._closing = False
        self._thread: Optional[threading.Thread] = None
        self._wal_pages = 0  # the WAL's length after this connection's last commit
        self._woken_at = 0  # the WAL's length when the thread was last woken (0 after a restart)
        self.checkpoints = 0
        self.inline_checkpoints = 0
        self.wakeups = 0
        self.wal_restarts = 0
        self._own_wal_pages = 0  # the WAL's length after the thread's own last commit
        self._inline_paused = 0  # `inline_paused` blocks open (they nest)
        db.set_wal_hook(self._committed)  # replaces (so turns off) SQLite's auto-checkpoint on `db`

    def _committed(self, db: apsw.Connection, name: str, pages: int) -> int:
        if name != "main":
            return apsw.SQLITE_OK
        # shorter than after the last commit: the WAL restarted, so it held nothing before this one
        before, self._wal_pages = (self._wal_pages if pages >= self._wal_pages else 0), pages
        if before == 0:
            self._woken_at = 0
        if before >= self._pages * INLINE_FACTOR and not self._inline_paused:
            try:
                db.wal_checkpoint(mode=apsw.SQLITE_CHECKPOINT_PASSIVE)
                self.inline_checkpoints += 1
            except apsw.BusyError:
                return apsw.SQLITE_OK  # the thread is checkpointing: a later commit retries
            self._wake_thread()  # it finds the WAL copied, and restarts it off the write path
        elif pages >= self._woken_at + self._pages:
            self._woken_at = pages
            self.wakeups += 1
            self._wake_thread()
        return apsw.SQLITE_OK

    @contextmanager
    def inline_paused(self) -> Iterator[None]:
        """No inline checkpoint in the commits made inside: a caller that holds the writer lock and
        checkpoints itself once it has released it (a compaction, whose snapshot phase leaves the WAL
        long: at 1M facts, the inline checkpoint in its view commit kept writers waiting 1.1 s more)."""
        self._inline_paused += 1
        try:
            yield
        finally:
            self._inline_paused -= 1

    def _wake_thread(self) -> None:
        if self._closing:
            return
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="cruxsql-wal-checkpoint", daemon=True)
            self._thread.start()
        self._wake.set()

    def _connect(self) -> apsw.Connection:
        """The thread's own connection: no busy handler (it never waits), its commits' WAL lengths seen."""
        conn = apsw.Connection(str(self._path))
        conn.execute("PRAGMA synchronous=NORMAL")  # a checkpoint fsyncs the WAL, then the database
        conn.set_wal_hook(self._own_commit)
        return conn

    def _run(self) -> None:
        conn = self._connect()
        try:
            retries = 0  # left to try a WAL restart that found the writer lock held
            seen = 0  # this connection's data_version before the checkpoint that found the WAL all copied
            while True:
                if self._wake.wait(RESTART_RETRY_S if retries else None):
                    self._wake.clear()  # (only when set: a wake landing after a timed-out wait is kept)
                elif not self._closing:  # a retry: the restart alone, no new checkpoint (the WAL was all copied)
                    retries = 0 if self._restart_wal(conn, seen) else retries - 1
                    continue
                if self._closing:
                    return
                retries = 0  # a new checkpoint: a pending restart is retried only after one that completes
                try:
                    seen = conn.execute("PRAGMA data_version").get
                    log, copied = conn.wal_checkpoint(mode=apsw.SQLITE_CHECKPOINT_PASSIVE)
                    self.checkpoints += 1
                except apsw.Error:
                    continue  # another connection is checkpointing, or an I/O error: a later wake-up retries
                if log and copied == log and not self._restart_wal(conn, seen):
                    retries = RESTART_RETRIES
        finally:
            conn.close()

    def _own_commit(self, conn: apsw.Connection, name: str, pages: int) -> int:
        self._own_wal_pages = pages
        return apsw.SQLITE_OK

    def _restart_wal(self, conn: apsw.Connection, seen: int) -> bool:
        """Restart the WAL, which a checkpoint found all copied when this connection's data_version was
        `seen`, with a commit that changes nothing; False when a writer holds the writer lock (the thread
        tries again shortly: the commit that woke it is often still inside that writer's call).

        The first commit after a complete checkpoint writes the WAL from its beginning again, under a new
        header that SQLite fsyncs even with synchronous=NORMAL (without that sync, a power cut could
        leave the old header beside the new frames). Left to the next writer, that sync was a second one
        in a `store_batch` or `store()` that followed a pause, after the journal's own fsync. Done here,
        it is off the write path. The commit rewrites `user_version` with its own value (page 1's header,
        which holds nothing the view reads), under the writer lock: a write transaction opened without
        it could land between a writer's first read and its first write, and fail that writer's
        transaction (SQLITE_BUSY_SNAPSHOT).

        Under the lock, nothing is copied or synced but the restart's own header. A changed data_version
        means another connection committed since that checkpoint (and restarted the WAL, or left frames a
        later checkpoint copies): nothing to do. Otherwise a RESTART checkpoint finds nothing to copy, and,
        as this connection has no busy handler, fails at once while another connection still reads from
        the WAL, which would keep the commit from restarting it (it would only append a frame, and keep the
        next writer from restarting the WAL too). Errors are left to the next writer, which meets and
        reports them."""
        try:
            with self._lock_if_free() as locked:
                if not locked:
                    return False
                if conn.execute("PRAGMA data_version").get != seen:
                    return True
                conn.wal_checkpoint(mode=apsw.SQLITE_CHECKPOINT_RESTART)
                conn.execute("BEGIN IMMEDIATE")
                try:
                    version = conn.execute("PRAGMA user_version").get
                    conn.execute(f"PRAGMA user_version={int(version)}")
                    conn.execute("COMMIT")
                finally:
                    if not conn.getautocommit():
                        conn.execute("ROLLBACK")
        except (apsw.Error, OSError):
            return True  # a reader or a lock-free writer is in, or an I/O error: not now
        if self._own_wal_pages == 1:
            self.wal_restarts += 1
        return True

    def close(self) -> None:
        """Stop the thread (after the checkpoint it is running, if any)."""
        self._closing = True
        if self._thread is not None:
            self._wake.set()
            self._thread.join()
            self._thread = None
