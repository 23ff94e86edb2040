"""Every option more than one cruxsql command takes, declared once: `--data-dir`, `--tenant`, `--agent`,
`--token-budget`, the output formats of commands that print records, ... A decorator takes the help each
command gives its option (and the default where commands differ); the name, type, metavar and checks are
the same everywhere. `tests/cli/test_conventions.py` fails on an inline declaration of one of these, and
on any option declared inline in two command modules.

One output convention: a command that prints records takes `--table` (aligned columns), `--json` (a
JSON array of objects), `--nl` (one JSON object per line) and `--csv` (a header row; booleans 0/1, NULL
empty). A command named after a Crux tool (`query`, `bootstrap`, `view`, `search`, `scan`) prints
Crux's text by default (`--text`) and its whole structured result with `--json`, as it always has.
A command that prints a summary rather than records takes `--json` alone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Optional

import click

from .common import (
    COUNT,
    DATA_DIR_ENV,
    DEFAULT_DATA_DIR,
    DEFAULT_LOCK_TIMEOUT,
    LOCK_TIMEOUT_ENV,
    LOCK_TIMEOUT_META,
    data_dir_of,
    reject_empty,
    require_value,
)

FORMATS = ("table", "json", "nl", "csv")
CONTRACTS = ("crc-v1", "legacy", "v0", "none", "off")


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


def _resolve_data_dir(ctx: click.Context, param: click.Parameter, value: Optional[Path]) -> Path:
    return value if value is not None else data_dir_of(ctx)


def _remember_lock_timeout(ctx: click.Context, param: click.Parameter, value: Optional[float]) -> None:
    if value is not None:
        ctx.meta[LOCK_TIMEOUT_META] = value


def lock_timeout_option(fn: Callable) -> Callable:
    """`--lock-timeout SECONDS` (env CRUXSQL_LOCK_TIMEOUT): how long to wait for the writer lock."""
    return click.option(
        "--lock-timeout", type=click.FloatRange(min=0, max=86_400), envvar=LOCK_TIMEOUT_ENV, default=None,
        expose_value=False, is_eager=True, callback=_remember_lock_timeout, metavar="SECONDS",
        help=f"Give up waiting for another process's writer lock after SECONDS [default: {DEFAULT_LOCK_TIMEOUT:g}].",
    )(fn)


def data_dir_option(fn: Callable) -> Callable:
    """`--data-dir` (also accepted before the subcommand; env CRUXSQL_DATA_DIR, default ./cruxsql-data)
    and `--lock-timeout`."""
    fn = lock_timeout_option(fn)
    return click.option(
        "--data-dir", type=click.Path(path_type=Path), default=None, callback=_resolve_data_dir,
        help=f"Data directory holding facts.jsonl, segments/ and cruxsql.db [env {DATA_DIR_ENV}; "
             f"default {DEFAULT_DATA_DIR}].",
    )(fn)


def create_option(fn: Callable) -> Callable:
    """`--create`: for a command that writes but is not meant to start a store, permission to start one."""
    return click.option("--create", is_flag=True,
                        help="Create the data directory and an empty store if there is none (without it, a path "
                             "without a store is refused: a typo must not become a new, empty memory).")(fn)


def contract_option(fn: Callable) -> Callable:
    """`--contract` of query, search, scan and expand: crc-v1 (the default, as in Crux) or legacy
    (v0, none and off are Crux's other names for legacy)."""
    return click.option("--contract", type=click.Choice(CONTRACTS, case_sensitive=False), default="crc-v1",
                        show_default=True, help="Response contract: crc-v1 envelope, or legacy (= v0, none, off).")(fn)


def agent_option(help: str) -> Callable[[Callable], Callable]:
    """`--agent NAME`: the caller, whose own private facts are visible; an explicitly empty value is refused."""
    return click.option("--agent", metavar="NAME", callback=reject_empty, help=help)


def all_tenants_option(help: str) -> Callable[[Callable], Callable]:
    """`--all-tenants`: every tenant instead of one `--tenant`."""
    return click.option("--all-tenants", is_flag=True, help=help)


def token_budget_option(help: str, default: Optional[int] = None) -> Callable[[Callable], Callable]:
    """`--token-budget N`: how many tokens the answer may take (no budget, or `default`, when not given)."""
    shown: dict[str, Any] = {} if default is None else {"default": default, "show_default": True}
    return click.option("--token-budget", type=COUNT, **shown, help=help)


def limit_option(help: str, default: int, show_default: bool = True) -> Callable[[Callable], Callable]:
    """`--limit N`: at most N results."""
    shown: dict[str, Any] = {"show_default": True} if show_default else {}
    return click.option("--limit", type=COUNT, default=default, **shown, help=help)


def offset_option(help: str) -> Callable[[Callable], Callable]:
    """`--offset N`: skip N results (the next page)."""
    return click.option("--offset", type=COUNT, default=0, show_default=True, help=help)


def entity_option(help: str) -> Callable[[Callable], Callable]:
    """`--entity NAME`: only this entity."""
    return click.option("--entity", help=help)


def entity_prefix_option(help: str, repeatable: bool = False) -> Callable[[Callable], Callable]:
    """`--entity-prefix P`: only entities starting with P; repeatable as the `entity_prefixes` tuple."""
    if repeatable:
        return click.option("--entity-prefix", "entity_prefixes", multiple=True, help=help)
    return click.option("--entity-prefix", help=help)


def confidence_option(help: str = "Confidence, 0.0 to 1.0.") -> Callable[[Callable], Callable]:
    """`--confidence X` of a stored fact, 1.0 when not given."""
    return click.option("--confidence", type=float, default=1.0, show_default=True, help=help)


def private_option(help: str) -> Callable[[Callable], Callable]:
    """`--private`: store as private."""
    return click.option("--private", is_flag=True, help=help)


def since_option(help: str) -> Callable[[Callable], Callable]:
    """`--since WHEN`: a point in time, read by `common.resolved_times`."""
    return click.option("--since", metavar="WHEN", help=help)


def older_than_option(help: str, required: bool = False) -> Callable[[Callable], Callable]:
    """`--older-than AGE`: a duration (90d, 12h, ...) or an RFC 3339 cutoff."""
    checks: dict[str, Any] = {"required": True, "callback": require_value} if required else {}
    return click.option("--older-than", **checks, help=help)


def dry_run_option(help: str) -> Callable[[Callable], Callable]:
    """`--dry-run`: say what would be done and change nothing."""
    return click.option("--dry-run", is_flag=True, help=help)


def request_id_option(help: str) -> Callable[[Callable], Callable]:
    """`--request-id ID` of an erasure report."""
    return click.option("--request-id", default=None, help=help)


def vacuum_option(help: str) -> Callable[[Callable], Callable]:
    """`--vacuum`: also VACUUM the view after erasing."""
    return click.option("--vacuum", is_flag=True, help=help)


ERASE_ALL_TENANTS = "Every tenant (an erasure needs --tenant T or this)."
"""The help of `--all-tenants` of the commands that erase (erase, retention apply)."""


def tenant_scope(tenant: Optional[str], all_tenants: bool) -> Optional[str]:
    """The tenant an erasure is scoped to (None: every tenant); one of the two must be given."""
    if tenant is None and not all_tenants:
        raise click.UsageError("say which tenant(s): --tenant T, or --all-tenants (reads default to the "
                               "tenant 'default'; an erasure never guesses)")
    if tenant is not None and all_tenants:
        raise click.UsageError("--tenant and --all-tenants exclude each other")
    return tenant
