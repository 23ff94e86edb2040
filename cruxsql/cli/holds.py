"""CLI commands for legal holds: hold place, hold release, hold list, hold override-receipt."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import click

from ..errors import InvalidInput
from ..governance import compaction, legal_holds
from .common import echo_json, echo_rows, fails_cleanly, open_store
from .options import (
    actor_option,
    data_dir_option,
    entity_prefix_option,
    json_flag,
    output_options,
    reason_option,
    tenant_option,
)


@click.group("hold")
def hold_group() -> None:
    """Legal holds: facts they cover are never erased by retention, erase or compaction."""


def _scope(hold: legal_holds.LegalHold) -> str:
    prefixes = ", ".join(repr(p) for p in hold.entity_prefixes)
    return f"tenant {hold.tenant_id!r}" + (f", entity prefixes {prefixes}" if prefixes else " (whole tenant)")


@hold_group.command("place")
@data_dir_option
@tenant_option("The tenant the hold covers.", required=True)
@entity_prefix_option("Only entities starting with this (repeatable; none = the whole tenant).", repeatable=True)
@reason_option("Why the hold exists.", required=True)
@actor_option("Who places it (default: operator).")
@json_flag("Print the hold and its receipt as JSON.")
@fails_cleanly
def hold_place(data_dir: Path, tenant: str, entity_prefixes: tuple[str, ...], reason: str, actor: Optional[str],
               as_json: bool) -> None:
    """Place a legal hold; prints its id and receipt id (--json: the hold and the receipt)."""
    with open_store(data_dir, "start") as store:
        hold, receipt = legal_holds.place_hold(store, tenant, reason, entity_prefixes, actor)
    if as_json:
        echo_json({"hold": hold.to_dict(), "receipt": receipt.to_dict()})
        return
    click.echo(f"placed hold {hold.hold_id} on {_scope(hold)} (receipt {receipt.receipt_id})")


@hold_group.command("release")
@data_dir_option
@click.argument("hold_id")
@tenant_option("Refuse unless the hold is in this tenant.")
@actor_option("Who releases it (default: operator).")
@reason_option("Why (default: the hold's reason).")
@json_flag("Print the released hold and its receipt as JSON.")
@fails_cleanly
def hold_release(data_dir: Path, hold_id: str, tenant: Optional[str], actor: Optional[str], reason: Optional[str],
                 as_json: bool) -> None:
    """Release a hold (two-phase: prepare, store the release receipt durably, store the released state)."""
    with open_store(data_dir, "write") as store:
        if tenant is not None and not any(h.hold_id == hold_id and h.tenant_id == tenant
                                           for h in legal_holds.list_holds(store, False)):
            raise InvalidInput(f"unknown hold id {hold_id!r} in tenant {tenant!r}")
        hold, receipt = legal_holds.release(store, hold_id, actor, reason)
    if as_json:
        echo_json({"hold": hold.to_dict(), "receipt": receipt.to_dict()})
        return
    click.echo(f"released hold {hold.hold_id} on {_scope(hold)} (receipt {receipt.receipt_id})")


@hold_group.command("list")
@data_dir_option
@click.option("--active", "active_only", is_flag=True, help="Only active holds.")
@output_options()
@fails_cleanly
def hold_list(data_dir: Path, active_only: bool, fmt: str) -> None:
    """List holds (resolved from their stored state; unparsable state is enforced fail-closed)."""
    with open_store(data_dir, "read") as store:
        holds = legal_holds.list_holds(store, active_only)
    if fmt == "json":
        echo_json([h.to_dict() for h in holds])
        return
    echo_rows(["hold_id", "tenant_id", "entity_prefixes", "active", "placed_at", "placed_by", "reason"],
              [(h.hold_id, h.tenant_id, ",".join(h.entity_prefixes), h.active, h.to_dict()["placed_at"],
                h.placed_by, h.reason) for h in holds], fmt)


@hold_group.command("override-receipt")
@data_dir_option
@reason_option("Why the holds are overridden.", required=True)
@actor_option("Who overrides (default: operator).")
@fails_cleanly
def hold_override_receipt(data_dir: Path, reason: str, actor: Optional[str]) -> None:
    """Print (as JSON, to review and save) a legal_hold_overridden receipt naming every fact compaction is
    blocked on; nothing is stored.

    Pass the saved file to `compact` / `erase` with --override-receipt; it is stored as a fact then.
    """
    with open_store(data_dir, "read") as store:
        with store.writer_lock():
            store.refresh()
            covered = compaction.blocked_by_holds(store)
    if not covered:
        raise click.ClickException("no deleted fact is covered by an active legal hold; nothing to override")
    echo_json(legal_holds.build_override_receipt(covered, reason, actor).to_dict())


COMMANDS = (hold_group,)
