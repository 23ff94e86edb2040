"""What state a `--data-dir` is in before a command opens it: missing, not a directory, read-only.

No command creates a store by accident (a mistyped path must not answer "no facts found", nor become
a new empty memory an agent writes into): only `init`, `store`, `store-batch`, `ingest` and `hold place`
create one; `mcp`, `import`, `bootstrap-seed` and `workspace index` do with `--create`; every other
command refuses a path without a store. Every environment problem becomes one CruxsqlError naming the path.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional


from ..documents.segments import segments_dir
from ..errors import CruxsqlError
from ..facts.journal import JOURNAL_NAME
from ..facts.view_file import DB_NAME


class DataDirError(CruxsqlError):
    """The data directory is missing, is not a directory, or holds something unusable."""


@dataclass(frozen=True)
class DataDirState:
    path: Path
    read_only: Optional[str]
    """Why the store cannot be written (e.g. "read-only file system"), or None when it can."""


def _unwritable(path: Path) -> Optional[str]:
    if os.access(path, os.W_OK):
        return None
    if os.statvfs(path).f_flag & os.ST_RDONLY:
        return "read-only file system"
    return f"{path} is not writable"


def check_directory(path: Path) -> None:
    """Refuse a data directory that is a file, or whose nearest existing parent is one."""
    if path.exists() and not path.is_dir():
        raise DataDirError(f"--data-dir {path} is not a directory")
    if not path.exists():
        for parent in path.parents:
            if parent.exists():
                if not parent.is_dir():
                    raise DataDirError(f"--data-dir {path}: {parent} is not a directory")
                break


def data_dir_state(path: Path, create: bool) -> DataDirState:
    """Check `path` for a command; with `create`, make the directory when it is missing."""
    check_directory(path)
    if not path.exists():
        if not create:
            raise DataDirError(f"no cruxsql store at {path} (run `cruxsql init` or pass --data-dir)")
        path.mkdir(parents=True)
    journal, db = path / JOURNAL_NAME, path / DB_NAME
    for name, file in (("journal", journal), ("view", db)):
        if file.exists() and not file.is_file():
            raise DataDirError(f"the {name} {file} is not a regular file")
    if not create and not (journal.exists() or db.exists() or segments_dir(path).is_dir()):
        raise DataDirError(f"no cruxsql store at {path} (run `cruxsql init` or pass --data-dir)")
    for candidate in (path, journal, db):
        if candidate.exists():
            why = _unwritable(candidate)
            if why:
                return DataDirState(path, why)
    return DataDirState(path, None)
