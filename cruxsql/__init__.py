"""cruxsql: a Crux-compatible memory store for AI agents, materialised into SQLite.

    import cruxsql
    with cruxsql.open("./cruxsql-data") as store:
        fact = store.store("deployment", "strategy", "blue-green")
        rows = cruxsql.Recall(store).query_facts("deploy").rows
"""

from .codec import Fact
from .errors import Conflict, CruxsqlError, InvalidInput, JournalError, JournalPoisoned, NotFound
from .documents.lane import DocumentLane
from .recall import Recall
from .store import Store, StoreRequest, open_store as open

__all__ = [
    "Conflict", "CruxsqlError", "DocumentLane", "Fact", "InvalidInput", "JournalError", "JournalPoisoned",
    "NotFound", "Recall", "Store", "StoreRequest", "open",
]
