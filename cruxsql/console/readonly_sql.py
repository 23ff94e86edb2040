"""Operators' SQL against the view, in a sandbox: one read-only statement, bounded in time and memory.

The connection is opened read-only, and an authorizer admits only what reads: SELECT (with its reads,
functions and recursive CTEs) and introspection PRAGMAs without an argument that sets anything. It
refuses everything else at prepare time, before anything runs: writes, VACUUM (including `VACUUM
INTO`, which would copy the view — private facts included — out of erasure's reach), ATTACH and
DETACH (which create files), every PRAGMA that writes or changes the connection, `load_extension` and
functions that touch files. A progress handler enforces the timeout and lets Ctrl-C interrupt at
once; SQLite's hard heap limit caps the memory a query may take.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Optional

import apsw
import apsw.ext

from ..errors import InvalidInput
from ..facts.busy import wait_when_busy

DEFAULT_MEMORY_LIMIT_MIB = 512
PIPE_TIMEOUT_SECONDS = 60.0  # the default when nobody is at a terminal to press Ctrl-C
_PROGRESS_EVERY = 1000  # SQLite VM steps between deadline / Ctrl-C checks

_READING_ACTIONS = {apsw.SQLITE_SELECT, apsw.SQLITE_READ, apsw.SQLITE_RECURSIVE}
_FILE_FUNCTIONS = {"load_extension", "readfile", "writefile", "edit", "fts3_tokenizer"}
# PRAGMAs that only describe the schema; their argument names a table or index, it sets nothing.
_SCHEMA_PRAGMAS = {
    "table_info", "table_xinfo", "table_list", "index_list", "index_info", "index_xinfo", "foreign_key_list",
    "foreign_key_check", "integrity_check", "quick_check", "collation_list", "function_list", "module_list",
    "pragma_list", "compile_options", "database_list",
}
# PRAGMAs readable without an argument (with one, they would change the database or the connection).
_READABLE_SETTINGS = {
    "user_version", "schema_version", "application_id", "page_size", "page_count", "freelist_count",
    "encoding", "journal_mode", "data_version", "auto_vacuum", "cache_size", "foreign_keys", "query_only",
}


def default_timeout(stdin_is_terminal: bool) -> Optional[float]:
    """No limit for a person at a terminal (Ctrl-C stops a query); PIPE_TIMEOUT_SECONDS in scripts."""
    return None if stdin_is_terminal else PIPE_TIMEOUT_SECONDS


class Sandbox:
    """The authorizer: remembers what it refused so the error can name it."""

    def __init__(self) -> None:
        self.refused: Optional[str] = None
        self.calls = 0

    def __call__(self, action: int, arg1: Optional[str], arg2: Optional[str], db_name: Optional[str],
                 trigger: Optional[str]) -> int:
        self.calls += 1
        if action in _READING_ACTIONS:
            return apsw.SQLITE_OK
        if action == apsw.SQLITE_FUNCTION and (arg2 or "").lower() not in _FILE_FUNCTIONS:
            return apsw.SQLITE_OK
        if action == apsw.SQLITE_PRAGMA:
            name = (arg1 or "").lower()
            if name in _SCHEMA_PRAGMAS or (name in _READABLE_SETTINGS and arg2 is None):
                return apsw.SQLITE_OK
            what = f"PRAGMA {arg1}" + ("" if arg2 is None else f"={arg2}")
        elif action == apsw.SQLITE_FUNCTION:
            what = f"the function {arg2}()"
        elif action == apsw.SQLITE_ATTACH:
            what = f"ATTACH or VACUUM ({arg1 or 'a temporary database'})"
        else:
            what = str(apsw.mapping_authorizer_function.get(action, action)).removeprefix("SQLITE_")
            what = what.replace("_", " ") + (f" {arg1}" if arg1 else "")
        self.refused = what
        return apsw.SQLITE_DENY


def _single_statement(db: apsw.Connection, sandbox: Sandbox, query: str) -> apsw.ext.QueryDetails:
    """Prepare (never run) `query`: exactly one statement, which the sandbox admits."""
    statements: list[apsw.ext.QueryDetails] = []
    rest: Optional[str] = query
    while rest:
        sandbox.calls = 0
        details = _prepare(db, sandbox, rest)
        if not details.is_readonly:  # VACUUM asks the authorizer only when it runs: refuse it here
            raise InvalidInput(f"read-only SQL console: {_excerpt(details.first_query)} is not allowed")
        if sandbox.calls:  # a comment or a lone `;` prepares to nothing and asks the authorizer nothing
            statements.append(details)
        if len(statements) > 1:
            raise InvalidInput(
                f"one SQL statement at a time: found another after {statements[0].first_query.strip()!r}")
        rest = details.query_remaining
    if not statements:
        raise InvalidInput("empty SQL statement: give one SELECT (or read-only PRAGMA) to run")
    return statements[0]


def _excerpt(sql: str) -> str:
    text = " ".join(sql.split()).rstrip(";").strip()
    return text if len(text) <= 200 else text[:197] + "..."


def _prepare(db: apsw.Connection, sandbox: Sandbox, sql: str) -> apsw.ext.QueryDetails:
    sandbox.refused = None
    try:
        return apsw.ext.query_info(db, sql)
    except apsw.Error as exc:
        if sandbox.refused is not None:  # AuthError, or SQLError for a refused function
            raise InvalidInput(f"read-only SQL console: {sandbox.refused} is not allowed") from None
        raise InvalidInput(f"SQL failed: {exc}") from None


def run_readonly_query(db_path: "Path | apsw.Connection", query: str, timeout: Optional[float] = None,
                       memory_limit_mib: int = DEFAULT_MEMORY_LIMIT_MIB) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Run one read-only `query` on the view; return (column names, rows).

    Anything but one statement that only reads fails with InvalidInput before it runs, and nothing is
    created or changed. `timeout` (seconds, None for none) and `memory_limit_mib` bound the query;
    KeyboardInterrupt stops it within a few thousand VM steps.
    """
    if timeout is not None and timeout <= 0:
        raise InvalidInput(f"--timeout must be a positive number of seconds, got {timeout}")
    if memory_limit_mib <= 0:
        raise InvalidInput(f"--max-memory must be a positive number of MiB, got {memory_limit_mib}")
    own = not isinstance(db_path, apsw.Connection)
    try:
        db = (db_path if isinstance(db_path, apsw.Connection)
              else apsw.Connection(str(db_path), flags=apsw.SQLITE_OPEN_READONLY))
    except apsw.Error as exc:
        raise InvalidInput(f"cannot open the view {db_path}: {exc}") from None
    previous_limit = apsw.hard_heap_limit(memory_limit_mib << 20)  # process-wide: restored below
    try:
        wait_when_busy(db)
        db.execute("PRAGMA query_only=ON")
        db.execute("PRAGMA temp_store=MEMORY")  # sorts and temp tables never touch the disk
        sandbox = Sandbox()
        db.authorizer = sandbox
        statement = _single_statement(db, sandbox, query)
        deadline = None if timeout is None else time.monotonic() + timeout
        # Returning True interrupts the query; a Ctrl-C raised here stops it as KeyboardInterrupt.
        db.set_progress_handler(lambda: deadline is not None and time.monotonic() > deadline, _PROGRESS_EVERY)
        try:
            rows = list(db.execute(statement.first_query))
        except apsw.InterruptError:
            raise InvalidInput(f"query stopped after the {timeout:g}-second timeout (--timeout)") from None
        except apsw.NoMemError:
            raise InvalidInput(
                f"query stopped at the {memory_limit_mib} MiB memory ceiling (--max-memory)") from None
        except apsw.Error as exc:
            if sandbox.refused is not None:
                raise InvalidInput(f"read-only SQL console: {sandbox.refused} is not allowed") from None
            raise InvalidInput(f"SQL failed: {exc}") from None
        return [d[0] for d in statement.description or ()], rows
    finally:
        if own:
            db.close()
        else:  # a caller's connection (a read-only store's in-memory view): give it back as it was
            db.authorizer = None
            db.set_progress_handler(None)
            db.execute("PRAGMA query_only=OFF")
        apsw.hard_heap_limit(previous_limit)
