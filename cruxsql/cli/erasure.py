"""CLI commands that take content out of the store: compact and erase (their reports print as
erasure_report.py says)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import click

from ..errors import InvalidInput
from ..governance import compaction, erasure, legal_holds
from .common import echo_json, fails_cleanly, open_store, progress_callback
from .erasure_report import blocked_message, carried_over_lines, echo_dry_run, echo_erasure_outcome
from .options import (
    ERASE_ALL_TENANTS,
    actor_option,
    all_tenants_option,
    data_dir_option,
    dry_run_option,
    entity_prefix_option,
    json_flag,
    older_than_option,
    reason_option,
    request_id_option,
    tenant_option,
    tenant_scope,
    vacuum_option,
)


def load_receipt(path: Optional[Path]) -> Optional[legal_holds.LegalHoldReceipt]:
    """The --override-receipt file (or `-` for stdin) as a receipt; InvalidInput names the file."""
    if path is None:
        return None
    try:
        text = sys.stdin.read() if str(path) == "-" else Path(path).read_text(encoding="utf-8")
        obj = json.loads(text)
    except (OSError, ValueError) as exc:
        raise InvalidInput(f"cannot read the override receipt {str(path)!r}: {exc}") from None
    return legal_holds.LegalHoldReceipt.from_obj(obj)


receipt_option = click.option(
    "--override-receipt", type=click.Path(dir_okay=False, path_type=Path), default=None,
    help="A legal_hold_overridden receipt (JSON file, or - for stdin) naming every blocked fact and hold.")


@click.command("compact")
@data_dir_option
@receipt_option
@click.option("--drop-corrupt", is_flag=True,
              help="Compact even though the journal has corrupt lines: they move, byte for byte, to a "
                   "facts.jsonl.corrupt.<hex> file (mode 0600) named in the report.")
@json_flag("Print the report as JSON.")
@fails_cleanly
def compact(data_dir: Path, override_receipt: Optional[Path], drop_corrupt: bool, as_json: bool) -> None:
    """Rewrite facts.jsonl without deleted facts' content (crash-atomic).

    Live facts are kept byte-identical, deleted ones become value-free tombstones. Refused while an
    active legal hold covers a deleted fact, unless --override-receipt names every blocked fact and hold,
    and while the journal has corrupt lines, unless --drop-corrupt. Waits for a running erasure (up to
    --lock-timeout).
    """
    receipt = load_receipt(override_receipt)
    with open_store(data_dir, "write") as store:
        try:
            report = compaction.compact(store, override_receipt=receipt, drop_corrupt=drop_corrupt,
                                        progress=progress_callback("compacting journal"))
        except compaction.LegalHoldBlocked as exc:
            raise click.ClickException(blocked_message(exc)) from None
    if as_json:
        echo_json(report.to_dict())
        return
    d = report.to_dict()
    for name in ("facts_dropped", "facts_retained", "tombstones_kept", "provenance_lines", "corrupt_lines_dropped",
                 "corrupt_lines_file", "lines_before", "lines_after", "bytes_before", "bytes_after",
                 "override_receipt_id", "seconds", "seconds_locked"):
        if d[name] is not None:
            click.echo(f"{name:24} {d[name]}")
    for line in carried_over_lines(report.lines_carried_over):
        click.echo(line)


@click.command("erase")
@data_dir_option
@tenant_option("Only facts of this tenant.")
@all_tenants_option(ERASE_ALL_TENANTS)
@entity_prefix_option("Only entities starting with this (repeatable).", repeatable=True)
@click.option("--fact-id", "fact_ids", multiple=True, help="Only these fact ids (repeatable).")
@older_than_option("Only facts stored before: 90d, 12h, ... or an RFC 3339 time.")
@reason_option("Why (e.g. the data-subject request); kept in the report.", required=True)
@actor_option("Who runs the erasure (default: operator).")
@request_id_option("Request id for the report (default: er_<random>).")
@click.option("--documents", is_flag=True, help="Also erase the tenant's ingested documents (needs --tenant).")
@vacuum_option("Also VACUUM cruxsql.db (secure_delete already zeroes freed content).")
@receipt_option
@dry_run_option("List what would be erased (facts, documents, copies outside "
                "erasure's reach) and change nothing.")
@json_flag("Print the full erasure report as JSON.")
@fails_cleanly
def erase(data_dir: Path, tenant: Optional[str], all_tenants: bool, entity_prefixes: tuple[str, ...],
          fact_ids: tuple[str, ...], older_than: Optional[str], reason: str, actor: Optional[str],
          request_id: Optional[str], documents: bool, vacuum: bool, override_receipt: Optional[Path], dry_run: bool,
          as_json: bool) -> None:
    """Delete the selected facts, compact, scrub every copy, verify, and report.

    Criteria combine (all must match); --tenant T or --all-tenants is required. Facts an active legal
    hold covers are held back and named. --documents erases the tenant's documents whether or not it has
    facts.

    \b
    Exit status:
      0  erased and verified in the data directory (recorded backups and exports that still
         hold the values are listed as WARNING lines, with the rule that applies to them)
      1  nothing matched (nothing changes), a --fact-id names no fact, the verification still finds
         erased content in the data directory or in a copy cruxsql did not record, or bad input
      3  legal holds held back every matching fact: nothing erased
    """
    scope = tenant_scope(tenant, all_tenants)
    selection = erasure.Selection(tenant=scope, entity_prefixes=entity_prefixes, fact_ids=fact_ids,
                                  older_than=older_than)
    if selection.is_empty() and not documents:
        raise click.UsageError("--all-tenants alone would erase every fact: add --entity-prefix, --fact-id or "
                               "--older-than")
    receipt = load_receipt(override_receipt)
    with open_store(data_dir, "write") as store:
        unmatched = erasure.unmatched_fact_ids(store, selection)
        if unmatched:
            raise InvalidInput(f"--fact-id {unmatched[0]} matches no fact" + (
                f" of tenant {scope!r}" if scope is not None else "") + ": nothing erased")
        if dry_run:
            echo_dry_run(erasure.dry_run(store, selection, documents), as_json)
            return
        try:
            report = erasure.erase(store, selection, actor=actor, reason=reason, request_id=request_id,
                                   override_receipt=receipt, documents=documents, vacuum=vacuum,
                                   progress=progress_callback("compacting journal"))
        except compaction.LegalHoldBlocked as exc:
            raise click.ClickException(blocked_message(exc)) from None
    echo_erasure_outcome(report, as_json)


COMMANDS = (compact, erase)
