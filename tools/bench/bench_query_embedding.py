"""MiniLM without torch: query latency and indexing rate of cruxsql's numpy pass beside the numpy row.

    python tools/bench/bench_query_embedding.py [--queries 200] [--turns 640] [--locomo DIR]

Runtimes, in one process, taking turns so a change in the machine's load reaches both alike:
`cruxsql` (cruxsql/embeddings/minilm.py: QKV fused, GELU with an A&S erf, one BLAS thread) and the numpy
row (tools/bench/minilm_numpy.py, cruxsql's first numpy pass), also held to one BLAS thread (a second
thread on these shared cores makes the p95 of both several times worse).

* Query latency: LoCoMo's questions embedded one at a time with `embed_one` (what `recall` does): p50
  and p95 of wall time and of the calling thread's CPU time (`time.thread_time`, steadier on a loaded
  machine).
* Indexing: LoCoMo dialog turns (`speaker: text`, what a stored turn's fact text holds) embedded in
  batches as the background indexer does (`embed_batch` of 32 at a time); turns per second of wall time
  and of CPU time, best of two passes.
* Agreement: each runtime's vectors of the LoCoMo questions against the other's, and cruxsql's against
  the torch reference vectors stored in tests/fixtures/minilm_reference.npz (min cosine).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import time
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))
DEFAULT_LOCOMO = next((base / "shared" / "data" / "locomo-dev" for base in REPO.parents
                       if (base / "shared" / "data" / "locomo-dev").exists()),
                      REPO.parent / "shared" / "data" / "locomo-dev")
WARM_UP = 5
BATCH = 32
Embed = Callable[[Sequence[str]], np.ndarray]


def locomo(directory: Path) -> tuple[list[str], list[str]]:
    """(questions, turns as `speaker: text`) of the LoCoMo conversations in `directory`."""
    questions: list[str] = []
    turns: list[str] = []
    for path in sorted(glob.glob(str(directory / "*.json"))):
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
        questions += [qa["question"] for qa in data["qa"]]
        for name, session in data.items():
            if name.startswith("session_") and isinstance(session, list):
                turns += [f"{turn['speaker']}: {turn['text']}" for turn in session]
    return questions, turns


def runtimes() -> dict[str, Embed]:
    from minilm_numpy import NumpyMiniLm
    from threadpoolctl import threadpool_limits

    from cruxsql.embeddings.minilm import MiniLmEmbedder

    row = NumpyMiniLm()

    def numpy_row(texts: Sequence[str]) -> np.ndarray:
        with threadpool_limits(1, user_api="blas"):
            return row.embed_batch(texts)

    return {"cruxsql numpy (this code)": MiniLmEmbedder.load().embed_batch, "numpy row (minilm_numpy.py)": numpy_row}


def percentiles(values: list[float]) -> str:
    return f"{np.percentile(values, 50):.2f} / {np.percentile(values, 95):.2f}"


def query_latency(embedders: dict[str, Embed], queries: Sequence[str]) -> dict[str, tuple[list[float], list[float]]]:
    """Per runtime: (wall ms, CPU ms) of each query embedded alone, the runtimes taking turns."""
    times: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in embedders}
    for i, text in enumerate(list(queries[:WARM_UP]) + list(queries)):
        for name, embed in embedders.items():
            wall, cpu = time.perf_counter(), time.thread_time()
            embed([text])
            if i >= WARM_UP:
                times[name][0].append((time.perf_counter() - wall) * 1000)
                times[name][1].append((time.thread_time() - cpu) * 1000)
    return times


def indexing_rate(embed: Embed, turns: Sequence[str]) -> tuple[float, float]:
    """(turns per wall second, turns per CPU second) embedding `turns` BATCH at a time."""
    wall, cpu = time.perf_counter(), time.thread_time()
    for start in range(0, len(turns), BATCH):
        embed(turns[start:start + BATCH])
    return len(turns) / (time.perf_counter() - wall), len(turns) / (time.thread_time() - cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--turns", type=int, default=640)
    parser.add_argument("--locomo", type=Path, default=DEFAULT_LOCOMO)
    args = parser.parse_args()
    questions, turns = locomo(args.locomo)
    questions, turns = questions[:args.queries], turns[:args.turns]
    embedders = runtimes()
    from cruxsql.embeddings.minilm import load_tokenizer

    def mean_tokens(texts: Sequence[str]) -> float:
        return float(np.mean([len(e.ids) for e in load_tokenizer().encode_batch(list(texts))]))

    print(f"load average {os.getloadavg()[0]:.1f}; {len(questions)} LoCoMo questions ({mean_tokens(questions):.1f} "
          f"tokens each), {len(turns)} turns ({mean_tokens(turns):.1f} tokens each)")
    latency = query_latency(embedders, questions)
    rates: dict[str, list[tuple[float, float]]] = {name: [] for name in embedders}
    for _ in range(2):
        for name, embed in embedders.items():
            rates[name].append(indexing_rate(embed, turns))
    vectors = {name: embed(questions) for name, embed in embedders.items()}
    first, second = vectors.values()
    agreement = float(np.einsum("ij,ij->i", first.astype(np.float64), second.astype(np.float64)).min())
    print(f"{'runtime':<30} {'query wall p50 / p95 ms':>24} {'CPU p50 / p95 ms':>18} {'turns/s wall':>13} "
          f"{'turns/s CPU':>12}")
    for name in embedders:
        wall, cpu = latency[name]
        best = max(rates[name])
        print(f"{name:<30} {percentiles(wall):>24} {percentiles(cpu):>18} {best[0]:>13.1f} {best[1]:>12.1f}")
    print(f"min cosine between the two runtimes over the questions: {agreement:.7f}")
    print(f"min cosine with the torch reference ({reference_agreement(embedders)}")
    print(f"load average {os.getloadavg()[0]:.1f} after")


def reference_agreement(embedders: dict[str, Embed]) -> str:
    golden = np.load(REPO / "tests" / "fixtures" / "minilm_reference.npz")
    ours = next(iter(embedders.values()))(golden["texts"].tolist())
    cosines = np.einsum("ij,ij->i", ours.astype(np.float64), golden["vectors"].astype(np.float64))
    return f"{len(cosines)} texts): {cosines.min():.7f}"


if __name__ == "__main__":
    main()
