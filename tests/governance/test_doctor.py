"""`cruxsql doctor`: exit codes on planted problems, read-only, Prometheus output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cruxsql.facts.store import Store
from cruxsql.governance import doctor
from support.cli_process import run_cruxsql
from support.journal_files import journal_bytes


def _doctor(data_dir: Path, *args: str) -> subprocess.CompletedProcess:
    return run_cruxsql(data_dir, "doctor", "--json", *args)


def _statuses(result: subprocess.CompletedProcess) -> dict[str, str]:
    return {c["check"]: c["status"] for c in json.loads(result.stdout)["checks"]}


@pytest.fixture
def store_dir(tmp_path):
    with Store(tmp_path / "d") as store:
        for i in range(5):
            store.store("svc", f"k{i}", f"value {i}")
    return tmp_path / "d"


def _snapshot(data_dir: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in data_dir.iterdir() if p.is_file() and not p.name.endswith("-shm")}


def test_a_healthy_store_is_ok_and_nothing_changes(store_dir):
    before = _snapshot(store_dir)
    result = _doctor(store_dir)
    assert result.returncode == 0, result.stdout
    assert set(_statuses(result).values()) == {"ok"}
    assert _snapshot(store_dir) == before


@pytest.mark.slow
def test_a_torn_tail_warns(store_dir):
    with open(store_dir / "facts.jsonl", "ab") as fh:
        fh.write(b'{"op":"store","fact":{"fact_id":"f_torn')
    result = _doctor(store_dir)
    assert result.returncode == 1
    assert _statuses(result)["torn_tails"] == "warning"
    assert journal_bytes(store_dir).endswith(b'"f_torn'), "doctor must not repair"


@pytest.mark.slow
def test_a_stale_view_warns(store_dir, tmp_path):
    other = tmp_path / "other"
    with Store(other) as store:
        store.store("svc", "extra", "appended by another process")
    line = journal_bytes(other).splitlines(keepends=True)[0]
    with open(store_dir / "facts.jsonl", "ab") as fh:
        fh.write(line)
    result = _doctor(store_dir)
    assert result.returncode == 1
    check = next(c for c in json.loads(result.stdout)["checks"] if c["check"] == "view_in_step")
    assert check["status"] == "warning" and check["value"] == len(line)


@pytest.mark.slow
def test_a_held_lock_warns_and_names_the_pid(store_dir):
    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, sys, time; fd = open(sys.argv[1], 'a'); fcntl.flock(fd, fcntl.LOCK_EX); "
        "print('locked', flush=True); time.sleep(60)"), str(store_dir / "LOCK")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        result = _doctor(store_dir)
    finally:
        holder.kill()
        holder.wait()
    assert result.returncode == 1
    check = next(c for c in json.loads(result.stdout)["checks"] if c["check"] == "writer_lock")
    assert check["status"] == "warning" and check["message"] == f"the writer lock is held by pid {holder.pid}"


def test_an_idle_store_warns(store_dir):
    later = doctor.diagnose(store_dir, max_idle="1h", now_ns=time.time_ns() + 2 * 3600 * 10**9)
    assert later.status == doctor.WARNING
    assert "nothing written for longer than 1h" in next(c for c in later.checks if c.name == "last_write").message
    assert doctor.diagnose(store_dir, max_idle="0", now_ns=time.time_ns() + 10**15).status == doctor.OK


@pytest.mark.slow
def test_a_full_disk_is_critical(tmp_path):
    mount = tmp_path / "tiny"
    mount.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)],
                                           capture_output=True).returncode != 0:
        pytest.skip("needs root and tmpfs mounts to build a tiny filesystem")
    try:
        with Store(mount / "d") as store:
            store.store("svc", "owner", "alice")
        result = _doctor(mount / "d")
        assert result.returncode == 2
        assert _statuses(result)["disk_space"] == "critical"
    finally:
        subprocess.run(["umount", str(mount)], check=True)


@pytest.mark.slow
def test_prometheus_output(store_dir):
    result = subprocess.run([sys.executable, "-m", "cruxsql", "doctor", "--prometheus", "--data-dir", str(store_dir)],
                            capture_output=True, text=True)
    assert result.returncode == 0
    lines = result.stdout.splitlines()
    assert f'cruxsql_doctor_status{{data_dir="{store_dir}"}} 0' in lines
    assert f'cruxsql_doctor_check_status{{data_dir="{store_dir}",check="view_in_step"}} 0' in lines
    assert sum(1 for line in lines if line.startswith("cruxsql_doctor_check_status{")) == 11  # mcp_tool_errors, lines_crux_skips and erasure_copies too


@pytest.mark.slow
def test_no_store_has_an_exit_status_of_its_own(tmp_path):
    result = _doctor(tmp_path / "nothing")
    assert result.returncode == 3
    assert result.stderr.startswith("Error: no cruxsql store at") and not (tmp_path / "nothing").exists()
    (tmp_path / "empty").mkdir()
    assert _doctor(tmp_path / "empty").returncode == 3


@pytest.mark.slow
def test_doctor_that_cannot_check_exits_4_not_as_a_warning(store_dir):
    bad_value = _doctor(store_dir, "--max-idle", "soon")
    assert bad_value.returncode == 4 and bad_value.stderr.startswith("Error: invalid duration 'soon'")
    unknown = _doctor(store_dir, "--bogus")
    assert unknown.returncode == 4 and "No such option '--bogus'" in unknown.stderr


def test_mcp_tool_errors_are_reported(store_dir):
    from cruxsql.accounting.tool_errors import record_error

    with Store(store_dir) as store:
        record_error(store.db, "query_facts", "alice", "top_k must be an integer", internal=False)
        assert doctor.diagnose(store_dir).status == doctor.OK
        record_error(store.db, "query", None, "internal error in query: OSError: [Errno 5] I/O error", internal=True)
    health = doctor.diagnose(store_dir)
    check = next(c for c in health.checks if c.name == "mcp_tool_errors")
    assert health.status == doctor.WARNING and check.status == doctor.WARNING
    assert check.message.startswith("1 MCP tool(s) failed inside the server: query (internal) at ")
    assert "query_facts at " in check.message and "top_k must be an integer" in check.message
    later = doctor.diagnose(store_dir, now_ns=time.time_ns() + 2 * 86400 * 10**9)
    assert next(c for c in later.checks if c.name == "mcp_tool_errors").status == doctor.OK  # outside the day
