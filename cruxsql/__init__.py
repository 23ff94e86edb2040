"""cruxsql: a Crux-compatible memory store for AI agents, materialised into SQLite.

    import cruxsql
    with cruxsql.open("./cruxsql-data") as store:
        fact = store.store("deployment", "strategy", "blue-green")
        rows = cruxsql.Recall(store).query_facts("deploy").rows

Every error it raises on purpose is a `cruxsql.CruxsqlError` (the tree is in `cruxsql/errors.py`).
Importing the package registers nothing and starts nothing, and loads only what a name used needs:
each public name is imported from its module on first use (so `cruxsql --help` never loads numpy).
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False   # not `typing.TYPE_CHECKING`: importing typing here would slow every start-up

# public name -> the module that defines it (`open` is `facts.store.open_store`)
_EXPORTS = {
    "ConsolidationError": "curation.consolidation", "DocumentLane": "documents.lane",
    "ReplicaMoved": "documents.replica", "SegmentError": "documents.segments",
    "VectorFileError": "embeddings.vectors",
    "CapabilityDenied": "errors", "Conflict": "errors", "CruxsqlError": "errors", "InvalidInput": "errors",
    "JournalError": "errors", "JournalPoisoned": "errors", "LockTimeout": "errors", "NotFound": "errors",
    "ReadOnlyStore": "errors", "ViewTooNew": "errors",
    "CorruptLine": "facts.codec", "Fact": "facts.codec", "UnrepresentableLine": "facts.codec",
    "ReservedEntityPrefix": "facts.privacy", "ReservedNamespace": "facts.privacy",
    "ReservedSupersedesTarget": "facts.privacy", "ReservedTarget": "facts.privacy",
    "Store": "facts.store", "StoreRequest": "facts.store", "open": "facts.store",
    "BackupError": "governance.backup", "CorruptLinesPresent": "governance.compaction",
    "LegalHoldBlocked": "governance.compaction", "Recall": "recall.facade",
    "TurnInput": "recall.conversations", "store_conversation": "recall.conversations",
}
_RENAMED = {"open": "open_store"}

__all__ = [
    "BackupError", "CapabilityDenied", "ConsolidationError", "Conflict", "CorruptLine", "CorruptLinesPresent",
    "CruxsqlError", "DocumentLane", "Fact", "InvalidInput", "JournalError", "JournalPoisoned", "LegalHoldBlocked",
    "LockTimeout", "NotFound", "ReadOnlyStore", "Recall", "ReplicaMoved", "ReservedEntityPrefix",
    "ReservedNamespace", "ReservedSupersedesTarget", "ReservedTarget", "SegmentError", "Store", "StoreRequest",
    "TurnInput", "UnrepresentableLine", "VectorFileError", "ViewTooNew", "__version__", "open", "store_conversation",
]


def __getattr__(name: str) -> Any:
    """Import a public name's module on first use (PEP 562) and keep the value."""
    if name == "__version__":
        value: Any = _installed_version()
    elif name in _EXPORTS:
        module = importlib.import_module(f".{_EXPORTS[name]}", __name__)
        value = getattr(module, _RENAMED.get(name, name))
    else:
        raise AttributeError(f"module 'cruxsql' has no attribute {name!r}")
    globals()[name] = value
    return value


def _installed_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("cruxsql")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "0+unknown"


if TYPE_CHECKING:
    from typing import Any

    from .curation.consolidation import ConsolidationError
    from .documents.lane import DocumentLane
    from .documents.replica import ReplicaMoved
    from .documents.segments import SegmentError
    from .embeddings.vectors import VectorFileError
    from .errors import (CapabilityDenied, Conflict, CruxsqlError, InvalidInput, JournalError, JournalPoisoned,
                         LockTimeout, NotFound, ReadOnlyStore, ViewTooNew)
    from .facts.codec import CorruptLine, Fact, UnrepresentableLine
    from .facts.privacy import ReservedEntityPrefix, ReservedNamespace, ReservedSupersedesTarget, ReservedTarget
    from .facts.store import Store, StoreRequest
    from .facts.store import open_store as open
    from .governance.backup import BackupError
    from .governance.compaction import CorruptLinesPresent, LegalHoldBlocked
    from .recall.conversations import TurnInput, store_conversation
    from .recall.facade import Recall

    __version__: str
