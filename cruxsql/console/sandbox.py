"""The console's SQL sandbox: the one `cruxsql sql` runs under (`readonly_sql.py`), on Python's sqlite3.

Every connection Datasette opens to a database a user can query gets, before any statement runs:

* `PRAGMA query_only` and `temp_store = MEMORY` (nothing written, no temp file outside the data directory);
* the authorizer of `cruxsql sql` (reads and introspection only: no ATTACH, VACUUM, writing PRAGMA; the
  function deny-list `fts3_tokenizer`, `load_extension`, the file functions). One allowance: the SQLite
  Python's sqlite3 links here (3.40) asks the authorizer to UPDATE `sqlite_master` when it connects an
  eponymous virtual table (`json_each`, `pragma_table_info`); query_only refuses any real write, and
  SQLite refuses to modify `sqlite_master` without `writable_schema`, which the authorizer refuses;
* the heap limit of `cruxsql sql` (SQLite's hard heap limit: process-wide, and this process serves only
  the console);
* a time limit by progress handler (Datasette's `sql_time_limit_ms`, set around every query). SQLite
  3.40's `printf`/`format` pad one character at a time inside a single VM step, where no progress handler
  runs, so a width or precision larger than the heap limit is refused before it starts.
"""

from __future__ import annotations

import re
import sqlite3
from typing import Any, Optional

from .readonly_sql import DEFAULT_MEMORY_LIMIT_MIB, Sandbox

MEMORY_LIMIT_BYTES = DEFAULT_MEMORY_LIMIT_MIB << 20
_SCHEMA_TABLES = {"sqlite_master", "sqlite_temp_master"}
_SCHEMA_BOOKKEEPING = {sqlite3.SQLITE_INSERT, sqlite3.SQLITE_UPDATE}
_SPEC = re.compile(r"%[-+ 0#,!]*(\*|\d+)?(?:\.(\*|\d+))?[a-zA-Z%]")


class ConsoleSandbox(Sandbox):
    """The authorizer of `cruxsql sql`, with SQLite 3.40's virtual-table connect allowed and virtual-table
    creation left to query_only (see above)."""

    def __call__(self, action: int, arg1: Optional[str], arg2: Optional[str], db_name: Optional[str],
                 trigger: Optional[str]) -> int:
        if action in _SCHEMA_BOOKKEEPING and arg1 in _SCHEMA_TABLES:
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_CREATE_VTABLE:
            return sqlite3.SQLITE_OK
        return super().__call__(action, arg1, arg2, db_name, trigger)


def _check_widths(fmt: Any, args: tuple[Any, ...]) -> None:
    if not isinstance(fmt, str):
        return
    i = 0
    for match in _SPEC.finditer(fmt):
        for part in match.groups():
            if part == "*":
                value = args[i] if i < len(args) else 0
                i += 1
            elif part:
                value = part
            else:
                continue
            try:
                size = abs(int(value))
            except (TypeError, ValueError):
                continue
            if size > MEMORY_LIMIT_BYTES:
                raise ValueError(f"printf width or precision {size} is over the console's "
                                 f"{DEFAULT_MEMORY_LIMIT_MIB} MiB memory ceiling")
        if match.group(0)[-1] != "%":
            i += 1


def _bounded_printf(name: str) -> Any:
    helper = sqlite3.connect(":memory:", check_same_thread=False)
    helper.execute(f"PRAGMA hard_heap_limit = {MEMORY_LIMIT_BYTES}")

    def call(fmt: Any = None, *args: Any) -> Any:
        _check_widths(fmt, args)
        marks = ",".join("?" * (len(args) + 1))
        return helper.execute(f"SELECT {name}({marks})", (fmt, *args)).fetchone()[0]
    return call


def apply(conn: sqlite3.Connection) -> None:
    """Put `conn` in the sandbox (before any user statement runs on it)."""
    conn.execute("PRAGMA query_only = ON")
    conn.execute("PRAGMA temp_store = MEMORY")  # sorts and temp tables never touch the disk
    conn.execute(f"PRAGMA hard_heap_limit = {MEMORY_LIMIT_BYTES}")
    for name in ("printf", "format"):
        conn.create_function(name, -1, _bounded_printf(name), deterministic=True)
    conn.set_authorizer(ConsoleSandbox())
