"""What every cruxsql command shares: opening the store, errors, output formats (its options: options.py)."""

from __future__ import annotations

import csv
import functools
import io
import json
import os
import sys
from pathlib import Path
from typing import Any, Callable, Iterable, Optional, Sequence

import apsw
import click

from ..errors import CruxsqlError, ReadOnlyStore
from ..facts import time_phrases
from ..facts.store import Store
from ..cluster.config import is_bound
from ..facts.journal import JOURNAL_NAME
from ..facts.view_file import DB_NAME
from ..governance.restore_traces import traces_beside
from .data_dir import data_dir_state
from .known_stores import FIRST, may_start, remember

DATA_DIR_ENV = "CRUXSQL_DATA_DIR"
DEFAULT_DATA_DIR = "./cruxsql-data"
LOCK_TIMEOUT_ENV = "CRUXSQL_LOCK_TIMEOUT"
DEFAULT_LOCK_TIMEOUT = 60.0
HELD_BACK_EXIT = 3
"""Exit status of an erasure or retention run that erased nothing because legal holds held it all back."""

LOCK_TIMEOUT_META = "cruxsql.lock_timeout"
"""Where `--lock-timeout` leaves its value for `open_store`."""
_READ_ONLY_NOTE_META = "cruxsql.read_only_noted"


class CruxsqlGroup(click.Group):
    """The click group of cruxsql: every failure is one `Error: ...` line on stderr and exit status 1
    (usage errors included; an erasure held back by legal holds exits HELD_BACK_EXIT). A command class
    with an `error_exit` attribute (doctor's) exits with that status on a usage error instead of 1."""

    def main(self, args: Optional[Sequence[str]] = None, prog_name: Optional[str] = None,
             complete_var: Optional[str] = None, standalone_mode: bool = True, **extra: Any) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            result = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.UsageError as exc:
            hint = f" (see `{exc.ctx.command_path} --help`)" if exc.ctx is not None else ""
            _fail(exc.format_message() + hint, _error_exit(exc.ctx))
        except click.ClickException as exc:
            _fail(exc.format_message())
        except click.Abort as exc:
            if isinstance(exc.__cause__, KeyboardInterrupt):
                sys.exit(INTERRUPTED_EXIT)     # Ctrl-C: quiet, as a shell expects of an interrupted command
            _fail("interrupted")
        except KeyboardInterrupt:
            sys.exit(INTERRUPTED_EXIT)
        except BrokenPipeError:
            end_after_closed_pipe()
        except OSError as exc:
            _fail(describe_os_error(exc))
        sys.exit(result if isinstance(result, int) else 0)


def end_after_closed_pipe() -> None:
    """The reader went away (`| head -1`): it has all it wanted. End silently and successfully (`set -o
    pipefail` scripts keep working), the flush at exit silenced as Python's docs advise."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    sys.exit(0)


INTERRUPTED_EXIT = 130     # 128 + SIGINT, what a shell reports for a command ended by Ctrl-C


def _fail(message: str, status: int = 1) -> None:
    click.echo(f"Error: {message}", err=True)
    sys.exit(status)


def _error_exit(ctx: Optional[click.Context]) -> int:
    return getattr(ctx.command, "error_exit", 1) if ctx is not None else 1


def describe_os_error(exc: OSError) -> str:
    """`PATH: reason` for an environment failure (permission denied, disk full, not a directory...)."""
    where = exc.filename if exc.filename is not None else ""
    reason = exc.strerror or str(exc)
    return f"{where}: {reason}" if where else reason


def data_dir_of(ctx: click.Context) -> Path:
    """The data directory given before the subcommand, else $CRUXSQL_DATA_DIR, else the default."""
    root = ctx.find_root()
    if root is not ctx and root.params.get("data_dir") is not None:
        return root.params["data_dir"]
    return Path(os.environ.get(DATA_DIR_ENV) or DEFAULT_DATA_DIR)


def fails_cleanly(fn: Callable) -> Callable:
    """Turn a CruxsqlError, undecodable input, an environment failure (OSError) or a SQLite failure
    into a one-line `Error: ...` and exit status 1."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except CruxsqlError as exc:
            raise click.ClickException(str(exc)) from None
        except (UnicodeDecodeError, UnicodeEncodeError, UnicodeTranslateError) as exc:
            raise click.ClickException(f"input is not valid UTF-8: {exc.reason} at position {exc.start}") from None
        except BrokenPipeError:
            raise                     # the reader went away: the group ends silently
        except OSError as exc:
            raise click.ClickException(describe_os_error(exc)) from None
        except apsw.FullError:
            raise click.ClickException("the disk holding the view (cruxsql.db) is full") from None
        except apsw.Error as exc:
            raise click.ClickException(f"the view (cruxsql.db) failed: {exc}") from None

    return wrapper


def resolved_times(given: dict[str, Optional[str]]) -> dict[str, Optional[str]]:
    """Each point-in-time option given (by its --name) as RFC 3339: dates and phrases read by
    facts/time_phrases.py in the server's zone, what they were read as said back on stderr."""
    times = time_phrases.resolve_all(given)
    echoed = time_phrases.echo_line(times)
    if echoed:
        click.echo(echoed, err=True)
    return {name: times[name].text if name in times else None for name in given}


COUNT = click.IntRange(0, 2**31 - 1)
"""The type of every integer option (counts, limits, budgets): out of range is a clean usage error."""

def require_value(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """The callback of every required option: refuse it missing, whatever click counts as missing (click
    8.2+ takes a declared `default=None` for a value and would run the command without the option)."""
    if param.required and (value is None or (getattr(param, "multiple", False) and not value)):
        raise click.MissingParameter(ctx=ctx, param=param)
    return value


def reject_empty(ctx: click.Context, param: click.Parameter, value: Optional[str]) -> Optional[str]:
    """A click callback refusing an explicitly empty (or blank) option value such as `--tenant ""`, and a
    required one missing (`require_value`)."""
    value = require_value(ctx, param, value)
    if isinstance(value, str) and not value.strip():
        raise click.BadParameter("must not be empty", ctx=ctx, param=param)
    return value


def open_store(data_dir: Path, access: str = "read", progress: bool = True, announce: bool = False) -> Store:
    """Open the store for `access`: "read" (needs a store; a directory that cannot be written — read-only,
    or a view SQLite cannot write, e.g. on a full disk — is read through an in-memory copy of the view,
    said once on stderr), "write" (needs a writable store), "start" (a write that may start a store
    where this user expects one: `known_stores.py`) or "create" (creates the directory and store if
    missing: `init`, `--create`). A store written to is added to this user's list of stores; `announce`:
    say on stderr when this was the user's first (the server's log; a CLI write's output stays as it was).
    Shows catch-up progress on a terminal."""
    _finish_interrupted_restore(data_dir)
    started = _may_start(data_dir) if access == "start" else None
    state = data_dir_state(data_dir, create=access == "create" or started is not None)
    if state.read_only and access != "read":
        raise ReadOnlyStore(f"{data_dir} is read-only ({state.read_only}); this command writes to it")
    ctx = click.get_current_context(silent=True)
    options: dict[str, Any] = {"progress": progress_callback("replaying journal") if progress else None,
               "lock_timeout": ctx.meta.get(LOCK_TIMEOUT_META, DEFAULT_LOCK_TIMEOUT) if ctx else DEFAULT_LOCK_TIMEOUT,
               "on_lock_wait": _say_waiting}
    if state.read_only:
        _note_in_memory(data_dir, f"is read-only ({state.read_only})")
        return Store(data_dir, read_only=True, **options)
    if is_bound(data_dir):
        return _open_node(data_dir, access, options)
    try:
        store = Store(data_dir, **options)
    except (apsw.FullError, apsw.IOError, apsw.ReadOnlyError, apsw.CantOpenError) as exc:
        if access != "read":
            raise
        _note_in_memory(data_dir, f"cannot be written ({exc})")
        return Store(data_dir, read_only=True, **options)
    _repair_on_open(store)
    if access != "read":
        remember(data_dir)
    if announce and started == FIRST:
        click.echo(f"cruxsql: created the store {data_dir.resolve()} (this user's first; later a path that "
                   "holds no store is refused unless told --create or `cruxsql init`)", err=True)
    return store


def _may_start(data_dir: Path) -> Optional[str]:
    """Why a write may start a store at `data_dir` (None: it holds one already, or may not)."""
    if (data_dir / JOURNAL_NAME).exists() or (data_dir / DB_NAME).exists():
        return None
    return may_start(data_dir, Path(DEFAULT_DATA_DIR))


def _finish_interrupted_restore(data_dir: Path) -> None:
    """Complete or roll back a killed `restore` into this directory (before a missing directory is refused:
    a restore killed between its renames leaves it missing), said on stderr."""
    target = data_dir.resolve() if data_dir.is_symlink() else data_dir
    try:
        if not traces_beside(target):   # what nearly every command finds: restore's code stays unloaded
            return
        from ..governance.restore import finish_interrupted

        lines = finish_interrupted(target)
    except OSError:  # a directory we cannot change: the next command that can, does
        return
    for line in lines:
        click.echo(f"repair: {line}", err=True)


def _repair_on_open(store: Store) -> None:
    """Remove what killed commands left behind and complete an interrupted erasure, said on stderr."""
    from ..governance.repair import repair
    try:
        for line in repair(store):
            click.echo(f"repair: {line}", err=True)
    except BaseException:
        store.close()
        raise


def _open_node(data_dir: Path, access: str, options: dict[str, Any]) -> Store:
    """A cluster node's directory: writes go through the cluster. A read when the cluster does not answer
    reads the local mirror as it stands, said on stderr; a write fails (nothing is acknowledged)."""
    from ..cluster.link import ClusterUnavailable
    from ..cluster.store import open_cluster_store
    try:
        return open_cluster_store(data_dir, **options)
    except ClusterUnavailable as exc:
        if access != "read":
            raise
        _note_in_memory(data_dir, f"is a cluster node and {exc}")
        return Store(data_dir, read_only=True, **options)


def _note_in_memory(data_dir: Path, why: str) -> None:
    ctx = click.get_current_context(silent=True)
    if ctx is not None and not ctx.meta.get(_READ_ONLY_NOTE_META):
        ctx.meta[_READ_ONLY_NOTE_META] = True
        click.echo(f"note: {data_dir} {why}: reading an in-memory copy of the view caught up with the "
                   f"journal; nothing is written", err=True)


def _say_waiting(pid: Optional[int]) -> None:
    by = f" held by pid {pid}" if pid else ""
    click.echo(f"waiting for the writer lock{by} ... (--lock-timeout to give up sooner)", err=True)


def progress_callback(label: str) -> Optional[Callable[[int, int], None]]:
    """A (done, total) callback drawing a progress bar on stderr when it is a terminal, else None."""
    if not sys.stderr.isatty():
        return None
    state: dict[str, Any] = {}

    def update(done: int, total: int) -> None:
        bar = state.get("bar")
        if bar is None:
            if done >= total:
                return
            bar = click.progressbar(length=total, label=label, file=sys.stderr, show_eta=True)
            bar.__enter__()
            state["bar"], state["pos"] = bar, 0
        bar.update(done - state["pos"])
        state["pos"] = done
        if done >= total:
            bar.__exit__(None, None, None)
            state.clear()

    return update


def echo_json(value: Any) -> None:
    click.echo(json.dumps(value, ensure_ascii=False, indent=2))


def echo_rows(columns: Sequence[str], rows: Iterable[Sequence[Any]], fmt: str) -> None:
    """Print rows as a JSON array of objects, JSON lines, CSV, or an aligned text table."""
    rows = list(rows)
    if fmt == "json":
        echo_json([dict(zip(columns, row)) for row in rows])
        return
    if fmt == "nl":
        for row in rows:
            click.echo(json.dumps(dict(zip(columns, row)), ensure_ascii=False))
        return
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows([_sql_value(v) for v in row] for row in rows)
        click.echo(buf.getvalue(), nl=False)
        return
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [len(c) for c in columns]
    for row in cells:
        widths = [max(w, len(v)) for w, v in zip(widths, row)]
    click.echo("  ".join(c.ljust(w) for c, w in zip(columns, widths)).rstrip())
    click.echo("  ".join("-" * w for w in widths))
    for row in cells:
        click.echo("  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip())


def _sql_value(value: Any) -> Any:
    """A cell as SQL would hold it: NULL as empty, booleans as 0/1."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return int(value)
    return value


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    text = str(value).replace("\n", "\\n")
    return text if len(text) <= 80 else text[:77] + "..."
