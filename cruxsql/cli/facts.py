"""CLI commands of the fact substrate: init, store, store-batch, get, history, delete, supersede,
clear-supersede, set-validity, set-horizon, reverify, sql, verify, rebuild."""

from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path
from typing import Optional

import click

from ..documents.lane import DocumentLane
from ..errors import InvalidInput
from ..facts import json_input, timestamps
from ..facts.codec import HORIZON_CLASSES, Fact, format_f32
from ..facts.store import StoreRequest
from ..facts.view_file import DB_NAME
from ..governance.erasure_proof import verify_erasure
from .common import echo_json, echo_rows, fails_cleanly, open_store, progress_callback, require_value
from .empty_answers import count_facts, explain_empty, explain_unknown_entities, fact_tenants
from .erasure_report import copy_lines, hit_line, verdict
from .options import (
    actor_option,
    confidence_option,
    data_dir_option,
    idempotency_key_option,
    json_flag,
    output_options,
    private_option,
    tenant_option,
)


def _timestamp(option: str, text: Optional[str]) -> Optional[int]:
    if text is None:
        return None
    try:
        return timestamps.parse_ns(text)
    except InvalidInput as exc:
        raise InvalidInput(f"{option}: {exc}") from None


def _fact_status(fact: Fact) -> str:
    if fact.deleted:
        return "deleted"
    return f"superseded by {fact.superseded_by}" if fact.superseded_by else "current"


@click.command()
@data_dir_option
@fails_cleanly
def init(data_dir: Path) -> None:
    """Create (or open) a data directory and bring its view up to date.

    A directory holding only a facts.jsonl written by a Crux daemon opens as it is.
    """
    with open_store(data_dir, "create") as store:
        counts = store.counts()
    click.echo(f"{data_dir}: {counts['journal_events']} journal events, {counts['facts']} facts "
               f"({counts['live_facts']} live) in {data_dir / DB_NAME}")


@click.command()
@click.argument("entity")
@click.argument("key")
@click.argument("value")
@tenant_option("Tenant (tenant_hash) of the fact.", default="default")
@confidence_option()
@click.option("--source-receipt", help="Receipt id the fact came from.")
@private_option("Mark the fact private (born-private prefixes are always private).")
@click.option("--horizon", type=click.Choice(HORIZON_CLASSES), help="Freshness horizon (default: by entity prefix).")
@actor_option("Who stored it.")
@json_flag("Print the whole stored fact as JSON.")
@idempotency_key_option()
@data_dir_option
@fails_cleanly
def store(entity: str, key: str, value: str, tenant: str, confidence: float, source_receipt: Optional[str],
          private: bool, horizon: Optional[str], actor: Optional[str], as_json: bool, idempotency_key: Optional[str],
          data_dir: Path) -> None:
    """Store VALUE as the newest version of (ENTITY, KEY).

    Prints the new fact's id and version; a previous version is marked superseded.
    """
    with open_store(data_dir, "start") as s:
        fact = s.store(entity, key, value, tenant=tenant, confidence=confidence, source_receipt=source_receipt,
                       private=private, horizon_class=horizon, actor=actor, idempotency_key=idempotency_key)
    if as_json:
        echo_json(fact.to_dict())
        return
    note = f", supersedes {fact.supersedes}" if fact.supersedes else ""
    click.echo(f"{fact.fact_id} version {fact.version}{note}")


@click.command("store-batch")
@click.argument("file", type=click.File("rb"))
@tenant_option("Tenant of every line: a line without tenant_hash is stored in it, a line naming another is "
               "refused (default: each line's tenant_hash, else 'default').")
@json_flag("Print the stored facts as a JSON array.")
@idempotency_key_option()
@data_dir_option
@fails_cleanly
def store_batch(file, tenant: Optional[str], as_json: bool, idempotency_key: Optional[str], data_dir: Path) -> None:
    """Store every request of FILE (JSONL, `-` for stdin) as one store_batch event.

    Each line is an object with the StoreFact keys: entity, key, value (required), tenant_hash,
    source_receipt, confidence, private, horizon_class, actor. Nothing is stored if any line is bad.
    Lines for the same (entity, key) become successive versions, in file order.
    """
    name = getattr(file, "name", "<stdin>")  # stdin's buffer is named "<stdin>" (or not at all)
    source = "stdin" if name == "<stdin>" else name
    requests = [_batch_request(line, tenant) for line in json_input.read_lines(file, source)]
    if not requests:
        raise InvalidInput("no store requests in the input")
    with open_store(data_dir, "start") as s:
        facts = s.store_batch(requests, idempotency_key=idempotency_key)
    if as_json:
        echo_json([f.to_dict() for f in facts])
        return
    for fact in facts:
        click.echo(f"{fact.fact_id} version {fact.version}")


def _batch_request(line: json_input.InputLine, tenant: Optional[str]) -> StoreRequest:
    """A store-batch line as a request, in `tenant` when the operator named one."""
    request = StoreRequest.from_obj(line.value, where=line.where)
    if tenant is None:
        return request
    named = line.value.get("tenant_hash")
    if named and named != tenant:
        raise InvalidInput(f"{line.where}: tenant_hash {named!r} is not --tenant {tenant!r}")
    return dataclasses.replace(request, tenant_hash=tenant)


@click.command()
@click.argument("fact_id")
@data_dir_option
@fails_cleanly
def get(fact_id: str, data_dir: Path) -> None:
    """Print one fact (deleted ones too) as its journal JSON."""
    with open_store(data_dir, "read") as s:
        click.echo(s.get(fact_id).to_json())


@click.command()
@click.argument("entity")
@click.argument("key")
@tenant_option("Tenant of the fact.", default="default")
@output_options()
@data_dir_option
@fails_cleanly
def history(entity: str, key: str, tenant: str, fmt: str, data_dir: Path) -> None:
    """Every version of (ENTITY, KEY), oldest first, with its status."""
    with open_store(data_dir, "read") as s:
        facts = s.history(entity, key, tenant=tenant)
        if not facts:
            explain_empty(f"version of ({entity}, {key})", tenant, fact_tenants(s),
                          lambda t: count_facts(s, t, entity=entity, key=key))
            explain_unknown_entities(s, entities=[entity])
    columns = ("version", "fact_id", "stored_at", "value", "confidence", "status")
    echo_rows(columns, [(f.version, f.fact_id, timestamps.format_fact_time(f.stored_at), f.value,
                         float(format_f32(f.confidence)), _fact_status(f)) for f in facts], fmt)


@click.command()
@click.argument("fact_id")
@tenant_option("Refuse unless the fact is in this tenant.")
@idempotency_key_option()
@data_dir_option
@fails_cleanly
def delete(fact_id: str, tenant: Optional[str], idempotency_key: Optional[str], data_dir: Path) -> None:
    """Mark a fact deleted (its text leaves the journal at the next compaction)."""
    with open_store(data_dir, "write") as s:
        s.delete(fact_id, tenant=tenant, idempotency_key=idempotency_key)
    click.echo(f"deleted {fact_id}")


@click.command()
@click.argument("fact_id")
@click.option("--by", "by_fact_id", required=True, callback=require_value, help="The fact that supersedes FACT_ID.")
@tenant_option("Refuse unless both facts are in this tenant.")
@data_dir_option
@fails_cleanly
def supersede(fact_id: str, by_fact_id: str, tenant: Optional[str], data_dir: Path) -> None:
    """Mark FACT_ID as superseded by another fact of the same tenant."""
    with open_store(data_dir, "write") as s:
        s.supersede(fact_id, by_fact_id, tenant=tenant)
    click.echo(f"{fact_id} superseded by {by_fact_id}")


@click.command("clear-supersede")
@click.argument("fact_id")
@tenant_option("Refuse unless the fact is in this tenant.")
@data_dir_option
@fails_cleanly
def clear_supersede(fact_id: str, tenant: Optional[str], data_dir: Path) -> None:
    """Make a superseded fact current again."""
    with open_store(data_dir, "write") as s:
        s.clear_supersede(fact_id, tenant=tenant)
    click.echo(f"{fact_id} is no longer superseded")


@click.command("set-validity")
@click.argument("fact_id")
@click.option("--from", "valid_from", metavar="TS", help="Valid from (RFC 3339, inclusive); omit for open.")
@click.option("--to", "valid_to", metavar="TS", help="Valid until (RFC 3339, exclusive); omit for open.")
@tenant_option("Refuse unless the fact is in this tenant.")
@data_dir_option
@fails_cleanly
def set_validity(fact_id: str, valid_from: Optional[str], valid_to: Optional[str], tenant: Optional[str],
                 data_dir: Path) -> None:
    """Set the valid-time interval [--from, --to) of a fact; omitting both clears it."""
    start, end = _timestamp("--from", valid_from), _timestamp("--to", valid_to)
    with open_store(data_dir, "write") as s:
        s.set_validity(fact_id, start, end, tenant=tenant)
        fact = s.get(fact_id)
    span = (f"{timestamps.format_fact_time(fact.valid_from) if fact.valid_from is not None else '-inf'} .. "
            f"{timestamps.format_fact_time(fact.valid_to) if fact.valid_to is not None else '+inf'}")
    click.echo(f"{fact_id} valid {span}")


@click.command("set-horizon")
@click.argument("fact_id")
@click.argument("horizon_class", metavar="CLASS")
@tenant_option("Refuse unless the fact is in this tenant.")
@data_dir_option
@fails_cleanly
def set_horizon(fact_id: str, horizon_class: str, tenant: Optional[str], data_dir: Path) -> None:
    """Set a fact's freshness horizon: volatile, medium, stable or none (journaled)."""
    with open_store(data_dir, "write") as s:
        s.set_horizon(fact_id, horizon_class, tenant=tenant)
        fact = s.get(fact_id)
    click.echo(f"{fact_id} horizon {fact.horizon_class}")


@click.command()
@click.argument("fact_id")
@tenant_option("Refuse unless the fact is in this tenant.")
@data_dir_option
@fails_cleanly
def reverify(fact_id: str, tenant: Optional[str], data_dir: Path) -> None:
    """Record that a fact was re-verified now (journaled; resets its freshness clock)."""
    with open_store(data_dir, "write") as s:
        fact = s.reverify(fact_id, tenant=tenant)
    assert fact.reverified_at is not None     # reverify() sets it
    click.echo(f"{fact_id} reverified at {timestamps.format_fact_time(fact.reverified_at)}")


@click.command()
@click.option("--strict", is_flag=True,
              help="Exit 1 on corrupt lines, quarantined tails, a view mismatch or a segment problem.")
@click.option("--erasure", is_flag=True,
              help="Instead: scan every file of the data directory for content erasure reports say is gone.")
@click.option("--cluster", "fleet", is_flag=True,
              help="With --erasure on a cluster node: collect every running node's proof of its own directory.")
@json_flag("Print the report as JSON.")
@data_dir_option
@fails_cleanly
def verify(strict: bool, erasure: bool, fleet: bool, as_json: bool, data_dir: Path) -> None:
    """Check the journal, the segments and the view: events by op, corrupt lines (with line numbers),
    quarantined torn tails, whether the view equals a fresh replay of the journal, and every segment
    against its manifest checksum.

    With --erasure, scan every file of the data directory for the content erased facts had, using only
    the hashes the erasure reports keep; exits 1 on any hit or a broken report chain. With --cluster too
    (on a cluster node's directory), every running node answers with that proof for its own directory;
    exits 1 unless each node the registry shows up answered with a clean one.
    """
    if fleet:
        if not erasure:
            raise click.UsageError("--cluster goes with --erasure")
        _verify_fleet_erasure(data_dir, as_json)
        return
    if erasure:
        with open_store(data_dir, "read") as s:
            result = verify_erasure(s)
        _echo_erasure_verification(result, as_json)
        if not result["ok"]:
            sys.exit(1)
        return
    with open_store(data_dir, "read") as s:
        report = s.verify()
        segment_problems = DocumentLane(s).verify()
    ok = report.ok and not segment_problems
    if as_json:
        echo_json({**report.to_dict(), "segment_problems": segment_problems, "ok": ok})
    else:
        ops = ", ".join(f"{op} {n}" for op, n in report.events_by_op.items()) or "none"
        click.echo(f"events: {ops}")
        click.echo(f"skipped by replay rules: {len(report.skipped_events)}")
        for ev in report.skipped_events[:20]:
            click.echo(f"  line {ev['line_no']}: {ev['op']} {ev['fact_id']}: {ev['reason']}")
        if report.tombstones:
            click.echo(f"tombstones of compacted-away facts: {report.tombstones}")
        click.echo(f"corrupt lines: {len(report.corrupt_lines)}")
        for c in report.corrupt_lines:
            click.echo(f"  line {c['line_no']} (byte {c['byte_offset']}): {c['reason']}")
        click.echo(f"quarantined torn tails: {len(report.quarantined_tails)}")
        for name in report.quarantined_tails:
            click.echo(f"  {name}")
        click.echo("view matches a fresh replay: " + ("yes" if report.view_matches_replay else "NO"))
        for d in report.differences:
            click.echo(f"  {d}")
        click.echo(f"segment problems: {len(segment_problems)}")
        for problem in segment_problems:
            click.echo(f"  {problem}")
    if strict and not ok:
        sys.exit(1)


def _verify_fleet_erasure(data_dir: Path, as_json: bool) -> None:
    from ..cluster.config import read_config
    from ..cluster.proofs import collect_erasure_proofs
    config = read_config(data_dir) if data_dir.is_dir() else None
    if config is None:
        raise click.UsageError(f"--cluster: {data_dir} is not a cluster node's directory (no cluster.json)")
    result = collect_erasure_proofs(config)
    if as_json:
        echo_json(result)
    else:
        for node, proof in sorted(result["nodes"].items()):
            state = "erasure verified" if proof["ok"] else "ERASURE NOT VERIFIED"
            click.echo(f"node {node}: {state} ({proof.get('files_scanned', 0)} files scanned, "
                       f"{len(proof.get('hits', []))} hits, {proof['reports']} reports)")
        for node in result["missing"]:
            click.echo(f"node {node}: did not answer")
        click.echo("erasure verified on every node" if result["ok"] else "ERASURE NOT VERIFIED ON EVERY NODE")
    if not result["ok"]:
        sys.exit(1)


def _echo_erasure_verification(result: dict, as_json: bool) -> None:
    if as_json:
        echo_json(result)
        return
    click.echo(f"erasure reports: {result['reports']} (chain {'intact' if result['chain_ok'] else 'BROKEN'})")
    for error in result["chain_errors"]:
        click.echo(f"  {error}")
    hits = result.get("hits", [])
    click.echo(f"files scanned: {result.get('files_scanned', 0)}; erased content found: {len(hits)}")
    for hit in hits[:50]:
        click.echo(f"  {hit_line(hit)}")
    for rid in result.get("ledger_only_reports", []):
        click.echo(f"  erasure {rid}: its report is no longer in the journal (a restore); scanned from the ledger")
    for rid in result.get("interrupted_erasures", []):
        click.echo(f"  erasure {rid} was interrupted and is not complete (the next write completes it)")
    if result.get("erasure_running"):
        click.echo("  an erasure is running in another process: its report is not stored yet, and not checked here")
    for line in copy_lines(result.get("outside_reach", [])):
        click.echo(f"  {line}")
    click.echo(verdict(result["ok"], result.get("outside_reach", [])))


@click.command()
@data_dir_option
@fails_cleanly
def rebuild(data_dir: Path) -> None:
    """Recreate cruxsql.db from the files alone: the fact tables from facts.jsonl, the document
    lane from segments/."""
    started = time.perf_counter()
    with open_store(data_dir, "write") as s:
        # An open that found no usable view has just rebuilt it from the journal: once is enough.
        stats = s.last_replay if s.last_replay.rebuilt else s.rebuild(progress=progress_callback("rebuilding facts"))
        segments = DocumentLane(s).rebuild(progress=progress_callback("re-indexing segments"))
    secs = time.perf_counter() - started
    click.echo(f"rebuilt from {stats.events} events ({stats.applied} applied, {stats.skipped} skipped by replay "
               f"rules, {len(stats.corrupt)} corrupt lines) and {segments} segments in {secs:.2f}s")


COMMANDS = (init, store, store_batch, get, history, delete, supersede, clear_supersede, set_validity, set_horizon,
            reverify, verify, rebuild)
