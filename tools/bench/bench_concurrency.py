"""Many processes on one store: read latency beside writers and a compaction, writer stalls, write scaling.

    python tools/bench/bench_concurrency.py [--events N] [--seconds S] [--code CHECKOUT] [--compaction-only N]
                                            [--erasure-only N]

Builds a store of N journal events (tools/bench/journal_gen.py; default 100,000, the issue's 1M with
--events 1000000), then, each phase with real processes for S seconds (default 6):
  idle        one reader process (Python API: `Recall.query_facts` of a random word, top_k 10) alone
  writers     the same reader beside 4 writing processes (`Store.store`)
  compaction  the same reader, and one writer, while another process compacts the journal
  scaling     aggregate `store()` throughput of 1, 4 and 8 writing processes
and prints one table with the ratios the goals are stated in: read p99 during a compaction vs idle
(goal <= 5x and <= 250 ms), the longest single `store()` during the compaction (goal <= 1 s), and 8-process
vs 1-process throughput (goal >= 1). `--code CHECKOUT` runs every child process on another checkout of
cruxsql (e.g. the commit before these changes) for a baseline with the same store and load.
`--compaction-only N` runs only the compaction phase, N times; `--erasure-only N` the same with an
erasure of one data-subject's facts instead (on the store compacted once first).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
if sys.argv[1:2] != ["--child"]:  # a child imports the cruxsql its PYTHONPATH names (--code)
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

WORDS = ("deploy canary rollout service owner alice database index latency budget incident runbook schema "
         "replica cache queue worker invoice customer region kernel release").split()


# --- child processes -------------------------------------------------------------------------------

def child_read(data: str, seconds: float, out: str) -> None:
    from cruxsql.facts.store import Store
    from cruxsql.recall.facade import Recall

    rng = random.Random(os.getpid())
    stop = Path(out).with_name("stop")
    lat = []
    with Store(data) as store:
        recall = Recall(store)
        recall.query_facts("warmup", tenant="tenant0", record_access=False)
        Path(out + ".ready").touch()
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not stop.exists():
            started = time.perf_counter()
            recall.query_facts(rng.choice(WORDS), tenant=f"tenant{rng.randrange(4)}", top_k=10, record_access=False)
            lat.append(time.perf_counter() - started)
    Path(out).write_text(json.dumps(lat))


def child_write(data: str, seconds: float, out: str) -> None:
    from cruxsql.facts.store import Store

    lat = []
    stop = Path(out).with_name("stop")
    pid = os.getpid()
    with Store(data) as store:
        store.store(f"bench-writer:{pid}", "k", "warmup")
        Path(out + ".ready").touch()
        deadline = time.monotonic() + seconds
        i = 0
        while time.monotonic() < deadline and not stop.exists():
            i += 1
            started = time.perf_counter()
            store.store(f"bench-writer:{pid}", f"k{i % 50}", f"value {pid} {i}")
            lat.append(time.perf_counter() - started)
    Path(out).write_text(json.dumps(lat))


def child_compact(data: str, seconds: float, out: str) -> None:
    from cruxsql.facts.store import Store
    from cruxsql.governance import compaction

    with Store(data) as store:
        started = time.perf_counter()
        report = compaction.compact(store, drop_corrupt=True)
        # (a baseline checkout's report may not say whether its lines came from a snapshot)
        Path(out).write_text(json.dumps([time.perf_counter() - started,
                                         getattr(report, "lines_from_snapshot", None),
                                         getattr(report, "seconds_locked", None)]))


def child_erase(data: str, seconds: float, out: str) -> None:
    from cruxsql.facts.store import Store
    from cruxsql.governance import erasure

    with Store(data) as store:
        started = time.perf_counter()
        report = erasure.erase(store, erasure.Selection(entity_prefixes=(ERASED_PREFIX,)), reason="bench")
        if not report.get("ok"):
            raise SystemExit(f"the erasure's report is not ok: {report.get('errors')}")
        Path(out).write_text(json.dumps([time.perf_counter() - started, None, None]))


ERASED_PREFIX = "user38"  # a few dozen of journal_gen's entities: one data-subject request's facts
CHILDREN = {"read": child_read, "write": child_write, "compact": child_compact, "erase": child_erase}


# --- the driver ------------------------------------------------------------------------------------

class Run:
    def __init__(self, data: Path, work: Path, code: Path) -> None:
        self.data, self.work, self.code = data, work, code
        self.n = 0
        self.stop = work / "stop"  # children end early once it exists

    def start(self, role: str, seconds: float) -> tuple[subprocess.Popen, Path]:
        self.n += 1
        out = self.work / f"{role}-{self.n}.json"
        env = {**os.environ, "PYTHONPATH": str(self.code)}
        proc = subprocess.Popen([sys.executable, __file__, "--child", role, str(self.data), str(seconds), str(out)],
                                env=env, cwd=str(self.work))
        return proc, out

    @staticmethod
    def wait_ready(outs: list[Path], timeout: float = 600) -> None:
        deadline = time.monotonic() + timeout
        while not all(Path(str(o) + ".ready").exists() for o in outs):
            if time.monotonic() > deadline:
                raise SystemExit("a child process never got ready")
            time.sleep(0.05)

    @staticmethod
    def collect(procs: list[tuple[subprocess.Popen, Path]]) -> list[list[float]]:
        results = []
        for proc, out in procs:
            if proc.wait() != 0:
                raise SystemExit(f"child {out.name} failed (exit {proc.returncode})")
            results.append(json.loads(out.read_text()))
        return results


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000 if ordered else float("nan")


def reads_beside(run: Run, seconds: float, writers: int = 0, compact: bool = False, role: str = "compact") -> dict:
    """The reader's latencies (and the writers' longest store) with `writers` writing processes and,
    with `compact`, a compaction (`role` "erase": an erasure) started once they all run (the phase lasts
    as long as it does)."""
    length = 3600 if compact else seconds  # a compaction phase lasts until the compaction is over
    procs = [run.start("write", length) for _ in range(writers)]
    reader = run.start("read", length)
    run.wait_ready([out for _, out in procs] + [reader[1]])
    comp = None
    if compact:
        time.sleep(0.5)
        comp = run.start(role, 0)
        comp[0].wait()
        time.sleep(0.2)
        run.stop.touch()
    results = run.collect([reader] + procs)
    run.stop.unlink(missing_ok=True)
    out = {"read_p50_ms": pct(results[0], 0.5), "read_p99_ms": pct(results[0], 0.99),
           "read_max_ms": pct(results[0], 1.0), "reads": len(results[0])}
    if procs:
        out["longest_store_ms"] = max(max(r) for r in results[1:]) * 1000
    if comp is not None:
        out["compaction_s"], out["from_snapshot"], out["locked_s"] = run.collect([comp])[0]
    return out


def compaction_runs(run: Run, data: Path, times: int, role: str = "compact") -> None:
    """The compaction phase (`role` "erase": an erasure instead) `times` times, each on a fresh copy of
    the store built once."""
    pristine = data.with_name("pristine")
    shutil.copytree(data, pristine)
    title = {"compact": "compaction s", "erase": "erasure s"}[role]
    print(f"{'run':<5}{title:>13}{'locked s':>10}"
          f"{'longest store() s':>19}{'read p99 ms':>13}")
    for i in range(times):
        shutil.rmtree(data)
        shutil.copytree(pristine, data)
        r = reads_beside(run, 0, writers=1, compact=True, role=role)
        locked = float("nan") if r["locked_s"] is None else r["locked_s"]
        print(f"{i + 1:<5}{r['compaction_s']:>13.2f}{locked:>10.2f}{r['longest_store_ms'] / 1000:>19.2f}"
              f"{r['read_p99_ms']:>13.0f}", flush=True)


def throughput(run: Run, seconds: float, writers: int) -> float:
    procs = [run.start("write", seconds) for _ in range(writers)]
    return sum(len(r) for r in run.collect(procs)) / seconds


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        role, data, seconds, out = sys.argv[2:6]
        CHILDREN[role](data, float(seconds), out)
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--seconds", type=float, default=6.0, help="Length of each phase (default 6).")
    ap.add_argument("--code", type=Path, default=ROOT, help="The cruxsql checkout the child processes run.")
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--compaction-only", type=int, default=0, metavar="N",
                    help="Only the compaction phase, N times, each on a fresh copy of the store (a stall's spread "
                         "on a loaded machine); prints each run's stall and the compaction's time under the lock.")
    ap.add_argument("--erasure-only", type=int, default=0, metavar="N",
                    help="The same with an erasure (the facts of the entities starting with "
                         f"{ERASED_PREFIX!r}, a data-subject request) instead of a bare compaction.")
    args = ap.parse_args()
    from journal_gen import generate

    work = Path(tempfile.mkdtemp(prefix="bench-concurrency-", dir=args.workdir))
    try:
        data = work / "data"
        data.mkdir()
        started = time.perf_counter()
        generate(data / "facts.jsonl", args.events)
        env = {**os.environ, "PYTHONPATH": str(args.code)}
        subprocess.run([sys.executable, "-m", "cruxsql", "rebuild", "--data-dir", str(data)], env=env, check=True,
                       capture_output=True, cwd=str(work))
        if args.erasure_only:  # the erasure then erases its selection only, not also every fact deleted before
            subprocess.run([sys.executable, "-m", "cruxsql", "compact", "--data-dir", str(data)], env=env,
                           check=True, capture_output=True, cwd=str(work))
        print(f"store: {args.events:,} events, built in {time.perf_counter() - started:.1f} s; code: {args.code}")
        run = Run(data, work, args.code)
        if args.compaction_only or args.erasure_only:
            compaction_runs(run, data, args.compaction_only or args.erasure_only,
                            "compact" if args.compaction_only else "erase")
            return
        idle = reads_beside(run, args.seconds)
        busy = reads_beside(run, args.seconds, writers=4)
        during = reads_beside(run, args.seconds, writers=1, compact=True)
        scale = {n: throughput(run, args.seconds, n) for n in (1, 4, 8)}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    rows = [("idle", idle), ("beside 4 writers", busy), ("during a compaction", during)]
    print(f"{'reads':<22}{'p50 ms':>9}{'p99 ms':>9}{'max ms':>9}{'reads':>8}  longest store() ms")
    for name, r in rows:
        print(f"{name:<22}{r['read_p50_ms']:>9.1f}{r['read_p99_ms']:>9.1f}{r['read_max_ms']:>9.1f}{r['reads']:>8}"
              f"  {r.get('longest_store_ms', float('nan')):.0f}")
    snapshot = {True: "built from a snapshot", False: "built under the lock", None: "baseline"}[during["from_snapshot"]]
    print(f"compaction took {during['compaction_s']:.2f} s (live lines {snapshot})")
    print("writes/s: " + ", ".join(f"{n} process(es) {v:.0f}" for n, v in scale.items()))
    ratio = during["read_p99_ms"] / idle["read_p99_ms"]
    print(f"read p99 during compaction / idle: {ratio:.2f}x (goal <= 5x, and <= 250 ms: "
          f"{during['read_p99_ms']:.0f} ms)")
    print(f"longest writer stall during compaction: {during['longest_store_ms'] / 1000:.2f} s (goal <= 1 s)")
    print(f"8-process / 1-process write throughput: {scale[8] / scale[1]:.2f}x (goal >= 1)")


if __name__ == "__main__":
    main()
