"""Trigram postings: the packed-key sort gives exactly what the general index sort gives."""

from __future__ import annotations

import random

import numpy as np
import pytest

from cruxsql.recall import trigrams


def _brute(strings: list[str], owners: list[int]) -> tuple[list[int], list[int]]:
    pairs = {((ord(s[i]) << 42) | (ord(s[i + 1]) << 21) | ord(s[i + 2]), seq)
             for s, seq in zip(strings, owners) for i in range(len(s) - 2)}
    ordered = sorted(pairs)
    return [c for c, _ in ordered], [s for _, s in ordered]


def _text(rng: random.Random, alphabet: str) -> str:
    return "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 12)))


def _runs(seed: int, alphabet: str, spread: int) -> tuple[list[str], list[int]]:
    rng = random.Random(seed)
    strings, owners, seq = [], [], rng.randrange(1, 200_000)
    for _ in range(300):
        seq += rng.randrange(0, spread)
        for _ in range(3):  # value, key, entity of one fact
            strings.append(_text(rng, alphabet))
            owners.append(seq)
    return strings, owners


ALPHABETS = {
    "ascii": "abc de",
    # NUL inside the text (the joiner), the highest code point, astral and combining characters
    "any": "a\x00b\U0010ffff\U0001f600\u0307\uffff\ud7ff",
}


@pytest.mark.parametrize("alphabet", ALPHABETS.values(), ids=ALPHABETS.keys())
@pytest.mark.parametrize("spread", [1, 40, 600], ids=["dense", "one-block", "many-blocks"])
def test_postings_are_every_distinct_trigram_and_seq_in_order(alphabet: str, spread: int) -> None:
    for seed in range(5):
        strings, owners = _runs(seed, alphabet, spread)
        codes, seqs = trigrams.postings(strings, np.array(owners, dtype=np.int64))
        assert (codes.tolist(), seqs.tolist()) == _brute(strings, owners)


def test_more_distinct_code_points_than_a_packed_key_holds_take_the_general_way() -> None:
    rng = random.Random(7)
    cps = [cp for cp in range(0x20, 0x2_0000) if not 0xD800 <= cp < 0xE000]
    rng.shuffle(cps)
    strings = ["".join(map(chr, cps[i:i + 7])) for i in range(0, len(cps), 7)]
    owners = sorted(rng.randrange(1, 1000) for _ in strings)
    codes, seqs = trigrams.postings(strings, np.array(owners, dtype=np.int64))
    assert (codes.tolist(), seqs.tolist()) == _brute(strings, owners)


def test_nothing_to_index() -> None:
    for strings in ([], ["", "ab", ""], ["a"]):
        codes, seqs = trigrams.postings(strings, np.ones(len(strings), dtype=np.int64))
        assert codes.tolist() == seqs.tolist() == []
