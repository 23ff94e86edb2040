"""cruxsql: a Crux-compatible memory store for AI agents, materialised into SQLite.

    import cruxsql
    with cruxsql.open("./cruxsql-data") as store:
        fact = store.store("deployment", "strategy", "blue-green")
"""

from .codec import Fact
from .errors import Conflict, CruxsqlError, InvalidInput, JournalError, JournalPoisoned, NotFound
from .store import Store, StoreRequest, open_store as open

__all__ = [
    "Conflict", "CruxsqlError", "Fact", "InvalidInput", "JournalError", "JournalPoisoned", "NotFound", "Store",
    "StoreRequest", "open",
]
