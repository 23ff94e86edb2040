"""Mounts made for a test (tests run as root): a read-only view of a directory, a tiny disk to fill.
Each skips the test, saying why, where the mount cannot be made, and is undone after it."""

from __future__ import annotations

import subprocess
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest


@contextmanager
def mounted(mount_point: Path, what: str, *mount_args: str) -> Iterator[Path]:
    """`mount *mount_args mount_point` for the block (`what` names it when it cannot be made)."""
    mount_point.mkdir()
    done = subprocess.run(["mount", *mount_args, str(mount_point)], capture_output=True, text=True)
    if done.returncode:
        pytest.skip(f"cannot make {what} here: {done.stderr.strip()}")
    try:
        yield mount_point
    finally:
        if subprocess.run(["umount", str(mount_point)]).returncode:
            subprocess.run(["umount", "-l", str(mount_point)], check=True)   # busy after a failure: detach


def read_only_mount(source: Path, mount_point: Path):
    """`source` seen through a read-only bind mount (permission bits do not stop root; a read-only mount does)."""
    return mounted(mount_point, "a read-only bind mount", "-o", "bind,ro", str(source))
