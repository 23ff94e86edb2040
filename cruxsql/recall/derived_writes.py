"""How recall's derived tables (text index, timeline) write into the view without racing one another.

Each derived table records the fact-table generation it was built for and starts over when
`journal_checkpoint.generation` changes. A reader catching a table up takes SQLite's write lock up
front (BEGIN IMMEDIATE), so two readers doing it at once serialise instead of deadlocking; inside a
caller's transaction (a replay hook) the catch-up joins it as a savepoint.
"""

from __future__ import annotations

from typing import Optional

import apsw



def checkpoint_generation(db: apsw.Connection) -> Optional[str]:
    """The fact tables' generation (`journal_checkpoint.generation`), None before the first replay."""
    row = db.execute("SELECT generation FROM journal_checkpoint WHERE id = 1").fetchone()
    return row[0] if row else None


def write_transaction(db: apsw.Connection, fn):
    """Run `fn` in a write transaction taken up front (BEGIN IMMEDIATE), so two readers catching the
    index up at once serialise instead of deadlocking; inside a caller's transaction, a savepoint."""
    if not db.getautocommit():
        with db:
            return fn()
    db.execute("BEGIN IMMEDIATE")
    try:
        result = fn()
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    return result
