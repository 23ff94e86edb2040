"""One sandbox for both consoles: every hostile statement `cruxsql sql` refuses, the Datasette console's
connections refuse too (same authorizer, function deny-list, heap limit), and nothing is written anywhere."""

from __future__ import annotations

import hashlib
import importlib.util
import sqlite3
import time
from pathlib import Path

import pytest

import cruxsql
from cruxsql.errors import InvalidInput
from cruxsql.console.readonly_sql import run_readonly_query

pytestmark = pytest.mark.skipif(importlib.util.find_spec("datasette") is None,
                                reason="Datasette is not installed (pip install -e '.[test]' brings it)")

WRITING_PRAGMAS = ["query_only=OFF", "journal_mode=DELETE", "cache_size=10", "writable_schema=ON",
                   "writable_schema", "user_version=7", "application_id=9", "foreign_keys=ON",
                   "secure_delete=OFF", "synchronous=OFF", "temp_store=FILE", "mmap_size=1000000",
                   "locking_mode=EXCLUSIVE", "auto_vacuum=FULL", "wal_checkpoint(TRUNCATE)", "optimize",
                   "incremental_vacuum", "shrink_memory", "soft_heap_limit=0", "hard_heap_limit=0",
                   "trusted_schema=ON", "recursive_triggers=ON", "max_page_count=1", "page_size=512",
                   "cell_size_check=ON", "threads=4", "busy_timeout=0", "legacy_alter_table=ON",
                   "reverse_unordered_selects=ON", "defer_foreign_keys=ON"]
HOSTILE = [
    "VACUUM", "VACUUM INTO '{out}/copy.db'", "VACUUM INTO '{data}/LOCK'",
    "ATTACH DATABASE '{out}/other.db' AS other", "ATTACH ':memory:' AS m", "DETACH DATABASE main",
    "SELECT load_extension('{out}/evil')", "SELECT load_extension('{out}/evil', 'entry')",
    "SELECT fts3_tokenizer('simple')", "SELECT fts3_tokenizer('evil', x'4141414141414141')",
    "SELECT readfile('/etc/passwd')", "SELECT writefile('{out}/w', 'x')", "SELECT edit('x')",
    "DELETE FROM facts", "INSERT INTO facts (fact_id) VALUES ('x')", "UPDATE facts SET value = 'x'",
    "REPLACE INTO facts (fact_id) VALUES ('x')", "CREATE TABLE t (x)", "CREATE TEMP TABLE t (x)",
    "CREATE VIEW v AS SELECT 1", "CREATE TEMP VIEW v AS SELECT 1", "CREATE INDEX i ON facts (value)",
    "CREATE TRIGGER tr AFTER INSERT ON facts BEGIN SELECT 1; END", "DROP TABLE facts", "DROP VIEW live_facts",
    "ALTER TABLE facts ADD COLUMN y", "ALTER TABLE facts RENAME TO f2", "BEGIN IMMEDIATE", "BEGIN EXCLUSIVE",
    "SAVEPOINT s", "ANALYZE", "REINDEX", "CREATE VIRTUAL TABLE x USING fts5(a)", "CREATE VIRTUAL TABLE temp.x USING fts5(a)",
    "CREATE VIRTUAL TABLE x USING rtree(id, a, b)",
    "UPDATE sqlite_master SET sql = 'x'", "WITH x AS (SELECT 1) DELETE FROM facts",
    "SELECT length(printf('%.*c', 2147483647, 'x'))", "SELECT length(randomblob(1000000000))",
] + [f"PRAGMA {p}" for p in WRITING_PRAGMAS]


def _snapshot(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and not p.name.endswith("-shm")
            and not (p.name.endswith("-wal") and p.stat().st_size == 0)}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("sandbox") / "data"
    with cruxsql.open(d) as store:
        store.store("__vault__::alice", "ssn", "078-05-1120", private=True)
    return d


def _datasette_connection(data_dir: Path) -> sqlite3.Connection:
    """A connection to the view prepared exactly as the console's plugin prepares Datasette's."""
    from cruxsql.console.plugin import ConsolePlugin
    conn = sqlite3.connect(data_dir / "cruxsql.db", check_same_thread=False)
    ConsolePlugin({"cruxsql": "view"}, None).prepare_connection(conn, "cruxsql")
    return conn


def test_there_are_many_hostile_statements() -> None:
    assert len(HOSTILE) >= 66


@pytest.mark.parametrize("statement", HOSTILE)
def test_both_consoles_refuse_every_hostile_statement(tmp_path: Path, data_dir: Path, statement: str) -> None:
    out = tmp_path / "out"
    out.mkdir()
    sql = statement.format(out=out, data=data_dir)
    before = _snapshot(data_dir)
    started = time.monotonic()
    with pytest.raises(InvalidInput):
        run_readonly_query(data_dir / "cruxsql.db", sql, timeout=1)
    conn = _datasette_connection(data_dir)
    try:
        with pytest.raises((sqlite3.Error, MemoryError)):
            conn.execute(sql).fetchall()
    finally:
        conn.close()
    assert time.monotonic() - started < 5, "a limit did not stop it at once"
    assert _snapshot(data_dir) == before and _snapshot(out) == {}


def test_the_datasette_sandbox_still_reads(data_dir: Path) -> None:
    conn = _datasette_connection(data_dir)
    assert conn.execute("SELECT value FROM facts WHERE key = 'ssn'").fetchall() == [("078-05-1120",)]
    assert conn.execute("SELECT key FROM json_each('[1,2]')").fetchall() == [(0,), (1,)]
    assert conn.execute("SELECT printf('%05d-%s', 42, 'x'), format('%.2f', 3.14159)").fetchone() == ("00042-x", "3.14")
    assert ("fact_id",) in conn.execute("SELECT name FROM pragma_table_info('facts')").fetchall()
    assert conn.execute("PRAGMA user_version").fetchone() is not None
