"""SQLite's "database is locked": waited out by busy handlers, and retried where waiting cannot help.

Every connection to the view waits for SQLite's own locks (`BUSY_TIMEOUT_MS`). A busy handler cannot
help a transaction that read first and must then write while another connection committed in between
(SQLITE_BUSY_SNAPSHOT: its snapshot is stale, it has to start over), nor the short windows around a WAL
restart or recovery; `retry_busy` runs such work again, a bounded number of times, from the start. The
work it retries is a whole view transaction (rolled back by the failure), so running it again is safe.
"""

from __future__ import annotations

import random
import time
from typing import Callable, TypeVar

import apsw

BUSY_TIMEOUT_MS = 30_000
BUSY_RETRIES = 50
_BACKOFF_S = 0.002
_BACKOFF_MAX_S = 0.1
T = TypeVar("T")


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
