"""Seeding bootstrap knowledge: the owner path into the daemon-owned `__bootstrap__::` namespace.

In Crux the daemon seeds `__bootstrap__::<topic>:<name>` facts itself; agents can never write there
(the namespace is create-reserved). cruxsql gives operators this one path instead: a topic is
normalised exactly as `get_bootstrap` normalises it, so what is seeded under `errors` is read back
under `errors`, `error` or `resolution`.
"""

from __future__ import annotations

from typing import Optional

from ..errors import InvalidInput
from ..facts.codec import Fact
from ..facts.privacy import NamespaceOwner
from ..facts.store import Store
from .facade import BOOTSTRAP_PREFIX, normalize_topic

OWNER = NamespaceOwner("bootstrap seeding", (BOOTSTRAP_PREFIX,))


def seed(store: Store, topic: str, name: str, key: str, value: str, *, tenant: str = "default",
         confidence: float = 1.0, actor: Optional[str] = None) -> Fact:
    """Store `value` as bootstrap fact `__bootstrap__::<topic>:<name>` / `key` (born private, stable)."""
    norm = normalize_topic(topic)
    if not norm:
        raise InvalidInput(f"bootstrap topic {topic!r} must not be blank")
    if not name.strip():
        raise InvalidInput(f"bootstrap name {name!r} must not be blank")
    return store.store(f"{BOOTSTRAP_PREFIX}{norm}:{name}", key, value, tenant=tenant, confidence=confidence,
                       actor=actor, owner=OWNER)
