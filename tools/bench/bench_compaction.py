"""Compaction benchmark: compact a journal of N events against a plain buffered write + fsync of the same bytes.

    python tools/bench/bench_compaction.py                  # 1,000,000 events (several minutes)
    python tools/bench/bench_compaction.py --events 100000  # quicker
    python tools/bench/bench_compaction.py --from-store DIR  # a copy of a store built earlier
    ... --code OLD_CHECKOUT   # time another checkout's cruxsql on the same store (before/after a change)
    ... --no-hooks            # without the replay hooks (other packages' derived tables)

Steps: generate a realistic journal with the codec (tools/bench/journal_gen.py: stores with version
chains, supersedes, ~6% deletes, validity changes), open it once so the view is built (setup, timed
but not compared), then in separate child processes (so each peak RSS is its own):

* `idle`     — import cruxsql and open the store (the floor every cruxsql process pays);
* `index`    — build the recall text index (a store in use has it; the compaction carries it over):
               setup, in its own process, so its peak memory is not counted as the compaction's;
* `compact`  — open the store and run `compaction.compact` (guard, rewrite through Journal.rewrite with
               fsync + rename + dir fsync, and the direct view rewrite in the same step);
* `baseline` — the same interpreter and imports, then a plain buffered write of exactly as many bytes
               as the compaction wrote, fsync, close.

Times are the operation only (not process start). Peak memory is the child's VmHWM, reset (via
/proc/self/clear_refs) after the store is open, so it is the peak during the operation. Optionally
(`--rebuild-baseline`, on by default) the view is also rebuilt from the compacted journal, which is what
a compaction that "just replays afterwards" would cost on top of its write.
"""

from __future__ import annotations

import argparse
import os
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent.parent))

CHILD = r"""
import json, os, resource, sys, time
sys.path.insert(0, sys.argv[3])
import cruxsql
from cruxsql.facts import derived_tables, replay, view, view_file
from cruxsql.governance import compaction
mode, data = sys.argv[1], sys.argv[2]
out = {"mode": mode}

def status(field):
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024  # MiB
    return None

if os.environ.get("BENCH_NO_HOOKS"):  # compaction without the replay hooks' derived tables
    derived_tables.derived_table_hooks().replay.clear()
store = cruxsql.open(data)
out["rss_before_mib"] = status("VmRSS")
try:  # reset the peak so it measures the operation (ru_maxrss would include the parent's, inherited)
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")
except OSError:
    pass
if mode == "index":
    # a store in use has its recall text index: built once, by its own process (its peak is not the
    # compaction's)
    from cruxsql.recall.text_index import TextIndex
    t = time.perf_counter()
    out["index_built"] = TextIndex(store.db).sync()
    out["index_build_s"] = time.perf_counter() - t
elif mode == "compact":
    from cruxsql.recall.text_index import TextIndex
    out["index_current"] = TextIndex(store.db).is_current()
    if sys.argv[4:] == ["nocarry"]:  # the baseline: derived tables start over on the new generation
        derived_tables.derived_table_hooks().rewrite.clear()
    first = []
    t = time.perf_counter()
    report = compaction.compact(store, progress=lambda done, total: first or first.append(time.perf_counter() - t))
    out["seconds"] = time.perf_counter() - t
    out["first_progress_s"] = first[0]
    out["report"] = report.to_dict()
    out["peak_rss_mib"] = status("VmHWM")
    from cruxsql.recall.facade import Recall
    recall = Recall(store)
    for name in ("first_known_at_ms", "second_known_at_ms"):
        t = time.perf_counter()
        recall.query_facts(None, entity="svc42", tenant="tenant1", known_at="2026-01-02T00:00:00Z")
        out[name] = (time.perf_counter() - t) * 1000
elif mode == "rebuild":
    t = time.perf_counter()
    with store.writer_lock():
        stats = replay.rebuild(store.db, store.journal, store.policy)
    out["seconds"] = time.perf_counter() - t
    out["events"] = stats.events
elif mode == "baseline":
    nbytes = int(sys.argv[4])
    target = os.path.join(data, "baseline.out")
    block = (b"x" * 255 + b"\n") * 4096  # 1 MiB of 256-byte lines
    t = time.perf_counter()
    with open(target, "wb") as fh:
        left = nbytes
        while left > 0:
            chunk = block if left >= len(block) else block[:left]
            fh.write(chunk)
            left -= len(chunk)
        fh.flush()
        os.fsync(fh.fileno())
    out["seconds"] = time.perf_counter() - t
    os.unlink(target)
out.setdefault("peak_rss_mib", status("VmHWM"))
store.close()
print(json.dumps(out))
"""


CODE = HERE.parent.parent  # the checkout whose cruxsql the children import (--code)
HOOKS = True


def child(mode: str, data: Path, *extra: str) -> dict:
    env = dict(os.environ, BENCH_NO_HOOKS="" if HOOKS else "1")
    proc = subprocess.run([sys.executable, "-c", CHILD, mode, str(data), str(CODE), *extra],
                          capture_output=True, text=True, check=False, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"{mode} child failed:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def bench_scan(data: Path, values: int = 2000) -> dict:
    """`verify --erasure`'s scanner over the data directory, against plainly reading the same files."""
    import random

    from cruxsql.governance import erasure_scan

    rng = random.Random(5)
    needles = []
    for i in range(values):
        needles += erasure_scan.needles_for(f"f_{i}", f"erased value {i} " + "x" * rng.randint(0, 3000))
    files = [p for p in data.rglob("*") if p.is_file()]
    t = time.perf_counter()
    total = 0
    for p in files:
        with open(p, "rb") as fh:
            while chunk := fh.read(1 << 23):
                total += len(chunk)
    read_s = time.perf_counter() - t
    t = time.perf_counter()
    result = erasure_scan.scan_directory(data, needles)
    scan_s = time.perf_counter() - t
    return {"values": values, "needles": result.needles, "bytes": result.bytes_scanned, "scan_s": scan_s,
            "read_s": read_s, "scan_mib_s": result.bytes_scanned / 2**20 / scan_s, "hits": len(result.hits)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--workdir", type=Path, default=None, help="Where to build the store (default: a temp dir).")
    ap.add_argument("--json-dir", type=Path, default=HERE / "out",
                    help="Where the figures are also written, as compaction-<events>.json (default: tools/bench/out).")
    ap.add_argument("--no-rebuild-baseline", dest="rebuild", action="store_false",
                    help="Skip timing a full view rebuild of the compacted journal.")
    ap.add_argument("--verify", action="store_true", help="Also check view == fresh replay after compacting (slow).")
    ap.add_argument("--from-store", type=Path, metavar="DATA_DIR",
                    help="Compact a copy of a store built earlier (its view is adopted, not rebuilt) instead of "
                         "generating --events and building one.")
    ap.add_argument("--carry-baseline", action="store_true",
                    help="Also compact a copy with the carry-over hooks off (fact_norms and the text index start "
                         "over, as a compaction without them would) and compare compaction time and the first known_at query.")
    ap.add_argument("--code", type=Path, metavar="CHECKOUT",
                    help="Run the timed children with the cruxsql of another checkout (e.g. main, for the code "
                         "before a change) against the same store.")
    ap.add_argument("--no-hooks", action="store_true",
                    help="Compact without the replay hooks (the derived tables other packages keep), to time "
                         "compaction's own work apart from theirs.")
    args = ap.parse_args()
    if args.events < 1:
        ap.error(f"--events must be 1 or more, not {args.events}")
    if args.from_store and not (args.from_store / "facts.jsonl").is_file():
        ap.error(f"--from-store {args.from_store}: no facts.jsonl in it (give a cruxsql data directory)")
    if args.code and not (args.code / "cruxsql" / "__init__.py").is_file():
        ap.error(f"--code {args.code}: not a cruxsql checkout (no cruxsql/__init__.py in it)")
    global CODE, HOOKS
    CODE = (args.code or CODE).resolve()
    HOOKS = not args.no_hooks

    from journal_gen import generate

    import cruxsql

    try:
        args.json_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        ap.error(f"--json-dir {args.json_dir}: {exc.strerror or exc}")
    try:
        if args.workdir:
            args.workdir.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix="cruxsql-bench-compaction-", dir=args.workdir))
    except OSError as exc:
        ap.error(f"--workdir {args.workdir or tempfile.gettempdir()}: {exc.strerror or exc}")
    data = work / "data"
    data.mkdir()
    try:
        t = time.perf_counter()
        if args.from_store:
            from cruxsql.facts import replay, view_file
            from cruxsql.facts.journal import Journal

            data.rmdir()
            shutil.copytree(args.from_store, data)
            db = view_file.open_connection(data / view_file.DB_NAME)
            replay.adopt_journal(db, Journal(data))
            db.close()
            written = sum(1 for _ in open(data / "facts.jsonl", "rb"))
        else:
            written = generate(data / "facts.jsonl", args.events)
        gen_s = time.perf_counter() - t
        journal_bytes = (data / "facts.jsonl").stat().st_size
        print(f"generated {written:,} events, {journal_bytes / 2**20:,.1f} MiB in {gen_s:.1f} s", flush=True)
        t = time.perf_counter()
        with cruxsql.open(data) as store:
            facts, deleted = store.db.execute("SELECT count(*), coalesce(sum(deleted), 0) FROM facts").fetchone()
        if not facts:
            ap.error(f"--from-store {args.from_store}: its journal holds no facts to compact")
        open_s = time.perf_counter() - t
        print(f"setup: view built in {open_s:.1f} s ({facts:,} facts, {deleted:,} deleted)", flush=True)

        idle = child("idle", data)
        index = child("index", data)
        old = None
        if args.carry_baseline:
            shutil.copytree(data, work / "data-nocarry")
            old = child("compact", work / "data-nocarry", "nocarry")
            shutil.rmtree(work / "data-nocarry")
        comp = child("compact", data, "carry")
        report = comp["report"]
        base = child("baseline", data, str(report["bytes_after"]))
        rebuild = child("rebuild", data) if args.rebuild else None
        verified = None
        if args.verify:
            with cruxsql.open(data) as store:
                verified = store.verify().view_matches_replay

        ratio_t = comp["seconds"] / base["seconds"] if base["seconds"] else float("inf")
        print()
        print(f"{'':34}{'compaction':>14}{'write+fsync':>14}{'ratio':>10}")
        print(f"{'time (s)':34}{comp['seconds']:>14.2f}{base['seconds']:>14.2f}{ratio_t:>9.1f}x")
        print(f"{'  of which under the writer lock':34}{report.get('seconds_locked', float('nan')):>14.2f}")
        print(f"{'peak RSS (MiB)':34}{comp['peak_rss_mib']:>14.1f}{base['peak_rss_mib']:>14.1f}"
              f"{comp['peak_rss_mib'] / base['peak_rss_mib']:>9.2f}x")
        print(f"{'RSS before the operation (MiB)':34}{comp['rss_before_mib']:>14.1f}{base['rss_before_mib']:>14.1f}")
        print(f"{'peak RSS growth in the op (MiB)':34}{comp['peak_rss_mib'] - comp['rss_before_mib']:>14.1f}"
              f"{base['peak_rss_mib'] - base['rss_before_mib']:>14.1f}")
        print(f"{'bytes written':34}{report['bytes_after']:>14,}{report['bytes_after']:>14,}")
        print()
        print(f"journal {report['bytes_before']:,} -> {report['bytes_after']:,} bytes, "
              f"{report['lines_before']:,} -> {report['lines_after']:,} lines; retained {report['facts_retained']:,}, "
              f"dropped {report['facts_dropped']:,}, tombstones {report['tombstones_kept']:,}; "
              f"view update: {report['view_update']}")
        print(f"throughput: {report['lines_before'] / comp['seconds']:,.0f} input events/s, "
              f"{report['bytes_after'] / comp['seconds'] / 2**20:,.1f} MiB/s written (baseline "
              f"{report['bytes_after'] / base['seconds'] / 2**20:,.1f} MiB/s)")
        print(f"text index built beforehand (setup, own process): {index['index_built']:,} facts in "
              f"{index['index_build_s']:.1f} s, peak RSS growth {index['peak_rss_mib'] - index['rss_before_mib']:.1f} MiB; "
              f"current when the compaction started: {comp.get('index_current')}")
        print(f"progress bar shown after {comp['first_progress_s']:.3f} s; known_at query right after the "
              f"compaction: first {comp['first_known_at_ms']:,.1f} ms, second {comp['second_known_at_ms']:,.1f} ms")
        if old:
            print(f"\n{'carry-over':34}{'carried':>14}{'started over':>14}{'ratio':>10}")
            for label, key in (("compaction with hooks (s)", "seconds"), ("first known_at after (ms)", "first_known_at_ms"),
                               ("second known_at after (ms)", "second_known_at_ms")):
                print(f"{label:34}{comp[key]:>14,.2f}{old[key]:>14,.2f}{comp[key] / old[key]:>9.3f}x")
            print(f"(text index built before both compactions: {index['index_built']:,} facts in "
                  f"{index['index_build_s']:.1f} s)")
        if rebuild:
            print(f"for comparison, a full view rebuild of the compacted journal alone: {rebuild['seconds']:.2f} s "
                  f"({rebuild['seconds'] / comp['seconds']:.2f}x the whole direct compaction)")
        if verified is not None:
            print(f"view == fresh replay after compaction: {verified}")
        scan = bench_scan(data)
        print(f"erasure scan of the data directory ({scan['bytes'] / 2**20:,.1f} MiB, {scan['needles']:,} needles "
              f"from {scan['values']:,} erased values): {scan['scan_s']:.2f} s = {scan['scan_mib_s']:,.1f} MiB/s; "
              f"plain read of the same files: {scan['read_s']:.2f} s ({scan['scan_s'] / scan['read_s']:.1f}x); "
              f"hits: {scan['hits']}")
        out = {"events": written, "journal_bytes": journal_bytes, "generate_s": gen_s, "setup_open_s": open_s,
               "idle": idle, "index": index, "compact": comp, "compact_nocarry": old, "baseline": base, "rebuild": rebuild, "time_ratio": ratio_t,
               "verified": verified, "scan": scan}
        (args.json_dir / f"compaction-{args.events}.json").write_text(json.dumps(out, indent=1) + "\n")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
