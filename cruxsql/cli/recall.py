"""CLI commands of fact recall: query, recall, bootstrap, view. They call only `cruxsql.recall.Recall`."""

from __future__ import annotations

import dataclasses
import functools
import re
from pathlib import Path
from typing import Any, Callable, Optional

import click

from ..embeddings import configured_embedder
from ..errors import InvalidInput
from ..facts import time_phrases
from ..facts.codec import token_cost
from ..recall import bootstrap_seed, scope
from ..recall import explain as recall_explain
from ..recall.facade import QueryResult, Recall
from ..recall.tokens import POINTER_TOKENS
from ..recall.relevance import MAX_TOP_K, default_embedder
from .common import COUNT, echo_json, echo_rows, fails_cleanly, open_store
from .empty_answers import explain_empty, explain_unknown_entities, fact_tenants
from .options import (
    actor_option,
    agent_option,
    confidence_option,
    contract_option,
    create_option,
    data_dir_option,
    entity_option,
    entity_prefix_option,
    offset_option,
    output_options,
    tenant_option,
    token_budget_option,
)

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
    fn = agent_option("Caller identity: sees its own __agent::NAME:: facts under their logical entity.")(fn)
    return tenant_option("Tenant to read (default: 'default').")(fn)


_format_options = output_options(text="Crux's text lines (default).", json_help="The whole structured result as JSON.",
                                 records="facts")


def _echo_structured(result: dict[str, Any], fmt: str, records: str) -> bool:
    """Print `result` for --json, or its `records` list for --table / --nl / --csv; False for --text."""
    if fmt == "json":
        echo_json(result)
    elif fmt != "text":
        rows = result[records]
        if not rows:
            return True
        keys = list(rows[0])
        columns = ["fact_id" if key == "id" else key for key in keys]   # memory_view's Crux payload says `id`
        echo_rows(columns, [[row.get(k) for k in keys] for row in rows], fmt)
    return fmt != "text"


@click.command()
@click.argument("text")
@entity_option("Only facts of this entity (stored, or the caller's logical entity).")
@entity_prefix_option("Only facts whose entity starts with this.")
@_scope_options
@click.option("--top-k", type=COUNT, default=10, show_default=True, help="How many facts without a budget.")
@token_budget_option("Token budget (legacy: greedy drop; crc-v1: full + epitomes).")
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
        if not result.rows:
            explain_empty("matching fact", scope.normalize_tenant(tenant), fact_tenants(store), lambda t: recall.query_facts(
                text, entity=entity, entity_prefix=entity_prefix, tenant=t, agent=agent, top_k=1, as_of=as_of,
                known_at=known_at, include_superseded=include_superseded, contract="legacy",
                record_access=False).matched)
            if agent is None:   # an agent's entities are stored under its __agent:: namespace
                explain_unknown_entities(store, entities=[entity], prefixes=[entity_prefix])
    shown = _within_envelope(result)
    structured = {**result.to_dict(), **({"explain": why} if why else {})}
    if _echo_structured(structured if fmt == "json" else {"rows": shown.records}, fmt, "rows"):
        return
    if why and result.rows:
        reasons = dict(zip((r["fact_id"] for r in result.rows), recall_explain.explain_lines(why)))
        for row, line in zip(shown.rows, shown.lines):
            click.echo(line)
            click.echo(reasons[row["fact_id"]])
    else:
        click.echo("\n".join(shown.lines) if result.rows else result.text())
    summary = (f"-- {len(shown.rows)} of {result.matched} matching fact(s) shown, "
               f"{result.filtered_below_threshold} below the confidence floor, {result.left_out} left out, "
               f"{shown.tokens} tokens")
    if result.crc_v1 is not None or result.compact is not None:
        summary += (f"; crc-v1 envelope: {shown.full} in full, {len(shown.rows) - shown.full} as epitomes, "
                    if result.compact is None else f"; compact: {shown.full} in full, "
                    f"{len(shown.rows) - shown.full} cut, ") + f"{len(result.rows) - len(shown.rows)} dropped"
        if token_budget is not None:
            summary += f" by --token-budget {token_budget}"
    click.echo(summary)
    if why:
        click.echo(recall_explain.left_out_line(why))


@dataclasses.dataclass
class _Shown:
    """What the CLI prints of a query result: the rows the MCP tool's text carries, nothing more."""

    rows: list[dict[str, Any]]
    lines: list[str]
    records: list[dict[str, Any]]
    full: int
    tokens: int


def _within_envelope(result: QueryResult) -> _Shown:
    """The rows a budgeted crc-v1 envelope carries (the MCP tool's text is that envelope): the first in
    full as Crux's lines, the demoted ones as their epitome, the capped ones not at all. Without an
    envelope (legacy contract), every row: the budget already cut them. Below the least envelope, the
    compact answer's lines (recall/facade.py `CompactAnswer`)."""
    if result.compact is not None:
        rows = result.rows[:len(result.compact.lines)]
        whole, cut = result.compact.whole, result.compact.cut_value
        records = [{**r, "shown": "full"} for r in rows[:whole]] + [{**r, "value": cut, "shown": "cut"}
                                                                   for r in rows[whole:]]
        return _Shown(rows, result.text().split("\n"), records, whole, sum(token_cost(r["value"]) for r in rows[:whole]))
    if result.crc_v1 is None:
        return _Shown(result.rows, result.text().split("\n") if result.rows else [], result.rows, len(result.rows),
                      result.total_tokens)
    in_full = {c["id"] for c in result.crc_v1["content"]}
    pointers = {p["id"]: p for p in result.crc_v1["pointers"]}
    rows = [r for r in result.rows if r["fact_id"] in pointers]
    full_rows = [r for r in rows if r["fact_id"] in in_full]
    tiered = len(full_rows) < len(result.rows)
    lines, records = [], []
    for row in rows:
        if row["fact_id"] in in_full:
            lines.append(dataclasses.replace(result, rows=[row]).text())
            records.append({**row, "shown": "full"} if tiered else row)
        else:
            epitome = pointers[row["fact_id"]]["epitome"]
            lines.append(f"~ {epitome} ... (id={row['fact_id']}: an epitome, `cruxsql get {row['fact_id']}` "
                         f"prints the value)")
            records.append({**row, "value": epitome, "shown": "epitome"})
    tokens = sum(token_cost(r["value"]) for r in full_rows) + POINTER_TOKENS * (len(rows) - len(full_rows))
    return _Shown(rows, lines, records, len(full_rows), tokens if tiered else result.total_tokens)


@click.command("recall")
@click.argument("text")
@entity_option("Only facts of this entity (stored, or the caller's logical entity).")
@entity_prefix_option("Only facts whose entity starts with this.")
@click.option("--key", help="Only facts with this key.")
@actor_option("Only facts this actor (agent) wrote.")
@_scope_options
@click.option("--stored-after", metavar="TS", help="Only facts stored at or after TS: RFC 3339, a date (2026-11, "
              "2026-11-03) or a phrase (yesterday, last week, 3 days ago, since monday; the server's zone).")
@click.option("--stored-before", metavar="TS", help="Only facts stored before TS (as --stored-after).")
@click.option("--valid-after", metavar="TS", help="Only facts valid at some time after TS.")
@click.option("--valid-before", metavar="TS", help="Only facts valid at some time before TS.")
@click.option("--as-of", "as_of", metavar="TS", help="Valid time (RFC 3339): facts valid at TS.")
@click.option("--known-at", "known_at", metavar="TS",
              help="Transaction time (RFC 3339): what the store believed at TS.")
@click.option("--include-superseded", is_flag=True, help="Include superseded versions.")
@click.option("--top-k", type=click.IntRange(0, MAX_TOP_K), default=10, show_default=True, help="At most this many facts.")
@offset_option("Skip this many (the next page).")
@token_budget_option("Token budget of the whole answer (default 400).")
@click.option("--fusion", type=click.Choice(("auto", "bm25", "rrf", "weighted")), default="auto", show_default=True,
              help="Fuse BM25 with the fact embeddings: auto = weighted with a real model (the [semantic] extra "
                   "or CRUXSQL_EMBEDDER=minilm), else bm25.")
@click.option("--explain", is_flag=True, help="Per fact: the BM25 score, the concepts it holds and misses, its "
              "dense cosine and ranks; and the fusion used.")
@_format_options
@data_dir_option
@fails_cleanly
@_option_names
def recall_command(text: str, entity: Optional[str], entity_prefix: Optional[str], key: Optional[str],
                   actor: Optional[str], tenant: Optional[str], agent: Optional[str], stored_after: Optional[str],
                   stored_before: Optional[str], valid_after: Optional[str], valid_before: Optional[str],
                   as_of: Optional[str], known_at: Optional[str], include_superseded: bool, top_k: int, offset: int,
                   token_budget: Optional[int], fusion: str, explain: bool, fmt: str, data_dir: Path) -> None:
    """Facts most relevant to TEXT, best first, one line each (entity · key: value · age · id).

    \b
    Ranked by BM25 over the facts' words (entity, key and value weighted 3:2:1; stopwords,
    punctuation and plurals ignored; names such as payments-api or "Maria Okafor" matched whole).
    Facts holding every query word come first; nothing comes back when nothing is relevant.
      "exact phrase"   the words adjacent, in this order
      -word            leave out facts holding the word
    Unlike `query` (Crux's query_facts: any word as a substring, ranked by confidence), this ranks
    by relevance. `+N more (offset=K)` says how to ask for the next page.
    """
    given = {"stored_after": stored_after, "stored_before": stored_before, "valid_after": valid_after,
             "valid_before": valid_before, "as_of": as_of, "known_at": known_at}
    times = time_phrases.resolve_all({f"--{name.replace('_', '-')}": value for name, value in given.items()})
    echoed = time_phrases.echo_line(times)
    if echoed:
        click.echo(echoed, err=True)       # what a phrase was read as (the server's zone)
    with open_store(data_dir, "read") as store:
        result = Recall(store).search(
            text, entity=entity, entity_prefix=entity_prefix, key=key, actor=actor, tenant=tenant, agent=agent,
            **{name[2:].replace("-", "_"): r.ns for name, r in times.items()}, include_superseded=include_superseded,
            top_k=top_k, offset=offset, token_budget=token_budget, fusion=fusion,
            embedder=None if fusion == "bm25" else default_embedder(), explain=explain)
    if result.unembedded:
        click.echo(f"{result.unembedded} facts have no vectors yet (ranked by BM25 alone): `cruxsql embed --facts` "
                   "or the MCP server's indexer fills them", err=True)
    if _echo_structured(result.to_dict(), fmt, "facts"):
        return
    click.echo(result.text())
    if explain and result.explain is not None:
        echo_json({k: v for k, v in result.explain.items()})


@click.command()
@click.option("--topic", help="doc, pattern, resolution, tool-output, or any other topic.")
@click.option("--query", "query_text", metavar="TEXT",
              help="Rank bootstrap facts by TEXT: 0.6·cosine + 0.4·confidence with an embedder "
                   "(CRUXSQL_EMBEDDER), else only facts matching TEXT.")
@token_budget_option("Token budget (greedy fill; the first fact always fits).")
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
        if not result.facts:
            explain_empty("bootstrap fact", scope.normalize_tenant(tenant), fact_tenants(store),
                          lambda t: Recall(store).get_bootstrap(topic, query_text, tenant=t, agent=agent).matched)
    if _echo_structured(result.to_dict(), fmt, "facts"):
        return
    click.echo(result.text())
    click.echo(f"-- {len(result.facts)} of {result.matched} bootstrap fact(s) shown, {result.left_out} left out, "
               f"{result.total_tokens} tokens")


@click.command()
@entity_option("Only facts of this (visible) entity.")
@click.option("--key", help="Only facts with this key.")
@click.option("--top-k", type=COUNT, default=20, show_default=True, help="At most this many facts (min 1).")
@token_budget_option("Token budget.", default=2000)
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
        if not result.facts:
            explain_empty("visible fact", scope.normalize_tenant(tenant), fact_tenants(store),
                          lambda t: Recall(store).memory_view(entity, key, 1, None, tenant=t, agent=agent).matched)
            if agent is None:
                explain_unknown_entities(store, entities=[entity])
        successors = _successors(store, [f["id"] for f in result.facts])
    marked = dataclasses.replace(result, facts=[{**f, "superseded_by": successors.get(f["id"])} for f in result.facts])
    if _echo_structured(marked.to_dict(), fmt, "facts"):
        return
    if not result.facts:
        click.echo(result.text())
    for fact in result.facts:   # memory_view's line; its ` [superseded]` marker names the successor here
        successor = successors.get(fact["id"])
        line = dataclasses.replace(result, facts=[fact]).text()
        click.echo(line.removesuffix(" [superseded]") + f" [superseded by {successor}]" if successor else line)
    more = "+" if result.capped else ""
    click.echo(f"-- {len(result.facts)} of {result.matched}{more} visible fact(s) shown, {result.left_out}{more} left "
               f"out, {result.total_tokens} tokens")


def _successors(store: Any, fact_ids: list[str]) -> dict[str, str]:
    """fact_id -> the fact that superseded it, for the superseded ones among `fact_ids`."""
    marks = ",".join("?" * len(fact_ids))
    return dict(store.db.execute(f"SELECT fact_id, superseded_by FROM facts WHERE fact_id IN ({marks}) "
                                 f"AND superseded_by IS NOT NULL", fact_ids)) if fact_ids else {}


@click.command("bootstrap-seed")
@click.argument("topic")
@click.argument("name")
@click.argument("key")
@click.argument("value")
@tenant_option("Tenant the knowledge belongs to.", default="default")
@confidence_option()
@actor_option("Who seeded it.")
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


COMMANDS = (query, recall_command, bootstrap, view, bootstrap_seed_command)
