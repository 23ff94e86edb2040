"""`facts.jsonl`: locked, fsynced appends; torn-tail quarantine; a streaming reader; atomic rewrite.

Durability rules (docs/architecture.md; Crux's journal in fact_store.rs): every line of one mutation goes out in one
`write` (JSON plus newline each), then the file is fsynced (and the directory when the file is created
or renamed). A failed write or fsync poisons the journal object: nothing more is written until it is
reopened. A mutation cut short by a crash is quarantined at the next open, never half applied.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import threading
import time
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Callable, Iterable, Iterator, Optional, TypeVar

import blake3

from ..errors import InvalidInput, JournalError, JournalPoisoned, LockTimeout
from .files import fsync_dir, write_all
from .write_intent import WriteIntentFile, line_signature

JOURNAL_NAME = "facts.jsonl"
LOCK_NAME = "LOCK"
MAX_RECORD_BYTES = 64 * 1024 * 1024
FINGERPRINT_WINDOW = 4096
_READ_CHUNK = 4 << 20
_ASCII_WS = b" \t\n\r\x0c"
LOCK_WAIT_NOTICE_SECONDS = 1.0
# A write hands its fsync to the sync thread only while recent fsyncs took longer than this: the hand-off
# costs thread switches under the GIL (~0.6 ms on two busy cores), more than a fast disk's whole fsync.
BACKGROUND_SYNC_ABOVE_S = 0.001
_LOCK_POLL_SECONDS = 0.02
K = TypeVar("K")


def _record_holder(fd: int) -> None:
    """Write our pid into LOCK (held by us), for waiters to name the holder."""
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)


def quarantine_torn_tail(path: Path) -> Optional[Path]:
    """Move the unterminated last line of the JSONL file `path` to `<name>.torn.<32hex>` (docs/architecture.md, "Durability") and
    truncate the file; return the quarantine file, if any. The caller holds the writer lock."""
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return None
    try:
        size = os.fstat(fd).st_size
        if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
            return None
        return quarantine_from(path, fd, _last_newline_end(fd, size), size, "oversized_unterminated_uncommitted_record")
    finally:
        os.close(fd)


def quarantine_from(path: Path, fd: int, start: int, size: int, oversized_reason: str) -> Path:
    """Move the bytes [start, size) of `path` (open as `fd`) to a new 0600 `<name>.torn.<32hex>` file,
    or, when longer than 64 MiB, a `.metadata.json` marker describing them; then truncate."""
    length = size - start
    name = f"{path.name}.torn.{uuid.uuid4().hex}"
    if length > MAX_RECORD_BYTES:
        name += ".metadata.json"
        payload = json.dumps(
            {"capture_limit_bytes": MAX_RECORD_BYTES, "reason": oversized_reason,
             "schema_version": 1, "tail_len": length, "tail_start": start},
            separators=(",", ":"),
        ).encode() + b"\n"
    else:
        payload = os.pread(fd, length, start)
    quarantine = path.parent / name
    qfd = os.open(quarantine, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        write_all(qfd, payload)
        os.fsync(qfd)  # the quarantined bytes are durable before the file loses them
    finally:
        os.close(qfd)
    fsync_dir(path.parent)  # ... and so is the quarantine file's name
    os.ftruncate(fd, start)
    os.fsync(fd)  # the truncation is durable before anything is appended after it
    fsync_dir(path.parent)
    return quarantine


def _last_newline_end(fd: int, size: int) -> int:
    pos = size
    while pos > 0:
        start = max(0, pos - 8192)
        block = os.pread(fd, pos - start, start)
        idx = block.rfind(b"\n")
        if idx >= 0:
            return start + idx + 1
        pos = start
    return 0


@dataclass(frozen=True)
class Record:
    """One newline-terminated journal line.

    `raw` is its content without the newline (and without one `\r` before it); `length` counts
    every byte of the line including the newline.
    """

    line_no: int
    offset: int
    length: int
    raw: bytes

    @property
    def end(self) -> int:
        return self.offset + self.length

    def is_blank(self) -> bool:
        return not self.raw.strip(_ASCII_WS)


@dataclass(frozen=True)
class Fingerprint:
    """Identity of the journal up to an offset: its inode and a hash of the bytes just before it."""

    inode: int
    tail_hash: str


class PendingAppend:
    """Lines written to the journal whose fsync may still be running (see `Journal.write`)."""

    def __init__(self, journal: "Journal", start: int, end: int, sync: Optional[Future]) -> None:
        self.journal = journal
        self.start = start
        self.end = end
        self._sync = sync

    def wait(self) -> tuple[int, int]:
        """Block until the lines are durable; (start offset, end offset). JournalPoisoned if the fsync failed."""
        if self._sync is not None:
            try:
                self._sync.result()
            except OSError as exc:
                self.journal._take_back(self.start)
                raise self.journal._poison(exc) from exc
        return self.start, self.end


class Journal:
    """The journal file of one data directory.

    `lock_timeout` (seconds; None waits forever) bounds the wait for the writer lock; `on_lock_wait`
    is called once, with the holder's pid (or None), when the wait passes one second.
    """

    def __init__(self, data_dir: Path, lock_timeout: Optional[float] = None,
                 on_lock_wait: Optional[Callable[[Optional[int]], None]] = None) -> None:
        self.data_dir = Path(data_dir)
        self.lock_timeout = lock_timeout
        self.on_lock_wait = on_lock_wait
        self.path = self.data_dir / JOURNAL_NAME
        self._lock_path = self.data_dir / LOCK_NAME
        self._lock_fd: Optional[int] = None
        self._lock_depth = 0
        self._thread_lock = threading.RLock()
        self._poisoned: Optional[str] = None
        self._syncer: Optional[ThreadPoolExecutor] = None
        self._syncer_pid = 0
        self.recent_fsync_s = 0.0  # moving average of this journal's recent fsyncs
        self.intent = WriteIntentFile(self.data_dir)

    # --- locking ---------------------------------------------------------------------------------

    @contextmanager
    def lock(self) -> Iterator[None]:
        """The cross-process writer lock (flock on LOCK), re-entrant within this object."""
        with self._thread_lock:
            if self._lock_depth == 0:
                self._acquire(self._lock_file())
            self._lock_depth += 1
            try:
                yield
            finally:
                self._lock_depth -= 1
                if self._lock_depth == 0:
                    fcntl.flock(self._lock_file(), fcntl.LOCK_UN)

    @contextmanager
    def lock_if_free(self) -> Iterator[bool]:
        """The writer lock if nobody holds it right now (yields True, held until the block ends), else
        nothing (yields False, also when this thread holds it already): for housekeeping that is better
        skipped than waited for."""
        with self.lock_unless_busy(reentrant=False) as held:
            yield held

    @contextmanager
    def lock_unless_busy(self, reentrant: bool = True) -> Iterator[bool]:
        """The writer lock without waiting for it: yields True with it held (re-entrantly, when this thread
        holds it already, unless not `reentrant`), False when another thread or process holds it. For a
        reader that catches the view up only when it costs no wait."""
        if not self._thread_lock.acquire(blocking=False):
            yield False
            return
        try:
            if self._lock_depth and not reentrant:
                yield False
                return
            if self._lock_depth == 0:
                fd = self._lock_file()
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    yield False
                    return
                try:
                    _record_holder(fd)
                except OSError:
                    fcntl.flock(fd, fcntl.LOCK_UN)
                    raise
            self._lock_depth += 1
            try:
                yield True
            finally:
                self._lock_depth -= 1
                if self._lock_depth == 0:
                    fcntl.flock(self._lock_file(), fcntl.LOCK_UN)
        finally:
            self._thread_lock.release()

    def _acquire(self, fd: int) -> None:
        """flock LOCK, waiting at most `lock_timeout`; then record our pid in it for waiters to name."""
        if self.lock_timeout is None and self.on_lock_wait is None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        else:
            started = time.monotonic()
            told = False
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    pass
                waited = time.monotonic() - started
                if self.lock_timeout is not None and waited >= self.lock_timeout:
                    holder = self.lock_holder()
                    by = f" held by pid {holder}" if holder else ""
                    raise LockTimeout(f"gave up waiting {self.lock_timeout:g}s for the writer lock{by} "
                                      f"({self._lock_path})")
                if not told and waited >= LOCK_WAIT_NOTICE_SECONDS and self.on_lock_wait is not None:
                    self.on_lock_wait(self.lock_holder())
                    told = True
                time.sleep(_LOCK_POLL_SECONDS)
        try:
            _record_holder(fd)
        except OSError:
            fcntl.flock(fd, fcntl.LOCK_UN)  # not left held by a lock() that failed
            raise

    def _lock_file(self) -> int:
        """The descriptor of LOCK, opened (created if need be) on first use and kept."""
        if self._lock_fd is None:
            self._lock_fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        return self._lock_fd

    def lock_holder(self) -> Optional[int]:
        """The pid the current (or last) holder of the writer lock wrote into LOCK, if any."""
        try:
            text = self._lock_path.read_text(encoding="ascii", errors="replace").strip()
        except OSError:
            return None
        return int(text) if text.isdigit() else None

    def current_lock_holders(self) -> list[int]:
        """Pids holding the writer lock right now, from the kernel's lock table (/proc/locks): unlike
        `lock_holder`, this sees any process that holds it, and only while it does."""
        try:
            inode = os.stat(self._lock_path).st_ino
            lines = Path("/proc/locks").read_text().splitlines()
        except OSError:
            return []
        pids = set()
        for line in lines:
            parts = line.split()
            if "->" in parts:  # a waiter, not a holder
                continue
            try:
                pid, dev_inode = int(parts[4]), parts[5]
            except (IndexError, ValueError):
                continue
            if dev_inode.rsplit(":", 1)[-1] == str(inode):
                pids.add(pid)
        return sorted(pids)

    def close(self) -> None:
        """Release the lock file descriptor and stop the sync thread."""
        if self._syncer is not None and self._syncer_pid == os.getpid():
            self._syncer.shutdown(wait=True)
            self._syncer = None
        self.intent.close()
        with self._thread_lock:
            if self._lock_fd is not None and self._lock_depth == 0:
                os.close(self._lock_fd)
                self._lock_fd = None

    # --- state -----------------------------------------------------------------------------------

    @property
    def poisoned(self) -> Optional[str]:
        return self._poisoned

    def stat(self) -> Optional[os.stat_result]:
        try:
            return os.stat(self.path)
        except FileNotFoundError:
            return None

    def fingerprint(self, offset: int) -> Fingerprint:
        """The fingerprint of the journal's first `offset` bytes (inode + BLAKE3 of the last 4 KiB)."""
        with open(self.path, "rb") as fh:
            st = os.fstat(fh.fileno())
            start = max(0, offset - FINGERPRINT_WINDOW)
            fh.seek(start)
            window = fh.read(offset - start)
        return Fingerprint(st.st_ino, blake3.blake3(window).hexdigest())

    # --- repair ----------------------------------------------------------------------------------

    def repair_torn_tail(self) -> Optional[Path]:
        """Quarantine an unterminated last record (Crux's repair_torn_journal_tail); return the quarantine file, if any.

        The caller holds the lock. The tail goes to `facts.jsonl.torn.<32hex>` (mode 0600), or, when
        longer than 64 MiB, a `.metadata.json` marker describes it; then the journal is truncated.
        """
        return quarantine_torn_tail(self.path)

    def repair_incomplete_group(self, since: int) -> Optional[Path]:
        """Quarantine the journal's last mutation when it is one of cruxsql's own, cut short between lines.

        cruxsql writes a new version as one `store` (or `store_batch`) line followed by one `supersede`
        line per predecessor, in a single write. If the process died inside that write, the journal
        can end with some of those lines and not the rest (the torn rest is quarantined by
        `repair_torn_tail` first): a group that was never acknowledged (acknowledgement follows the
        fsync of the whole write). It is moved to a `facts.jsonl.torn.<32hex>` file and the journal
        truncated only when the write intent (write_intent.py) shows that these very lines are a proper
        prefix of cruxsql's own last append, starting past `since` (the offset the view has replayed)
        and with nothing after them. Any other complete line, whoever wrote it, is left to replay as
        Crux replays it. The caller holds the lock and has repaired the torn tail.
        """
        intent = self.intent.read()
        st = self.stat()
        if intent is None or st is None or intent.inode != st.st_ino \
                or not since <= intent.start < st.st_size < intent.end:
            return None
        for n, rec in enumerate(self.records(intent.start)):
            if n >= len(intent.lines) or (rec.length, line_signature(rec.raw)[1]) != intent.lines[n]:
                return None
        fd = os.open(self.path, os.O_RDWR)
        try:
            return quarantine_from(self.path, fd, intent.start, os.fstat(fd).st_size, "oversized_incomplete_mutation")
        finally:
            os.close(fd)

    def quarantined_tails(self) -> list[Path]:
        return sorted(self.data_dir.glob(f"{JOURNAL_NAME}.torn.*"))

    def preserve_lines(self, spans: list[tuple[int, int]]) -> Path:
        """Copy the lines at `(byte_offset, byte_length)` spans, byte for byte and in order, into a new
        `facts.jsonl.corrupt.<32hex>` file (mode 0600), durably, before a rewrite drops them."""
        path = self.data_dir / f"{JOURNAL_NAME}.corrupt.{uuid.uuid4().hex}"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with open(self.path, "rb") as fh:
                for offset, length in sorted(spans):
                    write_all(fd, os.pread(fh.fileno(), length, offset))
            os.fsync(fd)  # the copy is durable before the rewrite that drops the originals
        finally:
            os.close(fd)
        fsync_dir(self.data_dir)
        return path

    def read_spans(self, spans: list[tuple[int, int]]) -> Iterator[tuple[int, bytes]]:
        """(byte_offset, bytes) of each `(byte_offset, byte_length)` span, in file order, byte for byte."""
        if not spans:
            return
        with open(self.path, "rb") as fh:
            for offset, length in sorted(spans):
                yield offset, os.pread(fh.fileno(), length, offset)

    # --- append ----------------------------------------------------------------------------------

    def append(self, lines: list[str]) -> tuple[int, int]:
        """Append encoded events (all in one `write`), fsync, and return (start offset, end offset).

        The caller holds the lock. Raises JournalPoisoned after any failed write or fsync.
        """
        return self.write(lines, sync_in_background=False).wait()

    def write(self, lines: list[str], sync_in_background: Optional[bool] = None) -> "PendingAppend":
        """Write encoded events (all in one `write`) and start their fsync; `wait()` on the result
        returns (start offset, end offset) once they are durable.

        With `sync_in_background` the fsync runs on the journal's sync thread, so the caller can prepare
        the view transaction while the disk works; it must not make anything visible before `wait()`
        returns. None (the default): in the background while recent fsyncs were slower than
        BACKGROUND_SYNC_ABOVE_S, else inline. The caller holds the lock. A failed write or fsync poisons
        the journal: JournalPoisoned.
        """
        if sync_in_background is None:
            sync_in_background = self.recent_fsync_s > BACKGROUND_SYNC_ABOVE_S
        if self._poisoned:
            raise JournalPoisoned(
                f"fact journal durable mutation plane is poisoned; reopen the store ({self._poisoned})"
            )
        payload = bytearray()
        signatures = []
        for line in lines:
            data = line.encode("utf-8")
            if len(data) > MAX_RECORD_BYTES:
                raise InvalidInput(
                    f"fact journal record exceeds the {MAX_RECORD_BYTES}-byte append ceiling ({len(data)} bytes)"
                )
            payload += data + b"\n"
            if len(lines) > 1:
                signatures.append(line_signature(data))
        return self._write(payload, signatures, sync_in_background)

    def append_lines(self, data: bytes) -> tuple[int, int]:
        """`append` for lines already encoded (`data`: whole lines, each ending in a newline, none over
        the append ceiling: the caller checked), as one write with no group intent: a crash that tears
        it leaves whole lines before a torn last one (a cluster node's mirror of its stream, which
        carries on from the last whole message)."""
        if self._poisoned:
            raise JournalPoisoned(
                f"fact journal durable mutation plane is poisoned; reopen the store ({self._poisoned})"
            )
        return self._write(data, [], False).wait()

    def _write(self, payload: bytes | bytearray, signatures: list, sync_in_background: bool) -> "PendingAppend":
        created = not self.path.exists()
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as exc:
            raise JournalError(f"cannot open {self.path}: {exc.strerror}") from exc
        start = None
        try:
            st = os.fstat(fd)
            start = st.st_size   # the lock holder is the only appender: the write lands here
            if signatures:  # several lines: note them first, so that only this append can be taken back
                self.intent.record(st.st_ino, st.st_size, signatures)
            # Every line of the mutation in one write: a crash leaves all of it, none of it, or a prefix
            # that the next open quarantines (torn tail, then incomplete group).
            write_all(fd, payload)
            end = os.fstat(fd).st_size
        except OSError as exc:
            os.close(fd)
            if start is not None:
                self._take_back(start)   # e.g. ENOSPC part-way: the failure is reported, so nothing stays
            raise self._poison(exc) from exc
        if sync_in_background:
            return PendingAppend(self, end - len(payload), end, self._sync_thread().submit(self._sync, fd, created))
        pending = PendingAppend(self, end - len(payload), end, None)
        try:
            self._sync(fd, created)
        except OSError as exc:
            self._take_back(pending.start)
            raise self._poison(exc) from exc
        return pending

    def _take_back(self, start: int) -> None:
        """After a failed write or fsync, cut the lines just written back off (the caller holds the lock):
        the write is reported failed, so nothing of it may be replayed later. Best effort: the journal is
        poisoned either way, and an unterminated rest is quarantined by the next open."""
        try:
            os.truncate(self.path, start)
        except OSError:
            pass

    def _sync(self, fd: int, created: bool) -> None:
        try:
            started = time.perf_counter()
            os.fsync(fd)  # durability of the event: acknowledged only after this returns
            self.recent_fsync_s += (time.perf_counter() - started - self.recent_fsync_s) / 8
            if created:
                fsync_dir(self.data_dir)  # the new journal's name survives a crash too
        finally:
            os.close(fd)

    def _poison(self, exc: OSError) -> JournalPoisoned:
        self._poisoned = f"{errno.errorcode.get(exc.errno or 0, exc.errno)}: {exc.strerror}"
        return JournalPoisoned(f"fact journal append durability is indeterminate; restart required: {exc.strerror}")

    def _sync_thread(self) -> ThreadPoolExecutor:
        """One thread per journal (and per process: a forked child starts its own) that runs fsyncs."""
        if self._syncer is None or self._syncer_pid != os.getpid():
            self._syncer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cruxsql-journal-fsync")
            self._syncer_pid = os.getpid()
        return self._syncer

    # --- read ------------------------------------------------------------------------------------

    def line_chunks(self, offset: int = 0,
                    progress: Optional[Callable[[int, int], None]] = None) -> Iterator[list[bytes]]:
        """The newline-terminated lines from `offset`, without their newlines, a read chunk's worth at a
        time; an unterminated final line is not committed and is not returned. Progress (bytes done,
        bytes to do) is reported after each chunk's lines were taken."""
        try:
            fh = open(self.path, "rb")
        except FileNotFoundError:
            return
        with fh:
            total = os.fstat(fh.fileno()).st_size
            fh.seek(offset)
            pending = b""
            done = offset
            while True:
                chunk = fh.read(_READ_CHUNK)
                if not chunk:
                    return
                buf = pending + chunk if pending else chunk
                end = buf.rfind(b"\n") + 1
                pending = buf[end:]
                if end:
                    yield buf[:end - 1].split(b"\n")
                done += end
                if progress is not None:
                    progress(done - offset, total - offset)

    def records(self, offset: int = 0, line_no: int = 1,
                progress: Optional[Callable[[int, int], None]] = None) -> Iterator[Record]:
        """Stream newline-terminated records from `offset` (whose line number is `line_no`).

        An unterminated final record is not committed and is not returned.
        """
        pos = offset
        for lines in self.line_chunks(offset, progress):
            for raw in lines:
                length = len(raw) + 1
                yield Record(line_no, pos, length, raw[:-1] if raw.endswith(b"\r") else raw)
                pos += length
                line_no += 1

    def read_lines(self, spans: Iterable[tuple[K, int, int]]) -> Iterator[tuple[K, bytes]]:
        """The lines at `(key, byte_offset, byte_length)` spans (as `journal_events` records them), in
        file order, each as `Record.raw`: without the newline and one `\r` before it."""
        wanted = sorted(spans, key=lambda s: s[1])
        if not wanted:
            return
        with open(self.path, "rb") as fh:
            for key, offset, length in wanted:
                data = os.pread(fh.fileno(), length, offset)
                if data.endswith(b"\n"):
                    data = data[:-1]
                yield key, data[:-1] if data.endswith(b"\r") else data

    # --- rewrite ---------------------------------------------------------------------------------

    def rewrite(self, write_lines: Callable[[Callable], None], whole_lines: bool = False) -> tuple[Path, int]:
        """Atomically replace the journal with the lines `write_lines(emit)` emits: `emit(line)` takes one
        encoded event (str, without its newline; checked against the record ceiling here), or, with
        `whole_lines`, bytes of any number of newline-terminated lines the caller has checked (compaction
        writes a chunk of lines at a time).

        Temp file `facts.jsonl.compact-<32hex>.tmp` in the same directory, fsync, rename over the
        journal (the commit point), fsync the directory. Returns (journal path, new size).
        The caller holds the lock.
        """
        tmp = self.data_dir / f"{JOURNAL_NAME}.compact-{uuid.uuid4().hex}.tmp"
        try:
            with open(tmp, "wb") as fh:
                def emit(line: str) -> None:
                    data = line.encode("utf-8")
                    if len(data) > MAX_RECORD_BYTES:
                        raise InvalidInput(
                            f"fact journal record exceeds the {MAX_RECORD_BYTES}-byte append ceiling"
                        )
                    fh.write(data + b"\n")

                write_lines(fh.write if whole_lines else emit)
                fh.flush()
                os.fsync(fh.fileno())
                size = fh.tell()
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        self._replace_with(tmp)
        return self.path, size

    def _replace_with(self, tmp: Path) -> None:
        """Rename the complete, fsynced `tmp` over the journal (the commit point; `tmp` goes if that
        fails), then fsync the directory."""
        try:
            os.replace(tmp, self.path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        fsync_dir(self.data_dir)

    def unnamed_file(self) -> IO[bytes]:
        """An unnamed file in the data directory (O_TMPFILE, mode 0644) that `rewrite_onto` can later make
        the journal: it disappears when closed, also after a crash, and until then nothing can see it."""
        return os.fdopen(os.open(self.data_dir, os.O_TMPFILE | os.O_RDWR, 0o644), "w+b")

    def rewrite_onto(self, head: IO[bytes], head_size: int, write_rest: Callable[[Callable], None]) -> tuple[Path, int]:
        """`rewrite` whose first `head_size` bytes (whole lines, fsynced already) are in `head`, an
        `unnamed_file`: it is cut there, `write_rest(emit)` appends the rest (bytes of whole lines),
        it is fsynced (only what was appended is left to write), named `facts.jsonl.compact-<32hex>.tmp`
        and renamed over the journal (the commit point), and the directory fsynced. The caller holds the
        lock. Returns (journal path, new size)."""
        head.truncate(head_size)
        head.seek(head_size)
        write_rest(head.write)
        head.flush()
        os.fsync(head.fileno())
        size = head.tell()
        tmp = self.data_dir / f"{JOURNAL_NAME}.compact-{uuid.uuid4().hex}.tmp"
        # linkat(AT_SYMLINK_FOLLOW) of the descriptor's /proc link (os.link makes it a plain link(),
        # which does not follow it, unless given a directory descriptor)
        dir_fd = os.open(self.data_dir, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.link(f"/proc/self/fd/{head.fileno()}", tmp.name, dst_dir_fd=dir_fd, follow_symlinks=True)
        finally:
            os.close(dir_fd)
        self._replace_with(tmp)
        return self.path, size
