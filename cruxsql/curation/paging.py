"""Crux's `export` and `list_page` paging over the view (crates/corecrux-memory/src/fact_store.rs).

`export` walks (stored_at, fact_id) ascending from `since`. Crux restarts from the beginning when the
cursor fact has since been deleted or made private (docs/curation.md: duplicates on the sync path);
cruxsql resumes after the cursor's (stored_at, fact_id) key whatever happened to that fact, and
names an unknown cursor as an error. `list_page` walks (stored_at in whole ms, fact_id) descending
with Crux's `"<ms>:<fact_id>"` cursors.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, cast

import apsw

from ..errors import InvalidInput
from ..facts import view
from ..facts.codec import Fact

_MS = "((stored_at_ns - ((stored_at_ns % 1000000) + 1000000) % 1000000) / 1000000)"


@dataclass
class Page:
    facts: list[Fact]
    has_more: bool
    next_cursor: Optional[str]
    total_visible: Optional[int] = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"facts": [f.to_dict() for f in self.facts], "has_more": self.has_more,
                               "next_cursor": self.next_cursor}
        if self.total_visible is not None:
            out["total_visible"] = self.total_visible
        return out


def _limit(limit: int) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidInput(f"limit must be a positive integer, got {limit!r}")
    return limit


def export(db: apsw.Connection, tenant: str = "default", since_ns: Optional[int] = None,
           cursor: Optional[str] = None, limit: int = 1000) -> Page:
    """Non-private, non-deleted facts of the tenant with stored_at >= since, after the cursor."""
    limit = _limit(limit)
    where = ["tenant_hash = ?", "deleted = 0", "private = 0"]
    params: list[Any] = [tenant]
    if since_ns is not None:
        where.append("stored_at_ns >= ?")
        params.append(since_ns)
    if cursor is not None:
        row = db.execute("SELECT stored_at_ns FROM facts WHERE fact_id = ? AND tenant_hash = ?",
                         (cursor, tenant)).fetchone()
        if row is None:
            raise InvalidInput(f"unknown export cursor {cursor!r}")
        where.append("(stored_at_ns, fact_id) > (?, ?)")
        params += [row[0], cursor]
    facts = list(view.iter_facts(db, f"WHERE {' AND '.join(where)} ORDER BY stored_at_ns, fact_id LIMIT ?",
                                 (*params, limit + 1)))
    has_more = len(facts) > limit
    facts = facts[:limit]
    return Page(facts, has_more, facts[-1].fact_id if has_more else None)


def decode_cursor(cursor: str) -> tuple[int, str]:
    """`"<stored_at_ms>:<fact_id>"`: split at the first `:`, an i64 and a non-empty id."""
    ms, sep, fact_id = cursor.partition(":")
    try:
        value = int(ms, 10)
    except ValueError:
        value = None
    if not sep or not fact_id or value is None or not -(1 << 63) <= value < (1 << 63) or ms.strip() != ms \
            or ms.startswith("+"):
        raise InvalidInput(f"invalid list_page cursor {cursor!r} (expected <stored_at_ms>:<fact_id>)")
    return value, fact_id


def list_page(db: apsw.Connection, tenant: str = "default", cursor: Optional[str] = None, limit: int = 50,
              include_superseded: bool = False, entity: Optional[str] = None, key: Optional[str] = None) -> Page:
    """Newest first by (stored_at ms, fact_id); `total_visible` counts every row before paging."""
    limit = _limit(limit)
    where = ["tenant_hash = ?", "deleted = 0", "private = 0"]
    params: list[Any] = [tenant]
    if not include_superseded:
        where.append("superseded_by IS NULL")
    for column, value in (("entity", entity), ("key", key)):
        if value is not None:
            where.append(f"{column} = ?")
            params.append(value)
    total = db.execute(f"SELECT count(*) FROM facts WHERE {' AND '.join(where)}", params).get
    if cursor is not None:
        ms, fid = decode_cursor(cursor)
        where.append(f"({_MS}, fact_id) < (?, ?)")
        params += [ms, fid]
    rows = db.execute(f"SELECT fact_id, {_MS} FROM facts WHERE {' AND '.join(where)} "
                      f"ORDER BY {_MS} DESC, fact_id DESC LIMIT ?", (*params, limit + 1)).fetchall()
    has_more = len(rows) > limit
    rows = rows[:limit]
    by_id = {f.fact_id: f for f in view.iter_facts(
        db, f"WHERE fact_id IN ({','.join('?' * len(rows))})", [r[0] for r in rows])} if rows else {}
    facts = [by_id[cast(str, r[0])] for r in rows]      # fact_id: TEXT NOT NULL
    return Page(facts, has_more, f"{rows[-1][1]}:{rows[-1][0]}" if has_more else None, total)
