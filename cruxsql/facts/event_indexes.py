"""The names of the event tables' indexes: each is `<name>` or its alternate `<name>__alt`.

A compaction builds its new `journal_events` and `journal_event_facts` as shadow tables before the
writer lock, with their indexes, and swaps them in by DROP + RENAME (governance/compaction_snapshot.py).
SQLite cannot rename an index and index names are unique, so a shadow index takes its live twin's
alternate name, and every compaction flips the names; the definitions stay. The migrations name the
indexes as they were created: before any pending migration runs, `restore_names` builds each index that
carries its alternate name again under its own (`view_file.migrate`), so a migration's `DROP INDEX` or
`CREATE INDEX IF NOT EXISTS` meets the name it expects.
"""

from __future__ import annotations

import re
from typing import Optional, cast

import apsw

SUFFIX = "__alt"
TABLES = ("journal_events", "journal_event_facts")
# CREATE INDEX as SQLite stores it (after a RENAME, the table name is quoted)
_INDEX = re.compile(r'CREATE (UNIQUE )?INDEX "?(\w+)"? ON "?(journal_events|journal_event_facts)"? ?\(')


def alternate(name: str) -> str:
    return name[:-len(SUFFIX)] if name.endswith(SUFFIX) else name + SUFFIX


def live(db: apsw.Connection) -> list[tuple[str, str]]:
    """(name, SQL) of the event tables' indexes, sorted by their SQL."""
    return cast(list[tuple[str, str]], db.execute(
        "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL "
        "AND tbl_name IN ('journal_events', 'journal_event_facts') ORDER BY sql").fetchall())


def parse(sql: str) -> Optional[re.Match[str]]:
    """The head of an event-table index's CREATE INDEX: groups (UNIQUE or None, name, table); the
    column list starts at its end. None for SQL of another form."""
    return _INDEX.match(sql)


def create(sql: str, name: str, table: str) -> Optional[str]:
    """`sql` (an event-table index's CREATE INDEX) made for index `name` on `table` (quoted as given)."""
    head = parse(sql)
    if head is None:
        return None
    return f'CREATE {head[1] or ""}INDEX "{name}" ON {table} (' + sql[head.end():]


def restore_names(db: apsw.Connection) -> list[str]:
    """Build again under its own name each event-table index that carries its alternate one (inside the
    caller's transaction), unless a running compaction's shadow table holds that name. Returns the
    names restored."""
    taken = {name for (name,) in db.execute("SELECT name FROM sqlite_master")}
    restored = []
    for name, sql in live(db):
        head = parse(sql)
        if head is None or not name.endswith(SUFFIX) or alternate(name) in taken:
            continue
        own = alternate(name)
        db.execute(f'DROP INDEX "{name}"')
        db.execute(cast(str, create(sql, own, f'"{head[3]}"')))
        restored.append(own)
    return restored
