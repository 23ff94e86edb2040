"""`cruxsql import mcp-memory|mem0 FILE`: bring an existing memory along."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable, Iterable

import click

from ..facts import json_input
from ..facts.store import StoreRequest
from ..interchange import importer, mcp_memory, mem0
from .common import echo_json, fails_cleanly, open_store
from .options import create_option, data_dir_option, dry_run_option, json_flag, private_option, tenant_option


def _read(file: str) -> tuple[bytes, str]:
    """(bytes, source name) of FILE, `-` for stdin (decoded by `facts/json_input.py`, which names a bad line)."""
    if file == "-":
        return sys.stdin.buffer.read(), "stdin"
    path = Path(file)
    try:
        return path.read_bytes(), path.name
    except FileNotFoundError:
        raise click.ClickException(f"no such file: {file}") from None
    except IsADirectoryError:
        raise click.ClickException(f"{file} is a directory, not a file") from None


def _run(parse: Callable[[bytes, str], Iterable[StoreRequest]], file: str, dry_run: bool, as_json: bool,
         data_dir: Path, create: bool) -> None:
    data, source = _read(file)
    requests = list(parse(data, source))
    with open_store(data_dir, "create" if create else "read" if dry_run else "write") as store:
        with store.writer_lock():
            store.refresh()
            plan = importer.plan(store, requests)
            ids = [] if dry_run else importer.apply(store, plan)
    summary = {"source": source, "dry_run": dry_run, "read": len(requests), "to_store": len(plan.to_store),
               "stored": len(ids), "already_present": plan.unchanged,
               "duplicates_in_input": plan.duplicates_in_input}
    if as_json:
        echo_json({**summary, "facts": [{"entity": r.entity, "key": r.key, "value": r.value,
                                         "tenant_hash": r.tenant_hash, "source_receipt": r.source_receipt}
                                        for r in plan.to_store] if dry_run else ids})
        return
    if dry_run:
        for r in plan.to_store:
            click.echo(f"would store [{r.entity}] {r.key} = {r.value}")
        click.echo(f"-- dry run: {len(plan.to_store)} to store, {plan.unchanged} already present, "
                   f"{plan.duplicates_in_input} duplicate(s) in the input; nothing written")
    else:
        click.echo(f"stored {len(ids)} fact(s) from {source}; {plan.unchanged} already present, "
                   f"{plan.duplicates_in_input} duplicate(s) in the input")


def _options(fn: Callable) -> Callable:
    fn = json_flag("Print the summary (and, with --dry-run, the facts) as JSON.")(fn)
    fn = dry_run_option("Print what would be stored; write nothing.")(fn)
    fn = private_option("Store every imported fact as private.")(fn)
    fn = tenant_option("Tenant of the imported facts.", default="default")(fn)
    return create_option(data_dir_option(fn))


@click.group("import")
def import_group() -> None:
    """Import another memory store's export as facts (idempotent: run it twice, store once)."""


@import_group.command("mcp-memory")
@click.argument("file")
@_options
@fails_cleanly
def import_mcp_memory(file: str, tenant: str, private: bool, dry_run: bool, as_json: bool, data_dir: Path,
                      create: bool) -> None:
    """Import the MCP reference memory server's memory.jsonl (entities, observations, relations).

    Entity NAME of type T becomes (NAME, entity_type, T); each observation becomes
    (NAME, observation:<hash>, text); a relation A -R-> B becomes (A, relation:R:B, B).
    """
    _run(lambda data, source: mcp_memory.parse(json_input.split_lines(data), source, tenant, private), file, dry_run, as_json,
         data_dir, create)


@import_group.command("mem0")
@click.argument("file")
@_options
@fails_cleanly
def import_mem0(file: str, tenant: str, private: bool, dry_run: bool, as_json: bool, data_dir: Path,
                create: bool) -> None:
    """Import a mem0 JSON export (`results` list of {id, memory, user_id, agent_id, ...}).

    Each memory becomes (user:<user_id> | agent:<agent_id> | run:<run_id> | mem0, memory:<id>, text)
    with source_receipt mem0:<id>.
    """
    _run(lambda data, source: mem0.parse(data, source, tenant, private), file, dry_run, as_json, data_dir, create)


COMMANDS = (import_group,)
