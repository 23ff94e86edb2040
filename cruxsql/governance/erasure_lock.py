"""The erasure lock: one erasure at a time in a data directory, and no legal hold placed or other
compaction run during one.

An erasure takes the writer lock only in short phases (`erasure.execute`): to delete, to swap in the
compacted journal and view, to scrub the derived copies, to store its report; between them it builds the
compaction's snapshot and scans the files without it. This lock (`erasure.lock`, an flock, released by
the kernel when its holder dies) spans the whole run, so that:

* a legal hold cannot be placed between the delete and the compaction, where it could cover a fact the
  erasure has already deleted and make the compaction refuse half-way (`legal_holds.place_hold`);
* no other compaction drops the erasure's deleted facts before its ledger has recorded their hashes
  (`compaction.compact` waits for it);
* two erasures (or retention runs) never interleave their phases or their report chain;
* the next command's repair tells an erasure running in another process (lock held) from one that was
  killed (ledger entry begun, lock free), and completes only the latter (`erasure_recovery.complete_interrupted`).

Order: this lock first, then the writer lock, never the other way round while waiting (the repair only
tries it, without waiting), so the two cannot deadlock. The file holds nothing.
"""

from __future__ import annotations

import fcntl
import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, Optional

from ..errors import LockTimeout

if TYPE_CHECKING:
    from ..facts.store import Store

ERASURE_LOCK_NAME = "erasure.lock"
_POLL_SECONDS = 0.02


def _open(data_dir: Path) -> int:
    return os.open(Path(data_dir) / ERASURE_LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)


@contextmanager
def held(store: Store) -> Iterator[None]:
    """Hold the erasure lock of the store's data directory for the block, waiting for a running erasure
    first (at most the store's writer-lock timeout, when it has one: then LockTimeout). A read-only
    store takes nothing (nothing erases through it)."""
    if store.read_only:
        yield
        return
    with held_at(store.data_dir, store.journal.lock_timeout):
        yield


@contextmanager
def held_at(data_dir: Path, timeout: Optional[float]) -> Iterator[None]:
    """The erasure lock of `data_dir` (no Store needed: a restore holds its source store's while it
    commits), waiting at most `timeout` seconds (None: as long as it takes)."""
    fd = _open(data_dir)
    try:
        started = time.monotonic()
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if timeout is not None and time.monotonic() - started >= timeout:
                    raise LockTimeout(f"gave up waiting {timeout:g}s for a running erasure to finish "
                                      f"({Path(data_dir) / ERASURE_LOCK_NAME})") from None
                time.sleep(_POLL_SECONDS)
        yield
    finally:
        os.close(fd)  # (releases the flock)


@contextmanager
def held_if_free(data_dir: Path) -> Iterator[bool]:
    """The erasure lock if no erasure is running (yields True, held for the block), else False at once."""
    fd = _open(data_dir)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


def running(data_dir: Path) -> bool:
    """Whether an erasure is running now (another process or thread holds the lock). Probed with a shared
    lock on a read-only descriptor: two probes never see each other, and a read-only directory (or an
    auditor who cannot write the file) can ask too; a file that cannot be opened says no."""
    try:
        fd = os.open(Path(data_dir) / ERASURE_LOCK_NAME, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
