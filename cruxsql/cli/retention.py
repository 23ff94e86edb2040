"""CLI commands for retention by age: retention report, retention apply."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import click

from ..governance import compaction, retention
from .common import echo_json, fails_cleanly, open_store, progress_callback
from .erasure_report import blocked_message, echo_dry_run, echo_erasure_outcome
from .options import (
    ERASE_ALL_TENANTS,
    actor_option,
    all_tenants_option,
    data_dir_option,
    dry_run_option,
    json_flag,
    older_than_option,
    reason_option,
    request_id_option,
    tenant_option,
    tenant_scope,
    vacuum_option,
)


@click.group("retention")
def retention_group() -> None:
    """Retention by age: report what would go, then apply."""


@retention_group.command("report")
@data_dir_option
@tenant_option("Only facts of this tenant (default: every tenant, as `retention apply --all-tenants`).")
@all_tenants_option("Every tenant (the default).")
@older_than_option("90d, 12h, 30m, 2w, 45s or an RFC 3339 cutoff.", required=True)
@json_flag("The full report as JSON (with every fact listed).")
@fails_cleanly
def retention_report(data_dir: Path, tenant: Optional[str], all_tenants: bool, older_than: str,
                     as_json: bool) -> None:
    """What `retention apply` would erase, what is protected and why, and the bytes it would reclaim."""
    if tenant is not None and all_tenants:
        raise click.UsageError("--tenant and --all-tenants exclude each other")
    with open_store(data_dir, "read") as store:
        report = retention.retention_report(store, older_than, tenant=tenant)
    if as_json:
        echo_json(report)
        return
    c, b = report["counts"], report["bytes"]
    click.echo(f"tenant                 {'every tenant' if tenant is None else tenant}")
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
@tenant_option("Only facts of this tenant.")
@all_tenants_option(ERASE_ALL_TENANTS)
@older_than_option("90d, 12h, 30m, 2w, 45s or an RFC 3339 cutoff.", required=True)
@actor_option("Who applies it (default: operator).")
@reason_option("Kept in the erasure report (default: retention: older than ...).")
@request_id_option("Request id for the report.")
@vacuum_option("Also VACUUM cruxsql.db.")
@dry_run_option("List what would be erased and change nothing (as `retention report`).")
@json_flag("Print the full erasure report as JSON.")
@fails_cleanly
def retention_apply(data_dir: Path, tenant: Optional[str], all_tenants: bool, older_than: str, actor: Optional[str],
                    reason: Optional[str], request_id: Optional[str], vacuum: bool, dry_run: bool,
                    as_json: bool) -> None:
    """Delete every eligible fact, compact, scrub and verify, and report (exit status as for `erase`).

    --tenant T or --all-tenants is required. With nothing eligible nothing changes: no compaction, no
    report (exit 0: a scheduled run with nothing due is not an error).
    """
    scope = tenant_scope(tenant, all_tenants)
    with open_store(data_dir, "write") as store:
        if dry_run:
            with store.writer_lock():
                store.refresh()
                c = retention.classify(store, retention.parse_cutoff(older_than), scope)
            result = {"dry_run": True, "tenant": scope, "older_than": older_than,
                      "facts": [e["fact_id"] for e in c.eligible], "already_deleted": [], "held_back":
                      [{"fact_id": p["fact_id"], "hold_ids": p["hold_ids"]} for p in c.protected if "hold_ids" in p],
                      "document_chunks": 0, "copies_outside_reach": []}
            echo_dry_run(result, as_json)
            return
        try:
            report = retention.apply(store, older_than, actor=actor, reason=reason, request_id=request_id,
                                     vacuum=vacuum, progress=progress_callback("compacting journal"), tenant=scope)
        except compaction.LegalHoldBlocked as exc:
            raise click.ClickException(blocked_message(exc)) from None
    echo_erasure_outcome(report, as_json)


COMMANDS = (retention_group,)
