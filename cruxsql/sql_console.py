"""Operators' read-only SQL against the view."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import apsw

from .errors import InvalidInput


def run_readonly_query(db_path: Path, query: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Run `query` on a read-only connection; return (column names, rows).

    Any statement that would write fails with InvalidInput and changes nothing.
    """
    db = apsw.Connection(str(db_path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        db.setbusytimeout(30_000)
        db.execute("PRAGMA query_only=ON")
        columns: list[str] = []

        def remember_columns(cursor: apsw.Cursor, sql: str, bindings: Any) -> bool:
            columns[:] = [d[0] for d in cursor.getdescription()]
            return True

        cursor = db.cursor()
        cursor.exec_trace = remember_columns
        try:
            rows = list(cursor.execute(query))
        except apsw.Error as exc:
            raise InvalidInput(f"SQL failed: {exc}") from None
        return columns, rows
    finally:
        db.close()
