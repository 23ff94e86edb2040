"""The fact substrate: the `facts.jsonl` journal (the truth) and its materialised SQLite view.

Modules: `codec` (Fact and journal events, byte-identical with the Rust daemon), `timestamps` (RFC 3339
and nanoseconds as chrono writes them), `journal` (locked, fsynced appends; torn-tail quarantine),
`view` (migrations, replay, checkpoint, rebuild), `store` (the write and read API), `privacy` (born-private
and reserved prefixes), `faults` (crash points for tests).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {"Fact": "codec", "Store": "store", "StoreRequest": "store", "open_store": "store"}   # name -> module, imported on first use
__all__ = ['Fact', 'Store', 'StoreRequest', 'open_store']


def __getattr__(name: str) -> Any:
    """Import a public name's module on first use (PEP 562): importing one module of the package
    never loads the others."""
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    globals()[name] = value
    return value


if TYPE_CHECKING:
    from .codec import Fact
    from .store import Store, StoreRequest, open_store
