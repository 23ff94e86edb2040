"""Live facts in a portable form: StoreFact JSON lines (`cruxsql store-batch` reads them back)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Iterator, Optional

from ..facts.codec import Fact, format_f32
from ..facts.view import FACT_SELECT, fact_from_row

if TYPE_CHECKING:
    from ..facts.store import Store


def live_facts(store: Store, tenant: Optional[str] = None, include_private: bool = False) -> Iterator[Fact]:
    """Live facts (neither deleted nor superseded) in (tenant, entity, key) order, so exports diff cleanly."""
    sql = f"SELECT {FACT_SELECT} FROM facts WHERE deleted = 0 AND superseded_by IS NULL"
    args: list = []
    if tenant is not None:
        sql += " AND tenant_hash = ?"
        args.append(tenant)
    if not include_private:
        sql += " AND private = 0"
    for row in store.db.execute(sql + " ORDER BY tenant_hash, entity, key, stored_at_ns, fact_id", args):
        yield fact_from_row(row)


def store_request_line(fact: Fact) -> str:
    return json.dumps({"entity": fact.entity, "key": fact.key, "value": fact.value, "tenant_hash": fact.tenant_hash,
                       "source_receipt": fact.source_receipt, "confidence": float(format_f32(fact.confidence)),
                       "private": fact.private, "horizon_class": fact.horizon_class, "actor": fact.actor},
                      ensure_ascii=False)
