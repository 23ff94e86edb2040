"""What every cruxsql command shares: the data-dir option, opening the store, errors, output formats."""

from __future__ import annotations

import csv
import functools
import io
import json
import sys
from pathlib import Path
from typing import Any, Callable, Iterable, Optional, Sequence

import click

from ..errors import CruxsqlError
from ..facts.store import Store

DATA_DIR_ENV = "CRUXSQL_DATA_DIR"
DEFAULT_DATA_DIR = "./cruxsql-data"


def data_dir_option(fn: Callable) -> Callable:
    """`--data-dir` (env CRUXSQL_DATA_DIR, default ./cruxsql-data)."""
    return click.option(
        "--data-dir",
        type=click.Path(file_okay=False, path_type=Path),
        envvar=DATA_DIR_ENV,
        default=DEFAULT_DATA_DIR,
        show_default=True,
        show_envvar=True,
        help="Data directory holding facts.jsonl, segments/ and cruxsql.db.",
    )(fn)


def fails_cleanly(fn: Callable) -> Callable:
    """Turn a CruxsqlError (or undecodable input) into a one-line `Error: ...` and exit status 1."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except CruxsqlError as exc:
            raise click.ClickException(str(exc)) from None
        except UnicodeError as exc:
            raise click.ClickException(f"input is not valid UTF-8: {exc.reason} at position {exc.start}") from None

    return wrapper


def open_store(data_dir: Path, progress: bool = True) -> Store:
    """Open the store, showing catch-up progress on a terminal (a large journal tail or a rebuild)."""
    return Store(data_dir, progress=progress_callback("replaying journal") if progress else None)


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


def output_format_options(fn: Callable) -> Callable:
    """`--json` / `--csv` / `--table` (default table) for commands that print rows."""
    fn = click.option("--table", "fmt", flag_value="table", default=True, help="Aligned columns (default).")(fn)
    fn = click.option("--csv", "fmt", flag_value="csv", help="CSV with a header row.")(fn)
    fn = click.option("--json", "fmt", flag_value="json", help="A JSON array of row objects.")(fn)
    return fn


def echo_rows(columns: Sequence[str], rows: Iterable[Sequence[Any]], fmt: str) -> None:
    """Print rows as a JSON array of objects, CSV, or an aligned text table."""
    rows = list(rows)
    if fmt == "json":
        echo_json([dict(zip(columns, row)) for row in rows])
        return
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows(["" if v is None else v for v in row] for row in rows)
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


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    text = str(value).replace("\n", "\\n")
    return text if len(text) <= 80 else text[:77] + "..."
