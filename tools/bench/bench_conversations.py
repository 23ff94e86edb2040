"""Storing conversations: `store_conversation` beside a plain `store_batch` of the same values, in the same
process, on LoCoMo's development conversations (every dialog turn, verbatim, with its session time and
dia_id as the turn id).

    python tools/bench/bench_conversations.py                     # ../shared/data/locomo-dev
    python tools/bench/bench_conversations.py --data DIR --rounds 3

Per conversation, one call stores all its turns (one journal line); the baseline stores the same values
under the same entity and keys as one `store_batch` without the turn encoding, position look-up or checks.
Figures: turns per second of each (best of `--rounds`, wall clock), their ratio, the journal bytes per
turn, and, after a fresh `rebuild`, `recall` over the questions (BM25): p50/p95 latency and the share of
evidence turns among the top 10 (read from the turn ids on the hits: informational, the ranking is
measured in its own benchmark).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # (REPO, before cruxsql is imported)

import cruxsql  # noqa: E402
from cruxsql.facts.store import StoreRequest  # noqa: E402
from cruxsql.recall.conversations import TurnInput, store_conversation  # noqa: E402
from cruxsql.recall.turns import conversation_entity, turn_key  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
# ../shared beside the main checkout, or beside the folder of worktrees
DEFAULT_DATA = next((base / "shared" / "data" / "locomo-dev" for base in REPO.parents
                     if (base / "shared" / "data" / "locomo-dev").exists()), REPO.parent / "shared" / "data" / "locomo-dev")


def load(path: Path) -> tuple[list[TurnInput], list[tuple[str, set[str]]]]:
    """(turns in session order, (question, evidence dia_ids)) of one LoCoMo file."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    conv = doc.get("conversation", doc)
    sessions = sorted((int(k.split("_")[1]), k) for k in conv if k.startswith("session_") and k.count("_") == 1)
    turns = [TurnInput(t["speaker"], t["text"], conv.get(f"{key}_date_time"), str(n), t["dia_id"])
             for n, key in sessions for t in conv[key]]
    questions = [(q["question"], set(q["evidence"])) for q in doc.get("qa", []) if q.get("evidence")]
    return turns, questions


def timed_stores(data: Path, files: list[Path], rounds: int) -> tuple[float, float, int, int]:
    """(best seconds of store_conversation, best seconds of the plain store_batch, turns, journal bytes)."""
    best_turns = best_plain = float("inf")
    total = size = 0
    for _ in range(rounds):
        with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
            with cruxsql.open(a) as turns_store, cruxsql.open(b) as plain_store:
                spent_turns = spent_plain = 0.0
                total = 0
                for path in files:
                    turns, _ = load(path)
                    plain = [StoreRequest(conversation_entity(path.stem), turn_key(i), f"{t.speaker}: {t.text}")
                             for i, t in enumerate(turns)]
                    started = time.perf_counter()
                    store_conversation(turns_store, path.stem, turns)
                    spent_turns += time.perf_counter() - started
                    started = time.perf_counter()
                    plain_store.store_batch(plain)
                    spent_plain += time.perf_counter() - started
                    total += len(turns)
            size = (Path(a) / "facts.jsonl").stat().st_size
        best_turns, best_plain = min(best_turns, spent_turns), min(best_plain, spent_plain)
    return best_turns, best_plain, total, size


def recall_figures(data: Path, files: list[Path]) -> tuple[float, float, float, int]:
    """(p50 ms, p95 ms, share of evidence turns in the top 10, questions) after a rebuild."""
    latencies, shares = [], []
    with tempfile.TemporaryDirectory() as d:
        with cruxsql.open(d) as store:
            for path in files:
                store_conversation(store, path.stem, load(path)[0])
            store.rebuild()
            recall = cruxsql.Recall(store)
            for path in files:
                for question, evidence in load(path)[1]:
                    started = time.perf_counter()
                    hits = recall.search(question, entity=conversation_entity(path.stem), fusion="bm25",
                                         top_k=10, token_budget=100_000).hits
                    latencies.append((time.perf_counter() - started) * 1000)
                    found = {h.turn.turn_id for h in hits if h.turn is not None}
                    shares.append(len(found & evidence) / len(evidence))
    latencies.sort()
    return (statistics.median(latencies), latencies[int(0.95 * (len(latencies) - 1))],
            statistics.fmean(shares), len(shares))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="a directory of LoCoMo conversation files")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds (the best is kept)")
    args = parser.parse_args()
    files = sorted(args.data.glob("*.json"))
    if not files or args.rounds < 1:
        sys.exit(f"Error: no LoCoMo *.json files in {args.data}" if not files else "Error: --rounds must be >= 1")
    turns_s, plain_s, turns, size = timed_stores(args.data, files, args.rounds)
    print(f"conversations {len(files)}, turns {turns:,}, one call per conversation, best of {args.rounds}")
    print(f"{'':34}{'turns/s':>10}")
    print(f"{'store_conversation':34}{turns / turns_s:>10,.0f}")
    print(f"{'store_batch of the same values':34}{turns / plain_s:>10,.0f}")
    print(f"{'ratio':34}{plain_s / turns_s:>10.2f}x")
    print(f"journal bytes per turn {size / turns:,.0f}")
    p50, p95, share, questions = recall_figures(args.data, files)
    print(f"recall after a rebuild, {questions} questions: p50 {p50:.1f} ms, p95 {p95:.1f} ms, "
          f"evidence turns in the top 10 {share:.3f}")


if __name__ == "__main__":
    main()
