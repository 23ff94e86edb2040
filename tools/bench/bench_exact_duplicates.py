"""What keeping `fact_norms` current costs writers (migration 0016 and its replay hook,
`cruxsql.curation.exact_duplicates.keep_current`): a full replay, `store()`, and a whole recount.

    python tools/bench/bench_exact_duplicates.py                         # 100,000 journal events
    python tools/bench/bench_exact_duplicates.py --events 300000
    python tools/bench/bench_exact_duplicates.py --recount-view tools/bench/out/console-1350000
    python tools/bench/bench_exact_duplicates.py --events 20000 --rounds 1 --recount-view DATA_DIR  # recount only,
        # against the previous formulation (insert with indexes in place, then an UPDATE of the duplicated groups)

Baseline, in the same run: the same work with the hook unregistered (what replay did before), the two
arms interleaved, the best of each kept. Replay is timed in CPU seconds of this process too, which the
other jobs on a shared machine disturb less than wall time, and the hook's own time in each `store()`
(an fsync dominates a store's latency). The journal and views are kept under
tools/bench/out/exact-duplicates-<events>/.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

sys.path.insert(0, str(Path(__file__).resolve().parent))

from journal_gen import generate  # noqa: E402

import cruxsql  # noqa: E402
from cruxsql.curation import exact_duplicates  # noqa: E402
from cruxsql.facts import derived_tables, view_file  # noqa: E402

OUT = Path(__file__).resolve().parent / "out"


HOOK_MS: list[float] = []  # each call of the hook, timed, in the arm that runs it


def timed_hook(db, journal) -> None:
    started = time.perf_counter()
    exact_duplicates.keep_current(db, journal)
    HOOK_MS.append((time.perf_counter() - started) * 1000)


@contextmanager
def hook(enabled: bool) -> Iterator[None]:
    """Replay with the fact_norms hook (timed) or without it (the baseline arm)."""
    hooks = derived_tables.derived_table_hooks().replay
    hooks.remove(exact_duplicates.keep_current)
    if enabled:
        hooks.append(timed_hook)
    try:
        yield
    finally:
        if enabled:
            hooks.remove(timed_hook)
        hooks.append(exact_duplicates.keep_current)


def timed_replay(work: Path, journal: Path, name: str) -> tuple[float, float, Path]:
    """(wall s, CPU s) of opening a data directory whose journal has never been replayed."""
    data_dir = work / name
    shutil.rmtree(data_dir, ignore_errors=True)
    data_dir.mkdir(parents=True)
    shutil.copy(journal, data_dir / "facts.jsonl")
    wall, cpu = time.perf_counter(), time.process_time()
    with cruxsql.open(data_dir):
        pass
    return time.perf_counter() - wall, time.process_time() - cpu, data_dir


def store_p50(data_dir: Path, n: int, tag: str) -> float:
    """Median ms of `store()`; every seventh value repeats one of its entity (a duplicate to count)."""
    with cruxsql.open(data_dir) as store:
        times = []
        for i in range(n):
            started = time.perf_counter()
            store.store(f"bench:{tag}{i % 50}", f"k{i}", f"value {i if i % 7 else i % 3}", tenant="tenant0")
            times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def previous_recompute(db) -> None:
    """The whole recount without the carry-over: insert with every index in place, then an
    UPDATE of the duplicated groups (the baseline of `recount`)."""
    db.execute("DELETE FROM fact_norms")
    db.execute("INSERT INTO fact_norms (tenant_hash, entity, norm, fact_id, duplicated) "
               "SELECT tenant_hash, entity, lower(trim(value)), fact_id, 0 FROM facts "
               "WHERE deleted = 0 AND superseded_by IS NULL AND private = 0 ORDER BY 1, 2, 3, 4")
    db.execute("UPDATE fact_norms SET duplicated = 1 WHERE (tenant_hash, entity, norm) IN ("
               "SELECT tenant_hash, entity, norm FROM fact_norms GROUP BY tenant_hash, entity, norm "
               "HAVING count(*) > 1)")


def recount(data_dir: Path, rounds: int) -> dict[str, tuple[float, float]]:
    """Best wall and CPU seconds of `exact_duplicates.recompute` and of the previous formulation on a
    built view (each rolled back, interleaved), checked to give the same rows; and the row count."""
    db = view_file.open_connection(data_dir / view_file.DB_NAME)
    best: dict[str, tuple[float, float]] = {}
    digests = set()
    try:
        for _ in range(rounds):
            for name, fn in (("new", exact_duplicates.recompute), ("previous", previous_recompute)):
                db.execute("BEGIN IMMEDIATE")
                wall, cpu = time.perf_counter(), time.process_time()
                fn(db)
                wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
                digests.add(db.execute("SELECT count(*), sum(duplicated), total(length(fact_id) * duplicated) "
                                       "FROM fact_norms").fetchone())
                db.execute("ROLLBACK")
                best[name] = min(best.get(name, (wall, cpu)), (wall, cpu))
    finally:
        db.close()
    assert len(digests) == 1, digests
    best["rows"] = (digests.pop()[0], 0.0)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000, help="journal events to replay")
    parser.add_argument("--stores", type=int, default=200, help="store() calls per arm and round")
    parser.add_argument("--rounds", type=int, default=2, help="interleaved rounds; the best of each arm is kept")
    parser.add_argument("--recount-view", type=Path, help="also time a whole recount on this built data directory")
    args = parser.parse_args()
    work = OUT / f"exact-duplicates-{args.events}"
    work.mkdir(parents=True, exist_ok=True)
    journal = work / "journal.jsonl"
    if not journal.exists():
        generate(journal, args.events)
    figures: dict[str, dict[bool, list[float]]] = {m: {True: [], False: []} for m in ("wall", "cpu", "store", "hook")}
    for r in range(args.rounds):
        for enabled in (True, False):
            with hook(enabled):
                wall, cpu, data_dir = timed_replay(work, journal, "with" if enabled else "without")
                figures["wall"][enabled].append(wall)
                figures["cpu"][enabled].append(cpu)
                HOOK_MS.clear()
                figures["store"][enabled].append(store_p50(data_dir, args.stores, f"r{r}"))
                if enabled:
                    figures["hook"][enabled].append(statistics.median(HOOK_MS))
    print(f"\n{args.events:,} journal events; best of {args.rounds} interleaved rounds\n")
    print("| measure | with the hook | without (baseline) | ratio |\n|---|---|---|---|")
    for key, label in (("wall", "full replay, wall s"), ("cpu", "full replay, CPU s"), ("store", "`store()` p50, ms")):
        a, b = min(figures[key][True]), min(figures[key][False])
        print(f"| {label} | {a:.3f} | {b:.3f} | {a / b:.2f} |")
    print(f"| the hook's own time in a `store()`, p50 ms | {min(figures['hook'][True]):.3f} | | |")
    if args.recount_view:
        best = recount(args.recount_view, args.rounds)
        (nw, nc), (pw, pc) = best["new"], best["previous"]
        print(f"\n| whole recount (after a rebuild), {best['rows'][0]:,} live facts | this code | previous "
              f"formulation (baseline) | ratio |\n|---|---|---|---|")
        print(f"| wall s | {nw:.2f} | {pw:.2f} | {nw / pw:.2f} |\n| CPU s | {nc:.2f} | {pc:.2f} | {nc / pc:.2f} |")


if __name__ == "__main__":
    main()
