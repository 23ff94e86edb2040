"""SQLite's "database is locked": waited out by busy handlers, and retried where waiting cannot help.

Every connection to the view waits for SQLite's own locks (`BUSY_TIMEOUT_MS`) in `wait_when_busy`'s
handler, which sleeps in Python, so a Ctrl-C during the wait stops it at once (SQLite's own busy timeout
sleeps in C, where a signal waits for the whole timeout). A busy handler cannot
help a transaction that read first and must then write while another connection committed in between
(SQLITE_BUSY_SNAPSHOT: its snapshot is stale, it has to start over), nor the short windows around a WAL
restart or recovery; `retry_busy` runs such work again, a bounded number of times, from the start. The
work it retries is a whole view transaction (rolled back by the failure), so running it again is safe.
"""

from __future__ import annotations

import random
import time
from contextlib import contextmanager
from typing import Callable, Iterator, TypeVar

import apsw

BUSY_TIMEOUT_MS = 30_000
BUSY_RETRIES = 50
_BACKOFF_S = 0.002
_BACKOFF_MAX_S = 0.1
T = TypeVar("T")
# connections (by id) whose busy handler gives up at once for now (`not_waiting`)
_NOT_WAITING: set[int] = set()


def wait_when_busy(db: apsw.Connection, timeout_ms: int = BUSY_TIMEOUT_MS) -> None:
    """Make `db` wait up to `timeout_ms` for a lock another connection holds, as SQLite's busy timeout
    does, but in short Python sleeps: a KeyboardInterrupt raised meanwhile ends the wait and the
    statement (apsw raises it), instead of waiting in C for the whole timeout."""
    started = [0.0]
    key = id(db)

    def wait(attempts: int) -> bool:
        if key in _NOT_WAITING:
            return False
        now = time.monotonic()
        if attempts == 0:
            started[0] = now
        elif now - started[0] >= timeout_ms / 1000:
            return False
        time.sleep(min(_BACKOFF_S * (attempts + 1), 0.025))
        return True

    db.set_busy_handler(wait)


@contextmanager
def not_waiting(db: apsw.Connection) -> Iterator[None]:
    """Inside the block, `db` meets another connection's lock with SQLITE_BUSY at once instead of waiting
    (a read that would index only if SQLite's write lock is free at this moment)."""
    _NOT_WAITING.add(id(db))
    try:
        yield
    finally:
        _NOT_WAITING.discard(id(db))


def retry_busy(work: Callable[[], T], attempts: int = BUSY_RETRIES) -> T:
    """`work()`, run again after a short randomised pause whenever it fails with SQLITE_BUSY or
    SQLITE_LOCKED; the last attempt's error is raised."""
    pause = _BACKOFF_S
    for attempt in range(attempts):
        try:
            return work()
        except (apsw.BusyError, apsw.LockedError):
            if attempt + 1 == attempts:
                raise
            time.sleep(pause * (0.5 + random.random()))
            pause = min(pause * 2, _BACKOFF_MAX_S)
    raise AssertionError("unreachable")
