"""The fact substrate: the `facts.jsonl` journal (the truth) and its materialised SQLite view.

Modules: `codec` (Fact and journal events, byte-identical with the Rust daemon), `timestamps` (RFC 3339
and nanoseconds as chrono writes them), `journal` (locked, fsynced appends; torn-tail quarantine),
`view` (migrations, replay, checkpoint, rebuild), `store` (the write and read API), `privacy` (born-private
and reserved prefixes), `faults` (crash points for tests).
"""

from .codec import Fact
from .store import Store, StoreRequest, open_store

__all__ = ["Fact", "Store", "StoreRequest", "open_store"]
