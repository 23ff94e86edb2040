"""`LocalHashEmbedder` (model `crux-local-hash-v1`), bit-exact with Crux (crates/corecrux-memory/src/embeddings.rs).

Split on every character that is not Unicode alphanumeric (apostrophes split too), lowercase each token
with full Unicode case mapping, then hash the unigram `tok_i` and, when a next token exists, the bigram
`tok_i + "_" + tok_{i+1}`: BLAKE3 of the feature's UTF-8 bytes, bucket = first four bytes little-endian
modulo dims, sign = −1 when bit 0 of byte 4 is set. Sums are f32; the vector is L2-normalised in f32
unless its norm is ≤ 1e-12 (empty text gives the zero vector). Lexical overlap, not meaning.
"""

from __future__ import annotations

from typing import Sequence

import blake3
import numpy as np
import regex

from .profile import SemanticProfile

MODEL_ID = "crux-local-hash-v1"
DEFAULT_DIMENSIONS = 256
TOKENIZER = "whitespace_ngram_v1"

# Rust's char::is_alphanumeric: Unicode Alphabetic or Numeric (Nd, Nl, No).
_NOT_ALPHANUMERIC = regex.compile(r"[^\p{Alphabetic}\p{N}]+")


def hash_tokens(text: str) -> list[str]:
    """The embedder's tokens: alphanumeric runs, full-Unicode lowercased (Rust `to_lowercase`)."""
    return [token.lower() for token in _NOT_ALPHANUMERIC.split(text) if token]


def features(tokens: Sequence[str]) -> list[str]:
    """Unigram then bigram for each position, in order."""
    out: list[str] = []
    for i, token in enumerate(tokens):
        out.append(token)
        if i + 1 < len(tokens):
            out.append(f"{token}_{tokens[i + 1]}")
    return out


class LocalHashEmbedder:
    """Feature hashing into `dims` float32 buckets (Crux's default, offline embedder)."""

    def __init__(self, dims: int = DEFAULT_DIMENSIONS) -> None:
        self._dims = max(1, int(dims))
        self._buckets: dict[str, tuple[int, float]] = {}

    def _bucket(self, feature: str) -> tuple[int, float]:
        cached = self._buckets.get(feature)
        if cached is None:
            digest = blake3.blake3(feature.encode("utf-8")).digest(length=5)
            cached = (int.from_bytes(digest[:4], "little") % self._dims, -1.0 if digest[4] & 1 else 1.0)
            if len(self._buckets) < 1_000_000:
                self._buckets[feature] = cached
        return cached

    def embed_one(self, text: str) -> np.ndarray:
        buckets = self._buckets
        pairs = [buckets.get(f) or self._bucket(f) for f in features(hash_tokens(text))]
        if not pairs:
            return np.zeros(self._dims, dtype=np.float32)
        indices, signs = zip(*pairs)
        # Sums of ±1 are small integers, exact in any order and in f32: the same vector as adding one by one.
        vector = np.bincount(indices, weights=signs, minlength=self._dims).astype(np.float32)
        norm = np.sqrt(np.dot(vector, vector), dtype=np.float32)
        if norm > np.float32(1e-12):
            vector /= norm
        return vector

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self._dims), dtype=np.float32)
        for row, text in enumerate(texts):
            out[row] = self.embed_one(text)
        return out

    def dimensions(self) -> int:
        return self._dims

    def model(self) -> str:
        return MODEL_ID

    def semantic_profile(self) -> SemanticProfile:
        return SemanticProfile(MODEL_ID, self._dims, TOKENIZER, "none", "l2")

    def runs_locally(self) -> bool:
        return True
