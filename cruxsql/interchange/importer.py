"""Importing requests idempotently: what is already live is skipped, the rest is stored in batches."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from ..facts.store import Store, StoreRequest

BATCH = 1000


@dataclass
class ImportPlan:
    to_store: list[StoreRequest] = field(default_factory=list)
    unchanged: int = 0
    duplicates_in_input: int = 0


def plan(store: Store, requests: Iterable[StoreRequest]) -> ImportPlan:
    """Split requests into those to store and those a live fact already holds (same value)."""
    out = ImportPlan()
    seen: set[tuple] = set()
    for req in requests:
        ident = (req.tenant_hash, req.entity, req.key, req.value)
        if ident in seen:
            out.duplicates_in_input += 1
            continue
        seen.add(ident)
        live = store.db.execute(
            "SELECT 1 FROM facts WHERE tenant_hash = ? AND entity = ? AND key = ? AND value = ? AND deleted = 0 "
            "AND superseded_by IS NULL LIMIT 1", (req.tenant_hash, req.entity, req.key, req.value)).fetchone()
        if live:
            out.unchanged += 1
        else:
            out.to_store.append(req)
    return out


def apply(store: Store, import_plan: ImportPlan) -> list[str]:
    """Store the planned requests, one journal append per batch; returns the new fact ids."""
    ids: list[str] = []
    for i in range(0, len(import_plan.to_store), BATCH):
        ids += [f.fact_id for f in store.store_batch(import_plan.to_store[i:i + BATCH])]
    return ids
