"""Lexical fingerprints of fact values: normalised text, character 4-gram shingles, MinHash.

`normalise` lowercases, turns every run of non-word characters into one space and trims, so
"Deployed  to PROD!" and "deployed to prod" are the same text. A value's shingles are the 4-byte
windows of its normalised UTF-8 text padded with a space at each end (so a value of two or more
characters has at least one); the MinHash signature is computed for many values at once with numpy.
"""

from __future__ import annotations

import re

import numpy as np

GRAM = 4
_NON_WORD = re.compile(r"[\W_]+")
# the same rule for ASCII text, without a regex: every non-alphanumeric ASCII character becomes a space
_ASCII_NON_WORD = str.maketrans({c: " " for c in map(chr, range(128)) if not c.isalnum()})


def normalise(value: str) -> str:
    """Lowercase, runs of non-alphanumeric characters to one space, trimmed."""
    if value.isascii():
        return " ".join(value.lower().translate(_ASCII_NON_WORD).split())
    return _NON_WORD.sub(" ", value.lower()).strip()


def _padded(text: str) -> bytes:
    """The bytes a text's shingles are cut from: a space at each end, NUL-padded to at least GRAM."""
    return f" {text} ".encode().ljust(GRAM, b"\0")


def shingle_set(text: str) -> set[bytes]:
    """The exact shingle set of an already normalised text (used to verify candidate pairs)."""
    data = _padded(text)
    return {data[i:i + GRAM] for i in range(len(data) - GRAM + 1)}


def jaccard(a: set[bytes], b: set[bytes]) -> float:
    if not a and not b:
        return 1.0
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter)


def hash_params(count: int, seed: int = 13) -> tuple[np.ndarray, np.ndarray]:
    """`count` (a, b) pairs of the multiply-add family (a*x + b) mod 2^32, `a` odd: each is a
    permutation of the 32-bit shingle codes, and the minimum is decided by the high, well-mixed bits.
    (Candidates are verified with the exact Jaccard, so the hash only has to propose them.)"""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 1 << 31, size=count, dtype=np.uint32) * np.uint32(2) + np.uint32(1)
    b = rng.integers(0, 1 << 32, size=count, dtype=np.uint64).astype(np.uint32)
    return a, b


def minhash_signatures(texts: list[str], a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(len(texts), len(a)) uint32 MinHash signatures of normalised, non-empty texts.

    All texts go into one byte array; the 4-byte window at every position is packed into a uint32
    code, the windows that run past the end of their text are dropped, and each hash function's
    minimum per text is taken with `np.minimum.reduceat` (a minimum ignores repeated shingles)."""
    encoded = [_padded(t) for t in texts]
    lengths = np.fromiter((len(e) for e in encoded), dtype=np.int64, count=len(encoded))
    buf = np.frombuffer(b"".join(encoded), dtype=np.uint8)
    wide = buf.astype(np.uint32)
    codes = (wide[:-3] << 24) | (wide[1:-2] << 16) | (wide[2:-1] << 8) | wide[3:]
    valid = np.ones(len(codes) + GRAM - 1, dtype=bool)
    ends = np.cumsum(lengths)
    valid[(ends[:, None] - np.arange(1, GRAM)).ravel()] = False     # the last GRAM-1 starts of each text
    codes = codes[valid[:len(codes)]]
    counts = lengths - (GRAM - 1)
    offsets = np.concatenate(([0], np.cumsum(counts)[:-1]))
    out = np.empty((len(texts), len(a)), dtype=np.uint32)
    for j in range(len(a)):
        out[:, j] = np.minimum.reduceat(codes * a[j] + b[j], offsets)   # wraps mod 2^32
    return out
