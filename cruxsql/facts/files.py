"""Durable file writes and file checksums: the one home of the write-rename-fsync rule.

A file that must survive a crash whole or not at all is written to a temporary name in the same
directory, fsynced, renamed over its final name (the commit point), and then the directory is fsynced
so the rename itself is durable. A crash leaves either the old file or the new one, plus at most a
temporary file that the owner of its name pattern sweeps (the segment lane's `.*.partial`, see
`documents/segments.py:stray_files`). File checksums are BLAKE3 over the whole file, read in blocks.
"""

from __future__ import annotations

import fcntl
import os
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Optional

import blake3

_HASH_BLOCK = 1 << 22


def fsync_dir(path: Path) -> None:
    """Make the names in directory `path` (a creation, rename or removal) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes | bytearray) -> None:
    """`os.write` until every byte is out (a regular file takes it in one call unless interrupted)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def write_file_durably(path: Path, data: bytes, mode: int = 0o644, temp: Optional[Path] = None) -> None:
    """Write `data` to `path` via a temp file, fsync, rename and directory fsync.

    `temp` is the temporary file's path (in `path`'s directory); by default `<name>.<32hex>.tmp`.
    """
    tmp = temp if temp is not None else path.with_name(f"{path.name}.{uuid.uuid4().hex}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        write_all(fd, data)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)


def file_blake3(path: Path) -> str:
    """The BLAKE3 hex digest of the file at `path` (FileNotFoundError if it is missing)."""
    hasher = blake3.blake3()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(_HASH_BLOCK), b""):
            hasher.update(block)
    return hasher.hexdigest()


@contextmanager
def directory_locked(path: Path) -> Iterator[None]:
    """An exclusive flock on the directory itself, held while the block runs (one process at a time)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
