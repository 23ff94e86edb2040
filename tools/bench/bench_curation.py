"""Curation benchmark: contradiction, disagreement and near-duplicate scans at 1M facts against a plain
SELECT of the same rows, and the precision of each beyond-Crux detector on a labelled set.

    python tools/bench/bench_curation.py                  # ~1,000,000 facts (a few minutes to build)
    python tools/bench/bench_curation.py --facts 100000   # quicker
    python tools/bench/bench_curation.py --precision-only # just the labelled set (curation_pairs.jsonl)

The synthetic journal comes from journal_gen.py, plus planted signal (opposite-polarity pairs,
numeric disagreements, actor flip-flops, near-duplicate pairs) so every scan has work to report.
The built data directory is kept under --work (default: a temp dir) and reused when it exists.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from journal_gen import generate  # noqa: E402

from cruxsql.curation.contradictions import contradiction_candidates_v1  # noqa: E402
from cruxsql.curation.disagreements import actor_flip_flops, disagreements, live_disagreements  # noqa: E402
from cruxsql.curation.duplicates import lexical_duplicates  # noqa: E402
from cruxsql.facts import codec, timestamps  # noqa: E402
from cruxsql.facts.codec import Fact  # noqa: E402
from cruxsql.facts.store import Store  # noqa: E402

PAIRS = Path(__file__).resolve().parent / "curation_pairs.jsonl"
BASELINE_SQL = ("SELECT entity, key, fact_id, value FROM facts WHERE tenant_hash = ? AND deleted = 0 "
                "AND superseded_by IS NULL AND private = 0")
T0 = timestamps.parse_ns("2026-03-01T00:00:00Z")


def _fact(rng: random.Random, tenant: str, entity: str, key: str, value: str, at: int, version: int = 1,
          supersedes: str | None = None, actor: str | None = None) -> Fact:
    return Fact(fact_id=f"f_{rng.getrandbits(128):032x}", tenant_hash=tenant, entity=entity, key=key, value=value,
                confidence=0.9, stored_at=at, tokens=codec.token_cost(value), version=version, supersedes=supersedes,
                horizon_class=codec.default_horizon_for_entity(entity), actor=actor)


def plant_pair(fh, rng: random.Random, kind: str, tenant: str, entity: str, a: str, b: str, at: int,
               seconds: float = 60, actor_a: str = "agent-a", actor_b: str = "agent-b") -> None:
    """Write one labelled pair into a journal the way it would arise."""
    if kind == "actor_flip_flop":
        fa = _fact(rng, tenant, entity, "k", a, at, actor=actor_a)
        fb = _fact(rng, tenant, entity, "k", b, at + int(seconds * 1e9), 2, fa.fact_id, actor_b)
        stamp = timestamps.format_event_time(fb.stored_at)
        lines = [codec.StoreEvent(fa), codec.StoreEvent(fb), codec.SupersedeEvent(fa.fact_id, fb.fact_id, stamp)]
    else:
        keys = ("k1", "k2") if kind == "lexical_near_duplicate" else ("k", "k")
        lines = [codec.StoreBatchEvent([_fact(rng, tenant, entity, keys[0], a, at),
                                        _fact(rng, tenant, entity, keys[1], b, at)])]
    for event in lines:
        fh.write(codec.encode_event(event) + "\n")


def precision(work: Path) -> list[tuple[str, int, int, int, int]]:
    """(detector, tp, fp, fn, tn) of each beyond-Crux detector on the labelled pairs."""
    rows = [json.loads(line) for line in PAIRS.read_text(encoding="utf-8").splitlines() if line.strip()]
    data = work / "labelled"
    data.mkdir(parents=True, exist_ok=True)
    (data / "cruxsql.db").unlink(missing_ok=True)
    rng = random.Random(7)
    with open(data / "facts.jsonl", "w", encoding="utf-8") as fh:
        for i, r in enumerate(rows):
            plant_pair(fh, rng, r["detector"], "default", f"pair:{i}", r["a"], r["b"], T0 + i * 10**9,
                       r.get("seconds", 60), r.get("actor_a", "agent-a"), r.get("actor_b", "agent-b"))
    flagged: dict[str, set[str]] = defaultdict(set)
    with Store(data) as store:
        for f in live_disagreements(store.db) + actor_flip_flops(store.db):
            flagged[f.reason].add(f.entity)
        for p in lexical_duplicates(store.db):
            flagged["lexical_near_duplicate"].add(p.entity)
    out = []
    for detector in ("numeric_disagreement", "phrase_polarity", "actor_flip_flop", "lexical_near_duplicate"):
        tp = fp = fn = tn = 0
        for i, r in enumerate(rows):
            if r["detector"] != detector:
                continue
            hit = f"pair:{i}" in flagged[detector]
            tp += hit and r["label"]
            fp += hit and not r["label"]
            fn += (not hit) and r["label"]
            tn += (not hit) and not r["label"]
        out.append((detector, tp, fp, fn, tn))
    return out


def build(work: Path, facts: int) -> Path:
    data = work / f"scale-{facts}"
    if (data / "cruxsql.db").exists():
        return data
    data.mkdir(parents=True, exist_ok=True)
    journal = data / "facts.jsonl"
    events = int(facts * 1.32)
    print(f"generating ~{facts:,} facts ({events:,} events) ...", file=sys.stderr)
    generate(journal, events)
    rng = random.Random(11)
    planted = max(100, facts // 200)
    with open(journal, "a", encoding="utf-8") as fh:
        for i in range(planted):
            tenant = f"tenant{i % 4}"
            at = T0 + i * 10**9
            plant_pair(fh, rng, "crux", tenant, f"flag:{i}", "enabled", "disabled", at)
            plant_pair(fh, rng, "numeric_disagreement", tenant, f"lat:{i}", f"{100 + i % 50} ms", f"{90 + i % 7} ms", at)
            plant_pair(fh, rng, "actor_flip_flop", tenant, f"owner:{i}", "alice", "bob", at)
            plant_pair(fh, rng, "lexical_near_duplicate", tenant, f"doc:{i}", f"deploy canary {i} to eu-west first",
                       f"Deploy canary {i} to EU-west first!", at)
    print("replaying into the view ...", file=sys.stderr)
    with Store(data):
        pass
    return data


def timed(fn, repeats: int = 3):
    best, result = float("inf"), None
    for _ in range(repeats):
        started = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - started)
    return best, result


def scale(work: Path, facts: int) -> None:
    data = build(work, facts)
    with Store(data) as store:
        db = store.db
        tenants = [r[0] for r in db.execute("SELECT DISTINCT tenant_hash FROM facts ORDER BY 1")]
        n_facts = db.execute("SELECT count(*) FROM facts").fetchone()[0]
        base, rows = timed(lambda: sum(len(db.execute(BASELINE_SQL, (t,)).fetchall()) for t in tenants))
        cases = [
            ("Crux contradiction scan (contradiction_candidates_v1)",
             lambda: sum(len(contradiction_candidates_v1(db, t)) for t in tenants), 3),
            ("SQL view contradiction_candidates",
             lambda: len(db.execute("SELECT * FROM contradiction_candidates").fetchall()), 3),
            ("beyond-Crux disagreements (numeric, phrase, flip-flops)",
             lambda: sum(len(disagreements(db, t)) for t in tenants), 3),
            ("lexical near-duplicates (MinHash + exact verify)",
             lambda: sum(len(lexical_duplicates(db, t)) for t in tenants), 1),
        ]
        print(f"\n{n_facts:,} facts, {rows:,} live non-private rows; baseline: plain SELECT of those rows "
              f"(all {len(tenants)} tenants) = {base:.3f} s\n")
        print(f"{'scan':58} {'seconds':>8} {'baseline':>9} {'ratio':>7} {'found':>7}")
        for name, fn, repeats in cases:
            seconds, found = timed(fn, repeats)
            print(f"{name:58} {seconds:8.3f} {base:9.3f} {seconds / base:6.2f}x {found:7,}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--facts", type=int, default=1_000_000)
    parser.add_argument("--work", type=Path, help="Where to keep the built data directories (reused).")
    parser.add_argument("--precision-only", action="store_true")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="cruxsql-bench-curation-"))
    print(f"labelled set: {PAIRS.name}")
    print(f"{'detector':24} {'pairs':>5} {'tp':>4} {'fp':>4} {'fn':>4} {'tn':>4} {'precision':>9} {'recall':>7}")
    for detector, tp, fp, fn, tn in precision(work):
        p = tp / (tp + fp) if tp + fp else float("nan")
        r = tp / (tp + fn) if tp + fn else float("nan")
        print(f"{detector:24} {tp + fp + fn + tn:5} {tp:4} {fp:4} {fn:4} {tn:4} {p:9.3f} {r:7.3f}")
    if not args.precision_only:
        scale(work, args.facts)


if __name__ == "__main__":
    main()
