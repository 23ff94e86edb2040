"""The BM25 analyzer of Crux (tokenizer_version 1, corecrux-index/src/tokenizer.rs): split, ASCII-lowercase, drop, stem.

Documents and queries go through the same pipeline. The token list keeps duplicates: a query
"drift drift" scores the term twice.
"""

from __future__ import annotations

import re

import regex

# Rust `char::is_alphanumeric` is Unicode Alphabetic ∪ N; the apostrophe is kept inside tokens.
_WORD = regex.compile(r"[\p{Alphabetic}\p{N}']+")
# The same class restricted to ASCII, for the common all-ASCII text (the stdlib engine is faster).
_ASCII_WORD = re.compile(r"[A-Za-z0-9']+")
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")

# (suffix, minimum byte length of the base, replacement), tried in order after -ies/-ied/-sses.
_SUFFIX_RULES: tuple[tuple[str, int, str], ...] = (
    ("ies", 2, "i"),
    ("ied", 2, "i"),
    ("sses", 0, "ss"),
    ("ness", 2, ""),
    ("ment", 3, ""),
    ("ing", 3, ""),
    ("tion", 2, "t"),
    ("ation", 2, "at"),
    ("able", 3, ""),
    ("ible", 3, ""),
    ("ful", 3, ""),
    ("ous", 3, ""),
    ("ive", 3, ""),
    ("ly", 3, ""),
    ("ed", 3, ""),
    ("er", 3, ""),
    ("es", 3, ""),
)
# The same rules grouped by their suffix's last character (order kept): only those can match a word.
_RULES_BY_LAST_CHAR: dict[str, tuple[tuple[str, int, str], ...]] = {
    last: tuple(rule for rule in _SUFFIX_RULES if rule[0][-1] == last) for last in {r[0][-1] for r in _SUFFIX_RULES}
}


def _byte_len(word: str) -> int:
    return len(word) if word.isascii() else len(word.encode("utf-8"))


def split_words(text: str) -> list[str]:
    """Step 1: the non-empty pieces between characters that are neither alphanumeric nor `'`."""
    return (_ASCII_WORD if text.isascii() else _WORD).findall(text)


def is_dropped(piece: str) -> bool:
    """Step 3: pieces of one UTF-8 byte (a single ASCII character) are not tokens."""
    return len(piece) == 1 and piece.isascii()


def surface_words(text: str) -> list[str]:
    """The original-case words that become tokens (pieces longer than one UTF-8 byte).

    Coverage maps `token_matched[i]` back onto this list to name missing words in their original case.
    """
    return [piece for piece in split_words(text) if not is_dropped(piece)]


def stem(word: str) -> str:
    """Step 4: Crux's suffix stemmer; every length is a UTF-8 byte length, the first matching rule wins."""
    size = _byte_len(word)
    if size <= 3:
        return word
    for suffix, min_base, replacement in _RULES_BY_LAST_CHAR.get(word[-1], ()):
        if word.endswith(suffix):
            base = word[: -len(suffix)]
            if _byte_len(base) >= min_base:
                return base + replacement
    if word.endswith("s") and not word.endswith("ss") and size >= 4:
        return word[:-1]
    return word


def normalize(word: str) -> str:
    """Steps 2 and 4 for one surface word: ASCII-lowercase, then stem."""
    return stem(word.translate(_ASCII_LOWER))


def analyze(text: str) -> list[str]:
    """The stemmed tokens of `text`, in order, duplicates kept."""
    return [normalize(word) for word in surface_words(text)]
