"""A mutation that writes several journal lines is all-or-nothing, even when the process dies mid-write.

A real `cruxsql store` process is killed by SIGKILL from inside `os.write`: the wrapper below writes
only the first CUT bytes of the journal append and then kills the process, so the journal is left
exactly as a crash between (or inside) the writes of one mutation leaves it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import cruxsql
from support.journal_files import journal_bytes

pytestmark = pytest.mark.slow

KILL_INSIDE_WRITE = r"""
import os, signal, sys
real_write = os.write
def write(fd, data):
    data = bytes(data)
    if data.startswith(b'{"op":"store'):
        first = data.index(b"\n") + 1
        cut = {"inside-first-line": first // 2, "between-lines": first, "inside-second-line": first + 30}
        real_write(fd, data[:cut[os.environ["CUT"]]])
        os.kill(os.getpid(), signal.SIGKILL)
    return real_write(fd, data)
os.write = write
from cruxsql.cli import main
sys.argv = ["cruxsql"] + sys.argv[1:]
main()
"""


def _cli(data_dir: Path, *args: str, cut: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "CRUXSQL_DATA_DIR": str(data_dir)}
    if cut is None:
        cmd = [sys.executable, "-m", "cruxsql", *args]
    else:
        env["CUT"] = cut
        cmd = [sys.executable, "-c", KILL_INSIDE_WRITE, *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)


@pytest.mark.parametrize("where", ["inside-first-line", "between-lines", "inside-second-line"])
def test_a_store_cut_short_is_not_applied_and_is_reported(tmp_path: Path, where: str) -> None:
    assert _cli(tmp_path, "store", "svc", "owner", "alice").returncode == 0
    before = journal_bytes(tmp_path)
    crashed = _cli(tmp_path, "store", "svc", "owner", "bob", cut=where)
    assert crashed.returncode == -signal.SIGKILL and crashed.stdout == ""
    cut = len(journal_bytes(tmp_path)) - len(before)
    assert cut > 0  # the kill landed inside the append

    verify = _cli(tmp_path, "verify", "--strict", "--json")
    report = json.loads(verify.stdout)
    # the unacknowledged mutation is not applied: one current head, the old one
    with cruxsql.open(tmp_path) as store:
        assert [(f.value, f.superseded_by) for f in store.history("svc", "owner")] == [("alice", None)]
    assert journal_bytes(tmp_path) == before
    # ... and it is reported: the cut-off bytes sit in quarantine, so --strict fails
    assert verify.returncode == 1 and report["view_matches_replay"] is True
    assert len(report["quarantined_tails"]) >= 1
    quarantined = b"".join((tmp_path / name).read_bytes() for name in report["quarantined_tails"])
    assert len(quarantined) == cut
    for name in report["quarantined_tails"]:
        assert (tmp_path / name).stat().st_mode & 0o777 == 0o600

    # a later store extends the chain from the one head
    assert _cli(tmp_path, "store", "svc", "owner", "carol").returncode == 0
    with cruxsql.open(tmp_path) as store:
        chain = store.history("svc", "owner")
        assert [(f.value, f.version) for f in chain] == [("alice", 1), ("carol", 2)]
        assert [f.fact_id for f in chain if f.superseded_by is None] == [chain[1].fact_id]
        assert store.verify().view_matches_replay


def test_a_complete_group_past_the_checkpoint_is_applied_not_quarantined(tmp_path: Path) -> None:
    """A writer killed after its whole write (before the view caught up) loses nothing."""
    with cruxsql.open(tmp_path) as store:
        store.store("svc", "owner", "alice")
    env = {**os.environ, "CRUXSQL_DATA_DIR": str(tmp_path), "CRUXSQL_TEST_CRASH_AT": "store-after-append"}
    crashed = subprocess.run([sys.executable, "-m", "cruxsql", "store", "svc", "owner", "bob"], env=env,
                             capture_output=True, timeout=60)
    assert crashed.returncode == -signal.SIGKILL
    with cruxsql.open(tmp_path) as store:
        chain = store.history("svc", "owner")
        assert [(f.value, f.superseded_by) for f in chain] == [("alice", chain[1].fact_id), ("bob", None)]
        assert store.journal.quarantined_tails() == []


def test_a_journal_the_view_never_followed_is_left_as_written(tmp_path: Path) -> None:
    """Only bytes appended past the view's checkpoint are candidates: a journal written elsewhere (here:
    the same two lines, copied into a fresh directory with no view) replays as Crux would."""
    with cruxsql.open(tmp_path / "a") as store:
        store.store("svc", "owner", "alice")
        store.store("svc", "owner", "bob")
    lines = journal_bytes(tmp_path / "a").splitlines(keepends=True)
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "facts.jsonl").write_bytes(b"".join(lines[:2]))  # store, store: no supersede line
    with cruxsql.open(tmp_path / "b") as store:
        assert [(f.value, f.superseded_by) for f in store.history("svc", "owner")] == [("alice", None),
                                                                                      ("bob", None)]
        assert store.journal.quarantined_tails() == []
