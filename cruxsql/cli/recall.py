"""CLI commands of fact recall: query, bootstrap, view. They call only `cruxsql.recall.Recall`."""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any, Callable, Optional

import click

from ..embeddings import configured_embedder
from ..errors import InvalidInput
from ..recall import bootstrap_seed
from ..recall import explain as recall_explain
from ..recall.queries import Recall
from .common import (
    COUNT,
    contract_option,
    data_dir_option,
    echo_json,
    echo_rows,
    fails_cleanly,
    open_store,
    reject_empty,
)
from .data_dir import create_option

_ARG_NAME = re.compile(r"^([a-z_]+) must")


def _option_names(fn: Callable) -> Callable:
    """Name the CLI option (`--token-budget`) rather than the API argument in input errors."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except InvalidInput as exc:
            message = _ARG_NAME.sub(lambda m: "--" + m.group(1).replace("_", "-") + " must", str(exc), count=1)
            raise InvalidInput(message) from None

    return wrapper


def _scope_options(fn: Callable) -> Callable:
    fn = click.option("--agent", metavar="NAME", callback=reject_empty,
                      help="Caller identity: sees its own __agent::NAME:: facts under their logical entity.")(fn)
    fn = click.option("--tenant", callback=reject_empty, help="Tenant to read (default: 'default').")(fn)
    return fn


def _format_options(fn: Callable) -> Callable:
    """`--text` (Crux's lines, default), `--json` (the whole result), `--nl` / `--csv` (the facts)."""
    fn = click.option("--csv", "fmt", flag_value="csv", help="The facts as CSV (booleans as 0/1).")(fn)
    fn = click.option("--nl", "fmt", flag_value="nl", help="The facts as JSON lines.")(fn)
    fn = click.option("--json", "fmt", flag_value="json", help="The whole structured result as JSON.")(fn)
    fn = click.option("--text", "fmt", flag_value="text", default=True, help="Crux's text lines (default).")(fn)
    return fn


def _echo_structured(result: dict[str, Any], fmt: str, records: str) -> bool:
    """Print `result` for --json, or its `records` list for --nl / --csv; False for --text."""
    if fmt == "json":
        echo_json(result)
    elif fmt in ("nl", "csv"):
        rows = result[records]
        if not rows:
            return True
        keys = list(rows[0])
        columns = ["fact_id" if key == "id" else key for key in keys]   # memory_view's Crux payload says `id`
        echo_rows(columns, [[row.get(k) for k in keys] for row in rows], fmt)
    return fmt != "text"


@click.command()
@click.argument("text")
@click.option("--entity", help="Only facts of this entity (stored, or the caller's logical entity).")
@click.option("--entity-prefix", help="Only facts whose entity starts with this.")
@_scope_options
@click.option("--top-k", type=COUNT, default=10, show_default=True, help="How many facts without a budget.")
@click.option("--token-budget", type=COUNT, help="Token budget (legacy: greedy drop; crc-v1: full + epitomes).")
@click.option("--min-effective-confidence", type=float, help="Floor on effective confidence, 0.0 to 1.0.")
@click.option("--as-of", "as_of", metavar="TS", help="Valid time (RFC 3339): facts valid at TS.")
@click.option("--known-at", "known_at", metavar="TS",
              help="Transaction time (RFC 3339): what the store believed at TS.")
@click.option("--include-superseded", is_flag=True, help="Include superseded versions.")
@contract_option
@click.option("--explain", is_flag=True, help="Say per row which term matched which field and how its effective "
              "confidence was reached, and why other matching facts were left out.")
@_format_options
@data_dir_option
@fails_cleanly
@_option_names
def query(text: str, entity: Optional[str], entity_prefix: Optional[str], tenant: Optional[str],
          agent: Optional[str], top_k: int, token_budget: Optional[int], min_effective_confidence: Optional[float],
          as_of: Optional[str], known_at: Optional[str], include_superseded: bool, contract: str, explain: bool,
          fmt: str, data_dir: Path) -> None:
    """Recall facts matching TEXT (Crux query_facts).

    A fact matches when any whitespace-separated, lowercased term of TEXT is a substring of its
    lowercased value, key or entity. Facts are ranked by effective confidence (halved when stale),
    then newest first.
    """
    with open_store(data_dir, "read") as store:
        recall = Recall(store)
        result = recall.query_facts(
            text, entity=entity, entity_prefix=entity_prefix, tenant=tenant, agent=agent, top_k=top_k,
            token_budget=token_budget, min_effective_confidence=min_effective_confidence, as_of=as_of,
            known_at=known_at, include_superseded=include_superseded, contract=contract)
        why = recall_explain.explain(recall, result, text, tenant=tenant, agent=agent, entity=entity,
                                     entity_prefix=entity_prefix, as_of=result.as_of, known_at=known_at,
                                     include_superseded=include_superseded) if explain else None
    if _echo_structured({**result.to_dict(), **({"explain": why} if why else {})}, fmt, "rows"):
        return
    if why and result.rows:
        for line, reason in zip(result.text().split("\n"), recall_explain.explain_lines(why)):
            click.echo(line)
            click.echo(reason)
    else:
        click.echo(result.text())
    summary = (f"-- {len(result.rows)} of {result.matched} matching fact(s) shown, "
               f"{result.filtered_below_threshold} below the confidence floor, {result.left_out} left out, "
               f"{result.total_tokens} tokens")
    if result.crc_v1 is not None:
        meta = result.crc_v1["meta"]
        full = len(result.crc_v1["content"])
        summary += (f"; crc-v1 envelope: {full} in full, {meta.get('demoted', 0)} as epitomes, "
                    f"{meta.get('capped', 0)} dropped")
    click.echo(summary)
    if why:
        click.echo(recall_explain.left_out_line(why))


@click.command()
@click.option("--topic", help="doc, pattern, resolution, tool-output, or any other topic.")
@click.option("--query", "query_text", metavar="TEXT",
              help="Rank bootstrap facts by TEXT: 0.6·cosine + 0.4·confidence with an embedder "
                   "(CRUXSQL_EMBEDDER), else only facts matching TEXT.")
@click.option("--token-budget", type=COUNT, help="Token budget (greedy fill; the first fact always fits).")
@_scope_options
@_format_options
@data_dir_option
@fails_cleanly
@_option_names
def bootstrap(topic: Optional[str], query_text: Optional[str], token_budget: Optional[int], tenant: Optional[str],
              agent: Optional[str], fmt: str, data_dir: Path) -> None:
    """Bootstrap knowledge under __bootstrap__::<topic>: (Crux get_bootstrap, budget honoured).

    \b
    TOPIC aliases (trimmed, ASCII case-insensitive):
      doc, docs                                -> doc
      pattern, patterns                        -> pattern
      error, errors, resolution, resolutions   -> resolution
      tool, tool-output, tool-outputs          -> tool-output (adds the CRC-v1 schema catalogue)
    Any other topic is used as given (trimmed); a blank topic matches nothing; no topic reads all.
    """
    with open_store(data_dir, "read") as store:
        result = Recall(store, embedder=configured_embedder()).get_bootstrap(
            topic, query_text, token_budget, tenant=tenant, agent=agent)
    if _echo_structured(result.to_dict(), fmt, "facts"):
        return
    click.echo(result.text())
    click.echo(f"-- {len(result.facts)} of {result.matched} bootstrap fact(s) shown, {result.left_out} left out, "
               f"{result.total_tokens} tokens")


@click.command()
@click.option("--entity", help="Only facts of this (visible) entity.")
@click.option("--key", help="Only facts with this key.")
@click.option("--top-k", type=COUNT, default=20, show_default=True, help="At most this many facts (min 1).")
@click.option("--token-budget", type=COUNT, default=2000, show_default=True, help="Token budget.")
@_scope_options
@_format_options
@data_dir_option
@fails_cleanly
@_option_names
def view(entity: Optional[str], key: Optional[str], top_k: int, token_budget: int, tenant: Optional[str],
         agent: Optional[str], fmt: str, data_dir: Path) -> None:
    """The memory panel (Crux memory_view): newest visible facts first, superseded included."""
    with open_store(data_dir, "read") as store:
        result = Recall(store).memory_view(entity, key, top_k, token_budget, tenant=tenant, agent=agent)
    if _echo_structured(result.to_dict(), fmt, "facts"):
        return
    click.echo(result.text())
    more = "+" if result.capped else ""
    click.echo(f"-- {len(result.facts)} of {result.matched}{more} visible fact(s) shown, {result.left_out}{more} left "
               f"out, {result.total_tokens} tokens")


@click.command("bootstrap-seed")
@click.argument("topic")
@click.argument("name")
@click.argument("key")
@click.argument("value")
@click.option("--tenant", default="default", show_default=True, callback=reject_empty,
              help="Tenant the knowledge belongs to.")
@click.option("--confidence", type=float, default=1.0, show_default=True, help="Confidence, 0.0 to 1.0.")
@click.option("--actor", help="Who seeded it.")
@data_dir_option
@create_option
@fails_cleanly
def bootstrap_seed_command(topic: str, name: str, key: str, value: str, tenant: str, confidence: float,
                           actor: Optional[str], data_dir: Path, create: bool) -> None:
    """Operator: seed bootstrap knowledge as __bootstrap__::<topic>:<name> / KEY.

    The namespace is daemon-owned: `cruxsql store` refuses it, this is its one writer. TOPIC is
    normalised like `cruxsql bootstrap --topic` (errors -> resolution, docs -> doc, ...).
    """
    with open_store(data_dir, "create" if create else "write") as store:
        fact = bootstrap_seed.seed(store, topic, name, key, value, tenant=tenant, confidence=confidence,
                                   actor=actor)
    click.echo(f"{fact.fact_id} {fact.entity} version {fact.version}")


COMMANDS = (query, bootstrap, view, bootstrap_seed_command)


def register(group: click.Group) -> None:
    """Add the recall commands to the main group."""
    for command in COMMANDS:
        group.add_command(command)
