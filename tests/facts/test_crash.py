"""Crash safety with real processes killed by SIGKILL while writing."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import cruxsql
from support.cli_process import run_cruxsql
from cruxsql.facts.faults import CRASH_ENV
from support.journal_files import journal_bytes

pytestmark = pytest.mark.slow

WRITER = r"""
import sys, cruxsql
store = cruxsql.open(sys.argv[1])
i = 0
while True:
    fact = store.store("svc%d" % (i % 7), "k%d" % (i % 3), "value %d ünï" % i, confidence=0.5 + (i % 5) / 10)
    if i % 11 == 0:
        store.delete(fact.fact_id)
    print(fact.fact_id, flush=True)
    i += 1
"""


def _assert_consistent(data_dir: Path, acknowledged: list[str]) -> None:
    with cruxsql.open(data_dir) as store:
        present = {r[0] for r in store.db.execute("SELECT fact_id FROM facts")}
        missing = [f for f in acknowledged if f not in present]
        assert not missing, f"acknowledged writes lost: {missing[:5]}"
        report = store.verify()
        assert report.view_matches_replay, report.differences
        assert not report.corrupt_lines


def test_sigkill_during_a_stream_of_writes_loses_no_acknowledged_write(tmp_path: Path) -> None:
    rng = random.Random(7)
    acknowledged: list[str] = []
    for _ in range(6):
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path)], stdout=subprocess.PIPE)
        fd = proc.stdout.fileno()
        os.set_blocking(fd, False)
        # The kill lands a random moment after the writer's first acknowledged write (not after its start,
        # which on a loaded machine can take longer than the whole window).
        started, deadline = time.monotonic(), None
        buf = b""
        while deadline is None or time.monotonic() < deadline:
            try:
                buf += os.read(fd, 1 << 16)
            except BlockingIOError:
                time.sleep(0.01)
            if deadline is None and (b"\n" in buf or time.monotonic() - started > 30):
                deadline = time.monotonic() + rng.uniform(0.05, 0.6)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        os.set_blocking(fd, True)
        buf += proc.stdout.read()
        proc.stdout.close()
        acknowledged += [l for l in buf.decode().split("\n")[:-1] if l]  # a partial last line was never acknowledged
        _assert_consistent(tmp_path, acknowledged)
    assert len(acknowledged) > 20


def test_crash_after_the_append_before_the_view_commit(tmp_path: Path) -> None:
    assert run_cruxsql(tmp_path, "store", "svc", "owner", "alice").returncode == 0
    crashed = run_cruxsql(tmp_path, "store", "svc", "owner", "bob", env={CRASH_ENV: "store-after-append"})
    assert crashed.returncode == -signal.SIGKILL and crashed.stdout == ""
    # the event was durable in the journal, so reopening applies it
    with cruxsql.open(tmp_path) as store:
        assert [f.value for f in store.history("svc", "owner")] == ["alice", "bob"]
        assert store.verify().ok


def test_crash_inside_the_view_transaction(tmp_path: Path) -> None:
    assert run_cruxsql(tmp_path, "store", "svc", "owner", "alice").returncode == 0
    crashed = run_cruxsql(tmp_path, "store", "svc", "owner", "carol", env={CRASH_ENV: "replay-before-commit"})
    assert crashed.returncode == -signal.SIGKILL
    with cruxsql.open(tmp_path) as store:
        history = store.history("svc", "owner")
        assert [f.value for f in history] == ["alice", "carol"]
        assert history[0].superseded_by == history[1].fact_id
        assert store.verify().ok


def _run_store_and_kill(data_dir: Path, args: list[str], kill_when) -> tuple[int, str, bool]:
    """Run `cruxsql store ...`, polling every millisecond; SIGKILL it as soon as `kill_when(appended)`
    says so. Returns (exit status, stdout, whether its line reached the journal)."""
    journal = data_dir / "facts.jsonl"
    size_before = journal.stat().st_size if journal.exists() else 0
    env = {**os.environ, "CRUXSQL_DATA_DIR": str(data_dir)}
    proc = subprocess.Popen([sys.executable, "-m", "cruxsql", "store", *args], stdout=subprocess.PIPE, text=True,
                            env=env)
    while proc.poll() is None:
        if kill_when(journal.exists() and journal.stat().st_size > size_before):
            proc.send_signal(signal.SIGKILL)
            break
        time.sleep(0.001)
    out, _ = proc.communicate(timeout=60)
    return proc.returncode, out, journal.exists() and journal.stat().st_size > size_before


def test_cli_processes_killed_at_random_moments(tmp_path: Path) -> None:
    """Three kinds of round: a store left to finish (acknowledged), one killed the moment its line lands
    in the journal (before the view and the acknowledgement), one killed at a random moment."""
    rng = random.Random(11)
    acknowledged: list[str] = []
    killed_after_append = killed_at_random = 0
    # Nine rounds, then more of whichever kind has not yet landed its minimum (a loaded machine can let
    # a process finish before its kill arrives); bounded, so a CLI that never writes still fails.
    rounds = ["finish", "after-append", "random"] * 10
    for i, mode in enumerate(rounds):
        done = len(acknowledged) >= 3 and killed_after_append >= 2 and killed_at_random >= 1
        if i >= 9 and done:
            break
        if i >= 9 and mode == "finish" and len(acknowledged) >= 3:
            continue
        deadline = time.monotonic() + rng.uniform(0.05, 1.0)
        status, out, appended = _run_store_and_kill(
            tmp_path, ["svc", f"k{i % 2}", f"v{i}"],
            {"finish": lambda grown: False, "after-append": lambda grown: grown,
             "random": lambda grown: time.monotonic() > deadline}[mode])
        if out.strip():  # printed, so acknowledged (even if the kill then caught the process exiting)
            acknowledged.append(out.split()[0])
        elif status == -signal.SIGKILL:
            killed_after_append += appended
            killed_at_random += mode == "random"
    _assert_consistent(tmp_path, acknowledged)
    assert len(acknowledged) >= 3  # every "finish" round
    assert killed_after_append >= 2  # durable in the journal, never acknowledged: applied at the next open
    assert killed_at_random >= 1
    with cruxsql.open(tmp_path) as store:
        assert len(store.db.execute("SELECT fact_id FROM facts").fetchall()) >= len(acknowledged) + 2


def test_kill_during_rebuild_reopens_to_a_full_replay(tmp_path: Path) -> None:
    with cruxsql.open(tmp_path) as store:
        store.store_batch([cruxsql.StoreRequest(f"e{i}", "k", f"v{i}") for i in range(3000)])
        for i in range(50):
            store.store(f"e{i}", "k", f"w{i}")
    crashed = run_cruxsql(tmp_path, "rebuild", env={CRASH_ENV: "replay-before-commit"})
    assert crashed.returncode == -signal.SIGKILL
    with cruxsql.open(tmp_path) as store:
        assert store.counts()["facts"] == 3050 and store.counts()["live_facts"] == 3000
        assert store.verify().ok


def test_a_killed_verify_leaves_no_copy_outside_the_data_directory(tmp_path: Path) -> None:
    data_dir, tmp_dir = tmp_path / "data", tmp_path / "tmp"
    tmp_dir.mkdir()
    assert run_cruxsql(data_dir, "store", "__vault__::alice", "ssn", "078-05-1120 private").returncode == 0
    crashed = run_cruxsql(data_dir, "verify", env={CRASH_ENV: "verify-fresh-replay-built", "TMPDIR": str(tmp_dir)})
    assert crashed.returncode == -signal.SIGKILL
    assert list(tmp_dir.iterdir()) == []
    # the fresh replay it was building sits where erasure scans, and the next command removes it
    leftovers = sorted(p.name for p in data_dir.glob("verify-replay-*"))
    assert leftovers and leftovers[0].endswith(".db")
    assert b"078-05-1120 private" in b"".join((data_dir / name).read_bytes() for name in leftovers)
    assert run_cruxsql(data_dir, "query", "anything").returncode == 0
    assert list(data_dir.glob("verify-replay-*")) == []
    assert run_cruxsql(data_dir, "verify", "--strict").returncode == 0
    assert list(data_dir.glob("verify-replay-*")) == []


KILL_INSIDE_VIEW_COMMIT = r"""
import os, signal, sys
from cruxsql.facts import view, view_file
journal = os.path.join(os.environ["CRUXSQL_DATA_DIR"], "facts.jsonl")
size_at_open = os.path.getsize(journal)
real_open = view_file.open_connection
def open_connection(path):
    db = real_open(path)
    def commit_hook():
        # SQLite runs this inside COMMIT, before the transaction is durable or visible
        if os.path.getsize(journal) > size_at_open:
            os.kill(os.getpid(), signal.SIGKILL)
        return False
    db.set_commit_hook(commit_hook)
    return db
view_file.open_connection = open_connection
from cruxsql.cli import main
sys.argv = ["cruxsql"] + sys.argv[1:]
main()
"""


def _journal_fact_ids(data_dir: Path) -> list[str]:
    import json
    lines = journal_bytes(data_dir).splitlines()
    return [json.loads(line)["fact"]["fact_id"] for line in lines if line.startswith(b'{"op":"store",')]


def _assert_stored_exactly_once(data_dir: Path) -> None:
    """Reopened (twice), every journal store line is one fact row and one event row, the chain intact."""
    ids = _journal_fact_ids(data_dir)
    for _ in range(2):
        with cruxsql.open(data_dir) as store:
            rows = store.db.execute("SELECT fact_id, count(*) FROM facts GROUP BY fact_id").fetchall()
            assert sorted(rows) == sorted((fid, 1) for fid in ids)
            assert store.db.execute("SELECT count(*) FROM journal_events").fetchone()[0] == \
                len(journal_bytes(data_dir).splitlines())
            history = store.history("svc", "owner")
            assert [(f.value, f.version) for f in history] == [("alice", 1), ("bob", 2)]
            assert history[0].superseded_by == history[1].fact_id
            assert store.verify().ok


def test_killed_after_the_journal_fsync_inside_the_view_transaction_stores_exactly_once(tmp_path: Path) -> None:
    """SIGKILL after the journal's fsync returned, with the view transaction open and not committed."""
    assert run_cruxsql(tmp_path, "store", "svc", "owner", "alice").returncode == 0
    crashed = run_cruxsql(tmp_path, "store", "svc", "owner", "bob", env={CRASH_ENV: "store-after-append"})
    assert crashed.returncode == -signal.SIGKILL and crashed.stdout == ""
    assert len(_journal_fact_ids(tmp_path)) == 2
    _assert_stored_exactly_once(tmp_path)


def test_killed_inside_the_view_commit_stores_exactly_once(tmp_path: Path) -> None:
    """SIGKILL from SQLite's commit hook, i.e. inside COMMIT of the view transaction of a durable line."""
    assert run_cruxsql(tmp_path, "store", "svc", "owner", "alice").returncode == 0
    env = {**os.environ, "CRUXSQL_DATA_DIR": str(tmp_path)}
    crashed = subprocess.run([sys.executable, "-c", KILL_INSIDE_VIEW_COMMIT, "store", "svc", "owner", "bob"],
                             capture_output=True, text=True, env=env, timeout=60)
    assert crashed.returncode == -signal.SIGKILL and crashed.stdout == ""
    assert len(_journal_fact_ids(tmp_path)) == 2
    _assert_stored_exactly_once(tmp_path)


def test_a_view_transaction_lost_to_a_power_cut_is_replayed_from_the_journal(tmp_path: Path) -> None:
    """synchronous=NORMAL: a power cut may lose the view's last commits (never the journal's fsynced
    lines). Simulated by putting back the view files as they were before the store: reopening replays
    the line past the view's checkpoint, once."""
    with cruxsql.open(tmp_path) as store:
        store.store("svc", "owner", "alice")
    saved = {p.name: p.read_bytes() for p in tmp_path.glob("cruxsql.db*")}
    with cruxsql.open(tmp_path) as store:
        store.store("svc", "owner", "bob")
    for p in tmp_path.glob("cruxsql.db*"):
        p.unlink()
    for name, data in saved.items():
        (tmp_path / name).write_bytes(data)
    _assert_stored_exactly_once(tmp_path)
