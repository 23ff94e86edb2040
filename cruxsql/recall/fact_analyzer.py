"""How a fact's text becomes recall's word terms: the analyzer of relevance-ranked recall.

The document lane's word split (`documents.analyzer`), with what short facts need on top: Unicode
lowercasing, the possessive `'s` dropped, stopwords (question words, auxiliaries, articles) left out,
words stemmed (word_stems.py: irregular forms, Snowball English, then the document lane's suffix stemmer
until it settles, so `payments`, `payment` and `pay` meet, as do `went` and `go`), and multi-word names
kept as units: an entity or key of two or more words (`payments-api`, `Maria Okafor`), a value of two to
four words, and any hyphenated or dotted chunk of a value also index one unit term (`=payments-api`,
`=maria-okafor`) beside their words, which a query's consecutive words find whatever punctuation joins
them. `analyse_texts` analyses many texts at once (numpy over a joined text); the postings that hold the
terms are fact_terms.py's.
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass
from typing import Optional, Sequence, TypeVar

import numpy as np

from ..documents.analyzer import split_words
from .scope import rust_lower
from .word_stems import word_stem

UNIT = "="                       # prefix of a unit term (never produced by the word split)
MAX_UNIT_WORDS = 4            # the longest name a query's consecutive words are looked up as

STOPWORDS = frozenset("""
a an the and or but if of at by for with about against between into through during before after above below to
from up down in out on off over under again further then once here there when where why how all any both each
few more most other some such no nor not only own same so than too very can will just should now is am are was
were be been being have has had having do does did doing would could might must shall may i me my myself we our
ours you your yours he him his she her hers it its they them their theirs what which who whom whose this that
these those use uses used using tell know show find give get got s t don doesn didn isn aren wasn weren
""".split())



@functools.lru_cache(maxsize=1 << 16)
def term_of(word: str) -> str:
    """A lowercased word's index term: its stem (word_stems.py: `payments` -> `pay`, `went` -> `go`)."""
    return word_stem(word)


def words(text: str) -> list[str]:
    """The lowercased words of `text` (possessive `'s` and edge apostrophes dropped; one-character ASCII
    pieces dropped, as the document analyzer does)."""
    pieces = split_words(rust_lower(text))
    if "'" in text:
        pieces = [p[:-2] if p.endswith("'s") else p for p in pieces]
        pieces = [p.strip("'") for p in pieces]
    return [p for p in pieces if len(p) > 1 or (p and not p.isascii())]


def unit_term(parts: Sequence[str]) -> str:
    return UNIT + "-".join(parts)


def is_unit(parts: Sequence[str]) -> bool:
    """Whether words name a unit: two of them at least hold a letter (`payments-api`, `eu-west-1`, not
    `note-17` or `PostgreSQL 15`, whose words find them as well)."""
    return sum(1 for p in parts if not p.isdigit()) > 1


def name_terms(text: str) -> tuple[tuple[str, ...], int]:
    """(terms, word count) of a name (an entity or key): its words' terms, plus the unit of the whole name
    when it is one. With `value_terms`, the analyzer of one fact; `FactTerms` indexes many at once and
    gives the same terms (tests/recall/test_relevance.py)."""
    ws = words(text)
    terms = [term_of(w) for w in ws if w not in STOPWORDS]
    length = len(terms)
    if is_unit(ws):
        terms.append(unit_term(ws))
    return tuple(terms), length


@functools.lru_cache(maxsize=1 << 16)
def _chunk_unit(chunk: str) -> Optional[str]:
    """The unit a whitespace-free chunk with punctuation names (two to eight words), else None; chunks
    repeat (names mentioned in values), so they are remembered."""
    parts = words(chunk)
    return unit_term(parts) if len(parts) <= 8 and is_unit(parts) else None


def value_units(text: str) -> list[str]:
    """The unit terms of a value: the whole value when it is a name of two to four words (`Maria Okafor`),
    and one per chunk of two to eight words joined by punctuation."""
    units = []
    if 0 < text.count(" ") <= 3:
        ws = words(text)
        if len(ws) <= 4 and is_unit(ws):
            units.append(unit_term(ws))
    if text.replace(" ", "").isalnum():     # no punctuation: no other unit
        return units
    chunks = map(_value_chunk_unit, text.split())
    return units + [u for u in chunks if u is not None and u not in units]


def _value_chunk_unit(chunk: str) -> Optional[str]:
    """The unit of one whitespace-free chunk of a value: none without punctuation, nor for an ASCII chunk
    without a letter or an apostrophe (only numbers for words: `#4711`, `2027-12-15`)."""
    if chunk.isalnum() or (chunk.isascii() and "'" not in chunk and chunk.lower() == chunk.upper()):
        return None
    return _chunk_unit(chunk)


def chunk_units(texts: list[str]) -> tuple[np.ndarray, list[str]]:
    """(text numbers, units) of the chunk units of values with no whole-value unit (more than three spaces,
    or none), a unit as often as its chunk: `value_units` of each, in order. Joined, the values are split
    into chunks at once, and only the chunks with punctuation (the separators among them, which tell the
    texts apart) are looked at, each distinct one once. Only the texts holding a character other than an
    ASCII letter, digit or space are split (a third of the bench's notes): the others have no punctuation."""
    joined = _joinable(texts)
    if joined is None:
        pairs = [(i, u) for i, text in enumerate(texts) for u in value_units(text)]
        return np.array([i for i, _ in pairs], dtype=np.int64), [u for _, u in pairs]
    # what is left of each text once its ASCII letters, digits and spaces are taken out (the texts hold no
    # NUL, nor does the UTF-8 of any other character)
    rest = joined.encode("utf-8", "surrogatepass").translate(None, _ALNUM_OR_SPACE).split(SEPARATOR.encode())
    split = np.flatnonzero(np.fromiter(map(len, rest), dtype=np.int64, count=len(rest)))
    if len(split) < len(texts):
        joined = _JOIN.join([texts[i] for i in split.tolist()])
    punctuated = list(itertools.filterfalse(str.isalnum, joined.split()))
    distinct, chunk_ids = _numbered(punctuated)
    units: dict[str, int] = {}
    unit_of_chunk = np.full(len(punctuated), -1, dtype=np.int64)
    for chunk, i in distinct.items():
        unit = _value_chunk_unit(chunk) if chunk != SEPARATOR else None
        if unit is not None:
            unit_of_chunk[i] = units.setdefault(unit, len(units))
    owner = np.cumsum(chunk_ids == distinct.get(SEPARATOR, -1))
    unit_ids = unit_of_chunk[chunk_ids]
    kept = unit_ids >= 0
    names = list(units)
    return split[owner[kept]], [names[u] for u in unit_ids[kept].tolist()]


def value_terms(text: str) -> tuple[list[str], int]:
    """(terms with repeats, word count) of a value: its words' terms, plus its units."""
    terms = [term_of(w) for w in words(text) if w not in STOPWORDS]
    return terms + value_units(text), len(terms)


# Texts split at once are joined with a separator of their own: a word of no text, set apart by spaces
SEPARATOR = "\x00"
_JOIN = f" {SEPARATOR} "
# lowercased ASCII: every character that is neither a word character ([a-z0-9']) nor the separator becomes
# a space, so that `bytes.split` gives `split_words`'s pieces (and the separators)
_ALNUM_OR_SPACE = bytes(c for c in range(128) if chr(c).isalnum() or c == 32)
_NOT_IN_WORDS = bytes(c if chr(c) in "abcdefghijklmnopqrstuvwxyz0123456789'\x00" else 32 for c in range(256))


def _word(piece: str) -> Optional[str]:
    """One lowercased piece as `words` keeps it (possessive and edge apostrophes dropped), else None."""
    if piece.endswith("'s"):
        piece = piece[:-2]
    piece = piece.strip("'")
    return piece if len(piece) > 1 or (piece and not piece.isascii()) else None


@dataclass(frozen=True)
class TextTerms:
    """The words of many texts analysed at once, without units: occurrence j is term `terms[ids[j]]` of
    text `owners[j]` (owners non-decreasing); per text, how many terms it keeps (its word count for BM25)
    and how many of its words are not all digits (`is_unit` needs two)."""

    terms: list[str]
    ids: np.ndarray
    owners: np.ndarray
    counts: np.ndarray
    named: np.ndarray


def _joinable(texts: Sequence[str]) -> Optional[str]:
    """`texts` joined by `_JOIN`, when none of them holds `SEPARATOR` (else its count would misplace them)."""
    joined = _JOIN.join(texts)
    return joined if joined.count(SEPARATOR) == len(texts) - 1 else None


def analyse_texts(texts: Sequence[str]) -> TextTerms:
    """The `TextTerms` of `texts`. ASCII texts are split by one regular expression over all of them and
    each distinct word is analysed once; the others (and any holding the separator the split joins them
    with) one at a time, through `words`."""
    joined = _joinable(texts)
    if joined is not None and joined.isascii():
        return _ascii_terms(joined, len(texts))
    plain = [i for i, t in enumerate(texts) if t.isascii() and SEPARATOR not in t]
    fast = _ascii_terms(_JOIN.join(texts[i] for i in plain), len(plain))
    table = {t: i for i, t in enumerate(fast.terms)}
    counts, named = np.zeros(len(texts), dtype=np.int64), np.zeros(len(texts), dtype=np.int64)
    plain_arr = np.array(plain, dtype=np.int64)
    counts[plain_arr], named[plain_arr] = fast.counts, fast.named
    ids: list[int] = []
    owners: list[int] = []
    for i in sorted(set(range(len(texts))).difference(plain)):
        ws = words(texts[i])
        kept = [table.setdefault(term_of(w), len(table)) for w in ws if w not in STOPWORDS]
        ids += kept
        owners += [i] * len(kept)
        counts[i], named[i] = len(kept), sum(1 for w in ws if not w.isdigit())
    all_owners = np.concatenate([plain_arr[fast.owners], np.array(owners, dtype=np.int64)])
    order = np.argsort(all_owners, kind="stable")
    return TextTerms(list(table), np.concatenate([fast.ids, np.array(ids, dtype=np.int64)])[order],
                     all_owners[order], counts, named)


_Item = TypeVar("_Item", str, bytes)


def _numbered(items: list[_Item]) -> tuple[dict[_Item, int], np.ndarray]:
    """(each distinct item's first position, each item's first position): one hashing pass."""
    first: dict[_Item, int] = {}
    return first, np.fromiter(map(first.setdefault, items, itertools.count()), dtype=np.int64, count=len(items))


def _ascii_terms(joined: str, n: int) -> TextTerms:
    """`analyse_texts` of `n` ASCII texts joined by `_JOIN` (none of which holds `SEPARATOR`)."""
    if not n:
        empty = np.zeros(0, dtype=np.int64)
        return TextTerms([], empty, empty, empty, empty)
    # split and numbered as bytes, each distinct piece decoded once: a third cheaper than making and
    # hashing a str per piece
    pieces = joined.encode("ascii").lower().translate(_NOT_IN_WORDS).split()
    distinct, piece_ids = _numbered(pieces)
    first = np.fromiter(distinct.values(), dtype=np.int64, count=len(distinct))
    items = b" ".join(distinct).decode("ascii").split()          # pieces hold no whitespace
    terms: dict[str, int] = {}
    term_of_piece = np.full(len(pieces), -1, dtype=np.int64)
    named_piece = np.zeros(len(pieces), dtype=bool)
    digits = np.fromiter(map(str.isdigit, items), dtype=bool, count=len(items))
    for k in np.flatnonzero(~digits).tolist():
        piece = items[k]
        word = _word(piece) if piece != SEPARATOR else None
        if word is not None:
            named_piece[first[k]] = not word.isdigit()
            if word not in STOPWORDS:
                term_of_piece[first[k]] = terms.setdefault(term_of(word), len(terms))
    # a number of two digits or more is its own term (ids and counts make many): numbered at once unless
    # a word already gave one of them (`'15'`)
    number_ks = np.flatnonzero(digits)
    numbers = [items[k] for k in number_ks.tolist()]
    longer = np.fromiter(map((1).__lt__, map(len, numbers)), dtype=bool, count=len(numbers))
    numbers = list(itertools.compress(numbers, longer))
    at = first[number_ks[longer]]
    if any(map(terms.__contains__, numbers)):
        term_of_piece[at] = [terms.setdefault(number, len(terms)) for number in numbers]
    else:
        term_of_piece[at] = np.arange(len(terms), len(terms) + len(numbers))
        terms.update(zip(numbers, itertools.count(len(terms))))
    owner = np.cumsum(piece_ids == distinct.get(SEPARATOR.encode(), -1))
    mapped = term_of_piece[piece_ids]
    keep = mapped >= 0
    owners = owner[keep]
    return TextTerms(list(terms), mapped[keep], owners, np.bincount(owners, minlength=n),
                     np.bincount(owner[named_piece[piece_ids]], minlength=n))
