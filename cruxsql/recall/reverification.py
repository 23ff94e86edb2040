"""Re-verifying a fact: the journaled `reverify` plus Crux's receipt fact (crates/crux-mcp/src/tools/freshness.rs).

The receipt is a fact under `__reverify_receipts__::<fact_id>` (born private, daemon-owned), key
`rev_<32 hex>`, value `{"class":"Reverify","fact_id","reverified_by","reverified_at"}`, its own id as
`source_receipt`, horizon `stable`. Crux keeps the re-verification itself in memory only; here it is a
journal line, written before the receipt (two appends, as Crux's two steps).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from ..facts import timestamps
from ..facts.codec import Fact
from ..facts.privacy import NamespaceOwner
from ..facts.store import Store
from .tokens import compact_json

RECEIPT_PREFIX = "__reverify_receipts__::"
OWNER = NamespaceOwner("reverify receipts", (RECEIPT_PREFIX,))


@dataclass(frozen=True)
class Reverification:
    fact: Fact
    receipt_id: str
    reverified_at: str      # RFC 3339 with +00:00, as the receipt says


def reverify_with_receipt(store: Store, fact_id: str, tenant: str, agent: str) -> Reverification:
    fact = store.reverify(fact_id, tenant=tenant)
    assert fact.reverified_at is not None  # reverify just set it
    at = timestamps.format_event_time(fact.reverified_at)
    receipt_id = "rev_" + uuid.uuid4().hex
    value = compact_json({"class": "Reverify", "fact_id": fact_id, "reverified_by": agent, "reverified_at": at})
    store.store(f"{RECEIPT_PREFIX}{fact_id}", receipt_id, value, tenant=tenant, source_receipt=receipt_id,
                horizon_class="stable", actor=agent, owner=OWNER)
    return Reverification(fact, receipt_id, at)
