"""What an erasure targets: the selection (tenant, entity prefixes, fact ids, older than) and the plan made
from it under the writer lock, which leaves out the governance records and what an active legal hold
covers (erasure.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional

import blake3

from ..errors import InvalidInput
from ..facts import timestamps
from ..recall.relations import PREFIX as RELATION
from . import legal_holds
from .erasure_proof import ERASURE_REPORT_PREFIX

if TYPE_CHECKING:
    from ..facts.store import Store

GOVERNANCE_PREFIXES = (legal_holds.LEGAL_HOLD_ENTITY_PREFIX, legal_holds.LEGAL_HOLD_RECEIPT_ENTITY_PREFIX,
                       ERASURE_REPORT_PREFIX)


@dataclass
class Selection:
    """Which facts an erasure targets: every given criterion must match (fact ids: any of them)."""

    tenant: Optional[str] = None
    entity_prefixes: tuple[str, ...] = ()
    fact_ids: tuple[str, ...] = ()
    older_than: Optional[str] = None
    cutoff_ns: Optional[int] = None

    def __post_init__(self) -> None:
        self.entity_prefixes = tuple(p for p in (self.entity_prefixes or ()) if p)
        self.fact_ids = tuple(f.strip() for f in (self.fact_ids or ()) if f and f.strip())
        if self.tenant is not None and not self.tenant.strip():
            raise InvalidInput("--tenant must not be empty")
        if self.older_than is not None and self.cutoff_ns is None:
            from .durations import parse_cutoff
            self.cutoff_ns = parse_cutoff(self.older_than)

    def is_empty(self) -> bool:
        return self.tenant is None and not self.entity_prefixes and not self.fact_ids and self.cutoff_ns is None

    def where(self) -> tuple[str, list]:
        clauses: list[str] = []
        params: list[Any] = []
        if self.tenant is not None:
            clauses.append("tenant_hash = ?")
            params.append(self.tenant)
        if self.entity_prefixes:     # the entities' facts, and the relations of others naming them as target
            named = " OR ".join("substr({0}, 1, ?) = ?" for _ in self.entity_prefixes)
            clauses.append(f"({named.format('entity')} OR (key GLOB '{RELATION}*' AND ({named.format('value')})))")
            params += [x for p in self.entity_prefixes for x in (len(p), p)] * 2
        if self.fact_ids:
            clauses.append("fact_id IN (" + ",".join("?" * len(self.fact_ids)) + ")")
            params += list(self.fact_ids)
        if self.cutoff_ns is not None:
            clauses.append("stored_at_ns < ?")
            params.append(self.cutoff_ns)
        return " AND ".join(clauses) or "1", params

    def to_report(self) -> dict[str, Any]:
        """The selection as the report keeps it: entity prefixes only as hashes (they may name a person)."""
        return {
            "tenant": self.tenant,
            "entity_prefixes": [{"blake3": blake3.blake3(p.encode()).hexdigest(), "bytes": len(p.encode())}
                                for p in self.entity_prefixes],
            "fact_ids": list(self.fact_ids),
            "older_than": self.older_than,
            "cutoff": None if self.cutoff_ns is None else timestamps.format_fact_time(self.cutoff_ns),
        }


def _governance(entity: str) -> bool:
    return entity.startswith(GOVERNANCE_PREFIXES)


@dataclass
class Plan:
    """What an erasure will delete, and what it leaves and why."""

    to_delete: list[str] = field(default_factory=list)
    already_deleted: list[str] = field(default_factory=list)
    held_back: list[dict[str, Any]] = field(default_factory=list)
    protected: list[dict[str, Any]] = field(default_factory=list)


def plan_selection(store: Store, selection: Selection) -> Plan:
    """Classify the facts a selection matches (the caller holds the writer lock, view caught up)."""
    if selection.is_empty():
        raise InvalidInput("an erasure needs a selection: --tenant, --entity-prefix, --fact-id or --older-than")
    holds = legal_holds.active_holds(store.db)
    where, params = selection.where()
    plan = Plan()
    for fid, tenant, entity, key, value, deleted in store.db.execute(
            f"SELECT fact_id, tenant_hash, entity, key, value, deleted FROM facts WHERE {where} ORDER BY fact_id",
            params):
        if _governance(entity):
            plan.protected.append({"fact_id": fid, "reason": "governance record (legal hold, receipt or report)"})
            continue
        hold_ids = legal_holds.covering_holds(holds, tenant, entity, key, value)
        if hold_ids:
            plan.held_back.append({"fact_id": fid, "hold_ids": hold_ids})
        elif deleted:
            plan.already_deleted.append(fid)
        else:
            plan.to_delete.append(fid)
    return plan
