"""The word index of relevance-ranked recall: an analyzer for facts and BM25 postings kept beside the text index.

Analyzer: the document lane's word split and suffix stemmer (`documents.analyzer`), with what short facts
need on top: Unicode lowercasing, the possessive `'s` dropped, stopwords (question words, auxiliaries,
articles) left out, the stemmer applied until it settles (so `payments`, `payment` and `pay` meet), and
multi-word names kept as units: an entity or key of two or more words (`payments-api`, `Maria Okafor`),
a value of two to four words, and any hyphenated or dotted chunk of a value also index one unit term
(`=payments-api`, `=maria-okafor`) beside their words, which a query's consecutive words find whatever punctuation joins
them.

Postings (`recall_terms`, migration 0019): per (tenant, owner, term, block of 65536 seqs) one blob of
8-byte records (seq offset, term frequency and word count per field: entity, key, value), so a query reads
a few rows per term and scores them with numpy. `owner` is '' for facts the whole tenant sees, else the
owner of an `__agent::<owner>::` entity; facts nobody can recall (private without an owner) are not
indexed. `recall_term_stats` holds N and the summed field lengths per scope. The index follows
`facts.seq` with `text_index.TextIndex` (same state, same hooks): facts' text never changes after
insert, so indexing is append-only, and a compaction drops the dropped facts' postings (`drop`).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Optional, Sequence

import apsw
import numpy as np

from ..documents.analyzer import split_words, stem
from .scope import rust_lower, split_private_entity

BLOCK_BITS = 16
BLOCK_SIZE = 1 << BLOCK_BITS
UNIT = "="                       # prefix of a unit term (never produced by the word split)
FIELDS = ("entity", "key", "value")
POSTING = np.dtype([("off", "<u2"), ("tf", "u1", (3,)), ("len", "u1", (3,))])
_CHUNK = 50_000                  # facts analysed and written at a time
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
    """A lowercased word's index term: the stemmer applied until it settles (`payments` -> `pay`)."""
    for _ in range(3):
        stemmed = stem(word)
        if stemmed == word:
            break
        word = stemmed
    return word


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


def _name_terms(text: str) -> tuple[tuple[str, ...], int]:
    """(terms, word count) of a name (an entity or key): its words' terms, plus the unit of the whole name
    when it is one."""
    ws = words(text)
    terms = [term_of(w) for w in ws if w not in STOPWORDS]
    length = len(terms)
    if is_unit(ws):
        terms.append(unit_term(ws))
    return tuple(terms), length


# Names repeat across facts, so their terms are remembered; entities and keys apart, so that many
# one-off keys (`note-4711`) do not push the entities out.
name_terms = functools.lru_cache(maxsize=1 << 16)(_name_terms)
key_terms = functools.lru_cache(maxsize=1 << 16)(_name_terms)


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
    chunks = [_chunk_unit(chunk) for chunk in text.split() if not chunk.isalnum()]
    return units + [u for u in chunks if u is not None and u not in units]


def value_terms(text: str) -> tuple[list[str], int]:
    """(terms with repeats, word count) of a value: its words' terms, plus its units."""
    terms = [term_of(w) for w in words(text) if w not in STOPWORDS]
    return terms + value_units(text), len(terms)


_SEPARATOR = "\x1f"
_ASCII_PIECE = re.compile(r"[a-z0-9']+|\x1f")


def _kept_term(piece: str) -> Optional[str]:
    """The term of one lowercased ASCII piece as `words` and `value_terms` would keep it, else None."""
    if piece.endswith("'s"):
        piece = piece[:-2]
    piece = piece.strip("'")
    return term_of(piece) if len(piece) > 1 and piece not in STOPWORDS else None


def many_value_terms(values: Sequence[str]) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    """`value_terms` of many values at once, without their units: (term table, term number of each term
    occurrence, its value's index, each value's word count). ASCII values are split by one regular
    expression over all of them and each distinct word is analysed once."""
    joined = _SEPARATOR.join(values)
    if not joined.isascii() or not values:
        table: dict[str, int] = {}
        ids: list[int] = []
        of_value: list[int] = []
        counts: list[int] = []
        for i, value in enumerate(values):
            kept = [term_of(w) for w in words(value) if w not in STOPWORDS]
            ids += [table.setdefault(t, len(table)) for t in kept]
            of_value += [i] * len(kept)
            counts.append(len(kept))
        return list(table), np.array(ids, dtype=np.int64), np.array(of_value, dtype=np.int64), \
            np.array(counts, dtype=np.int64)
    pieces = _ASCII_PIECE.findall(joined.lower())
    distinct = {p: i for i, p in enumerate(dict.fromkeys(pieces))}
    piece_ids = np.fromiter(map(distinct.__getitem__, pieces), dtype=np.int64, count=len(pieces))
    terms: dict[str, int] = {}
    term_of_piece = np.full(len(distinct), -1, dtype=np.int64)
    for piece, i in distinct.items():
        term = _kept_term(piece) if piece != _SEPARATOR else None
        if term is not None:
            term_of_piece[i] = terms.setdefault(term, len(terms))
    separators = piece_ids == distinct.get(_SEPARATOR, -1)
    owner = np.cumsum(separators)
    mapped = term_of_piece[piece_ids]
    keep = mapped >= 0
    owners = owner[keep]
    return list(terms), mapped[keep], owners, np.bincount(owners, minlength=len(values)).astype(np.int64)


@dataclass(frozen=True)
class TermPostings:
    """One term's postings in the caller's scopes: seqs (ascending), tf and word counts (n x 3 fields)."""

    seqs: np.ndarray
    tf: np.ndarray
    lengths: np.ndarray


@dataclass(frozen=True)
class ScopeStats:
    facts: int
    avg_lengths: np.ndarray      # per field (entity, key, value), at least 1.0


def _scope_of(entity: str, private: int) -> Optional[tuple[str, str]]:
    """(owner or '', visible entity) of a fact, or None when no caller can recall it."""
    split = split_private_entity(entity)
    if split is not None:
        return split
    return None if private else ("", entity)


class FactTerms:
    """The BM25 postings of one view's facts (maintained by `text_index.TextIndex`)."""

    def __init__(self, db: apsw.Connection) -> None:
        self.db = db

    # --- maintenance (inside the text index's transaction) -----------------------------------------

    def wipe(self) -> None:
        self.db.execute("DELETE FROM recall_terms")
        self.db.execute("DELETE FROM recall_term_stats")

    def _analyse(self, rows: Sequence[tuple]) -> tuple[dict, np.ndarray, np.ndarray, list[tuple[str, str, str]],
                                                       np.ndarray]:
        """(per-scope stats deltas, postings records, their key numbers, the keys (tenant, owner, term) by
        number, their blocks) of `rows` (seq, tenant, entity, key, value, private), in seq order: the terms
        of every fact are listed once, then counted per (scope, term, fact, field) with numpy."""
        scopes: dict[tuple[str, str], int] = {}
        tokens: list[str] = []                       # entity and key terms, then value units
        counts: list[tuple[int, int]] = []           # terms of the entity and the key of each fact
        lengths: list[tuple[int, int]] = []          # word counts of the entity and the key
        fact_scope: list[int] = []
        seqs: list[int] = []
        values: list[str] = []
        for seq, tenant, entity, key, value, private in rows:
            scoped = _scope_of(entity, private)
            if scoped is None:
                continue
            owner, visible = scoped
            fact_scope.append(scopes.setdefault((tenant, owner), len(scopes)))
            e_terms, e_len = name_terms(visible)
            k_terms, k_len = key_terms(key)
            tokens += e_terms
            tokens += k_terms
            counts.append((len(e_terms), len(k_terms)))
            lengths.append((e_len, k_len))
            seqs.append(seq)
            values.append(value)
        n = len(seqs)
        count_arr = np.array(counts, dtype=np.int64).reshape(-1, 2)
        fact_parts = [np.repeat(np.arange(n, dtype=np.int64), count_arr.sum(axis=1))]
        field_parts = [np.repeat(np.tile(np.arange(2, dtype=np.int64), n), count_arr.ravel())]
        unit_owners = []
        for i, value in enumerate(values):
            units = value_units(value)
            tokens += units
            unit_owners += [i] * len(units)
        fact_parts.append(np.array(unit_owners, dtype=np.int64))
        field_parts.append(np.full(len(unit_owners), 2, dtype=np.int64))
        table, value_ids, value_owners, value_lengths = many_value_terms(values)
        numbers = {t: i for i, t in enumerate(dict.fromkeys([*tokens, *table]))}
        term_ids = np.concatenate([
            np.fromiter(map(numbers.__getitem__, tokens), dtype=np.int64, count=len(tokens)),
            np.array([numbers[t] for t in table], dtype=np.int64)[value_ids] if table else value_ids])
        fact_of = np.concatenate(fact_parts + [value_owners])
        field_of = np.concatenate(field_parts + [np.full(len(value_owners), 2, dtype=np.int64)])
        length_arr = np.concatenate([np.array(lengths, dtype=np.int64).reshape(-1, 2), value_lengths[:, None]],
                                    axis=1) if n else np.zeros((0, 3), dtype=np.int64)
        scope_arr = np.array(fact_scope, dtype=np.int64)
        n_terms = max(len(numbers), 1)
        # one key per (scope, term, fact, field): sorted, they group postings by term, facts ascending
        keys, tf = np.unique(((scope_arr[fact_of] * n_terms + term_ids) * max(n, 1) + fact_of) * 3 + field_of,
                             return_counts=True)
        posting_keys, first = np.unique(keys // 3, return_index=True)
        which = np.searchsorted(posting_keys, keys // 3)
        records = np.zeros(len(posting_keys), dtype=POSTING)
        tf_matrix = np.zeros((len(posting_keys), 3), dtype=np.int64)
        tf_matrix[which, keys % 3] = tf
        facts = posting_keys % max(n, 1)
        seq_arr = np.array(seqs, dtype=np.int64)
        records["off"] = seq_arr[facts] & (BLOCK_SIZE - 1)
        records["tf"] = np.minimum(tf_matrix, 255)
        records["len"] = np.minimum(length_arr, 255)[facts]
        group = posting_keys // max(n, 1)                # scope * n_terms + term
        term_names = list(numbers)
        scope_names = list(scopes)
        distinct, ids = np.unique(group, return_inverse=True)
        names = [(*scope_names[g // n_terms], term_names[g % n_terms]) for g in distinct.tolist()]
        stats: dict[tuple[str, str], np.ndarray] = {}
        for sc, name in enumerate(scope_names):
            mine = scope_arr == sc
            stats[name] = np.array([int(mine.sum()), *np.minimum(length_arr[mine], 255).sum(axis=0).tolist()])
        return stats, records, ids, names, seq_arr[facts] >> BLOCK_BITS

    def add(self, rows: Sequence[tuple]) -> None:
        """Index `rows` (seq, tenant, entity, key, value, private), every seq above those indexed."""
        stats, records, ids, names, blocks = self._analyse(rows)
        if not len(records):
            return
        # postings come grouped by term, seqs ascending; blocks ascend within a group too
        starts = np.flatnonzero(np.r_[True, (ids[1:] != ids[:-1]) | (blocks[1:] != blocks[:-1])])
        bounds = np.r_[starts, len(ids)].tolist()
        raw = records.tobytes()
        size = POSTING.itemsize
        self.db.executemany(
            "INSERT INTO recall_terms (tenant, owner, term, block, postings) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (tenant, owner, term, block) DO UPDATE SET postings = CAST(postings || excluded.postings AS BLOB)",
            ((*names[ids[s]], int(blocks[s]), raw[s * size:e * size]) for s, e in zip(bounds[:-1], bounds[1:])))
        self._count(stats, 1)

    def _count(self, stats: dict[tuple[str, str], np.ndarray], sign: int) -> None:
        self.db.executemany(
            "INSERT INTO recall_term_stats (tenant, owner, facts, entity_words, key_words, value_words) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (tenant, owner) DO UPDATE SET facts = facts + excluded.facts, "
            "entity_words = entity_words + excluded.entity_words, key_words = key_words + excluded.key_words, "
            "value_words = value_words + excluded.value_words",
            [(tenant, owner, *(sign * delta).tolist()) for (tenant, owner), delta in stats.items()])

    def index_range(self, last: int, max_seq: int) -> None:
        """Index the facts with seqs in (last, max_seq]."""
        while last < max_seq:
            hi = min(max_seq, last + _CHUNK)
            self.add(self.db.execute(
                "SELECT seq, tenant_hash, entity, key, value, private FROM facts WHERE seq > ? AND seq <= ? "
                "ORDER BY seq", (last, hi)).fetchall())
            last = hi

    def drop(self, seqs: Sequence[int]) -> None:
        """Take the facts `seqs` (still in `facts`) out of the postings and the statistics."""
        for i in range(0, len(seqs), _CHUNK):
            chunk = np.array(seqs[i:i + _CHUNK], dtype=np.int64)
            rows = self.db.execute(
                "SELECT seq, tenant_hash, entity, key, value, private FROM facts WHERE seq IN carray(?) ORDER BY seq",
                (apsw.carray(chunk),)).fetchall()
            stats, _, ids, names, blocks = self._analyse(rows)
            updates: list[tuple] = []
            deletes: list[tuple] = []
            # One mask of the dropped offsets per block, built once: a posting goes when its offset is
            # set (an `np.isin` against the whole chunk per term hashed the chunk again for each of
            # ~13k terms: 14 of a 100k-fact compaction's 16 s).
            gone: dict[int, np.ndarray] = {}
            for block in np.unique(chunk >> BLOCK_BITS).tolist():
                mask = np.zeros(BLOCK_SIZE, dtype=bool)
                mask[chunk[(chunk >> BLOCK_BITS) == block] & (BLOCK_SIZE - 1)] = True
                gone[block] = mask
            for key, block in sorted({(names[i], b) for i, b in zip(ids.tolist(), blocks.tolist())}):
                row = self.db.execute("SELECT postings FROM recall_terms WHERE tenant = ? AND owner = ? AND term = ? "
                                      "AND block = ?", (*key, block)).fetchone()
                if row is None:
                    continue
                records = np.frombuffer(row[0], dtype=POSTING)
                kept = records[~gone[block][records["off"]]]
                if len(kept) == len(records):
                    continue
                (updates if len(kept) else deletes).append(
                    (kept.tobytes(), *key, block) if len(kept) else (*key, block))
            self.db.executemany("UPDATE recall_terms SET postings = ? WHERE tenant = ? AND owner = ? AND term = ? "
                                "AND block = ?", updates)
            self.db.executemany("DELETE FROM recall_terms WHERE tenant = ? AND owner = ? AND term = ? AND block = ?",
                                deletes)
            self._count(stats, -1)

    # --- lookups ----------------------------------------------------------------------------------

    @staticmethod
    def _owners(agent: Optional[str]) -> tuple[str, ...]:
        return ("",) if agent is None else ("", agent)

    def postings(self, tenant: str, agent: Optional[str], terms: Sequence[str]) -> dict[str, TermPostings]:
        """The postings of `terms` among the facts of the tenant that the caller may see (public ones and
        the caller's own); terms with none are absent."""
        if not terms:
            return {}
        owners = self._owners(agent)
        parts: dict[str, list[tuple[int, bytes]]] = {}
        for term, block, blob in self.db.execute(
                f"SELECT term, block, postings FROM recall_terms WHERE tenant = ? AND owner IN "
                f"({', '.join('?' * len(owners))}) AND term IN carray(?)",
                (tenant, *owners, apsw.carray(tuple(dict.fromkeys(terms))))):
            parts.setdefault(term, []).append((block, blob))
        out = {}
        for term, blobs in parts.items():
            records = [np.frombuffer(blob, dtype=POSTING) for _, blob in blobs]
            seqs = np.concatenate([r["off"].astype(np.int64) + (b << BLOCK_BITS) for (b, _), r in zip(blobs, records)])
            merged = records[0] if len(records) == 1 else np.concatenate(records)
            if len(blobs) > 1:
                order = np.argsort(seqs, kind="stable")
                seqs, merged = seqs[order], merged[order]
            out[term] = TermPostings(seqs, merged["tf"], merged["len"])
        return out

    def stats(self, tenant: str, agent: Optional[str]) -> ScopeStats:
        owners = self._owners(agent)
        row = self.db.execute(
            f"SELECT sum(facts), sum(entity_words), sum(key_words), sum(value_words) FROM recall_term_stats "
            f"WHERE tenant = ? AND owner IN ({', '.join('?' * len(owners))})", (tenant, *owners)).fetchone()
        assert row is not None  # an aggregate always has its row
        facts = int(row[0] or 0)
        sums = np.array([row[1] or 0, row[2] or 0, row[3] or 0], dtype=np.float64)
        return ScopeStats(facts, np.maximum(sums / max(facts, 1), 1.0).astype(np.float32))
