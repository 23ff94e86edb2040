"""mem0's JSON export (`Memory.get_all()` / the platform's export) as facts.

Accepted shapes: `{"results": [...]}` (mem0 1.x), `{"memories": [...]}`, or a bare list; each item has
`id` and `memory` (the text), optionally `user_id`, `agent_id`, `run_id`, `metadata`, `created_at`.
The mapping (documented in docs/operations.md): entity `user:<user_id>` (else `agent:<agent_id>`, else
`run:<run_id>`, else `mem0`), key `memory:<id>`, value the memory text, `source_receipt`
`mem0:<id>`. mem0's own timestamps and metadata are not facts' fields and are not carried over.
"""

from __future__ import annotations

from typing import Any, Iterator

from ..errors import InvalidInput
from ..facts import json_input
from ..facts.store import StoreRequest

FORMAT = "mem0"


def _items(doc: Any, source: str) -> list:
    if isinstance(doc, list):
        return doc
    if isinstance(doc, dict):
        for name in ("results", "memories"):
            if isinstance(doc.get(name), list):
                return doc[name]
    raise InvalidInput(f"{source}: expected a list of memories or an object with `results`")


def entity_for(item: dict) -> str:
    for field, prefix in (("user_id", "user:"), ("agent_id", "agent:"), ("run_id", "run:")):
        if isinstance(item.get(field), str) and item[field].strip():
            return prefix + item[field]
    return "mem0"


def parse(data: json_input.Text, source: str, tenant: str = "default", private: bool = False,
          actor: str = "import:mem0") -> Iterator[StoreRequest]:
    """StoreRequests for every memory of a mem0 export."""
    for n, item in enumerate(_items(json_input.read_document(data, source), source)):
        where = f"{source} memory #{n}"
        if not isinstance(item, dict):
            raise InvalidInput(f"{where}: expected an object")
        memory_id, memory = item.get("id"), item.get("memory")
        if not isinstance(memory_id, (str, int)) or not str(memory_id).strip():
            raise InvalidInput(f"{where}: `id` is required")
        if not isinstance(memory, str) or not memory.strip():
            raise InvalidInput(f"{where}: `memory` must be a non-empty string")
        yield StoreRequest(entity=entity_for(item), key=f"memory:{memory_id}", value=memory, tenant_hash=tenant,
                           source_receipt=f"{FORMAT}:{memory_id}", private=private, actor=actor)
