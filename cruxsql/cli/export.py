"""CLI exports: `export audit` for auditors, `export facts` for other tools."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import click

from ..governance import audit_export
from ..interchange import facts_export, mcp_memory
from .common import fails_cleanly, open_store, require_value, resolved_times
from .empty_answers import count_facts, explain_empty, explain_unknown_entities, fact_tenants
from .options import data_dir_option, entity_prefix_option, json_flag, since_option, tenant_option


@click.group("export")
def export_group() -> None:
    """Exports: the audit trail for auditors, live facts for other tools."""


@export_group.command("audit")
@data_dir_option
@tenant_option("Only facts of this tenant.")
@entity_prefix_option("Only entities starting with this (repeatable).", repeatable=True)
@since_option("Events at or after WHEN: RFC 3339, a date (2026-11), a duration ago (7d) or a phrase (last week).")
@click.option("--until", default=None, metavar="WHEN", help="Events at or before WHEN (as --since).")
@click.option("--format", "fmt", type=click.Choice(audit_export.FORMATS), required=True,
              callback=require_value)
@click.option("--output", type=click.Path(path_type=Path, allow_dash=True), required=True,
              callback=require_value,
              help="The file to write (its directory must exist), or - for stdout (jsonl, csv; the summary "
                   "goes to stderr then).")
@click.option("--include-private", is_flag=True, help="Include private facts (left out by default).")
@json_flag("Print the export summary as JSON.")
@fails_cleanly
def export_audit(data_dir: Path, tenant: Optional[str], entity_prefixes: tuple[str, ...], since: Optional[str],
                 until: Optional[str], fmt: str, output: Path, include_private: bool, as_json: bool) -> None:
    """Every journal event that touched the selection, in order, with the fact state it produced.

    An export written inside the data directory is recorded there, so an erasure re-writes it.
    """
    times = resolved_times({"--since": since, "--until": until})     # recorded resolved: a re-write keeps them
    query = audit_export.AuditQuery(tenant=tenant, entity_prefixes=entity_prefixes, since=times["--since"],
                                    until=times["--until"], include_private=include_private)
    to_stdout = str(output) == "-"
    with open_store(data_dir, "read") as store:
        if to_stdout:
            summary = audit_export.export_audit_stream(store, query, fmt, sys.stdout)
        else:
            summary = audit_export.export_audit(store, query, fmt, output, record=not store.read_only)
        if summary.events == 0:
            if tenant is not None:
                explain_empty("fact of the selection", tenant, fact_tenants(store), lambda t: count_facts(
                    store, t, entity_prefixes=query.entity_prefixes, include_private=include_private))
            explain_unknown_entities(store, prefixes=query.entity_prefixes)
    if as_json:
        click.echo(json.dumps(summary.to_dict(), ensure_ascii=False, indent=2), err=to_stdout)
        return
    if to_stdout:
        click.echo(f"wrote {summary.events} event(s) to stdout", err=True)
        return
    if summary.outside_data_dir:
        recorded_so = "it is recorded, and erasure reports and `verify --erasure` name it while it holds erased " \
            "values" if summary.recorded_in_manifest else "and it is not recorded (the data directory is read-only)"
        click.echo(f"warning: {summary.path} is outside the data directory, out of erasure's reach: an erasure "
                   f"cannot rewrite it; {recorded_so}", err=True)
    recorded = " (recorded for erasure)" if summary.recorded_in_manifest else ""
    click.echo(f"wrote {summary.events} event(s), {summary.bytes_written} bytes, to {summary.path}{recorded}")


@export_group.command("facts")
@data_dir_option
@tenant_option("Only facts of this tenant (default: all).")
@click.option("--format", "fmt", type=click.Choice(["jsonl", "mcp-memory"]), default="jsonl", show_default=True,
              help="jsonl: StoreFact lines (`cruxsql store-batch` reads them); mcp-memory: the MCP memory "
                   "server's knowledge graph.")
@click.option("--include-private", is_flag=True, help="Include private facts (left out by default).")
@fails_cleanly
def export_facts(data_dir: Path, tenant: Optional[str], fmt: str, include_private: bool) -> None:
    """Print the live facts (neither deleted nor superseded) for another tool to import, to stdout.

    Nothing is written into the data directory: where the output goes is the operator's pipe.
    """
    with open_store(data_dir, "read") as store:
        facts = list(facts_export.live_facts(store, tenant, include_private))
        if not facts and tenant is not None:
            explain_empty("live fact", tenant, fact_tenants(store),
                          lambda t: count_facts(store, t, live=True, include_private=include_private))
    lines = (facts_export.store_request_line(f) for f in facts) if fmt == "jsonl" else mcp_memory.export_lines(facts)
    for line in lines:
        click.echo(line)


COMMANDS = (export_group,)
