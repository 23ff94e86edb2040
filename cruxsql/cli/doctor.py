"""`cruxsql doctor`: the health check for cron jobs and monitoring."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Optional

import click

from ..governance import doctor as health_checks
from .common import echo_json, fails_cleanly, resolved_times
from .data_dir import DataDirError, data_dir_state
from .options import data_dir_option, since_option

NO_STORE_EXIT = 3
"""doctor's exit status when there is no store at --data-dir (missing, not a directory, or no store in it)."""
ERROR_EXIT = 4
"""doctor's exit status when it could not check at all: bad options or an unreadable store."""


class DoctorCommand(click.Command):
    """doctor exits ERROR_EXIT, not 1 (a warning), when it fails before it could check anything."""

    error_exit = ERROR_EXIT   # usage errors: CruxsqlGroup reads it

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.ClickException as exc:
            click.echo(f"Error: {exc.format_message()}", err=True)
            ctx.exit(ERROR_EXIT)


@click.command("doctor", cls=DoctorCommand)
@click.option("--json", "fmt", flag_value="json", help="Print the checks as JSON.")
@click.option("--prometheus", "fmt", flag_value="prometheus", help="Print Prometheus text-format gauges.")
@since_option("Count torn tails only since WHEN: RFC 3339, a date, a duration ago "
               "(7d) or a phrase (yesterday).")
@click.option("--max-idle", default="7d", show_default=True, metavar="DURATION",
              help="Warn when nothing was written for longer than this (0 turns it off).")
@click.option("--retention", "retention_window", metavar="DURATION",
              help="Warn about legal holds that will block a retention run with this window within 7 days.")
@data_dir_option
@fails_cleanly
def doctor(fmt: Optional[str], since: Optional[str], max_idle: str, retention_window: Optional[str],
           data_dir: Path) -> None:
    """Check the store's health without changing anything.

    \b
    Exit status (for cron and monitoring):
      0  every check ok
      1  at least one warning, nothing critical
      2  at least one check critical
      3  no usable store at --data-dir: missing, not a directory, no store in it, or its
         journal or view is not a regular file
      4  doctor could not check: bad options, or the store could not be read

    Checks: the view in step with the journal, the time of the last write, torn tails and corrupt
    lines, disk space against the journal's growth rate, who holds the writer lock, the WAL's size,
    erasures whose verification failed, (with --retention) legal holds about to block a run, and the
    last error of each MCP tool (a failure inside the server warns).
    """
    try:
        data_dir_state(data_dir, create=False)
    except DataDirError as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(NO_STORE_EXIT)
    health = health_checks.diagnose(data_dir, since=resolved_times({"--since": since})["--since"], max_idle=max_idle, retention_window=retention_window)
    if fmt == "json":
        echo_json(health.to_dict())
    elif fmt == "prometheus":
        click.echo(health_checks.to_prometheus(health), nl=False)
    else:
        click.echo(f"{health_checks.STATUS_NAMES[health.status].upper()}: {data_dir}")
        for check in health.checks:
            click.echo(f"  {health_checks.STATUS_NAMES[check.status]:<8} {check.name}: {check.message}")
    sys.exit(health.status)


COMMANDS = (doctor,)
