"""The `cruxsql` command line: one click group, commands registered per domain module."""

from __future__ import annotations

import click

from . import documents, facts, recall, retention


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="cruxsql")
def main() -> None:
    """cruxsql: a Crux-compatible agent memory store, materialised into SQLite.

    Facts live in DATA_DIR/facts.jsonl (the journal, the source of truth); DATA_DIR/cruxsql.db is a
    SQLite view rebuilt from it. Every command takes --data-dir (env CRUXSQL_DATA_DIR, default
    ./cruxsql-data).
    """


for _module in (facts, recall, documents, retention):
    _module.register(main)
