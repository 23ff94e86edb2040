"""Query embedding latency: MiniLM's torch pass against `minilm-int8`, one query at a time, in one process.

    python tools/bench/bench_query_embedding.py --data-dir DIR [--compare CHECKOUT] [--queries 300] [--rounds 1]

The 300 SciFact test queries are embedded one at a time with `embed_one` (what a search does), the runtimes
taking turns on each query so a change in the machine's load reaches all of them alike: `minilm` (torch, one
thread), this checkout's `minilm-int8` (its model exported into DIR/models on first use, read back after) and,
with `--compare`, another checkout's `cruxsql/embeddings/minilm_int8.py` loaded into this process (its cache
key is its own recipe's, so both models sit side by side in DIR/models; it must import only names this
checkout still has). Per runtime: p50 and p90 of wall time and of the calling thread's CPU time
(`time.thread_time`, steadier on a loaded machine), and the int8 vectors' cosine with torch's.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_documents import DEFAULT_SCIFACT, load_scifact  # noqa: E402

WARM_UP = 5


def _load_beside(checkout: Path, name: str) -> Any:
    """`cruxsql/embeddings/<name>.py` of another checkout, loaded under `compared_<name>`."""
    spec = importlib.util.spec_from_file_location(f"cruxsql.embeddings.compared_{name}",
                                                  checkout / "cruxsql" / "embeddings" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    return importlib.util.module_from_spec(spec), spec.loader


def compared_int8(checkout: Path, data_dir: Path) -> Any:
    """Another checkout's minilm-int8 embedder, its module loaded beside this checkout's under its own name.
    A checkout with its own `int8_recipes` (its recipes and CPU rule) gets that one, not this checkout's:
    its `from . import int8_recipes` is pointed at it while the module loads."""
    import cruxsql.embeddings as package

    module, loader = _load_beside(checkout, "minilm_int8")
    own = None
    if (checkout / "cruxsql" / "embeddings" / "int8_recipes.py").exists():
        own, own_loader = _load_beside(checkout, "int8_recipes")
        own_loader.exec_module(own)
    from cruxsql.embeddings import int8_recipes as ours  # (main has imported it already)

    try:
        if own is not None:
            sys.modules[ours.__name__] = package.int8_recipes = own
        loader.exec_module(module)
    finally:
        sys.modules[ours.__name__] = package.int8_recipes = ours
    return module.MiniLmInt8Embedder.load(data_dir)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, required=True, help="where minilm-int8 keeps its models/")
    parser.add_argument("--compare", type=Path, metavar="CHECKOUT", help="another checkout's minilm-int8 too")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=1, help="passes over the queries, each timed")
    parser.add_argument("--scifact", type=Path, default=DEFAULT_SCIFACT)
    args = parser.parse_args()
    from cruxsql.embeddings.minilm import MiniLmEmbedder
    from cruxsql.embeddings.minilm_int8 import MiniLmInt8Embedder

    embedders: dict[str, Callable[[str], np.ndarray]] = {"minilm (torch f32)": MiniLmEmbedder.load().embed_one,
                                                         "minilm-int8 (this checkout)":
                                                             MiniLmInt8Embedder.load(args.data_dir).embed_one}
    if args.compare:
        embedders[f"minilm-int8 ({args.compare})"] = compared_int8(args.compare, args.data_dir).embed_one
    queries = [text for _, text in load_scifact(args.scifact).queries][:args.queries]  # the tested queries
    wall: dict[str, list[float]] = {name: [] for name in embedders}
    cpu: dict[str, list[float]] = {name: [] for name in embedders}
    vectors: dict[str, list[np.ndarray]] = {name: [] for name in embedders}
    for text in queries[:WARM_UP]:
        for embed in embedders.values():
            embed(text)
    load_before = os.getloadavg()
    for round_ in range(args.rounds):
        for text in queries:
            for name, embed in embedders.items():
                cpu_started, started = time.thread_time(), time.perf_counter()
                vector = embed(text)
                wall[name].append(time.perf_counter() - started)
                cpu[name].append(time.thread_time() - cpu_started)
                if round_ == 0:
                    vectors[name].append(vector)
    load_after = os.getloadavg()
    reference = np.stack(vectors["minilm (torch f32)"]).astype(np.float64)
    print(f"{len(queries)} SciFact queries x {args.rounds} round(s), one at a time, runtimes in turn; "
          f"load average {load_before[0]:.2f} before, {load_after[0]:.2f} after")
    print(f"{'runtime':<48} {'wall p50':>8} {'p90':>7} {'cpu p50':>8} {'p90':>7} {'cos mean':>9} {'cos min':>8}")
    for name in embedders:
        cosines = np.einsum("ij,ij->i", np.stack(vectors[name]).astype(np.float64), reference)
        ms = {kind: np.array(times) * 1000 for kind, times in (("wall", wall[name]), ("cpu", cpu[name]))}
        print(f"{name:<48} {np.median(ms['wall']):>8.2f} {np.percentile(ms['wall'], 90):>7.2f} "
              f"{np.median(ms['cpu']):>8.2f} {np.percentile(ms['cpu'], 90):>7.2f} {cosines.mean():>9.5f} "
              f"{cosines.min():>8.5f}", flush=True)


if __name__ == "__main__":
    main()
