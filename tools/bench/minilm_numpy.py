"""cruxsql's first MiniLM runtime, kept as a benchmark row: BERT's forward pass written in numpy.

The package runs a tuned numpy pass (`cruxsql/embeddings/minilm.py`: QKV fused, a cheaper erf, in-place
element-wise steps, one BLAS thread); `bench_query_embedding.py` and `bench_embedders.py` compare both.
Weights and tokenizer come through the package's verified loader.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from cruxsql.embeddings.minilm import (
    DIMENSIONS,
    HEADS,
    LAYERS,
    load_tokenizer,
    model_dir,
    token_batches,
    verified_bytes,
)

LAYER_NORM_EPS = np.float32(1e-12)


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


class NumpyMiniLm:
    """all-MiniLM-L6-v2 with numpy matrix products (BLAS) and numpy element-wise operations."""

    def __init__(self) -> None:
        from safetensors.numpy import load

        weights = load(verified_bytes(model_dir() / "model.safetensors"))
        # Dense layers' weights are kept transposed (in × out, contiguous) so each layer is one BLAS matmul.
        self._w = {name.removeprefix("bert."): np.ascontiguousarray(
                       value.T if value.ndim == 2 and "embeddings" not in name else value, dtype=np.float32)
                   for name, value in weights.items()}
        self._tokenizer = load_tokenizer()

    def _encode(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
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
        for rows, ids, mask in token_batches(self._tokenizer, texts):
            out[rows] = self._encode(ids, mask)
        return out
