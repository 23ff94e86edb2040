"""The fact substrate: the `facts.jsonl` journal (the truth) and its materialised SQLite view.

Modules: `codec` (Fact and journal events, byte-identical with the Rust daemon), `timestamps` (RFC 3339
and nanoseconds as chrono writes them), `journal` (locked, fsynced appends; torn-tail quarantine),
`view` (migrations, replay, checkpoint, rebuild), `store` (the write and read API), `privacy` (born-private
and reserved prefixes), `faults` (crash points for tests).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy_exports import lazy_attributes

_EXPORTS = {"Fact": "codec", "Store": "store", "StoreRequest": "store", "open_store": "store"}   # name -> module, imported on first use
__all__ = ['Fact', 'Store', 'StoreRequest', 'open_store']

__getattr__ = lazy_attributes(__name__, _EXPORTS)


if TYPE_CHECKING:
    from .codec import Fact
    from .store import Store, StoreRequest, open_store
