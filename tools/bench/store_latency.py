"""store() latency beside a bare append + fsync, and the first recall after bursts of single writes.

Imported by bench_facts.py, and run as a script by its `--compare` in a subprocess whose PYTHONPATH names
another commit's code (so this file imports nothing that older code lacks: `cruxsql` and its codec):

    PYTHONPATH=CODE python tools/bench/store_latency.py DATA WORKDIR STORES BURSTS BURST   # prints one JSON line
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import cruxsql
from cruxsql.facts import codec


def bench_store_latency(data: Path, work: Path, n: int, pause_s: float = 0.0) -> tuple[list[float], list[float]]:
    """store() into the big store against a bare append + fsync of a line of the same size, interleaved
    call by call so both see the same disk (an fsync's cost depends on what else the machine writes);
    with `pause_s`, each pair after that pause (an agent's pace: the background checkpoints finish)."""
    path = work / "bare.jsonl"
    path.unlink(missing_ok=True)
    ours: list[float] = []
    bare: list[float] = []
    with cruxsql.open(data) as store:
        for i in range(n):
            if pause_s:
                time.sleep(pause_s)
            started = time.perf_counter()
            fact = store.store(f"svc{i % 50}", "status", f"deploy canary {i}", confidence=0.9)
            ours.append(time.perf_counter() - started)
            sample = codec.encode_event(codec.StoreEvent(fact)).encode() + b"\n"
            started = time.perf_counter()
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            os.write(fd, sample)
            os.fsync(fd)
            os.close(fd)
            bare.append(time.perf_counter() - started)
    return ours, bare


def bench_recall_after_burst(data: Path, bursts: int, burst: int) -> list[float]:
    """The first `recall` (relevance-ranked search, what an agent asks after writing) after each burst of
    `burst` single store() calls, in seconds. A checkout without `Recall.search` times `query_facts`."""
    took = []
    with cruxsql.open(data) as store:
        recall = cruxsql.Recall(store)
        ask = getattr(recall, "search", None) or recall.query_facts
        ask("warm up")
        for b in range(bursts):
            for i in range(burst):
                store.store(f"svc{i % 50}", "note", f"burst {b} write {i} rollout ledger", confidence=0.9)
            started = time.perf_counter()
            ask(f"ledger rollout burst {b}")
            took.append(time.perf_counter() - started)
    return took


def store_child(data: Path, work: Path, stores: int, bursts: int, burst: int) -> dict:
    """One side of `--compare`, in the process of the code its PYTHONPATH names: open (rebuilding the
    view of a journal copied in, outside the timing), store() latencies beside a bare append + fsync,
    then the first recall after each burst of single writes."""
    with cruxsql.open(data) as store:
        store.counts()
    ours, bare = bench_store_latency(data, work, stores)
    out = {"code": str(Path(cruxsql.__file__).resolve().parents[1]), "store_ms": [t * 1000 for t in ours],
           "bare_ms": [t * 1000 for t in bare]}
    if bursts:
        out["recall_after_burst_ms"] = [t * 1000 for t in bench_recall_after_burst(data, bursts, burst)]
    return out



if __name__ == "__main__":
    data, work, stores, bursts, burst = sys.argv[1:6]
    print(json.dumps(store_child(Path(data), Path(work), int(stores), int(bursts), int(burst))))
