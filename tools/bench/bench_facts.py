"""Fact substrate benchmark: rebuild vs parse-only, open+query vs rebuild, store vs bare write+fsync.

    python tools/bench/bench_facts.py                 # 1,000,000 events (a few minutes)
    python tools/bench/bench_facts.py --events 100000 # quicker
    python tools/bench/bench_facts.py --store-latency-only DIR --stores 1000  # store() rows only

Every figure is printed beside a baseline measured in the same run, with the ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from journal_gen import generate  # noqa: E402

import cruxsql  # noqa: E402
from cruxsql.facts import codec, timestamps  # noqa: E402
from cruxsql.sql_console import run_readonly_query  # noqa: E402


def percentile(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def bench_parse(journal: Path) -> float:
    started = time.perf_counter()
    n = 0
    with open(journal, "rb") as fh:
        for line in fh:
            json.loads(line)
            n += 1
    return time.perf_counter() - started


def bench_rebuild(journal: Path, work: Path) -> tuple[float, Path, int]:
    data = work / "rebuild"
    shutil.rmtree(data, ignore_errors=True)
    data.mkdir(parents=True)
    shutil.copy(journal, data / "facts.jsonl")
    started = time.perf_counter()
    with cruxsql.open(data) as store:
        events = store.last_replay.events
    return time.perf_counter() - started, data, events


def bench_open_and_query(data: Path, repeats: int = 7) -> tuple[float, int]:
    times = []
    rows = 0
    for _ in range(repeats):
        started = time.perf_counter()
        with cruxsql.open(data) as store:
            db_path = store.data_dir / "cruxsql.db"
        _, result = run_readonly_query(
            db_path, "SELECT entity, key, value FROM live_facts WHERE tenant_hash = 'tenant1' AND entity = 'svc42'")
        rows = len(result)
        times.append(time.perf_counter() - started)
    return statistics.median(times), rows


def bench_store_latency(data: Path, work: Path, n: int) -> tuple[list[float], list[float]]:
    """store() into the big store against a bare append + fsync of a line of the same size, interleaved
    call by call so both see the same disk (an fsync's cost depends on what else the machine writes)."""
    path = work / "bare.jsonl"
    path.unlink(missing_ok=True)
    ours: list[float] = []
    bare: list[float] = []
    with cruxsql.open(data) as store:
        for i in range(n):
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


def report_store_latency(data: Path, work: Path, n: int) -> None:
    """`--store-latency-only DIR`: the store() rows alone, into a store an earlier run built (and adopted
    when copied), so they can be re-measured without a rebuild."""
    ours, bare = bench_store_latency(data, work, n)
    print(f"store() into {data} ({n} stores, interleaved with a bare append + fsync of the same line)")
    print(f"{'measure':<44}{'cruxsql':>14}{'baseline':>14}{'ratio':>10}")
    for p in (50, 95, 99):
        o, b = percentile(ours, p), percentile(bare, p)
        print(f"{f'store() latency p{p}, ms (vs write+fsync)':<44}{o * 1000:>14.3f}{b * 1000:>14.3f}{o / b:>10.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--stores", type=int, default=300, help="store() calls for the latency figure")
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "cruxsql-bench-facts")
    parser.add_argument("--store-latency-only", type=Path, metavar="DATA_DIR",
                        help="only the store() latency rows, into the store already built in DATA_DIR")
    args = parser.parse_args()
    work: Path = args.workdir
    work.mkdir(parents=True, exist_ok=True)
    if args.store_latency_only:
        report_store_latency(args.store_latency_only, work, args.stores)
        return
    journal = work / f"journal-{args.events}.jsonl"
    if not journal.exists():
        started = time.perf_counter()
        generate(journal, args.events)
        print(f"generated {args.events:,} events ({journal.stat().st_size / 2**20:.0f} MiB) "
              f"in {time.perf_counter() - started:.1f}s")

    parse_s = bench_parse(journal)
    rebuild_s, data, events = bench_rebuild(journal, work)
    open_s, rows = bench_open_and_query(data)
    ours, bare = bench_store_latency(data, work, args.stores)

    print(f"\njournal: {events:,} events, {journal.stat().st_size / 2**20:.0f} MiB")
    print(f"{'measure':<44}{'cruxsql':>14}{'baseline':>14}{'ratio':>10}")
    print(f"{'rebuild throughput, events/s (vs json parse)':<44}{events / rebuild_s:>14,.0f}"
          f"{events / parse_s:>14,.0f}{parse_s / rebuild_s:>10.3f}")
    print(f"{'open + 1 SQL query, s (vs full rebuild)':<44}{open_s:>14.4f}{rebuild_s:>14.2f}"
          f"{rebuild_s / open_s:>9.0f}x")
    for p in (50, 95):
        o, b = percentile(ours, p), percentile(bare, p)
        print(f"{f'store() latency p{p}, ms (vs write+fsync)':<44}{o * 1000:>14.3f}{b * 1000:>14.3f}{o / b:>10.2f}")
    summary = {
        "events": events, "rebuild_s": rebuild_s, "parse_s": parse_s, "open_query_s": open_s, "query_rows": rows,
        "store_p50_ms": percentile(ours, 50) * 1000, "store_p95_ms": percentile(ours, 95) * 1000,
        "bare_p50_ms": percentile(bare, 50) * 1000, "bare_p95_ms": percentile(bare, 95) * 1000,
        "measured_at": timestamps.format_event_time(timestamps.now_ns()),
    }
    out = Path(__file__).resolve().parent / "out"
    out.mkdir(exist_ok=True)
    (out / f"facts-{events}.json").write_text(json.dumps(summary, indent=2) + "\n")


if __name__ == "__main__":
    main()
