"""The SQL console is a sandbox: one read-only statement; nothing created or changed, anywhere."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import cruxsql
from cruxsql.errors import InvalidInput
from cruxsql.console.readonly_sql import run_readonly_query

FOREVER = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"


@pytest.fixture()
def data_dir(tmp_path: Path) -> Path:
    d = tmp_path / "data"
    with cruxsql.open(d) as store:
        store.store("__vault__::alice", "ssn", "078-05-1120", private=True)
        store.store("svc", "owner", "alice")
    return d


def _snapshot(root: Path) -> dict[str, str]:
    """Every file under root with the hash of its content. The WAL index is left out (readers of a WAL
    database map it) and so is an empty WAL (a reader opens it); neither holds data of the view."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and not p.name.endswith("-shm")
            and not (p.name.endswith("-wal") and p.stat().st_size == 0)}


REFUSED = [
    ("PRAGMA query_only=OFF", "PRAGMA query_only=OFF"),
    ("VACUUM INTO '{out}/copy.db'", "VACUUM INTO '{out}/copy.db'"),
    ("VACUUM INTO '{data}/LOCK'", "VACUUM INTO '{data}/LOCK'"),
    ("VACUUM", "VACUUM"),
    ("ATTACH DATABASE '{out}/other.db' AS other", "ATTACH or VACUUM ({out}/other.db)"),
    ("DETACH DATABASE main", "DETACH main"),
    ("PRAGMA journal_mode=DELETE", "PRAGMA journal_mode=DELETE"),
    ("PRAGMA cache_size=10", "PRAGMA cache_size=10"),
    ("PRAGMA writable_schema", "PRAGMA writable_schema"),
    ("SELECT load_extension('{out}/evil')", "the function load_extension()"),
    ("DELETE FROM facts", "DELETE facts"),
    ("INSERT INTO facts (fact_id) VALUES ('x')", "INSERT facts"),
    ("CREATE TABLE t (x)", "INSERT sqlite_master"),
    ("BEGIN IMMEDIATE", "TRANSACTION BEGIN"),
]


@pytest.mark.parametrize("query,named", REFUSED, ids=[q for q, _ in REFUSED])
def test_refused_statements_say_read_only_and_leave_every_file_alone(tmp_path: Path, data_dir: Path,
                                                                    query: str, named: str) -> None:
    out = tmp_path / "out"
    out.mkdir()
    before, out_before = _snapshot(data_dir), _snapshot(out)
    with pytest.raises(InvalidInput) as err:
        run_readonly_query(data_dir / "cruxsql.db", query.format(out=out, data=data_dir))
    assert str(err.value) == f"read-only SQL console: {named.format(out=out, data=data_dir)} is not allowed"
    assert _snapshot(data_dir) == before and _snapshot(out) == out_before == {}


def test_turning_query_only_off_before_a_vacuum_into_is_refused_before_anything_runs(tmp_path: Path, data_dir: Path) -> None:
    target = tmp_path / "x.db"
    with pytest.raises(InvalidInput) as err:
        run_readonly_query(data_dir / "cruxsql.db", f"PRAGMA query_only=OFF; VACUUM INTO '{target}'")
    assert str(err.value) == "read-only SQL console: PRAGMA query_only=OFF is not allowed"
    assert not target.exists()


def test_one_statement_at_a_time(data_dir: Path) -> None:
    with pytest.raises(InvalidInput) as err:
        run_readonly_query(data_dir / "cruxsql.db", "SELECT 1; SELECT 2")
    assert str(err.value) == "one SQL statement at a time: found another after 'SELECT 1;'"
    # a trailing semicolon, comment or blank is not a second statement
    assert run_readonly_query(data_dir / "cruxsql.db", "SELECT 1 AS one; -- done\n ;") == (["one"], [(1,)])


@pytest.mark.parametrize("query", ["", "   ", ";", "-- only a comment", "/* c */ ;"])
def test_an_empty_statement_is_an_error(data_dir: Path, query: str) -> None:
    with pytest.raises(InvalidInput) as err:
        run_readonly_query(data_dir / "cruxsql.db", query)
    assert str(err.value).startswith("empty SQL statement")


def test_reads_and_schema_pragmas_work(data_dir: Path) -> None:
    db = data_dir / "cruxsql.db"
    assert run_readonly_query(db, "SELECT entity, value FROM live_facts WHERE key = 'owner'") == (
        ["entity", "value"], [("svc", "alice")])
    columns, rows = run_readonly_query(db, "PRAGMA table_info(facts)")
    assert columns[:3] == ["cid", "name", "type"] and rows[0][1:3] == ("fact_id", "TEXT")
    assert run_readonly_query(db, "SELECT name FROM pragma_table_info('facts') WHERE cid = 2") == (
        ["name"], [("entity",)])
    assert run_readonly_query(db, "PRAGMA user_version") == (["user_version"], [(0,)])
    assert run_readonly_query(db, "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 3) "
                                  "SELECT sum(x) AS s FROM c") == (["s"], [(6,)])


def test_timeout_stops_a_runaway_query(data_dir: Path) -> None:
    started = time.monotonic()
    with pytest.raises(InvalidInput) as err:
        run_readonly_query(data_dir / "cruxsql.db", FOREVER, timeout=0.3)
    assert str(err.value) == "query stopped after the 0.3-second timeout (--timeout)"
    assert time.monotonic() - started < 5


def test_memory_ceiling_stops_a_greedy_query(data_dir: Path) -> None:
    greedy = ("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 2000000) "
              "SELECT length(group_concat(printf('%040d', x))) FROM c")
    with pytest.raises(InvalidInput) as err:
        run_readonly_query(data_dir / "cruxsql.db", greedy, memory_limit_mib=16)
    assert str(err.value) == "query stopped at the 16 MiB memory ceiling (--max-memory)"
    # the ceiling is lifted afterwards: the same query fits in the default
    assert run_readonly_query(data_dir / "cruxsql.db", greedy) == (
        ["length(group_concat(printf('%040d', x)))"], [(2000000 * 41 - 1,)])


def _as_at_a_terminal() -> None:
    """In the CLI's process before it starts: Ctrl-C handled as at a terminal, whatever the test process
    inherited or was left with (an ignored or blocked SIGINT passes to a child and outlives its exec)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])


def _cli(data_dir: Path, *args: str, **kw) -> subprocess.Popen:
    env = {**os.environ, "CRUXSQL_DATA_DIR": str(data_dir)}
    return subprocess.Popen([sys.executable, "-m", "cruxsql", "sql", *args], env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_as_at_a_terminal, **kw)


def _wait_until_the_view_is_open(proc: subprocess.Popen, within: float = 30.0) -> None:
    """Until the CLI process holds cruxsql.db open (its store is open and the query is about to run)."""
    deadline = time.monotonic() + within
    fds = Path(f"/proc/{proc.pid}/fd")
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if any(os.readlink(fd).endswith("cruxsql.db") for fd in fds.iterdir()):
                return
        except OSError:   # an fd closed while it was being read
            pass
        time.sleep(0.05)
    raise AssertionError("the CLI never opened its view")


def test_cli_ctrl_c_interrupts_at_once_with_one_error_line(data_dir: Path) -> None:
    proc = _cli(data_dir, FOREVER, "--timeout", "30")
    _wait_until_the_view_is_open(proc)   # start-up takes seconds on a loaded machine: wait for it, not a guess
    time.sleep(0.5)  # then well inside the query
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=20)
    assert time.monotonic() - sent < 3
    assert proc.returncode == 130 and out == ""
    assert err == "Error: query interrupted (Ctrl-C); nothing was changed\n"


_HOLD_THE_VIEW = """
import sys, time, apsw
db = apsw.Connection(sys.argv[1])
db.execute("PRAGMA locking_mode=EXCLUSIVE")
db.execute("BEGIN EXCLUSIVE")
db.execute("CREATE TABLE held(x)")
print("held", flush=True)
time.sleep(120)
"""


def test_cli_ctrl_c_interrupts_at_once_while_waiting_for_a_lock(data_dir: Path) -> None:
    # another process holds the view's lock: the CLI waits in its busy handler (up to 30 s), and a
    # Ctrl-C must end that wait at once (SQLite's own busy timeout sleeps in C, deferring the signal)
    holder = subprocess.Popen([sys.executable, "-c", _HOLD_THE_VIEW, str(data_dir / "cruxsql.db")],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        proc = _cli(data_dir, "SELECT count(*) FROM facts", "--timeout", "30")
        _wait_until_the_view_is_open(proc)
        time.sleep(0.5)
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=25)
        assert time.monotonic() - sent < 5
        assert proc.returncode == 130 and out == ""
        assert err.strip() in ("", "Error: query interrupted (Ctrl-C); nothing was changed")
    finally:
        holder.kill()
        holder.wait()


def test_cli_refusal_is_one_error_line(tmp_path: Path, data_dir: Path) -> None:
    proc = _cli(data_dir, f"VACUUM INTO '{tmp_path}/copy.db'")
    out, err = proc.communicate(timeout=60)
    assert (proc.returncode, out) == (1, "")
    assert err == f"Error: read-only SQL console: VACUUM INTO '{tmp_path}/copy.db' is not allowed\n"
    assert not (tmp_path / "copy.db").exists()
