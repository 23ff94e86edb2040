"""Empty answers explain themselves: when a read, an export or a search finds nothing in the tenant it
looked in, a note on stderr says how many matches other tenants hold (counts only, never their data)
and the `--tenant` that finds them; a tenant, entity or entity prefix that matches nothing anywhere is
said to be so. The exit status stays 0: an empty answer is still an honest one.

Only the CLI, that is the operator, ever sees these notes. The MCP and agent surfaces never call this
module: an agent must not learn what other tenants hold, not even how much.
"""

from __future__ import annotations

import difflib
import shlex
from typing import Callable, Iterable, Optional, Sequence

import click

from ..facts.store import Store

MAX_TENANTS_NAMED = 5
_PAST_EVERY_CHARACTER = "\U0010ffff"   # UTF-8 F4 8F BF BF: above every character's encoding, for prefix ranges


def fact_tenants(store: Store) -> list[str]:
    """Every tenant that holds a fact in the view (deleted ones too)."""
    return [row[0] for row in store.db.execute("SELECT DISTINCT tenant_hash FROM facts ORDER BY tenant_hash")]


def document_tenants(store: Store) -> list[str]:
    """Every tenant that holds an ingested document chunk."""
    return [row[0] for row in store.db.execute("SELECT DISTINCT tenant_id FROM document_chunks ORDER BY tenant_id")]


def count_facts(store: Store, tenant: str, *, entity: Optional[str] = None, key: Optional[str] = None,
                entity_prefixes: Sequence[str] = (), live: bool = False, include_private: bool = True) -> int:
    """How many facts of `tenant` an export or read with these filters would have found."""
    where, args = ["tenant_hash = ?"], [tenant]
    for column, value in (("entity", entity), ("key", key)):
        if value is not None:
            where.append(f"{column} = ?")
            args.append(value)
    if entity_prefixes:
        where.append("(" + " OR ".join("(entity >= ? AND entity < ?)" for _ in entity_prefixes) + ")")
        for prefix in entity_prefixes:
            args += [prefix, prefix + _PAST_EVERY_CHARACTER]
    if live:
        where.append("deleted = 0 AND superseded_by IS NULL")
    if not include_private:
        where.append("private = 0")
    return store.db.execute(f"SELECT count(*) FROM facts WHERE {' AND '.join(where)}", args).get


def explain_empty(what: str, tenant: str, tenants: Sequence[str], count: Callable[[str], int]) -> None:
    """Say on stderr where the `what` the command did not find in `tenant` is: `count(t)` of every other
    tenant t that has any, the largest first; or that `tenant` holds nothing in this store at all."""
    others = sorted(((n, t) for t in tenants if t != tenant for n in [count(t)] if n), key=lambda p: (-p[0], p[1]))
    if others:
        named = ", ".join(f"{n} in tenant {t!r}" for n, t in others[:MAX_TENANTS_NAMED])
        more = f" and {len(others) - MAX_TENANTS_NAMED} more tenant(s)" if len(others) > MAX_TENANTS_NAMED else ""
        unknown = " (which holds nothing in this store)" if tenant not in tenants else ""
        _note(f"no {what} in tenant {tenant!r}{unknown}; {named}{more} (pass --tenant {shlex.quote(others[0][1])})")
    elif tenant not in tenants:
        _note(f"tenant {tenant!r} holds nothing in this store{_did_you_mean(tenant, tenants, '--tenant ')}")


def explain_unknown_entities(store: Store, entities: Iterable[Optional[str]] = (),
                             prefixes: Iterable[Optional[str]] = ()) -> None:
    """Say on stderr which of `entities` no fact of any tenant has, and which `prefixes` no entity starts with."""
    for entity in filter(None, entities):
        if store.db.execute("SELECT 1 FROM facts WHERE entity = ? LIMIT 1", (entity,)).fetchone() is None:
            _note(f"no fact of any tenant has entity {entity!r}")
    for prefix in filter(None, prefixes):
        if not any(count_facts(store, tenant, entity_prefixes=[prefix]) for tenant in fact_tenants(store)):
            _note(f"no entity of any tenant starts with {prefix!r}")


def _did_you_mean(name: str, candidates: Sequence[str], option: str) -> str:
    close = difflib.get_close_matches(name, candidates, n=1, cutoff=0.6)
    return f" (did you mean {option}{shlex.quote(close[0])}?)" if close else ""


def _note(message: str) -> None:
    click.echo(f"note: {message}", err=True)
