"""A mutation's durability as the files show it: the first write into a new directory fsyncs the journal
and then the directory (so the journal's name survives a crash too), and a process killed right after
its write to the journal leaves the whole mutation there, never a part of it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cruxsql.facts.store import Store
from support.journal_files import journal_bytes

KILL_AFTER_FIRST_JOURNAL_WRITE = r"""
import os, signal, sys
import cruxsql

data_dir = sys.argv[1]
store = cruxsql.open(data_dir)
journal = os.path.realpath(os.path.join(data_dir, "facts.jsonl"))
real_write = os.write

def write(fd, data):
    written = real_write(fd, data)
    if os.readlink(f"/proc/self/fd/{fd}") == journal:
        os.kill(os.getpid(), signal.SIGKILL)   # a crash right after the first write() to the journal
    return written

os.write = write
store.store("svc", "owner", "bob")             # retires alice's fact: a store line and a supersede line
"""


def test_the_first_store_into_a_new_directory_fsyncs_the_journal_then_the_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data_dir = tmp_path / "new"
    journal = data_dir / "facts.jsonl"
    with Store(data_dir) as store:
        assert not journal.exists()
        synced: list[str] = []
        real_fsync = os.fsync

        def fsync(fd: int) -> None:
            synced.append(os.readlink(f"/proc/self/fd/{fd}"))
            real_fsync(fd)

        monkeypatch.setattr(os, "fsync", fsync)
        store.store("svc", "owner", "alice")
        first = list(synced)
        synced.clear()
        store.store("svc", "pager", "bob")
    assert str(journal) in first, first
    assert str(data_dir) in first[first.index(str(journal)) + 1:], f"no directory fsync after the journal's: {first}"
    assert synced.count(str(journal)) == 1 and str(data_dir) not in synced  # the name exists: the file only


def test_a_kill_right_after_the_journal_write_leaves_the_whole_mutation_in_the_file(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with Store(data_dir) as store:
        alice = store.store("svc", "owner", "alice")
    before = journal_bytes(data_dir)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    crashed = subprocess.run([sys.executable, "-c", KILL_AFTER_FIRST_JOURNAL_WRITE, str(data_dir)],
                             capture_output=True, text=True, timeout=60, env=env)
    assert crashed.returncode == -9, crashed.stderr
    after = journal_bytes(data_dir)       # read before any store reopens (and repairs) it
    assert after.startswith(before)
    added = after[len(before):]
    assert added.endswith(b"\n"), f"the journal holds part of a line: {added!r}"
    lines = [json.loads(raw) for raw in added.splitlines()]
    assert [line["op"] for line in lines] == ["store", "supersede"], \
        f"the journal holds {len(lines)} of the mutation's 2 lines: {lines}"
    bob = lines[0]["fact"]
    assert (bob["value"], lines[1]["fact_id"], lines[1]["by_fact_id"]) == ("bob", alice.fact_id, bob["fact_id"])
    with Store(data_dir) as store:                          # and replay applies all of it
        assert store.get(alice.fact_id).superseded_by == bob["fact_id"]
        assert journal_bytes(data_dir) == after
