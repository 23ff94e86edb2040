"""The options cruxsql commands share, declared once: `--tenant`, `--actor`, `--reason`, `--json` and the
output formats of commands that print records.

One output convention: a command that prints records takes `--table` (aligned columns), `--json` (a
JSON array of objects), `--nl` (one JSON object per line) and `--csv` (a header row; booleans 0/1, NULL
empty). A command named after a Crux tool (`query`, `bootstrap`, `view`, `search`, `scan`) prints
Crux's text by default (`--text`) and its whole structured result with `--json`, as it always has.
A command that prints a summary rather than records takes `--json` alone.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import click

from .common import reject_empty, require_value

FORMATS = ("table", "json", "nl", "csv")


def _apply(fn: Callable, decorators: list[Callable]) -> Callable:
    """Apply `decorators` so that --help lists them in the order given."""
    for decorator in reversed(decorators):
        fn = decorator(fn)
    return fn


def output_options(text: Optional[str] = None, json_help: str = "A JSON array of row objects.",
                   records: str = "") -> Callable[[Callable], Callable]:
    """`--table` / `--json` / `--nl` / `--csv` as the `fmt` parameter ("table" ... "csv"), for a command that
    prints records. With `text` (the help of its own text output), `--text` is the default, as for the
    Crux-named commands; `records` names what --table/--nl/--csv print when --json prints more."""
    the = f"The {records} as" if records else ""
    decorators = [click.option("--text", "fmt", flag_value="text", default=True, help=text)] if text else []
    table_default: dict[str, Any] = {} if text else {"default": True}
    decorators += [
        click.option("--table", "fmt", flag_value="table", **table_default,
                     help=f"{the} aligned columns." if the else "Aligned columns" + ("." if text else " (default).")),
        click.option("--json", "fmt", flag_value="json", help=json_help),
        click.option("--nl", "fmt", flag_value="nl", help=f"{the or 'As'} one JSON object per line."),
        click.option("--csv", "fmt", flag_value="csv", help=f"{the or 'As'} CSV with a header row; booleans 0/1, "
                                                             f"NULL empty."),
    ]
    return lambda fn: _apply(fn, decorators)


def json_flag(help: str = "Print the result as JSON.") -> Callable[[Callable], Callable]:
    """`--json` as the boolean `as_json`, for a command that prints a summary or a report."""
    return click.option("--json", "as_json", is_flag=True, help=help)


def _default(default: Optional[str]) -> dict[str, Any]:
    """`default=` only when there is one: a declared `default=None` is a value to click 8.2+, so a required
    option would not be enforced by click itself (`require_value` enforces it anyway)."""
    return {} if default is None else {"default": default}


def tenant_option(help: str, default: Optional[str] = None, required: bool = False) -> Callable[[Callable], Callable]:
    """`--tenant NAME` (the tenant_hash); an explicitly empty value is refused."""
    return click.option("--tenant", **_default(default), show_default=default is not None, required=required,
                        callback=reject_empty, metavar="TENANT", help=help)


def actor_option(help: str = "Who does it (default: operator).") -> Callable[[Callable], Callable]:
    """`--actor NAME`: who a write is recorded as done by."""
    return click.option("--actor", default=None, metavar="NAME", help=help)


def idempotency_key_option() -> Callable[[Callable], Callable]:
    """`--idempotency-key KEY`: a client key that makes a retried write safe (facts/idempotency.py)."""
    return click.option("--idempotency-key", metavar="KEY",
                        help="Client key: a retry with the same key prints the first result and stores nothing again.")


def reason_option(help: str, required: bool = False) -> Callable[[Callable], Callable]:
    """`--reason TEXT`: why, kept in the receipt or report the command writes."""
    return click.option("--reason", required=required, callback=require_value, metavar="TEXT", help=help)


def all_tenants_option() -> Callable[[Callable], Callable]:
    """`--all-tenants`: an erasure's scope when it is not one tenant's (`tenant_scope`)."""
    return click.option("--all-tenants", is_flag=True, help="Every tenant (an erasure needs --tenant T or this).")


def tenant_scope(tenant: Optional[str], all_tenants: bool) -> Optional[str]:
    """The tenant an erasure is scoped to (None: every tenant); one of the two must be given."""
    if tenant is None and not all_tenants:
        raise click.UsageError("say which tenant(s): --tenant T, or --all-tenants (reads default to the "
                               "tenant 'default'; an erasure never guesses)")
    if tenant is not None and all_tenants:
        raise click.UsageError("--tenant and --all-tenants exclude each other")
    return tenant
