"""Several processes writing one data directory at once."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import cruxsql

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

    lines = (tmp_path / "facts.jsonl").read_bytes().split(b"\n")
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
