"""How an erasure's outcome reads on a terminal, for `erase`, `compact`, `retention apply` and
`verify --erasure`: the report's summary and exit status, a dry run, a refusal by legal holds, and the
copies outside erasure's reach."""

from __future__ import annotations

import sys
from typing import Any

import click

from ..governance import compaction
from .common import HELD_BACK_EXIT, echo_json


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
