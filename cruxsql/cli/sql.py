"""`cruxsql sql`: one read-only query against the view, through the SQL sandbox
(`cruxsql/console/readonly_sql.py`). Its own module so that running it imports nothing else of the CLI."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import click

from ..errors import InvalidInput
from ..console.readonly_sql import DEFAULT_MEMORY_LIMIT_MIB, PIPE_TIMEOUT_SECONDS, default_timeout, run_readonly_query
from .common import INTERRUPTED_EXIT, echo_rows, fails_cleanly, open_store
from .options import data_dir_option, output_options


@click.command()
@click.argument("query")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=None, metavar="SECONDS",
              help=f"Stop the query after SECONDS. Default: none on a terminal (Ctrl-C stops it), "
                   f"{PIPE_TIMEOUT_SECONDS:g} s when stdin is not a terminal.")
@click.option("--max-memory", type=click.IntRange(min=0, max=1 << 20), default=DEFAULT_MEMORY_LIMIT_MIB, show_default=True,
              metavar="MIB", help="Stop the query when SQLite needs more than MIB mebibytes.")
@output_options()
@data_dir_option
@fails_cleanly
def sql(query: str, timeout: Optional[float], max_memory: int, fmt: str, data_dir: Path) -> None:
    """Run one read-only SQL QUERY against the view (tables facts, journal_events, ...; views live_facts,
    fact_versions).

    The console is a sandbox: only SELECT and schema PRAGMAs run; writes, VACUUM, ATTACH, setting
    PRAGMAs and file functions are refused before anything runs, and nothing is created or changed.
    One statement per call.

    \b
    Example:
      cruxsql sql "SELECT entity, key, value FROM live_facts ORDER BY stored_at_ns DESC LIMIT 5"
    """
    if not query.strip():
        raise InvalidInput("QUERY must not be empty")
    if timeout is None:
        timeout = default_timeout(sys.stdin.isatty())
    with open_store(data_dir, "read") as s:
        try:
            columns, rows = run_readonly_query(s.view_for_queries(), query, timeout=timeout, memory_limit_mib=max_memory)
        except KeyboardInterrupt:   # exit 130 as every command, saying that nothing was changed
            click.echo("Error: query interrupted (Ctrl-C); nothing was changed", err=True)
            sys.exit(INTERRUPTED_EXIT)
    echo_rows(columns, rows, fmt)


COMMANDS = (sql,)
