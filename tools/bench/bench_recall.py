"""Fact recall benchmark: query_facts latency at 100,000 and 1,000,000 facts, side by side with
(a) a brute-force scan in Python and (b) SQLite FTS5 (trigram tokenizer) over the same lowercased
columns, used here only as a reference index.

    python tools/bench/bench_recall.py                      # 100,000 and 1,000,000 facts
    python tools/bench/bench_recall.py --sizes 100000       # quicker
    python tools/bench/bench_recall.py --sizes 1000000 --workdir DIR --short-only  # a term under 3 characters

All three answer the same queries through the same pipeline; (b) differs from cruxsql only in how
candidates are found (FTS5 MATCH instead of cruxsql's trigram postings), (a) runs the whole pipeline
in Python over facts held in memory. Every answer is checked to be identical across the three.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Optional

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from cruxsql.facts import codec, timestamps  # noqa: E402
from cruxsql.facts.codec import Fact  # noqa: E402
from cruxsql.facts.store import Store  # noqa: E402
from cruxsql.recall.freshness import DecayPolicy, effective_confidence, freshness_at, ns_to_ms  # noqa: E402
from cruxsql.recall.facade import Recall  # noqa: E402
from cruxsql.recall.visibility import VisibilityPlan  # noqa: E402
from cruxsql.recall.scope import rust_lower, split_terms, visible_entity  # noqa: E402

COMMON = ("deploy canary rollout service owner alice bob carol database index latency budget token incident pager "
          "runbook schema migration replica shard cache eviction queue worker cron invoice customer region europe "
          "asia america kernel patch release freeze status green red amber").split()
T0 = timestamps.parse_ns("2026-01-01T00:00:00Z")


def rare_word(i: int) -> str:
    """A made-up word that appears in few facts (selective query terms)."""
    letters = "bcdfghjklmnpqrstvwxz"
    out, n = [], i + 7919
    for _ in range(6):
        out.append(letters[n % 20])
        n = n // 20 + 31 * (i + 1)
    return "".join(out)


def generate(path: Path, n: int, seed: int = 7) -> None:
    """n `store` lines: mixed-case values of common words plus one of n/50 rare words, a few
    agent-private and other-tenant facts, entities under a handful of prefixes."""
    rng = random.Random(seed)
    n_rare = max(100, n // 50)
    # Written beside the journal and renamed when complete: an interrupted run leaves no short journal
    # for the next run (which reuses a kept --workdir's journal) to measure under the full size's name.
    partial = path.with_name(path.name + ".partial")
    with open(partial, "w", encoding="utf-8") as fh:
        for i in range(n):
            words = [rng.choice(COMMON) for _ in range(rng.randint(3, 10))]
            words.insert(rng.randrange(len(words) + 1), rare_word(rng.randrange(n_rare)))
            if rng.random() < 0.3:
                words[0] = words[0].capitalize()
            value = " ".join(words) + (" Straße" if rng.random() < 0.05 else "")
            roll = rng.random()
            prefix = rng.choice(("svc:", "proj:", "user:", "incident:", "bench:"))
            entity = f"{prefix}{rng.randrange(n // 20 + 1)}"
            if roll < 0.02:
                entity = f"__agent::{rng.choice(('bob', 'alice'))}::{entity}"
            fact = Fact(fact_id=f"f_{i:032x}", tenant_hash="other" if roll > 0.97 else "default", entity=entity,
                        key=rng.choice(("owner", "status", "region", "note", "summary")), value=value,
                        confidence=codec.to_f32(rng.choice((0.5, 0.7, 0.9, 1.0))), stored_at=T0 + i * 1_000_000_007,
                        tokens=codec.token_cost(value), private=entity.startswith("__agent::"),
                        horizon_class=codec.default_horizon_for_entity(entity))
            fh.write(codec.encode_event(codec.StoreEvent(fact)) + "\n")
            if i % 25 == 24:  # a later change to an earlier fact: what `known_at` has to undo
                _write_change(fh, rng, i, T0 + i * 1_000_000_007 + 500)
    os.replace(partial, path)


def _write_change(fh, rng: random.Random, i: int, at_ns: int) -> None:
    """One change event to a random earlier fact: delete, set_validity, set_horizon or reverify."""
    fid = f"f_{rng.randrange(i):032x}"
    at = timestamps.format_event_time(at_ns)
    kind = rng.random()
    if kind < 0.4:
        event = codec.DeleteEvent(fid, at)
    elif kind < 0.6:
        event = codec.SetValidityEvent(fid, at_ns - 86_400_000_000_000, None, at)
    elif kind < 0.8:
        event = codec.SetHorizonEvent(fid, "stable", at)
    else:
        event = codec.ReverifyEvent(fid, at_ns)
    fh.write(codec.encode_event(event) + "\n")


class Fts5Recall(Recall):
    """The same pipeline, with FTS5 trigram MATCH as the candidate source (benchmark reference only)."""

    def _match_filter(self, plan: VisibilityPlan, terms: list[str]) -> Optional[str]:
        self._add_or_match(plan, terms)
        if all(len(t) >= 3 for t in terms):
            plan.params["fts"] = " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)
            plan.where.append("f.seq IN (SELECT rowid FROM bench.fts WHERE fts MATCH :fts)")
        return "fts5"


def build_fts(store: Store, path: Path) -> float:
    """The FTS5 reference index in its own file; a kept one (--workdir) only gets the facts it lacks."""
    started = time.perf_counter()
    db = store.db
    db.execute("ATTACH DATABASE ? AS bench", (str(path),))
    db.execute("CREATE VIRTUAL TABLE IF NOT EXISTS bench.fts USING fts5(v, k, e, tokenize='trigram case_sensitive 1')")
    with db:
        db.execute("INSERT INTO bench.fts (rowid, v, k, e) SELECT t.seq, coalesce(t.lc_value, f.value), "
                   "coalesce(t.lc_key, f.key), coalesce(t.lc_entity, f.entity) FROM recall_text t "
                   "JOIN facts f ON f.seq = t.seq WHERE t.seq > (SELECT coalesce(max(rowid), 0) FROM bench.fts)")
    return time.perf_counter() - started


class ScanOracle:
    """(a) brute force: the whole pipeline in Python over every fact held in memory."""

    def __init__(self, store: Store) -> None:
        self.facts = []
        for row in store.db.execute("SELECT fact_id, tenant_hash, entity, key, value, confidence, stored_at_ns, "
                                    "tokens, deleted, private, horizon_class, reverified_at_ns, superseded_by, "
                                    "actor, access_count FROM facts"):
            self.facts.append(row + (rust_lower(row[4]), rust_lower(row[3])))
        self.policy = DecayPolicy.from_env()

    def query(self, query: Optional[str], entity_prefix: Optional[str], now_ns: int, top_k: int = 10,
              agent: Optional[str] = None) -> list[str]:
        terms = split_terms(query) if query is not None else None
        now_ms = ns_to_ms(now_ns)
        hits = []
        for (fid, tenant, entity, key, value, conf, stored, tok, deleted, private, hz, rv, sup, actor, ac,  # noqa: B007 (the unpacking names every column of the row)
             lv, lk) in self.facts:
            if deleted or sup is not None or tenant != "default":
                continue
            vis = visible_entity(entity, bool(private), agent)
            if vis is None:
                continue
            if entity_prefix is not None and not (entity.startswith(entity_prefix) or vis.startswith(entity_prefix)):
                continue
            if terms is not None:
                le = rust_lower(vis)
                if not any(t in lv or t in lk or t in le for t in terms):
                    continue
            anchor = ns_to_ms(rv if rv is not None else stored)
            eff = effective_confidence(conf, freshness_at(hz, anchor, now_ms, ac, self.policy))
            hits.append((-eff, -stored, fid))
        hits.sort()
        return [h[2] for h in hits[:top_k]]


def timed(fn: Callable[[], Any], reps: int) -> tuple[list[float], Any]:
    out, times = None, []
    for _ in range(reps):
        started = time.perf_counter()
        out = fn()
        times.append((time.perf_counter() - started) * 1000)
    return times, out


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def _interleaved(ours: Callable[[], Any], base: Callable[[], Any], reps: int) -> tuple[list[float], list[float]]:
    """Alternate the two call by call, so both see the same machine load."""
    a: list[float] = []
    b: list[float] = []
    for _ in range(reps):
        a += timed(ours, 1)[0]
        b += timed(base, 1)[0]
    return a, b


def goals(store: Store, recall: Recall, n: int, now: int) -> list[dict]:
    """Issue 15's read-path goals, each beside its baseline measured interleaved in this process."""
    db = store.db
    out = []

    def report(kind: str, ours: list[float], base: list[float], baseline: str, goal: str) -> None:
        # the ratio is the median of call-by-call ratios: the load of a shared machine drifts between calls
        ratio = statistics.median(a / b for a, b in zip(ours, base))
        row = {"n": n, "kind": kind, "ours_p50": pct(ours, 50), "ours_max": max(ours), "base_p50": pct(base, 50),
               "ratio": ratio, "baseline": baseline, "goal": goal}
        out.append(row)
        print(f"  goal {kind:34s} p50 {row['ours_p50']:8.2f} ms (max {row['ours_max']:8.2f}) | {baseline} "
              f"p50 {row['base_p50']:8.2f} ms | ratio {ratio:5.2f}x | goal {goal}")

    newest = "SELECT fact_id, entity, key, value FROM facts ORDER BY stored_at_ns DESC, fact_id DESC LIMIT 20"
    ours, base = _interleaved(lambda: recall.memory_view(), lambda: db.execute(newest).fetchall(), 15)
    report("memory_view, no entity", ours, base, "read of the 20 newest rows", "<= 20 ms")

    # known_at on a store opened afresh: the first query must not build anything (replay kept the
    # timeline current); baseline: the same query at the present
    rng = random.Random(n + 1)
    fresh = Store(store.data_dir)
    fresh_recall = Recall(fresh, refresh=False)
    n_rare = max(100, n // 50)
    asks = [(rare_word(rng.randrange(n_rare)), T0 + rng.randrange(n) * 1_000_000_007) for _ in range(10)]
    ours, base = [], []
    for word, t in asks:
        ours += timed(lambda: fresh_recall.query_facts(word, known_at=t, contract="legacy"), 1)[0]
        base += timed(lambda: fresh_recall.query_facts(word, contract="legacy", record_access=False, now=now), 1)[0]
    print(f"  known_at: first query on a freshly opened store {ours[0]:.2f} ms")
    report("known_at, one term (first + 9)", ours, base, "same query at the present", "<= 100 ms, first included")
    # ... and right after a full rebuild, which used to leave the text index to the first read
    started = time.perf_counter()
    fresh.rebuild()
    print(f"  rebuild of the view: {time.perf_counter() - started:.1f} s")
    word, t = asks[0]
    ours = timed(lambda: fresh_recall.query_facts(word, known_at=t, contract="legacy"), 1)[0]
    base = timed(lambda: fresh_recall.query_facts(word, contract="legacy", record_access=False, now=now), 1)[0]
    fresh.close()
    report("known_at, first after a rebuild", ours, base, "same query at the present", "<= 100 ms")

    ours, base = short_term(store, recall, now, 5)
    report("term under 3 characters", ours, base, "SQL instr() scan of the same values", "<= 1.5x")
    return out


def short_term(store: Store, recall: Recall, now: int, reps: int, verbose: bool = False) -> tuple[list[float], list[float]]:
    """A term under 3 characters (`de`: ~half the facts, `qu`: ~15%) through query_facts, interleaved call
    by call with an SQL instr() count over the same three lowercased columns: (ours, baseline) in ms.
    `verbose`: also each word's median ratio, and the ratio of CPU time (less sensitive to other jobs)."""
    scan = ("SELECT count(*) FROM facts f JOIN recall_text t ON t.seq = f.seq WHERE instr(coalesce(t.lc_value, "
            "f.value), ?1) > 0 OR instr(coalesce(t.lc_key, f.key), ?1) > 0 OR instr(coalesce(t.lc_entity, f.entity), "
            "?1) > 0")
    ours: list[float] = []
    base: list[float] = []
    for word in ("de", "qu"):
        ask = (lambda: recall.query_facts(word, contract="legacy", record_access=False, now=now))  # noqa: E731
        count = (lambda: store.db.execute(scan, (word,)).fetchall())  # noqa: E731
        ask(), count()  # warm
        cpu = []
        for _ in range(reps):
            started = time.thread_time()
            a = timed(ask, 1)[0]
            mid = time.thread_time()
            b = timed(count, 1)[0]
            cpu.append((mid - started) / (time.thread_time() - mid))
            ours, base = ours + a, base + b
        if verbose:
            ratios = [x / y for x, y in zip(ours[-reps:], base[-reps:])]
            print(f"  {word!r}: query_facts p50 {pct(ours[-reps:], 50):7.1f} ms, instr() p50 {pct(base[-reps:], 50):7.1f} "
                  f"ms; ratio p50 {statistics.median(ratios):.2f}x (calls {', '.join(f'{r:.2f}' for r in ratios)}); "
                  f"CPU-time ratio p50 {statistics.median(cpu):.2f}x")
    return ours, base


def short_term_only(n: int, work: Path, reps: int) -> None:
    """`--short-only`: the short-term goal alone, on the store an earlier run left in `work`."""
    data = work / f"n{n}"
    if not (data / "facts.jsonl").exists():
        raise SystemExit(f"Error: no store of {n:,} facts in {work} (run once without --short-only to build it)")
    store = Store(data)
    recall = Recall(store, refresh=False)
    recall.index.sync()
    now = T0 + n * 1_000_000_007 + 3_600_000_000_000
    print(f"term under 3 characters at {n:,} facts, {reps} calls per word, load average {os.getloadavg()[0]:.2f}")
    ours, base = short_term(store, recall, now, reps, verbose=True)
    ratio = statistics.median(a / b for a, b in zip(ours, base))
    print(f"  all: query_facts p50 {pct(ours, 50):.1f} ms vs instr() p50 {pct(base, 50):.1f} ms; ratio (median of "
          f"per-call ratios) {ratio:.2f}x; goal <= 1.5x")
    store.close()


def run_size(n: int, work: Path, queries_per_kind: int, scan_reps: int) -> list[dict]:
    data = work / f"n{n}"
    data.mkdir(exist_ok=True)
    started = time.perf_counter()
    if not (data / "facts.jsonl").exists():  # a kept --workdir is reused as it is
        generate(data / "facts.jsonl", n)
    gen_s = time.perf_counter() - started
    started = time.perf_counter()
    store = Store(data)
    open_s = time.perf_counter() - started
    recall = Recall(store, refresh=False)
    started = time.perf_counter()
    recall.index.sync()
    index_s = time.perf_counter() - started
    fts_s = build_fts(store, work / f"fts{n}.db")
    fts = Fts5Recall(store, refresh=False)
    started = time.perf_counter()
    scan = ScanOracle(store)
    load_s = time.perf_counter() - started
    size = {name: store.db.execute(f"SELECT sum(pgsize) FROM dbstat WHERE name = '{name}'").fetchone()[0] or 0
            for name in ("recall_text", "recall_grams")}
    print(f"\n== {n:,} facts: journal written in {gen_s:.1f} s, store opened (replay) in {open_s:.1f} s, "
          f"trigram index caught up after it in {index_s:.1f} s (a rebuild builds it; recall_text {size['recall_text'] / 1e6:.0f} MB, "
          f"recall_grams {size['recall_grams'] / 1e6:.0f} MB), FTS5 reference built in {fts_s:.1f} s, "
          f"facts loaded for the Python scan in {load_s:.1f} s")
    now = T0 + n * 1_000_000_007 + 3_600_000_000_000
    rng = random.Random(n)
    n_rare = max(100, n // 50)
    kinds = {
        "one term (selective)": [(rare_word(rng.randrange(n_rare)), None) for _ in range(queries_per_kind)],
        "two terms (selective)": [(f"{rare_word(rng.randrange(n_rare))} {rare_word(rng.randrange(n_rare)).upper()}",
                                   None) for _ in range(queries_per_kind)],
        "entity prefix": [(None, f"svc:{rng.randrange(n // 20 + 1)}") for _ in range(queries_per_kind)],
        # not selective (each word is in ~15% of the facts): the planner scans instead of reading postings
        "one term (common)": [(w, None) for w in ("deploy", "Replica", "queue")],
        # shorter than a trigram: a scan for everyone (FTS5 trigram cannot answer it either)
        "short term (<3 chars)": [(w, None) for w in ("de", "qu")],
    }
    results = []
    for kind, queries in kinds.items():
        ours, ref, brute, ncands = [], [], [], []
        for qi, (text, prefix) in enumerate(queries):
            def run(r: Recall) -> list[str]:
                res = r.query_facts(text, entity_prefix=prefix, contract="legacy", now=now, record_access=False)
                return [row["fact_id"] for row in res.rows]
            run(recall), run(fts)  # warm
            reps = 5 if kind in ("one term (selective)", "two terms (selective)", "entity prefix") else 2
            t_ours, got = timed(lambda: run(recall), reps)
            t_fts, want_fts = timed(lambda: run(fts), reps)
            ours += t_ours
            ref += t_fts
            if qi < scan_reps or kind.startswith(("one term (common)", "short")):
                t_scan, want = timed(lambda: scan.query(text, prefix, now), 1)
                brute += t_scan
                if got != want:
                    raise SystemExit(f"MISMATCH vs brute-force oracle for {text or prefix!r}: {got} != {want}")
            if got != want_fts:
                raise SystemExit(f"MISMATCH vs FTS5 reference for {text or prefix!r}: {got} != {want_fts}")
            if text:
                c = recall.index.candidates(split_terms(text))
                ncands.append(0 if c is None else len(c))
        row = {"n": n, "kind": kind, "ours_p50": pct(ours, 50), "ours_p95": pct(ours, 95), "fts_p50": pct(ref, 50),
               "fts_p95": pct(ref, 95), "scan_p50": pct(brute, 50), "scan_p95": pct(brute, 95),
               "cands": statistics.mean(ncands) if ncands else None}
        results.append(row)
        cands = f"  (avg {row['cands']:.0f} trigram candidates)" if row["cands"] is not None else ""
        print(f"  {kind:22s} cruxsql p50 {row['ours_p50']:7.2f} ms p95 {row['ours_p95']:7.2f} | "
              f"FTS5 p50 {row['fts_p50']:7.2f} p95 {row['fts_p95']:7.2f} | scan p50 {row['scan_p50']:8.1f} "
              f"p95 {row['scan_p95']:8.1f} | cruxsql/FTS5 p50 {row['ours_p50'] / row['fts_p50']:.2f}x, "
              f"scan/cruxsql p50 {row['scan_p50'] / row['ours_p50']:.0f}x{cands}")
    results += goals(store, recall, n, now)
    # keeping the index current: each write is indexed by the next read (only the new fact)
    t_write, t_sync = [], []
    for i in range(10):
        started = time.perf_counter()
        store.store(f"svc:{i}", "note", f"Fresh {rare_word(i)} value {i}")
        t_write.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        recall.index.sync()
        t_sync.append((time.perf_counter() - started) * 1000)
    print(f"  after a write: Store.store p50 {pct(t_write, 50):.2f} ms (fsynced append + replay), index catch-up "
          f"p50 {pct(t_sync, 50):.2f} ms p95 {pct(t_sync, 95):.2f} ms for the new fact")
    store.close()
    return results


def fact_counts(text: str) -> list[int]:
    """`--sizes`: comma-separated fact counts, each 1 or more."""
    try:
        counts = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated fact counts, not {text!r}") from None
    if min(counts) < 1:
        raise argparse.ArgumentTypeError(f"each fact count must be 1 or more, not {min(counts)} (commas separate "
                                         "counts: write 1000000, not 1,000,000)")
    return counts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=fact_counts, default="100000,1000000", help="comma-separated fact counts")
    ap.add_argument("--queries", type=int, default=20, help="distinct queries per kind (each timed 5 times)")
    ap.add_argument("--scan-queries", type=int, default=5, help="how many of them also run the Python scan")
    ap.add_argument("--workdir", help="where to build the stores and keep them for the next run (default: a temp "
                                      "dir, removed afterwards)")
    ap.add_argument("--short-only", action="store_true",
                    help="only the term-under-3-characters goal, on the stores an earlier run left in --workdir")
    ap.add_argument("--short-reps", type=int, default=10, help="calls per word with --short-only")
    args = ap.parse_args()
    for name in ("queries", "scan_queries", "short_reps"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be 1 or more, not {getattr(args, name)}")
    if args.short_only:
        if not args.workdir:
            ap.error("--short-only needs --workdir (where an earlier run built the stores)")
        for n in args.sizes:
            short_term_only(n, Path(args.workdir), args.short_reps)
        return
    if args.workdir:
        try:
            Path(args.workdir).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            ap.error(f"--workdir {args.workdir}: {exc.strerror or exc}")
    with tempfile.TemporaryDirectory(prefix="bench-recall-") as tmp:
        work = Path(args.workdir) if args.workdir else Path(tmp)
        all_rows = []
        for n in args.sizes:
            all_rows += run_size(n, work, args.queries, args.scan_queries)
    print("\nsummary (p50 ms; every answer identical across cruxsql, FTS5 reference and the Python scan):")
    print(f"  {'facts':>9}  {'query':22s} {'cruxsql':>8} {'FTS5':>8} {'scan':>9} {'vs FTS5':>8} {'scan/us':>8}")
    for r in all_rows:
        if "goal" in r:
            continue
        print(f"  {r['n']:>9,}  {r['kind']:22s} {r['ours_p50']:8.2f} {r['fts_p50']:8.2f} {r['scan_p50']:9.1f} "
              f"{r['ours_p50'] / r['fts_p50']:7.2f}x {r['scan_p50'] / r['ours_p50']:7.0f}x")
    print("\nread-path goals (p50 ms, each beside its baseline measured interleaved in this run):")
    for r in all_rows:
        if "goal" in r:
            print(f"  {r['n']:>9,}  {r['kind']:34s} {r['ours_p50']:8.2f} (max {r['ours_max']:7.2f}) vs "
                  f"{r['base_p50']:8.2f} {r['baseline']}: {r['ratio']:5.2f}x; goal {r['goal']}")


if __name__ == "__main__":
    main()
