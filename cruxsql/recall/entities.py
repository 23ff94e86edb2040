"""`list_entities`: the entity names a caller can see in its tenant (crux-mcp/src/tools/facts.rs)."""

from __future__ import annotations

from typing import Optional

from ..facts.store import Store
from . import scope


def list_entities(store: Store, tenant: Optional[str] = None, agent: Optional[str] = None) -> list[str]:
    """Visible entities of the tenant's non-deleted facts (superseded ones count), deduplicated and sorted
    by code point (= UTF-8 byte) order: other agents' private facts and born-private facts are hidden;
    the caller's own private facts appear under their logical names."""
    store.refresh()
    names = set()
    for entity, private in store.db.execute(
            "SELECT DISTINCT entity, private FROM facts WHERE tenant_hash = ? AND deleted = 0",
            (scope.normalize_tenant(tenant),)):
        visible = scope.visible_entity(entity, bool(private), scope.normalize_agent(agent))
        if visible is not None:
            names.add(visible)
    return sorted(names)


def entities_text(names: list[str]) -> str:
    """Crux's text: one name per line, or `no entities found`."""
    return "\n".join(names) if names else "no entities found"
