"""CLI commands of curation: `curate contradictions|disagreements|duplicates`, `consolidate`, `consolidate undo`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import click

from ..curation import consolidation as cons
from ..curation.contradictions import contradiction_candidates_v1
from ..curation.disagreements import REASONS, disagreements
from ..curation.duplicates import LEXICAL_THRESHOLD, lexical_duplicates
from ..governance.durations import parse_duration_ns
from .common import echo_json, echo_rows, fails_cleanly, open_store, progress_callback, require_value
from .options import (
    actor_option,
    confidence_option,
    data_dir_option,
    entity_option,
    json_flag,
    limit_option,
    output_options,
    tenant_option,
)

_TENANT = tenant_option("Tenant to read or write.", default="default")


def _flat(value: Any) -> Any:
    return json.dumps(value, ensure_ascii=False) if isinstance(value, (list, dict)) else value


def _emit(rows: list[dict[str, Any]], columns: list[str], fmt: str, empty: str) -> None:
    if fmt in ("json", "nl"):
        echo_rows(list(rows[0]) if rows else columns, ([r[c] for c in r] for r in rows), fmt)
    elif not rows and fmt == "table":
        click.echo(empty)
    else:
        echo_rows(columns, ([_flat(r.get(c)) for c in columns] for r in rows), fmt)


@click.group()
def curate() -> None:
    """Find contradictions, disagreements and duplicates (read-only, advisory).

    Nothing is changed: candidates are recomputed from the view on every call and never journaled.
    Resolve one with `cruxsql consolidate`.
    """


@curate.command()
@_TENANT
@limit_option("At most N candidates (0: all).", default=0)
@output_options()
@data_dir_option
@fails_cleanly
def contradictions(tenant: str, limit: int, fmt: str, data_dir: Path) -> None:
    """Crux's contradiction candidates: live, shared facts of one (entity, key) whose whole values
    have opposite polarity ("true" / "false", "enabled" / "disabled", ...; 27 words)."""
    with open_store(data_dir, "read") as store:
        rows = [c.to_dict() for c in contradiction_candidates_v1(store.db, tenant, limit)]
    _emit(rows, ["entity", "key", "reason", "polarity_a", "polarity_b", "fact_ids", "values"], fmt,
          "no contradiction candidates")


@curate.command(name="disagreements")
@_TENANT
@click.option("--reason", "reasons", multiple=True, type=click.Choice(REASONS),
              help="Only these detectors (repeatable; default all).")
@click.option("--window", default="24h", show_default=True, metavar="DURATION",
              help="actor_flip_flop: the longest gap between the two versions (e.g. 90m, 24h, 7d).")
@output_options()
@data_dir_option
@fails_cleanly
def disagreements_cmd(tenant: str, reasons: tuple[str, ...], window: str, fmt: str, data_dir: Path) -> None:
    """Beyond Crux: numeric disagreements ("3" / "7"), opposite polarity inside short phrases
    ("deployed to prod" / "not deployed"), and agents overwriting each other's values (flip-flops)."""
    window_ns = parse_duration_ns(window)
    with open_store(data_dir, "read") as store:
        rows = [f.to_dict() for f in disagreements(store.db, tenant, window_ns, set(reasons) or None)]
    _emit(rows, ["reason", "entity", "key", "confidence", "fact_ids", "values", "evidence"], fmt,
          "no disagreements found")


@curate.command()
@_TENANT
@entity_option("Only this entity.")
@click.option("--threshold", type=float, default=LEXICAL_THRESHOLD, show_default=True,
              help="Least Jaccard similarity of the normalised values' 4-gram shingles, in (0, 1].")
@output_options()
@data_dir_option
@fails_cleanly
def duplicates(tenant: str, entity: Optional[str], threshold: float, fmt: str, data_dir: Path) -> None:
    """Near-duplicate facts inside one entity, across its keys (lexical: MinHash, verified exactly).

    Advisory review candidates: nothing is merged or dropped."""
    with open_store(data_dir, "read") as store:
        pairs = lexical_duplicates(store.db, tenant, threshold, entity,
                                   progress=progress_callback("finding near-duplicates"))
    _emit([p.to_dict() for p in pairs], ["entity", "reason", "similarity", "confidence", "fact_ids", "keys", "values"],
          fmt, "no duplicate candidates")


class _ApplyByDefault(click.Group):
    """`consolidate ARGS` runs `consolidate apply ARGS`; `consolidate undo ...` runs undo."""

    def resolve_command(self, ctx: click.Context, args: list[str]):
        if args and args[0] in self.commands:
            return super().resolve_command(ctx, args)
        return "apply", self.commands["apply"], args


@click.group(cls=_ApplyByDefault, context_settings={"ignore_unknown_options": True})
def consolidate() -> None:
    """Replace the live versions of one (entity, key) with a canonical fact, reversibly.

    `cruxsql consolidate ENTITY KEY VALUE --target ID...` (same as `consolidate apply ...`);
    `cruxsql consolidate undo CANONICAL_ID --source ID...`.
    """


def _echo_report(report: dict[str, Any], as_json: bool, text: str) -> None:
    if as_json:
        echo_json(report)
    else:
        click.echo(text)


@consolidate.command()
@click.argument("entity")
@click.argument("key")
@click.argument("canonical_value")
@click.option("--target", "targets", multiple=True, required=True, callback=require_value, metavar="FACT_ID",
              help="A fact to consolidate (repeatable; every live version of the chain must be named).")
@click.option("--protect", "protected", multiple=True, metavar="FACT_ID", help="Refuse if this fact is a target.")
@click.option("--id", "consolidation_id", help="Consolidation id (default: mcp-<uuid>); receipt consolidation:<id>.")
@confidence_option("The canonical's confidence.")
@click.option("--floor", "floor", type=float, default=cons.DEFAULT_CONFIDENCE_FLOOR, show_default=True,
              help="Targets at or above this confidence are protected.")
@click.option("--horizon", "horizon_class", help="volatile, medium, stable or none (default: by entity).")
@actor_option("Who consolidates (stored as the canonical's actor).")
@_TENANT
@json_flag("Print the report as JSON.")
@data_dir_option
@fails_cleanly
def apply(entity: str, key: str, canonical_value: str, targets: tuple[str, ...], protected: tuple[str, ...],
          consolidation_id: Optional[str], confidence: float, floor: float, horizon_class: Optional[str],
          actor: Optional[str], tenant: str, as_json: bool, data_dir: Path) -> None:
    """Consolidate TARGETs of ENTITY/KEY into CANONICAL_VALUE (Crux consolidate_facts_v1).

    Every guard runs before anything is written; then one `consolidate` line is appended."""
    req = cons.ConsolidationRequest(
        consolidation_id=consolidation_id if consolidation_id is not None else cons.new_consolidation_id(),
        entity=entity, key=key, canonical_value=canonical_value, target_fact_ids=list(targets),
        protected_fact_ids=list(protected), confidence=confidence, actor=actor, horizon_class=horizon_class,
        protected_confidence_floor=floor)
    with open_store(data_dir, "write") as store:
        report = cons.consolidate_facts_v1(store, req, tenant)
    r = report["receipt"]
    _echo_report(report, as_json, f"{r['canonical_fact_id']} consolidated {len(targets)} target(s) "
                                  f"(receipt consolidation:{r['consolidation_id']}, {r['canonical_hash']})")


@consolidate.command()
@click.argument("canonical_fact_id")
@click.option("--source", "sources", multiple=True, required=True, callback=require_value, metavar="FACT_ID",
              help="A source of the consolidation (repeatable; the exact set is required).")
@_TENANT
@json_flag("Print the report as JSON.")
@data_dir_option
@fails_cleanly
def undo(canonical_fact_id: str, sources: tuple[str, ...], tenant: str, as_json: bool, data_dir: Path) -> None:
    """Undo a consolidation: delete CANONICAL_FACT_ID and make its sources live again (Crux
    consolidate_undo_v1). Undoing twice reports already_undone and writes nothing."""
    with open_store(data_dir, "write") as store:
        report = cons.consolidate_undo_v1(store, canonical_fact_id, list(sources), tenant)
    restored = ", ".join(report["restored_fact_ids"]) or "nothing"
    _echo_report(report, as_json, f"{report['status']}: {canonical_fact_id} (restored {restored})")


COMMANDS = (curate, consolidate)
