"""`cruxsql relate` and `cruxsql related`: relations between entities, stored as facts
(cruxsql/recall/relations.py), as the MCP tools `relate` and `related` do."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import click

from ..recall import relations
from .common import echo_json, fails_cleanly, open_store
from .options import agent_option, data_dir_option, json_flag, tenant_option, token_budget_option


@click.command()
@click.argument("source", metavar="FROM")
@click.argument("relation")
@click.argument("target", metavar="TO")
@tenant_option("Tenant of the relation (default: default).", default="default")
@data_dir_option
@fails_cleanly
def relate(source: str, relation: str, target: str, tenant: str, data_dir: Path) -> None:
    """Record that entity FROM has RELATION to entity TO (e.g. `payments-api uses postgres`): the fact
    (FROM, relation:RELATION:TO, TO). Relating it again stores its next version; delete it by its id."""
    with open_store(data_dir, "start") as store:
        fact = relations.relate(store, source, relation, target, tenant=tenant)
    click.echo(f"{source} -[{relation}]-> {target} · {fact.fact_id}")


@click.command()
@click.argument("entity")
@click.option("--depth", type=click.IntRange(1, relations.MAX_DEPTH), default=1, show_default=True,
              help="Follow relations this many hops (both directions).")
@token_budget_option("Token budget of the answer (the nearest relations first).")
@agent_option("The caller (its own private facts visible).")
@tenant_option("Tenant to read (default: default).", default="default")
@json_flag("Print the neighbourhood as JSON (entity, depth, edges, left_out).")
@data_dir_option
@fails_cleanly
def related(entity: str, depth: int, token_budget: Optional[int], agent: Optional[str], tenant: str, as_json: bool,
            data_dir: Path) -> None:
    """ENTITY's relations in both directions, up to --depth hops: one `from -[relation]-> to · id` per line."""
    with open_store(data_dir, "read") as store:
        found = relations.related(store, entity, depth=depth, tenant=tenant, agent=agent, token_budget=token_budget)
    if as_json:
        echo_json(found.to_json())
    else:
        click.echo(found.text())


COMMANDS = (relate, related)
