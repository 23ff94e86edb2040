"""Trigram codes of lowercased fact text, and the (code, seq) postings the text index stores.

A trigram's code packs its three code points, 21 bits each: `(a << 42) | (b << 21) | c`. The postings
of a run of facts are every distinct (code, seq) pair, sorted by code then seq.

Building them sorts one entry per character of text (~5M for 65,536 facts). The general way sorts
64-bit codes and carries each one's seq beside it (an index sort, then a gather). Almost always
there is room to pack the whole pair into one 64-bit key instead, and a plain in-place sort of those
keys is several times cheaper: each code point becomes its rank in the run's alphabet (16 bits, in
code point order, so keys sort exactly as codes do) and the seq its distance from the run's first
(16 bits). A run with more than 65,534 distinct code points or spanning more than 65,536 seqs takes the
general way; `tests/recall/test_trigrams.py` checks both give the same postings.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

MAX_CODE_POINT = 0x10FFFF
_SEP = MAX_CODE_POINT + 1  # above every code point: marks field boundaries in the general way
_NARROW = 0xFFFF  # ranks and seq offsets that fit a key's 16-bit fields (rank 0xFFFF marks a boundary)
_U64 = np.uint64
_EMPTY = (np.empty(0, np.int64), np.empty(0, np.int64))


def term_grams(term: str) -> Optional[np.ndarray]:
    """Distinct trigram codes of a (lowercased) term; None when it is shorter than three characters."""
    if len(term) < 3:
        return None
    cps = np.frombuffer(term.encode("utf-32-le"), dtype=np.uint32).astype(np.int64)
    codes = (cps[:-2] << 42) | (cps[1:-1] << 21) | cps[2:]
    return np.unique(codes)


def postings(strings: list[str], owners: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(codes, seqs) of every distinct (trigram, seq) pair of `strings`, sorted by code then seq.
    `strings[i]` belongs to seq `owners[i]`; owners must be non-decreasing. No trigram spans two strings."""
    if not strings:
        return _EMPTY
    cps = np.frombuffer("\x00".join(strings).encode("utf-32-le"), dtype=np.uint32)
    if len(cps) < 3:
        return _EMPTY
    lengths = np.fromiter(map(len, strings), dtype=np.int64, count=len(strings))
    boundaries = np.cumsum(lengths + 1)[:-1] - 1  # where the joiners sit
    used = np.zeros(_SEP, dtype=bool)
    used[cps] = True
    alphabet = np.flatnonzero(used)
    first = int(owners.min())
    if len(alphabet) < _NARROW and int(owners.max()) - first <= _NARROW:
        return _narrow(cps, lengths, boundaries, alphabet, owners - first, first)
    return _wide(cps, lengths, boundaries, owners)


def _narrow(cps: np.ndarray, lengths: np.ndarray, boundaries: np.ndarray, alphabet: np.ndarray,
            offsets: np.ndarray, first: int) -> tuple[np.ndarray, np.ndarray]:
    """`postings` through one in-place sort of packed (rank, rank, rank, seq offset) keys."""
    rank = np.zeros(_SEP, dtype=np.uint16)
    rank[alphabet] = np.arange(len(alphabet), dtype=np.uint16)
    ranks = rank[cps]
    ranks[boundaries] = _NARROW
    key = ranks[:-2].astype(_U64)
    for shifted in (ranks[1:-1], ranks[2:], np.repeat(offsets.astype(np.uint16), lengths + 1)[:len(key)]):
        key <<= _U64(16)
        key |= shifted
    crossing = (ranks[:-2] == _NARROW) | (ranks[1:-1] == _NARROW) | (ranks[2:] == _NARROW)
    key[crossing] = np.iinfo(np.uint64).max  # sorts last, then cut off
    key.sort()
    key = key[:len(key) - int(np.count_nonzero(crossing))]
    if len(key) > 1:
        distinct = np.empty(len(key), dtype=bool)
        distinct[0] = True
        np.not_equal(key[1:], key[:-1], out=distinct[1:])
        key = key[distinct]
    alphabet = alphabet.astype(np.int64)
    codes = alphabet[(key >> _U64(48)).astype(np.intp)] << 42
    codes |= alphabet[((key >> _U64(32)) & _U64(_NARROW)).astype(np.intp)] << 21
    codes |= alphabet[((key >> _U64(16)) & _U64(_NARROW)).astype(np.intp)]
    return codes, (key & _U64(_NARROW)).astype(np.int64) + first


def _wide(cps: np.ndarray, lengths: np.ndarray, boundaries: np.ndarray,
          owners: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`postings` for any text: a stable index sort of the codes, then the seqs gathered after them."""
    cps = cps.astype(np.int64)
    cps[boundaries] = _SEP
    a, b, c = cps[:-2], cps[1:-1], cps[2:]
    valid = (a < _SEP) & (b < _SEP) & (c < _SEP)
    codes = ((a << 42) | (b << 21) | c)[valid]
    seq_of_pos = np.repeat(owners, lengths + 1)[: len(cps) - 2][valid]
    order = np.argsort(codes, kind="stable")  # seqs stay ascending within a code
    codes, seqs = codes[order], seq_of_pos[order]
    if len(codes) > 1:
        keep = np.ones(len(codes), dtype=bool)
        keep[1:] = (codes[1:] != codes[:-1]) | (seqs[1:] != seqs[:-1])
        codes, seqs = codes[keep], seqs[keep]
    return codes, seqs
