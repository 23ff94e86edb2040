"""The stores this user has, and when a command may start a new one without being told.

`$XDG_CONFIG_HOME/cruxsql/stores.json` (default `~/.config/cruxsql/stores.json`) lists the absolute
paths of the stores cruxsql created or wrote to for this user. A command that writes but was not told to
create (`store`, `store-batch`, `ingest`, `hold place`, `mcp` without `--create`) starts a store at a
path that holds none only when:

* this user has no store yet (no list, or an empty one): the first launch on a machine, e.g. the
  README's agent configuration copied verbatim; the creation is said on stderr;
* or the path is one this user's list already names (a store removed and started again);
* or the path is the default `./cruxsql-data` (the quick start's, never a typo).

Anywhere else the command is refused, naming the path: a mistyped `--data-dir` never forks memory.
`init PATH` and `--create` always create. An unreadable or corrupt list (or no home directory to
find it in) counts as "this user has stores" (the safe side), said in one warning line; a list that
cannot be written is noted on stderr, never a failure of the command. Adding to the list is done under
an exclusive lock on `stores.json.lock` and renamed into place whole, so two processes adding at once
keep both entries and a reader never sees half a file.
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import Optional

import click

LIST_NAME = "stores.json"
FIRST, KNOWN, DEFAULT = "first store of this user", "a store this user had", "the default directory"


def list_path() -> Path:
    """Where this user's list is; OSError when there is no home directory to hold it."""
    try:
        base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    except RuntimeError:        # HOME unset and no passwd entry
        raise OSError("no home directory (set HOME or XDG_CONFIG_HOME)") from None
    return Path(base) / "cruxsql" / LIST_NAME


def known_stores() -> Optional[list[str]]:
    """The listed store paths ([] when there is no list yet), or None (said on stderr) when the list
    cannot be read."""
    try:
        entries = json.loads(list_path().read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as exc:
        _warn(f"cannot read this user's list of stores ({_why(exc)})")
        return None
    if not isinstance(entries, list):
        _warn(f"this user's list of stores {list_path()} is not a JSON list")
        return None
    return [e for e in entries if isinstance(e, str)]


def may_start(path: Path, default: Path) -> Optional[str]:
    """Why a store may be started at `path` without `--create` (FIRST, KNOWN or DEFAULT), or None."""
    where = str(path.resolve())
    if where == str(default.resolve()):
        return DEFAULT
    listed = known_stores()
    if listed == []:
        return FIRST
    return KNOWN if listed is not None and where in listed else None


def remember(path: Path) -> None:
    """Add the store at `path` to this user's list (under the list's lock, written whole, then renamed
    into place)."""
    where = str(path.resolve())
    try:
        target = list_path()
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target.with_name(LIST_NAME + ".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)      # released when closed
            listed = known_stores()
            if listed is None or where in listed:
                return
            staging = target.with_name(f".{LIST_NAME}.{os.getpid()}.tmp")
            staging.write_text(json.dumps(listed + [where], indent=1) + "\n", encoding="utf-8")
            os.replace(staging, target)
    except OSError as exc:
        _warn(f"could not record the store {where} in this user's list of stores ({_why(exc)})")


def _why(exc: Exception) -> str:
    if isinstance(exc, OSError):
        return f"{exc.filename}: {exc.strerror}" if exc.filename and exc.strerror else str(exc.strerror or exc)
    return f"{list_path()}: {exc}"


def _warn(message: str) -> None:
    click.echo(f"warning: {message}", err=True)
