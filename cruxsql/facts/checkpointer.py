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
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Optional

import apsw

WAL_CHECKPOINT_PAGES = 1000  # SQLite's own auto-checkpoint threshold
# A steady stream of commits can keep the background checkpoint from ever catching up with the WAL's
# end, and only a checkpoint that does lets the next write restart the WAL: when the WAL already held
# this many times the threshold before a commit, the committing connection checkpoints what is left
# itself (the thread copied the rest). Counting what was there before the commit, not after it, keeps
# one large commit (a store_batch of 1,000 facts writes ~7,000 pages) from paying for a checkpoint
# inline: its only sync stays the journal's, and the WAL stays bounded by this plus one commit.
INLINE_FACTOR = 10


class WalCheckpointer:
    """Checkpoints `path`'s WAL in a background thread whenever a commit on `db` leaves it past `pages`."""

    def __init__(self, db: apsw.Connection, path: Path, pages: int = WAL_CHECKPOINT_PAGES) -> None:
        self._path = path
        self._pages = pages
        self._wake = threading.Event()
        self._closing = False
        self._thread: Optional[threading.Thread] = None
        self._wal_pages = 0  # the WAL's length after this connection's last commit
        self._woken_at = 0  # the WAL's length when the thread was last woken (0 after a restart)
        self.checkpoints = 0
        self.inline_checkpoints = 0
        self.wakeups = 0
        db.set_wal_hook(self._committed)  # replaces (so turns off) SQLite's auto-checkpoint on `db`

    def _committed(self, db: apsw.Connection, name: str, pages: int) -> int:
        if name != "main":
            return apsw.SQLITE_OK
        # shorter than after the last commit: the WAL restarted, so it held nothing before this one
        before, self._wal_pages = (self._wal_pages if pages >= self._wal_pages else 0), pages
        if before == 0:
            self._woken_at = 0
        if before >= self._pages * INLINE_FACTOR:
            try:
                db.wal_checkpoint(mode=apsw.SQLITE_CHECKPOINT_PASSIVE)
                self.inline_checkpoints += 1
            except apsw.BusyError:
                pass  # the thread is checkpointing: a later commit retries
        elif pages >= self._woken_at + self._pages and not self._closing:
            self._woken_at = pages
            self.wakeups += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="cruxsql-wal-checkpoint", daemon=True)
                self._thread.start()
            self._wake.set()
        return apsw.SQLITE_OK

    def _run(self) -> None:
        conn = apsw.Connection(str(self._path))
        try:
            conn.execute("PRAGMA synchronous=NORMAL")  # a checkpoint fsyncs the WAL, then the database
            while True:
                self._wake.wait()
                self._wake.clear()
                if self._closing:
                    return
                try:
                    conn.wal_checkpoint(mode=apsw.SQLITE_CHECKPOINT_PASSIVE)
                    self.checkpoints += 1
                except apsw.BusyError:
                    pass  # another connection is checkpointing: the next commit past the threshold retries
        finally:
            conn.close()

    def close(self) -> None:
        """Stop the thread (after the checkpoint it is running, if any)."""
        self._closing = True
        if self._thread is not None:
            self._wake.set()
            self._thread.join()
            self._thread = None
