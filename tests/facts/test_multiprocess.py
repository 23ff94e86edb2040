"""Several processes writing one data directory at once."""

from __future__ import annotations

import json
import multiprocessing
import subprocess
import sys
from pathlib import Path

import pytest

import cruxsql
from support.journal_files import journal_bytes

pytestmark = pytest.mark.slow

WRITER = r"""
import sys, cruxsql
store = cruxsql.open(sys.argv[1])
worker = int(sys.argv[2])
for i in range(int(sys.argv[3])):
    store.store("shared", "counter", "w%d-%d" % (worker, i))
    store.store("own-%d" % worker, "k", "x" * (i * 37 % 500))
print("done", flush=True)
"""


def test_concurrent_writers_never_interleave_lose_or_duplicate_lines(tmp_path: Path) -> None:
    workers, per_worker = 4, 40
    with cruxsql.open(tmp_path):
        pass
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), str(w), str(per_worker)],
                              stdout=subprocess.PIPE, text=True) for w in range(workers)]
    for p in procs:
        out, _ = p.communicate(timeout=120)
        assert p.returncode == 0 and out.strip() == "done"

    lines = journal_bytes(tmp_path).split(b"\n")
    assert lines[-1] == b""
    events = [json.loads(l) for l in lines[:-1]]  # every line is whole JSON: nothing interleaved
    stores = [e["fact"] for e in events if e["op"] == "store"]
    assert len(stores) == 2 * workers * per_worker
    assert len({f["fact_id"] for f in stores}) == len(stores)
    shared = [f for f in stores if f["entity"] == "shared"]
    # the lock serialises build + append, so the shared chain has every version exactly once
    assert [f["version"] for f in shared] == list(range(1, workers * per_worker + 1))
    values = sorted(f["value"] for f in shared)
    assert values == sorted(f"w{w}-{i}" for w in range(workers) for i in range(per_worker))

    with cruxsql.open(tmp_path) as store:
        live = store.db.execute("SELECT value FROM live_facts WHERE entity = 'shared'").fetchall()
        assert len(live) == 1
        assert store.counts()["facts"] == len(stores)
        assert store.verify().ok


def test_a_reader_process_sees_writes_made_by_another(tmp_path: Path) -> None:
    reader = cruxsql.open(tmp_path)
    subprocess.run([sys.executable, "-m", "cruxsql", "--help"], check=True, capture_output=True)
    subprocess.run([sys.executable, "-m", "cruxsql", "store", "--data-dir", str(tmp_path), "svc", "k", "from-cli"],
                   check=True, capture_output=True)
    reader.refresh()
    assert [f.value for f in reader.history("svc", "k")] == ["from-cli"]
    reader.close()


def _first_open(data_dir: str, worker: int, barrier, errors) -> None:
    barrier.wait()
    try:
        with cruxsql.open(data_dir) as store:
            store.store("svc", f"k{worker}", "v")
    except BaseException as exc:  # report, whatever it is: the parent asserts there are none
        errors.put(f"{type(exc).__name__}: {exc}")


def test_eight_processes_opening_a_fresh_directory_at_once_all_succeed(tmp_path: Path) -> None:
    """Eight processes released together on a fresh directory (20 times): migrations and the first
    writes never fail with SQLITE_BUSY or anything else."""
    ctx = multiprocessing.get_context("fork")
    errors = ctx.Queue()
    for round_no in range(20):
        data_dir = tmp_path / f"d{round_no}"
        barrier = ctx.Barrier(8)
        procs = [ctx.Process(target=_first_open, args=(str(data_dir), w, barrier, errors)) for w in range(8)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(60)
        assert [p.exitcode for p in procs] == [0] * 8
        found = []
        while not errors.empty():
            found.append(errors.get())
        assert found == []
        with cruxsql.open(data_dir) as store:
            assert store.counts()["live_facts"] == 8
