"""Runtimes for all-MiniLM-L6-v2 side by side, in one run, on the same texts.

    python tools/bench/bench_embedders.py [--docs 64] [--rounds 2] [--threads N] [--scifact DIR]

Rows: the hash embedder (baseline); cruxsql's runtime (BERT's forward pass in numpy over the verified
safetensors weights, one BLAS thread); cruxsql's first numpy pass (tools/bench/minilm_numpy.py);
sentence-transformers on torch (the model's reference implementation, whose vectors the others are compared
with); onnxruntime running a graph exported from the same torch model at load (no package ships an f32 ONNX
file of it). torch is no dependency of cruxsql: the last two rows run where torch, transformers,
sentence-transformers, onnx and onnxruntime are installed (a separate venv with cruxsql on PYTHONPATH) and
are left out, saying so, where they are not; without the reference the agreement columns stay empty.

Per runtime: install size of the packages it needs beyond the weights, load time (a fresh process: imports
plus weights; for onnxruntime also the export), chunks/s on the first N SciFact abstracts (title + text,
256-token truncation, batches of 32 in order of token count, after one warm-up batch; the runtimes take turns
and each keeps its best of `--rounds` passes) and agreement with the
reference: the largest 1 − cosine and the largest component difference; query p50: the median time of one
SciFact query embedded alone (the first 100 queries). `--threads` sets torch's and onnxruntime's intra-op
threads (default: the libraries' own choice, one per core; `--threads 1` for one core; cruxsql's runtime
always runs on one).
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))
DEFAULT_SCIFACT = next((base / "shared" / "data" / "scifact" for base in REPO.parents
                        if (base / "shared" / "data" / "scifact").exists()), REPO.parent / "shared" / "data" / "scifact")
BATCH = 32
QUERIES = 100     # SciFact queries timed one at a time for the query p50
Embed = Callable[[Sequence[str]], np.ndarray]


def set_threads(threads: Optional[int]) -> None:
    if threads:
        import torch
        torch.set_num_threads(threads)


def load_hash(threads: Optional[int]) -> Embed:
    from cruxsql.embeddings import LocalHashEmbedder
    return LocalHashEmbedder().embed_batch


def load_cruxsql(threads: Optional[int]) -> Embed:
    from cruxsql.embeddings.minilm import MiniLmEmbedder
    return MiniLmEmbedder.load().embed_batch


def load_numpy(threads: Optional[int]) -> Embed:
    from minilm_numpy import NumpyMiniLm
    return NumpyMiniLm().embed_batch


def load_sentence_transformers(threads: Optional[int]) -> Embed:
    os.environ["HF_HUB_OFFLINE"] = "1"
    from sentence_transformers import SentenceTransformer

    from cruxsql.embeddings.minilm import model_dir
    set_threads(threads)
    model = SentenceTransformer(str(model_dir()), device="cpu")
    return lambda texts: model.encode(list(texts), batch_size=BATCH, normalize_embeddings=True)


def load_onnxruntime(threads: Optional[int]) -> Embed:
    import onnxruntime
    import torch
    from transformers import BertModel

    from cruxsql.embeddings.minilm import DIMENSIONS, load_tokenizer, model_dir, token_batches
    bert = BertModel.from_pretrained(str(model_dir())).eval()

    class Encoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids: Any, attention_mask: Any) -> Any:
            return self.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    path = Path(tempfile.mkdtemp(prefix="minilm-onnx-")) / "minilm.onnx"
    ids = torch.ones((2, 8), dtype=torch.long)
    mask = torch.ones((2, 8), dtype=torch.long)
    mask[1, 5:] = 0       # a padded example, so the export keeps the attention mask's path
    with torch.no_grad():
        torch.onnx.export(Encoder().eval(), (ids, mask), str(path), input_names=["input_ids", "attention_mask"],
                          output_names=["hidden"], dynamic_axes={"input_ids": {0: "b", 1: "n"},
                          "attention_mask": {0: "b", 1: "n"}, "hidden": {0: "b", 1: "n"}}, dynamo=False,
                          opset_version=17)
    options = onnxruntime.SessionOptions()
    if threads:
        options.intra_op_num_threads = threads
    session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    tokenizer = load_tokenizer()

    def embed(texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        for rows, ids, mask in token_batches(tokenizer, texts):
            hidden = session.run(None, {"input_ids": ids, "attention_mask": mask})[0]
            pooled = (hidden * mask[:, :, None]).sum(1) / mask.sum(1, keepdims=True)
            out[rows] = pooled / np.linalg.norm(pooled, axis=1, keepdims=True)
        return out
    return embed


RUNTIMES = {   # name: (loader, packages it needs beyond the weights package)
    "hash embedder (baseline)": (load_hash, []),
    "cruxsql: numpy, one BLAS thread (chosen)": (load_cruxsql, ["tokenizers", "safetensors", "threadpoolctl"]),
    "numpy forward pass": (load_numpy, ["tokenizers", "safetensors"]),
    "sentence-transformers (reference)": (load_sentence_transformers,
                                          ["torch", "transformers", "sentence_transformers", "tokenizers",
                                           "safetensors"]),
    "onnxruntime (exported at load)": (load_onnxruntime, ["onnxruntime", "onnx", "torch", "transformers",
                                                          "tokenizers"]),
}
REFERENCE = "sentence-transformers (reference)"


def installed_mib(names: Sequence[str]) -> float:
    total = 0
    for name in names:
        spec = importlib.util.find_spec(name)
        if spec and spec.submodule_search_locations:
            root = Path(next(iter(spec.submodule_search_locations)))
            total += sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    return total / 2**20


def load_seconds(name: str, threads: Optional[int]) -> float:
    """Import and load `name` in a fresh process (what every `cruxsql` command pays)."""
    command = [sys.executable, __file__, "--time-load", name] + (["--threads", str(threads)] if threads else [])
    out = subprocess.run(command, capture_output=True, text=True, check=True, cwd=REPO)
    return float(out.stdout.strip().splitlines()[-1])


def query_p50_ms(embedders: dict[str, Embed], queries: Sequence[str]) -> dict[str, float]:
    """Median milliseconds of embedding one query alone, per runtime; the runtimes take turns on each query
    (after 5 warm-up queries), so a change in the machine's load reaches all of them alike."""
    times: dict[str, list[float]] = {name: [] for name in embedders}
    for i, text in enumerate(queries[:5] + list(queries)):
        for name, embed in embedders.items():
            started = time.perf_counter()
            embed([text])
            if i >= 5:
                times[name].append(time.perf_counter() - started)
    return {name: float(np.median(values) * 1000) for name, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=64)
    parser.add_argument("--threads", type=int, help="intra-op threads for torch and onnxruntime")
    parser.add_argument("--rounds", type=int, default=2, help="timed passes per runtime, interleaved; best kept")
    parser.add_argument("--scifact", type=Path, default=DEFAULT_SCIFACT)
    parser.add_argument("--time-load", metavar="RUNTIME", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.time_load:
        started = time.perf_counter()
        RUNTIMES[args.time_load][0](args.threads)
        print(time.perf_counter() - started)
        return
    with gzip.open(args.scifact / "corpus.jsonl.gz", "rt", encoding="utf-8") as handle:
        texts = [f"{d.get('title', '')} {d['text']}" for d in map(json.loads, handle)][:args.docs]
    runtimes = {name: (loader, packages) for name, (loader, packages) in RUNTIMES.items()
                if all(importlib.util.find_spec(p) for p in packages)}
    for name in RUNTIMES.keys() - runtimes.keys():
        print(f"({name}: left out, needs {', '.join(RUNTIMES[name][1])})")
    embedders = {name: loader(args.threads) for name, (loader, _) in runtimes.items()}
    for embed in embedders.values():
        embed(texts[:BATCH])                        # warm-up
    # Rounds over every runtime in turn, best round kept: the machine is shared, so its load drifts.
    vectors: dict[str, np.ndarray] = {}
    best = dict.fromkeys(embedders, float("inf"))
    for _ in range(args.rounds):
        for name, embed in embedders.items():
            started = time.perf_counter()
            vectors[name] = np.asarray(embed(texts), dtype=np.float32)
            best[name] = min(best[name], time.perf_counter() - started)
    with open(args.scifact / "queries.jsonl", encoding="utf-8") as handle:
        queries = [json.loads(line)["text"] for line in handle][:QUERIES]
    query_ms = query_p50_ms(embedders, queries)
    rows = [(name, installed_mib(packages), load_seconds(name, args.threads), len(texts) / best[name])
            for name, (_, packages) in runtimes.items()]
    from cruxsql.embeddings.minilm import load_tokenizer
    tokens = np.mean([len(e.ids) for e in load_tokenizer().encode_batch(texts)])
    print(f"all-MiniLM-L6-v2 on {len(texts)} SciFact abstracts ({tokens:.0f} tokens each on average), "
          f"threads: {args.threads or 'library default'}, load average {os.getloadavg()[0]:.1f}")
    print(f"{'runtime':<40} {'packages MiB':>12} {'load s':>7} {'chunks/s':>9} {'vs numpy':>9} "
          f"{'max 1-cos':>10} {'max |Δ|':>9} {'query p50 ms':>12}")
    reference = vectors.get(REFERENCE)
    numpy_rate = next(rate for name, _, _, rate in rows if name == "numpy forward pass")
    for name, size, load, rate in rows:
        if name.startswith("hash") or reference is None:
            worst, delta = "", ""
        else:
            cosines = np.einsum("ij,ij->i", vectors[name].astype(np.float64), reference.astype(np.float64))
            worst, delta = f"{1 - cosines.min():.1e}", f"{np.abs(vectors[name] - reference).max():.1e}"
        print(f"{name:<40} {size:>12.0f} {load:>7.2f} {rate:>9.1f} {rate / numpy_rate:>8.2f}x {worst:>10} "
              f"{delta:>9} {query_ms[name]:>12.2f}", flush=True)


if __name__ == "__main__":
    main()
