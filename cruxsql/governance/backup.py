"""Backup and restore: a consistent snapshot taken while writers keep running, verified before restoring.

A backup holds the journal up to the view's checkpoint, every file of `segments/` (manifest, segments,
sidecars), and the view copied with SQLite's online backup API — plus `cruxsql-backup.json`, which lists
every file with its size and BLAKE3. The writer lock is held only while the view is refreshed, copied and
the files are opened; the bytes are then copied from the open descriptors, so a compaction or an
erasure that runs meanwhile cannot change what the backup holds (append-only journal, immutable
segments, renamed files keep their old bytes behind an open descriptor).

DEST is a directory (it must not exist or be empty) or a single archive when its name ends in `.tar`,
`.tar.gz` or `.tgz`. Backups are recorded in `backups.json` of the data directory, so an erasure report
can say which backups still hold what it erased.

The manifest names the store the backup was taken of (its path and `store_identity`), so that
`restore` (governance/restore.py) can ask that store which erasures were made since.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import tarfile
import uuid
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, BinaryIO, Callable, ContextManager, Iterator, Literal, Optional

import apsw
import blake3

from ..errors import CruxsqlError
from ..facts import replay_position, timestamps, view_file
from ..facts.files import directory_locked, fsync_dir, write_file_durably
from ..facts.journal import JOURNAL_NAME
from .erasure_ledger import LEDGER_NAME
from .store_identity import ensure_id

if TYPE_CHECKING:
    from ..facts.store import Store

BACKUP_FORMAT = "cruxsql.backup.v1"
BACKUP_MANIFEST = "cruxsql-backup.json"
REGISTRY_NAME = "backups.json"
VIEW_COPY_PREFIX = ".backup-view-"
SEGMENTS = "segments"
_ARCHIVE_SUFFIXES = (".tar", ".tar.gz", ".tgz")
_COPY_BLOCK = 1 << 20

Progress = Optional[Callable[[int, int], None]]


class BackupError(CruxsqlError):
    """A backup or restore that cannot proceed (bad destination, checksum mismatch, non-empty target)."""


@dataclass
class BackupReport:
    path: str
    archive: bool
    journal_offset: int
    journal_lines: int
    files: int
    bytes: int
    created_at: str

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def is_archive(path: Path) -> bool:
    return path.name.endswith(_ARCHIVE_SUFFIXES)


def _check_destination(dest: Path) -> None:
    if is_archive(dest):
        if dest.exists():
            raise BackupError(f"backup destination {dest} already exists")
        if not dest.parent.is_dir():
            raise BackupError(f"backup destination's directory {dest.parent} does not exist")
        return
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise BackupError(f"backup destination {dest} exists and is not an empty directory")
    if not dest.parent.is_dir():
        raise BackupError(f"backup destination's directory {dest.parent} does not exist")


class _Sink:
    """Where backup files go: a staging directory, or a tar archive being written."""

    def __init__(self, dest: Path) -> None:
        self.dest = dest
        self.archive = is_archive(dest)
        self.partial = dest.with_name(f"{dest.name}.partial-{uuid.uuid4().hex[:12]}")
        self.entries: list[dict[str, Any]] = []
        self.total = 0
        if self.archive:
            mode: Literal["w:gz", "w"] = "w:gz" if dest.name.endswith((".tar.gz", ".tgz")) else "w"
            self.tar = tarfile.open(self.partial, mode)
        else:
            self.partial.mkdir()

    def add(self, name: str, source: BinaryIO, length: int, progress: Progress, grand_total: int) -> None:
        hasher = blake3.blake3()
        if self.archive:
            spool = _HashingReader(source, length, hasher, lambda n: self._advance(n, progress, grand_total))
            info = tarfile.TarInfo(name)
            info.size = length
            info.mode = 0o600
            info.mtime = int(timestamps.now_ns() // 1_000_000_000)
            self.tar.addfile(info, spool)
        else:
            copied, hasher = copy_hashed(source, self.partial / name, length,
                                          lambda n: self._advance(n, progress, grand_total))
            if copied != length:
                raise BackupError(f"{name} ended early while it was being copied")
        self.entries.append({"path": name, "bytes": length, "blake3": hasher.hexdigest()})

    def _advance(self, n: int, progress: Progress, grand_total: int) -> None:
        self.total += n
        if progress:
            progress(self.total, grand_total)

    def finish(self, manifest: dict[str, Any]) -> None:
        data = json.dumps(manifest, indent=1, ensure_ascii=False).encode("utf-8") + b"\n"
        if self.archive:
            info = tarfile.TarInfo(BACKUP_MANIFEST)
            info.size = len(data)
            info.mode = 0o600
            self.tar.addfile(info, io.BytesIO(data))
            self.tar.close()
            with open(self.partial, "rb") as fh:
                os.fsync(fh.fileno())
        else:
            write_file_durably(self.partial / BACKUP_MANIFEST, data, mode=0o600)
            for directory in sorted({p.parent for p in self.partial.rglob("*")} | {self.partial}, reverse=True):
                fsync_dir(directory)
        if self.dest.exists():  # an empty directory we were allowed to fill
            self.dest.rmdir()
        os.replace(self.partial, self.dest)
        fsync_dir(self.dest.parent)

    def abort(self) -> None:
        if self.archive:
            try:
                self.tar.close()
            except Exception:
                pass
            self.partial.unlink(missing_ok=True)
        else:
            shutil.rmtree(self.partial, ignore_errors=True)


def copy_hashed(source: IO[bytes], target: Optional[Path] = None, length: Optional[int] = None,
                 advance: Optional[Callable[[int], None]] = None) -> tuple[int, Any]:
    """Read `source` (its first `length` bytes, or to its end), writing it durably to `target` when given;
    return (bytes read, their BLAKE3 hasher)."""
    hasher, size = blake3.blake3(), 0
    out = None
    if target is not None:
        target.parent.mkdir(parents=True, exist_ok=True)
        out = open(target, "wb")
    try:
        while length is None or size < length:
            block = source.read(_COPY_BLOCK if length is None else min(_COPY_BLOCK, length - size))
            if not block:
                break
            hasher.update(block)
            size += len(block)
            if out is not None:
                out.write(block)
            if advance is not None:
                advance(len(block))
        if out is not None:
            out.flush()
            os.fsync(out.fileno())
    finally:
        if out is not None:
            out.close()
    return size, hasher


class _HashingReader(io.RawIOBase):
    """A file-like view of the first `length` bytes of `source` that hashes what tarfile reads."""

    def __init__(self, source: BinaryIO, length: int, hasher: Any, advance: Callable[[int], None]) -> None:
        self.source, self.left, self.hasher, self.advance = source, length, hasher, advance

    def read(self, size: int = -1) -> bytes:
        size = self.left if size < 0 else min(size, self.left)
        block = self.source.read(size)
        self.left -= len(block)
        self.hasher.update(block)
        self.advance(len(block))
        return block


def backup(store: Store, dest: Path | str, progress: Progress = None) -> BackupReport:
    """Write a consistent snapshot of `store` to `dest` (directory or .tar/.tar.gz archive)."""
    dest = Path(dest)
    _check_destination(dest)
    data_dir = store.data_dir.resolve()
    if dest.resolve() == data_dir or data_dir in dest.resolve().parents:
        raise BackupError(f"backup destination {dest} is inside the data directory {data_dir}")
    sink = _Sink(dest)
    # The staging copy outside the data directory is recorded before a byte of it is written (erasure
    # names it; the next command removes it if this process dies); the view's copy is made inside the
    # data directory, where erasure scans and the next command cleans.
    record_staging(data_dir, dest, sink.partial, "backup")
    source = {"path": str(data_dir), "store_id": ensure_id(data_dir)}
    opened: list[tuple[str, BinaryIO, int]] = []
    view_copy = data_dir / f"{VIEW_COPY_PREFIX}{os.getpid()}-{uuid.uuid4().hex[:8]}.db"
    try:
        with store.writer_lock():
            store.refresh()
            # The backup's time is its snapshot's, not the end of its copy: an erasure that finishes while
            # the bytes are copied may have left its values in what this backup holds (the journal as
            # opened here), so restore must apply it again (its `executed_at` is later than this), and
            # its report must name this backup as holding them.
            created = timestamps.format_event_time(timestamps.now_ns())
            cp = replay_position.read_checkpoint(store.db)
            offset = cp.byte_offset if cp else 0
            lines = cp.line_count if cp else 0
            if store.journal.path.exists():
                opened.append((JOURNAL_NAME, open(store.journal.path, "rb"), offset))
            if store.extensions.path.exists():  # cruxsql's own fact events (extension_events.py)
                fh: BinaryIO = open(store.extensions.path, "rb")
                opened.append((store.extensions.name, fh, os.fstat(fh.fileno()).st_size))
            ledger = data_dir / LEDGER_NAME
            if ledger.exists():
                fh = open(ledger, "rb")
                opened.append((LEDGER_NAME, fh, os.fstat(fh.fileno()).st_size))
            segments = data_dir / SEGMENTS
            if segments.is_dir():
                for path in sorted(p for p in segments.rglob("*") if p.is_file() and not p.name.endswith(".tmp")):
                    fh = open(path, "rb")
                    opened.append((str(path.relative_to(data_dir)), fh, os.fstat(fh.fileno()).st_size))
            target = apsw.Connection(str(view_copy))
            try:
                with target.backup("main", store.db, "main") as copy:
                    while not copy.done:
                        copy.step(-1)
            finally:
                target.close()
        grand_total = sum(length for _, _, length in opened) + view_copy.stat().st_size
        for name, fh, length in opened:
            sink.add(name, fh, length, progress, grand_total)
        with open(view_copy, "rb") as fh:
            sink.add(view_file.DB_NAME, fh, view_copy.stat().st_size, progress, grand_total)
        view_copy.unlink()
        manifest = {"format": BACKUP_FORMAT, "cruxsql_version": _version(), "created_at": created,
                    "journal_offset": offset, "journal_lines": lines, "source": source, "files": sink.entries}
        sink.finish(manifest)
    except BaseException:
        sink.abort()
        view_copy.unlink(missing_ok=True)
        drop_staging(data_dir, sink.partial)
        raise
    finally:
        for _, fh, _ in opened:
            fh.close()
    report = BackupReport(path=str(dest.resolve()), archive=sink.archive, journal_offset=offset,
                          journal_lines=lines, files=len(sink.entries), bytes=sink.total, created_at=created)
    drop_staging(data_dir, sink.partial)
    _record(data_dir, report)
    return report


def _version() -> str:
    try:
        return metadata.version("cruxsql")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "unknown"


# --- the registry of backups ------------------------------------------------------------------------


def recorded_backups(data_dir: Path) -> list[dict[str, Any]]:
    """Backups cruxsql made of this data directory, oldest first (from `backups.json`)."""
    try:
        entries = json.loads((Path(data_dir) / REGISTRY_NAME).read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return []
    return [e for e in entries if isinstance(e, dict) and "path" in e and "created_at" in e]


def write_registry(data_dir: Path, entries: list[dict[str, Any]]) -> None:
    write_file_durably(Path(data_dir) / REGISTRY_NAME,
                       json.dumps(entries, indent=1, ensure_ascii=False).encode("utf-8") + b"\n")


def _registry_changed(data_dir: Path) -> ContextManager[None]:
    """One process at a time reads, changes and writes `backups.json` (backups, restores of this store's
    backups elsewhere and repairs run side by side): a flock on the data directory itself."""
    return directory_locked(data_dir)


def _record(data_dir: Path, report: BackupReport) -> None:
    with _registry_changed(data_dir):
        entries = [e for e in recorded_backups(data_dir) if e["path"] != report.path]
        entries.append({"path": report.path, "created_at": report.created_at,
                        "journal_offset": report.journal_offset})
        write_registry(data_dir, entries)


def record_staging(data_dir: Path, dest: Path, partial: Path, kind: str) -> None:
    """Record a copy being written outside the data directory (its staging path and our pid) before
    writing it: a backup's, or a restore's (`kind` "restore": the staging copy of a restore of a backup
    of this store into another directory, which the restore drops once it renamed it into place)."""
    with _registry_changed(data_dir):
        entries = recorded_backups(data_dir)
        entries.append({"path": str(dest.resolve()), "created_at": timestamps.format_event_time(timestamps.now_ns()),
                        "staging": str(partial.resolve()), "pid": os.getpid(), "kind": kind})
        write_registry(data_dir, entries)


def drop_staging(data_dir: Path, partial: Path) -> None:
    with _registry_changed(data_dir):
        entries = recorded_backups(data_dir)
        kept = [e for e in entries if e.get("staging") != str(partial.resolve())]
        if kept != entries:
            write_registry(data_dir, kept)


def alive(pid: Any) -> bool:
    try:
        os.kill(int(pid), 0)
        return True
    except (ProcessLookupError, ValueError, TypeError):
        return False
    except PermissionError:
        return True


def remove_dead_stagings(data_dir: Path) -> list[tuple[str, str]]:
    """Remove what killed backups (and restores of this store elsewhere) left: recorded staging copies and
    view copies of processes that are gone (the caller holds the writer lock). Returns (path, "backup" or
    "restore") for each removal."""
    removed = []
    with _registry_changed(data_dir):
        entries = recorded_backups(data_dir)
        kept = []
        for entry in entries:
            if entry.get("staging") and not alive(entry.get("pid")):
                staging = Path(entry["staging"])
                kind = "restore" if entry.get("kind") == "restore" else "backup"
                if staging.is_dir():
                    shutil.rmtree(staging, ignore_errors=True)
                    removed.append((str(staging), kind))
                elif staging.exists():
                    staging.unlink(missing_ok=True)
                    removed.append((str(staging), kind))
                continue
            kept.append(entry)
        if kept != entries:
            write_registry(data_dir, kept)
    for path in sorted(Path(data_dir).glob(f"{VIEW_COPY_PREFIX}*")):
        pid = path.name[len(VIEW_COPY_PREFIX):].split("-", 1)[0]
        if not alive(pid):
            path.unlink(missing_ok=True)
            removed.append((str(path), "backup"))
    return removed


# --- reading a backup ------------------------------------------------------------------------------


def members(src: Path) -> Iterator[tuple[str, IO[bytes]]]:
    """(name, readable) for every file of a backup directory or archive, manifest excluded."""
    if src.is_dir():
        for path in sorted(p for p in src.rglob("*") if p.is_file()):
            name = str(path.relative_to(src))
            if name != BACKUP_MANIFEST:
                with open(path, "rb") as fh:
                    yield name, fh
        return
    with tarfile.open(src, "r:*") as tar:
        for info in tar:
            if info.name == BACKUP_MANIFEST:
                continue
            if not info.isfile():
                raise BackupError(f"backup {src}: member {info.name} is not a regular file")
            member = tar.extractfile(info)
            assert member is not None       # a regular file, checked above
            yield info.name, member


def read_manifest(src: Path) -> dict[str, Any]:
    if not src.exists():
        raise BackupError(f"no backup at {src}")
    try:
        if src.is_dir():
            raw = (src / BACKUP_MANIFEST).read_bytes()
        else:
            with tarfile.open(src, "r:*") as tar:
                member = tar.extractfile(BACKUP_MANIFEST)
                raw = member.read() if member else b""
        manifest = json.loads(raw)
    except (OSError, KeyError, ValueError, tarfile.TarError) as exc:
        raise BackupError(f"{src} is not a cruxsql backup (no readable {BACKUP_MANIFEST}: {exc})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != BACKUP_FORMAT:
        raise BackupError(f"{src}: {BACKUP_MANIFEST} is not a {BACKUP_FORMAT} manifest")
    return manifest


def safe_name(name: str) -> str:
    path = Path(name)
    if path.is_absolute() or ".." in path.parts or not name:
        raise BackupError(f"backup member {name!r} points outside the data directory")
    return name


def verify_backup(src: Path | str) -> dict[str, Any]:
    """Check every file of a backup against its manifest; raise BackupError naming the first problem."""
    src = Path(src)
    manifest = read_manifest(src)
    expected = {safe_name(e["path"]): e for e in manifest.get("files", [])}
    seen = set()
    for name, fh in members(src):
        entry = expected.get(name)
        if entry is None:
            raise BackupError(f"backup {src}: {name} is not listed in its manifest")
        size, hasher = copy_hashed(fh)
        if size != entry["bytes"] or hasher.hexdigest() != entry["blake3"]:
            raise BackupError(f"backup {src}: {name} does not match its checksum (damaged or altered)")
        seen.add(name)
    missing = sorted(set(expected) - seen)
    if missing:
        raise BackupError(f"backup {src}: {missing[0]} is missing")
    return manifest
