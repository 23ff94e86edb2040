"""The `cruxsql` command line: one click group; every module of this package adds its own commands.

A module here that defines `register(group)` is discovered and called, so a new capability adds a
module (e.g. `cli/curation.py`) and edits no central list.
"""

from __future__ import annotations

import importlib
import pkgutil

import click


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="cruxsql")
def main() -> None:
    """cruxsql: a Crux-compatible agent memory store, materialised into SQLite.

    Facts live in DATA_DIR/facts.jsonl (the journal, the source of truth); DATA_DIR/cruxsql.db is a
    SQLite view rebuilt from it. Every command takes --data-dir (env CRUXSQL_DATA_DIR, default
    ./cruxsql-data).
    """


for _info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
    _module = importlib.import_module(f"{__name__}.{_info.name}")
    if hasattr(_module, "register"):
        _module.register(main)
