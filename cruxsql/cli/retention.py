"""CLI commands for retention: compact, erase, hold, retention, export audit."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import click

from ..errors import InvalidInput
from ..governance import audit_export, compaction, erasure, legal_holds, retention
from .common import (
    data_dir_option,
    echo_json,
    echo_rows,
    fails_cleanly,
    open_store,
    output_format_options,
    progress_callback,
)


def _load_receipt(path: Optional[Path]) -> Optional[legal_holds.LegalHoldReceipt]:
    if path is None:
        return None
    try:
        text = sys.stdin.read() if str(path) == "-" else Path(path).read_text(encoding="utf-8")
        obj = json.loads(text)
    except (OSError, ValueError) as exc:
        raise InvalidInput(f"cannot read the override receipt {str(path)!r}: {exc}") from None
    return legal_holds.LegalHoldReceipt.from_obj(obj)


def _blocked_message(exc: compaction.LegalHoldBlocked) -> str:
    lines = [str(exc)]
    for fid, holds in exc.covered[:20]:
        lines.append(f"  {fid}: {','.join(holds)}")
    if len(exc.covered) > 20:
        lines.append(f"  ... and {len(exc.covered) - 20} more")
    lines.append("Build a receipt for review with `cruxsql hold override-receipt --reason R`, then pass it "
                 "with --override-receipt FILE.")
    return "\n".join(lines)


_receipt_option = click.option(
    "--override-receipt", type=click.Path(dir_okay=False, path_type=Path), default=None,
    help="A legal_hold_overridden receipt (JSON file, or - for stdin) naming every blocked fact and hold.")


def register(group: click.Group) -> None:
    """Add compact, erase, hold, retention and export to the main group."""

    @group.command("compact")
    @data_dir_option
    @_receipt_option
    @click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
    @fails_cleanly
    def compact_cmd(data_dir: Path, override_receipt: Optional[Path], as_json: bool) -> None:
        """Rewrite facts.jsonl without deleted facts' content (crash-atomic).

        Live facts are kept byte-identical, deleted ones become value-free tombstones. Refused while an
        active legal hold covers a deleted fact, unless --override-receipt names every blocked fact and hold.
        """
        receipt = _load_receipt(override_receipt)
        with open_store(data_dir) as store:
            try:
                report = compaction.compact(store, override_receipt=receipt,
                                            progress=progress_callback("compacting journal"))
            except compaction.LegalHoldBlocked as exc:
                raise click.ClickException(_blocked_message(exc)) from None
        if as_json:
            echo_json(report.to_dict())
            return
        d = report.to_dict()
        for name in ("facts_dropped", "facts_retained", "tombstones_kept", "supersede_lines", "provenance_lines",
                     "corrupt_lines_dropped", "lines_before", "lines_after", "bytes_before", "bytes_after",
                     "override_receipt_id", "seconds"):
            if d[name] is not None:
                click.echo(f"{name:24} {d[name]}")

    @group.command("erase")
    @data_dir_option
    @click.option("--tenant", default=None, help="Only facts of this tenant.")
    @click.option("--entity-prefix", "entity_prefixes", multiple=True, help="Only entities starting with this (repeatable).")
    @click.option("--fact-id", "fact_ids", multiple=True, help="Only these fact ids (repeatable).")
    @click.option("--older-than", default=None, help="Only facts stored before: 90d, 12h, ... or an RFC 3339 time.")
    @click.option("--reason", required=True, help="Why (e.g. the data-subject request); kept in the report.")
    @click.option("--actor", default=None, help="Who runs the erasure (default: operator).")
    @click.option("--request-id", default=None, help="Request id for the report (default: er_<random>).")
    @click.option("--documents", is_flag=True, help="Also erase the tenant's ingested documents (needs --tenant).")
    @click.option("--vacuum", is_flag=True, help="Also VACUUM cruxsql.db (secure_delete already zeroes freed content).")
    @_receipt_option
    @fails_cleanly
    def erase_cmd(data_dir: Path, tenant: Optional[str], entity_prefixes: tuple[str, ...], fact_ids: tuple[str, ...],
                  older_than: Optional[str], reason: str, actor: Optional[str], request_id: Optional[str],
                  documents: bool, vacuum: bool, override_receipt: Optional[Path]) -> None:
        """Delete the selected facts, compact, scrub every copy, verify, and print the erasure report.

        Criteria combine (all must match). Facts an active legal hold covers are held back and listed.
        Exits with status 1 when the verification scan still finds erased content or a copy could not be
        scrubbed (the report says which).
        """
        selection = erasure.Selection(tenant=tenant, entity_prefixes=entity_prefixes, fact_ids=fact_ids,
                                      older_than=older_than)
        receipt = _load_receipt(override_receipt)
        with open_store(data_dir) as store:
            try:
                report = erasure.erase(store, selection, actor=actor, reason=reason, request_id=request_id,
                                       override_receipt=receipt, documents=documents, vacuum=vacuum,
                                       progress=progress_callback("compacting journal"))
            except compaction.LegalHoldBlocked as exc:
                raise click.ClickException(_blocked_message(exc)) from None
        echo_json(report)
        if not report["ok"]:
            raise SystemExit(1)

    # --- holds ---------------------------------------------------------------------------------

    @group.group("hold")
    def hold_group() -> None:
        """Legal holds: facts they cover are never erased by retention, erase or compaction."""

    @hold_group.command("place")
    @data_dir_option
    @click.option("--tenant", required=True, help="The tenant the hold covers.")
    @click.option("--entity-prefix", "entity_prefixes", multiple=True,
                  help="Only entities starting with this (repeatable; none = the whole tenant).")
    @click.option("--reason", required=True, help="Why the hold exists.")
    @click.option("--actor", default=None, help="Who places it (default: operator).")
    @fails_cleanly
    def hold_place(data_dir: Path, tenant: str, entity_prefixes: tuple[str, ...], reason: str,
                   actor: Optional[str]) -> None:
        """Place a legal hold; prints the hold and its receipt."""
        with open_store(data_dir) as store:
            hold, receipt = legal_holds.place_hold(store, tenant, reason, entity_prefixes, actor)
        echo_json({"hold": hold.to_dict(), "receipt": receipt.to_dict()})

    @hold_group.command("release")
    @data_dir_option
    @click.argument("hold_id")
    @click.option("--actor", default=None, help="Who releases it (default: operator).")
    @click.option("--reason", default=None, help="Why (default: the hold's reason).")
    @fails_cleanly
    def hold_release(data_dir: Path, hold_id: str, actor: Optional[str], reason: Optional[str]) -> None:
        """Release a hold (two-phase: prepare, store the release receipt durably, store the released state)."""
        with open_store(data_dir) as store:
            hold, receipt = legal_holds.release(store, hold_id, actor, reason)
        echo_json({"hold": hold.to_dict(), "receipt": receipt.to_dict()})

    @hold_group.command("list")
    @data_dir_option
    @click.option("--active", "active_only", is_flag=True, help="Only active holds.")
    @output_format_options
    @fails_cleanly
    def hold_list(data_dir: Path, active_only: bool, fmt: str) -> None:
        """List holds (resolved from their stored state; unparsable state is enforced fail-closed)."""
        with open_store(data_dir) as store:
            holds = legal_holds.list_holds(store, active_only)
        if fmt == "json":
            echo_json([h.to_dict() for h in holds])
            return
        echo_rows(["hold_id", "tenant_id", "entity_prefixes", "active", "placed_at", "placed_by", "reason"],
                  [(h.hold_id, h.tenant_id, ",".join(h.entity_prefixes), h.active, h.to_dict()["placed_at"],
                    h.placed_by, h.reason) for h in holds], fmt)

    @hold_group.command("override-receipt")
    @data_dir_option
    @click.option("--reason", required=True, help="Why the holds are overridden.")
    @click.option("--actor", default=None, help="Who overrides (default: operator).")
    @fails_cleanly
    def hold_override_receipt(data_dir: Path, reason: str, actor: Optional[str]) -> None:
        """Print a legal_hold_overridden receipt naming every fact compaction is blocked on (nothing is stored).

        Review it, then pass it to `compact` / `erase` with --override-receipt; it is stored as a fact then.
        """
        with open_store(data_dir) as store:
            with store.writer_lock():
                store.refresh()
                covered = compaction.blocked_by_holds(store)
        if not covered:
            raise click.ClickException("no deleted fact is covered by an active legal hold; nothing to override")
        echo_json(legal_holds.build_override_receipt(covered, reason, actor).to_dict())

    # --- retention -----------------------------------------------------------------------------

    @group.group("retention")
    def retention_group() -> None:
        """Retention by age: report what would go, then apply."""

    @retention_group.command("report")
    @data_dir_option
    @click.option("--older-than", required=True, help="90d, 12h, 30m, 2w, 45s or an RFC 3339 cutoff.")
    @click.option("--json", "as_json", is_flag=True, help="The full report as JSON (with every fact listed).")
    @fails_cleanly
    def retention_report_cmd(data_dir: Path, older_than: str, as_json: bool) -> None:
        """What `retention apply` would erase, what is protected and why, and the bytes it would reclaim."""
        with open_store(data_dir) as store:
            report = retention.retention_report(store, older_than)
        if as_json:
            echo_json(report)
            return
        c, b = report["counts"], report["bytes"]
        click.echo(f"cutoff                 {report['cutoff']} (older than {older_than})")
        click.echo(f"eligible               {c['eligible']} facts, {b['eligible_value_bytes']} value bytes")
        click.echo(f"protected              {c['protected']}")
        for why, n in sorted(c["protected_by_reason"].items()):
            click.echo(f"  {why:20} {n}")
        click.echo(f"awaiting compaction    {c['already_deleted_awaiting_compaction']} deleted facts")
        click.echo(f"journal bytes          {b['journal_now']} now, ~{b['journal_after_apply_estimate']} after apply "
                   f"(~{b['reclaimable_estimate']} reclaimable)")
        click.echo(f"active holds           {len(report['holds'])}")
        if report["next_due"]:
            click.echo(f"next fact due          {report['next_due']}")

    @retention_group.command("apply")
    @data_dir_option
    @click.option("--older-than", required=True, help="90d, 12h, 30m, 2w, 45s or an RFC 3339 cutoff.")
    @click.option("--actor", default=None, help="Who applies it (default: operator).")
    @click.option("--reason", default=None, help="Kept in the erasure report (default: retention: older than ...).")
    @click.option("--request-id", default=None, help="Request id for the report.")
    @click.option("--vacuum", is_flag=True, help="Also VACUUM cruxsql.db.")
    @fails_cleanly
    def retention_apply_cmd(data_dir: Path, older_than: str, actor: Optional[str], reason: Optional[str],
                            request_id: Optional[str], vacuum: bool) -> None:
        """Delete every eligible fact, compact, scrub and verify; prints the erasure report."""
        with open_store(data_dir) as store:
            try:
                report = retention.apply(store, older_than, actor=actor, reason=reason, request_id=request_id,
                                         vacuum=vacuum, progress=progress_callback("compacting journal"))
            except compaction.LegalHoldBlocked as exc:
                raise click.ClickException(_blocked_message(exc)) from None
        echo_json(report)
        if not report["ok"]:
            raise SystemExit(1)

    # --- export --------------------------------------------------------------------------------

    @group.group("export")
    def export_group() -> None:
        """Exports for auditors."""

    @export_group.command("audit")
    @data_dir_option
    @click.option("--tenant", default=None, help="Only facts of this tenant.")
    @click.option("--entity-prefix", "entity_prefixes", multiple=True, help="Only entities starting with this (repeatable).")
    @click.option("--since", default=None, help="Events at or after: RFC 3339, or a duration ago (7d).")
    @click.option("--until", default=None, help="Events at or before: RFC 3339, or a duration ago.")
    @click.option("--format", "fmt", type=click.Choice(audit_export.FORMATS), required=True)
    @click.option("--output", type=click.Path(dir_okay=False, path_type=Path), required=True)
    @click.option("--include-private", is_flag=True, help="Include private facts (left out by default).")
    @fails_cleanly
    def export_audit_cmd(data_dir: Path, tenant: Optional[str], entity_prefixes: tuple[str, ...], since: Optional[str],
                         until: Optional[str], fmt: str, output: Path, include_private: bool) -> None:
        """Every journal event that touched the selection, in order, with the fact state it produced."""
        query = audit_export.AuditQuery(tenant=tenant, entity_prefixes=entity_prefixes, since=since, until=until,
                                        include_private=include_private)
        with open_store(data_dir) as store:
            summary = audit_export.export_audit(store, query, fmt, output)
        echo_json(summary.to_dict())
