"""cruxsql: a Crux-compatible memory store for AI agents, materialised into SQLite.

    import cruxsql
    with cruxsql.open("./cruxsql-data") as store:
        fact = store.store("deployment", "strategy", "blue-green")
        rows = cruxsql.Recall(store).query_facts("deploy").rows

Every error it raises on purpose is a `cruxsql.CruxsqlError` (the tree is in `cruxsql/errors.py`).
Importing the package registers nothing and starts nothing.
"""

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _version

from .curation.consolidation import ConsolidationError
from .documents.lane import DocumentLane
from .documents.replica import ReplicaMoved
from .documents.segments import SegmentError
from .embeddings.vectors import VectorFileError
from .errors import (CapabilityDenied, Conflict, CruxsqlError, InvalidInput, JournalError, JournalPoisoned,
                     LockTimeout, NotFound, ReadOnlyStore, ViewTooNew)
from .facts.codec import CorruptLine, Fact
from .facts.privacy import ReservedEntityPrefix, ReservedNamespace, ReservedSupersedesTarget, ReservedTarget
from .facts.store import Store, StoreRequest
from .facts.store import open_store as open
from .governance.backup import BackupError
from .governance.compaction import CorruptLinesPresent, LegalHoldBlocked
from .recall.conversations import TurnInput, store_conversation
from .recall.queries import Recall

try:
    __version__ = _version("cruxsql")
except PackageNotFoundError:  # run from a source tree that was never installed
    __version__ = "0+unknown"

__all__ = [
    "BackupError", "CapabilityDenied", "ConsolidationError", "Conflict", "CorruptLine", "CorruptLinesPresent",
    "CruxsqlError", "DocumentLane", "Fact", "InvalidInput", "JournalError", "JournalPoisoned", "LegalHoldBlocked",
    "LockTimeout", "NotFound", "ReadOnlyStore", "Recall", "ReplicaMoved", "ReservedEntityPrefix",
    "ReservedNamespace", "ReservedSupersedesTarget", "ReservedTarget", "SegmentError", "Store", "StoreRequest",
    "TurnInput", "VectorFileError", "ViewTooNew", "__version__", "open", "store_conversation",
]
