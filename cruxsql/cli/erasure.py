"""CLI commands that take content out of the store: compact and erase (and the report printing they
share with `retention apply`)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Optional

import click

from ..errors import InvalidInput
from ..governance import compaction, erasure, legal_holds
from .common import HELD_BACK_EXIT, echo_json, fails_cleanly, open_store, progress_callback
from .options import (
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
    vacuum_option,
)

ERASE_ALL_TENANTS = "Every tenant (an erasure needs --tenant T or this)."
"""The help of `--all-tenants` of the commands that erase (erase, retention apply)."""


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


def blocked_message(exc: compaction.LegalHoldBlocked) -> str:
    """The refusal of a compaction blocked by holds: the holds, the facts, and what to do."""
    lines = [str(exc)]
    for fid, holds in exc.covered[:20]:
        lines.append(f"  {fid}: {','.join(holds)}")
    if len(exc.covered) > 20:
        lines.append(f"  ... and {len(exc.covered) - 20} more")
    lines.append("Build a receipt for review with `cruxsql hold override-receipt --reason R`, then pass it "
                 "with --override-receipt FILE.")
    return "\n".join(lines)


receipt_option = click.option(
    "--override-receipt", type=click.Path(dir_okay=False, path_type=Path), default=None,
    help="A legal_hold_overridden receipt (JSON file, or - for stdin) naming every blocked fact and hold.")


def echo_erasure_outcome(report: dict[str, Any], as_json: bool) -> None:
    """Print an erasure (or retention) report and exit with its status: 0 done or nothing matched,
    1 not verified, HELD_BACK_EXIT when legal holds held back everything the selection matched."""
    if as_json:
        echo_json(report)
    else:
        for line in erasure_summary(report):
            click.echo(line)
    if not report["ok"]:
        sys.exit(1)
    if report.get("outcome") == "held_back":
        sys.exit(HELD_BACK_EXIT)
    if report.get("outcome") == "nothing_matched" and report.get("kind") == "erasure":
        sys.exit(1)


def erasure_summary(report: dict[str, Any]) -> list[str]:
    """Readable lines for an erasure report; the first says what happened."""
    counts = report["counts"]
    holds = ",".join(report["holds_blocking"])
    if report.get("outcome") == "held_back":
        return [f"held back by legal hold(s) {holds}: {counts['facts_held_back']} matching fact(s) kept; "
                f"nothing erased, the journal is unchanged"]
    if report.get("outcome") == "nothing_matched":
        protected = f" ({counts['facts_protected']} governance record(s) are never erased)" \
            if counts["facts_protected"] else ""
        return [f"nothing matched the selection: nothing erased, the journal is unchanged{protected}"]
    first = f"erased {counts['facts_erased']} fact(s)"
    if counts["facts_held_back"]:
        first += f"; {counts['facts_held_back']} held back by legal hold(s) {holds}"
    journal = report["stores"]["journal"]
    verification = report["verification"]
    lines = [first,
             f"request id       {report['request_id']}",
             f"journal          {journal['bytes_before']} -> {journal['bytes_after']} bytes, "
             f"{journal['lines_before']} -> {journal['lines_after']} lines",
             *carried_over_lines(journal.get("lines_carried_over", [])),
             f"verification     {verification['files_scanned']} file(s) scanned, "
             f"{len(verification['hits'])} hit(s) of erased content"]
    lines += [f"  {hit_line(hit)}" for hit in verification["hits"][:50]]
    unscanned: dict[str, int] = {}
    for entry in report.get("erased_facts", []):
        if entry.get("scan", "scanned") != "scanned":
            unscanned[entry["scan"]] = unscanned.get(entry["scan"], 0) + 1
    lines += [f"not scanned      {count} fact(s): {reason.removeprefix('not scanned: ')}"
              for reason, count in sorted(unscanned.items())]
    for item in report["stores"].get("quarantine_files", {}).get("rewritten", []):
        lines.append(f"quarantine file  {item['file']} rewritten without erased content "
                     f"({item['bytes_before']} -> {item['bytes_after']} bytes)")
    scrubbed = report["stores"].get("tool_errors", {}).get("messages_scrubbed")
    if scrubbed:
        lines.append(f"tool errors      {scrubbed} message(s) holding erased content replaced")
    lines += [f"error            {error}" for error in report["errors"]]
    lines += copy_lines(report.get("outside_reach", []))
    lines.append(verdict(report["ok"], report.get("outside_reach", [])))
    return lines


def carried_over_lines(line_numbers: list[int]) -> list[str]:
    """What a compaction kept byte for byte because Crux reads it and cruxsql cannot represent it."""
    if not line_numbers:
        return []
    shown = ", ".join(map(str, line_numbers[:10])) + (", ..." if len(line_numbers) > 10 else "")
    return [f"carried over     {len(line_numbers)} line(s) Crux reads and cruxsql cannot represent, kept byte "
            f"for byte (old line {shown}; `cruxsql verify` names them)"]


def copy_lines(copies: list[dict[str, Any]]) -> list[str]:
    """One line per copy outside erasure's reach that holds (or may hold) erased content: a WARNING for a
    copy cruxsql recorded (with its date and the rule that applies to it), else NOT VERIFIED."""
    return [f"{'WARNING' if c.get('accounted', True) else 'NOT VERIFIED':<16} {c['kind']} {c['path']}"
            + (f" (taken {c['created_at']})" if c.get("created_at") else "")
            + f" is outside erasure's reach and {c['state']}" + (f": {c['rule']}" if c.get("rule") else "")
            for c in copies]


def verdict(ok: bool, copies: list[dict[str, Any]]) -> str:
    """The last line of an erasure report or `verify --erasure`."""
    if not ok:
        return "ERASURE NOT VERIFIED"
    if copies:
        return (f"erasure verified in the data directory; {len(copies)} recorded cop(ies) outside it still hold "
                "erased content (WARNING above)")
    return "erasure verified"


def hit_line(hit: dict[str, Any]) -> str:
    """`file:offset: fact f_... (value hash ...)` for one place erased content was found."""
    return f"{hit['file']}:{hit['offset']}: fact {hit['fact_id']} ({hit['form']} value hash {hit.get('blake3', '?')})"


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


def tenant_scope(tenant: Optional[str], all_tenants: bool) -> Optional[str]:
    """The tenant an erasure is scoped to (None: every tenant); one of the two must be given."""
    if tenant is None and not all_tenants:
        raise click.UsageError("say which tenant(s): --tenant T, or --all-tenants (reads default to the "
                               "tenant 'default'; an erasure never guesses)")
    if tenant is not None and all_tenants:
        raise click.UsageError("--tenant and --all-tenants exclude each other")
    return tenant


def echo_dry_run(result: dict[str, Any], as_json: bool) -> None:
    """What an erasure would take: facts, documents and copies outside erasure's reach."""
    if as_json:
        echo_json(result)
        return
    click.echo(f"dry run: would erase {len(result['facts']) + len(result['already_deleted'])} fact(s); "
               "nothing changed")
    for fid in result["facts"] + result["already_deleted"]:
        click.echo(f"  fact      {fid}")
    for item in result["held_back"]:
        click.echo(f"  held back {item['fact_id']} (legal hold(s) {','.join(item['hold_ids'])})")
    if result["document_chunks"]:
        click.echo(f"  documents {result['document_chunks']} chunk(s) of the tenant's documents")
    for copy in result["copies_outside_reach"]:
        click.echo(f"  copy      {copy['kind']} {copy['path']}: outside erasure's reach, {copy['state']}")


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
