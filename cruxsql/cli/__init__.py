"""The `cruxsql` command line: one click group; every module of this package adds its own commands.

A module here that defines `COMMANDS` (a tuple of click commands and groups) is discovered and its
commands added, so a new capability adds a module (e.g. `cli/curation.py`) and edits no central list.
The options commands share are in `options.py`, the rest of what they share in `common.py`.
"""

from __future__ import annotations

import importlib
import pkgutil

from pathlib import Path

import click

from .common import DATA_DIR_ENV, DEFAULT_DATA_DIR, CruxsqlGroup, lock_timeout_option


@click.group(cls=CruxsqlGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="cruxsql")
@click.option("--data-dir", type=click.Path(path_type=Path), envvar=DATA_DIR_ENV, default=DEFAULT_DATA_DIR,
              show_default=True, show_envvar=True,
              help="Data directory for every subcommand (like `git -C`); a subcommand's own --data-dir wins.")
@lock_timeout_option
def main(data_dir: Path) -> None:
    """cruxsql: a Crux-compatible agent memory store, materialised into SQLite.

    Facts live in DATA_DIR/facts.jsonl (the journal, the source of truth); DATA_DIR/cruxsql.db is a
    SQLite view rebuilt from it. --data-dir goes before or after the subcommand.

    \b
    Conventions of every command:
      - read commands need an existing store; only init, store, store-batch,
        store-conversation, ingest and hold place create one (mcp, import, bootstrap-seed and workspace index with --create)
      - a read-only data directory is read through an in-memory copy of the view
      - records print as a table by default, or with --json, --nl or --csv; commands named
        after Crux's tools print Crux's text by default (--text)
      - failures print one `Error: ...` line and exit 1, as does an erasure that matched
        nothing or is not verified; one that legal holds held back entirely exits 3; doctor has
        its own (see `cruxsql doctor --help`)
      - an empty answer says on stderr which other tenant holds matches (counts only)
      - `-` is stdin for an input file and stdout for --output
    """


for _info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
    _module = importlib.import_module(f"{__name__}.{_info.name}")
    for _command in getattr(_module, "COMMANDS", ()):
        main.add_command(_command)
