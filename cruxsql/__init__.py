"""cruxsql: a Crux-compatible memory store for AI agents, materialised into SQLite.

    import cruxsql
    with cruxsql.open("./cruxsql-data") as store:
        fact = store.store("deployment", "strategy", "blue-green")
        rows = cruxsql.Recall(store).query_facts("deploy").rows
"""

from .curation import exact_duplicates as _exact_duplicates  # noqa: F401  (registers its replay hook)
from .documents.lane import DocumentLane
from .errors import Conflict, CruxsqlError, InvalidInput, JournalError, JournalPoisoned, NotFound, ViewTooNew
from .facts.codec import Fact
from .facts.store import Store, StoreRequest
from .facts.store import open_store as open
from .recall.queries import Recall

__all__ = [
    "Conflict", "CruxsqlError", "DocumentLane", "Fact", "InvalidInput", "JournalError", "JournalPoisoned",
    "NotFound", "Recall", "Store", "StoreRequest", "ViewTooNew", "open",
]
