"""The word index of relevance-ranked recall: BM25 postings of the terms `fact_analyzer` finds in facts,
kept beside the text index.

Postings (`recall_terms`, migration 0019): per (tenant, owner, term, block of 65536 seqs) one blob of
8-byte records (seq offset, term frequency and word count per field: entity, key, value), so a query reads
a few rows per term and scores them with numpy. `owner` is '' for facts the whole tenant sees, else the
owner of an `__agent::<owner>::` entity; facts nobody can recall (private without an owner) are not
indexed. `recall_term_stats` holds N and the summed field lengths per scope. The index follows
`facts.seq` with `text_index.TextIndex` (same state, same hooks): facts' text never changes after
insert, so indexing is append-only, and a compaction drops the dropped facts' postings (`drop`).
"""

from __future__ import annotations

import bisect
import itertools
import operator
from dataclasses import dataclass
from typing import Iterable, Optional, Sequence

import apsw
import numpy as np

from ..facts.privacy import AGENT_PRIVATE_ENTITY_PREFIX
from .fact_analyzer import SEPARATOR, analyse_texts, chunk_units, unit_term, value_units, words
from .scope import split_private_entity

BLOCK_BITS = 16
BLOCK_SIZE = 1 << BLOCK_BITS
FIELDS = ("entity", "key", "value")
POSTING = np.dtype([("off", "<u2"), ("tf", "u1", (3,)), ("len", "u1", (3,))])
_CHUNK = 50_000                  # facts taken out of the index at a time


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


_Batch = tuple[dict[tuple[str, str], int], np.ndarray, np.ndarray, tuple[list[str], list[str], list[str]]]


def _names_an_agent(joined_entities: str) -> bool:
    """Whether any of the entities joined by the separator is an agent's (each entity starts right after a
    separator, so one is found whatever the others hold)."""
    return SEPARATOR + AGENT_PRIVATE_ENTITY_PREFIX in SEPARATOR + joined_entities


def _public_batch(seqs: np.ndarray, tenants: list[str], entities: list[str], keys: list[str],
                  values: list[str]) -> _Batch:
    """The `_split_rows` of facts none of which is private or an agent's: one scope per tenant."""
    scopes = {(tenant, ""): i for i, tenant in enumerate(dict.fromkeys(tenants))}
    if len(scopes) == 1:
        return scopes, np.zeros(len(seqs), dtype=np.int64), seqs, (entities, keys, values)
    number = {tenant: i for (tenant, _), i in scopes.items()}
    return scopes, np.fromiter(map(number.__getitem__, tenants), dtype=np.int64, count=len(seqs)), seqs, (
        entities, keys, values)


def _split_rows(rows: Sequence[tuple]) -> _Batch:
    """(scopes numbered, each indexed fact's scope number, seqs, (visible entities, keys, values)) of `rows`
    (seq, tenant, entity, key, value, private), leaving out the facts nobody can recall. Columns are split
    at once; only a batch holding a private flag or an agent's entity is looked at fact by fact."""
    if not rows:
        return {}, np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), ([], [], [])
    seqs, tenants, entities, keys, values, private = map(list, zip(*rows))
    if not any(private) and not _names_an_agent(SEPARATOR.join(entities)):
        return _public_batch(np.array(seqs, dtype=np.int64), tenants, entities, keys, values)
    scopes: dict[tuple[str, str], int] = {}
    fact_scope: list[int] = []
    kept_seqs: list[int] = []
    kept: tuple[list[str], list[str], list[str]] = ([], [], [])
    for seq, tenant, entity, key, value, is_private in rows:
        scoped = _scope_of(entity, is_private)
        if scoped is None:
            continue
        fact_scope.append(scopes.setdefault((tenant, scoped[0]), len(scopes)))
        kept_seqs.append(seq)
        for column, text in zip(kept, (scoped[1], key, value)):
            column.append(text)
    return scopes, np.array(fact_scope, dtype=np.int64), np.array(kept_seqs, dtype=np.int64), kept


def _mostly_distinct(field: list[str], sample: int = 1024) -> bool:
    """Whether a field's texts hardly repeat, told by a sample of them (a large field only)."""
    return len(field) > 4 * sample and len(set(field[::len(field) // sample])) * 10 > sample * 9


@dataclass(frozen=True)
class _Keys:
    """The postings keys (tenant, owner, term) of an analysed batch: `group[j]` is posting j's key number,
    scope * n_terms + term, both numbered in their text order."""

    scopes: list[tuple[str, str]]
    terms: list[str]
    n_terms: int
    group: np.ndarray

    def columns(self, groups: np.ndarray) -> tuple[Sequence[str], Sequence[str], Sequence[str]]:
        """The tenants, owners and terms of key numbers `groups`."""
        if not len(groups):
            return [], [], []
        terms = operator.itemgetter(*(groups % self.n_terms).tolist())(self.terms)
        terms = (terms,) if len(groups) == 1 else terms
        if len(self.scopes) == 1:
            return [self.scopes[0][0]] * len(groups), [self.scopes[0][1]] * len(groups), terms
        scoped = [self.scopes[i] for i in (groups // self.n_terms).tolist()]
        return [t for t, _ in scoped], [o for _, o in scoped], terms


def _occurrences_of(instances: np.ndarray, owners: np.ndarray, n_texts: int) -> tuple[np.ndarray, np.ndarray]:
    """(instance, occurrence) of every occurrence of every instance's text: `instances[k]` is the text
    number of instance k, `owners[j]` the text of occurrence j (non-decreasing)."""
    per_text = np.bincount(owners, minlength=n_texts)
    text_start = np.cumsum(per_text) - per_text
    per_instance = per_text[instances]
    instance_start = np.cumsum(per_instance) - per_instance
    total = int(per_instance.sum())
    of = np.repeat(np.arange(len(instances), dtype=np.int64), per_instance)
    return of, np.arange(total, dtype=np.int64) + np.repeat(text_start[instances] - instance_start, per_instance)


@dataclass
class TermsDrop:
    """The writes that take some facts out of the postings (`FactTerms.plan_drop`): per postings row
    (tenant, owner, term, block) what it keeps (None: the row goes), the dropped offsets per block, and
    the statistics to subtract per scope."""

    gone: dict[int, np.ndarray]
    rows: dict[tuple, Optional[bytes]]
    stats: dict[tuple[str, str], np.ndarray]


class FactTerms:
    """The BM25 postings of one view's facts (maintained by `text_index.TextIndex`)."""

    def __init__(self, db: apsw.Connection) -> None:
        self.db = db

    # --- maintenance (inside the text index's transaction) -----------------------------------------

    def wipe(self) -> None:
        self.db.execute("DELETE FROM recall_terms")
        self.db.execute("DELETE FROM recall_term_stats")

    def _analyse(self, batch: _Batch) -> tuple[dict, np.ndarray, "_Keys", np.ndarray]:
        """(per-scope stats deltas, postings records, their keys, their blocks) of the facts of `batch`
        (`_split_rows`), in seq order. Each field's distinct texts are analysed once, all of them together
        (`analyse_texts`), their term occurrences handed out to the facts that hold them and counted per
        (scope, term, fact, field) with numpy."""
        scopes, fact_scope, seqs, fields = batch
        n = len(seqs)
        texts: list[str] = []                        # each field's distinct texts, field after field
        instances = []                               # per field, each fact's text number
        for field in fields:
            values_from = base = len(texts)
            # hardly any repeats (a sample tells, before the whole field is hashed): each fact's own text is
            # analysed
            distinct = None if _mostly_distinct(field) else dict.fromkeys(field)
            if distinct is None or len(distinct) * 5 > n * 4:
                instances.append(np.arange(base, base + n, dtype=np.int64))
                texts += field
                continue
            number = {t: base + i for i, t in enumerate(distinct)}
            instances.append(np.fromiter(map(number.__getitem__, field), dtype=np.int64, count=n))
            texts += number
        analysed = analyse_texts(texts)
        numbers = {t: i for i, t in enumerate(analysed.terms)}
        # units: only a text with two words that are not all digits has one; a name's is the whole name, a
        # value's come from `value_units`, which gives none to a value of four spaces or more (no name)
        # without punctuation
        candidates = np.flatnonzero(analysed.named >= 2).tolist()
        names_end = bisect.bisect_left(candidates, values_from)
        value_texts = candidates[names_end:]
        is_short = [0 < texts[i].count(" ") <= 3 for i in value_texts]
        short = list(itertools.compress(value_texts, is_short))
        long = list(itertools.compress(value_texts, map(operator.not_, is_short)))
        unit_texts = candidates[:names_end] + short
        unit_lists = [[unit_term(words(texts[i]))] for i in candidates[:names_end]]
        short_units = {t: value_units(t) for t in dict.fromkeys(texts[i] for i in short)}    # typed values repeat
        unit_lists += map(short_units.__getitem__, [texts[i] for i in short])
        long_of, long_units = chunk_units([texts[i] for i in long])
        units = list(itertools.chain.from_iterable(unit_lists)) + long_units
        unit_number = {u: numbers.setdefault(u, len(numbers)) for u in dict.fromkeys(units)}
        unit_ids = np.fromiter(map(unit_number.__getitem__, units), dtype=np.int64, count=len(units))
        unit_owners = np.concatenate([np.repeat(np.array(unit_texts, dtype=np.int64), list(map(len, unit_lists))),
                                      np.array(long, dtype=np.int64)[long_of]])
        by_owner = np.argsort(unit_owners, kind="stable")
        unit_ids, unit_owners = unit_ids[by_owner], unit_owners[by_owner]
        # every field of every fact (instance k: fact k % n, field k // n), then its texts' occurrences
        instance_arr = np.concatenate(instances)
        word_inst, word_occ = _occurrences_of(instance_arr, analysed.owners, len(texts))
        unit_inst, unit_occ = _occurrences_of(instance_arr, unit_owners, len(texts))
        inst = np.concatenate([word_inst, unit_inst])
        term_ids = np.concatenate([analysed.ids[word_occ], unit_ids[unit_occ]])
        field_of, fact_of = np.divmod(inst, max(n, 1))
        length_arr = analysed.counts[instance_arr].reshape(3, n).T
        # scopes and terms numbered in their text order (SQLite's BINARY collation is code point order), so
        # that sorted keys come in the index's order: rows written in order append to its B-tree
        term_names = sorted(numbers)
        term_rank = np.empty(len(numbers), dtype=np.int64)
        term_rank[np.fromiter(map(numbers.__getitem__, term_names), dtype=np.int64, count=len(numbers))] = \
            np.arange(len(numbers))
        scope_names = sorted(scopes)
        scope_rank = np.empty(len(scopes), dtype=np.int64)
        scope_rank[[scopes[s] for s in scope_names]] = np.arange(len(scopes))
        scope_arr = scope_rank[fact_scope]
        n_terms = max(len(numbers), 1)
        # one key per (scope, term, fact, field): sorted, they group postings by term, facts ascending. Built
        # in place: each temporary of a block's ~1M occurrences is 8 MB of fresh pages for the kernel to map
        keys = term_rank[term_ids]
        if len(scope_names) > 1:
            keys += scope_arr[fact_of] * n_terms
        keys *= max(n, 1)
        keys += fact_of
        keys *= 3
        keys += field_of
        keys_arr, tf = np.unique(keys, return_counts=True)
        posting_of = keys_arr // 3
        fresh = np.r_[True, posting_of[1:] != posting_of[:-1]] if len(keys_arr) else np.zeros(0, dtype=bool)
        posting_keys = posting_of[fresh]
        # the records are written as rows of bytes (off: 2, tf: 3, len: 3): a field of the structured array
        # is a strided view, and filling it (from an n x 3 int64 matrix of the tfs) cost 3x as much
        facts = posting_keys % max(n, 1)
        record_bytes = np.zeros((len(posting_keys), POSTING.itemsize), dtype=np.uint8)
        record_bytes[:, :2] = (seqs[facts] & (BLOCK_SIZE - 1)).astype("<u2").view(np.uint8).reshape(-1, 2)
        record_bytes[np.cumsum(fresh) - 1, 2 + keys_arr % 3] = np.minimum(tf, 255)
        # cast before the gather: a gather of int64 rows cast into uint8 costs 3x more
        record_bytes[:, 5:] = np.minimum(length_arr, 255).astype(np.uint8)[facts]
        records = record_bytes.view(POSTING).reshape(-1)
        group = posting_keys // max(n, 1)                # scope * n_terms + term, ascending
        stats: dict[tuple[str, str], np.ndarray] = {}
        for sc, name in enumerate(scope_names):
            mine = scope_arr == sc
            stats[name] = np.array([int(mine.sum()), *np.minimum(length_arr[mine], 255).sum(axis=0).tolist()])
        return stats, records, _Keys(scope_names, term_names, n_terms, group), seqs[facts] >> BLOCK_BITS

    def add(self, rows: Sequence[tuple], fresh: bool = False) -> None:
        """Index `rows` (seq, tenant, entity, key, value, private), every seq above those indexed; `fresh`:
        no postings of their blocks are written yet (plain inserts, not appends)."""
        self._add(_split_rows(rows), fresh)

    def _add(self, batch: _Batch, fresh: bool) -> None:
        stats, records, keys, blocks = self._analyse(batch)
        if not len(records):
            return
        # postings come grouped by term, seqs ascending; blocks ascend within a group too. One row per
        # (key, block), its columns built by C-level maps (a tuple per row is all that is made per row)
        group = keys.group
        starts = np.flatnonzero(np.r_[True, (group[1:] != group[:-1]) | (blocks[1:] != blocks[:-1])])
        size = POSTING.itemsize
        bounds = (np.r_[starts, len(group)] * size).tolist()
        raw = records.tobytes()
        tenants, owners, terms = keys.columns(group[starts])
        self.db.executemany(
            "INSERT INTO recall_terms (tenant, owner, term, block, postings) VALUES (?, ?, ?, ?, ?)" + (
                "" if fresh else " ON CONFLICT (tenant, owner, term, block) DO UPDATE SET "
                                 "postings = CAST(postings || excluded.postings AS BLOB)"),
            zip(tenants, owners, terms, blocks[starts].tolist(),
                map(raw.__getitem__, map(slice, bounds[:-1], bounds[1:]))))
        self._count(stats, 1)

    def _count(self, stats: dict[tuple[str, str], np.ndarray], sign: int) -> None:
        self.db.executemany(
            "INSERT INTO recall_term_stats (tenant, owner, facts, entity_words, key_words, value_words) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (tenant, owner) DO UPDATE SET facts = facts + excluded.facts, "
            "entity_words = entity_words + excluded.entity_words, key_words = key_words + excluded.key_words, "
            "value_words = value_words + excluded.value_words",
            [(tenant, owner, *(sign * delta).tolist()) for (tenant, owner), delta in stats.items()])

    def index_range(self, last: int, max_seq: int) -> None:
        """Index the facts with seqs in (last, max_seq], a postings block at most at a time (a block's rows
        are written once, not extended by the next chunk)."""
        while last < max_seq:
            hi = min(max_seq, ((((last + 1) >> BLOCK_BITS) + 1) << BLOCK_BITS) - 1)
            fresh = last == 0 or (last + 1) & (BLOCK_SIZE - 1) == 0
            self._add(self._batch(last, hi), fresh)
            last = hi

    def _batch(self, last: int, hi: int) -> _Batch:
        """The `_split_rows` of the facts with seqs in (last, hi]. Each column comes as one string, split
        here: a block's 65,536 row tuples (the only tracked objects indexing makes per fact) set off two
        full garbage collections per 100k facts in a rebuild, which walk every object of the process (a
        tenth of the postings' time). Rows are fetched instead when a fact is private or an agent's
        (looked at one by one), when a text holds the separator, or should the seqs not come in order."""
        row = self.db.execute(
            "SELECT count(*), group_concat(seq, ' '), group_concat(tenant_hash, char(0)), group_concat(entity, char(0)), "
            "group_concat(key, char(0)), group_concat(value, char(0)), max(private) FROM (SELECT seq, tenant_hash, "
            "entity, key, value, private FROM facts WHERE seq > ? AND seq <= ? ORDER BY seq)", (last, hi)).fetchone()
        assert row is not None  # an aggregate always has its row
        count, seqs, tenants, entities, keys, values, private = row
        if not count:
            return _split_rows([])
        if not private and not _names_an_agent(entities):
            seq_arr = np.array(seqs.split(), dtype=np.int64)
            columns = [text.split(SEPARATOR) for text in (tenants, entities, keys, values)]
            if all(len(column) == count for column in columns) and bool(np.all(seq_arr[1:] > seq_arr[:-1])):
                return _public_batch(seq_arr, *columns)
        return _split_rows(self.db.execute(
            "SELECT seq, tenant_hash, entity, key, value, private FROM facts WHERE seq > ? AND seq <= ? "
            "ORDER BY seq", (last, hi)).fetchall())

    def drop(self, seqs: Sequence[int]) -> None:
        """Take the facts `seqs` (still in `facts`) out of the postings and the statistics."""
        self.apply_drop(self.plan_drop(seqs))

    def plan_drop(self, seqs: "Sequence[int] | np.ndarray") -> "TermsDrop":
        """What taking the facts `seqs` (still in `facts`) out of the postings and the statistics writes,
        read and computed without writing anything (a compaction plans it from a snapshot, before the
        writer lock). Every postings row one of them is in is read once."""
        dropped = np.unique(np.asarray(seqs, dtype=np.int64))
        # One mask of the dropped offsets per block, built once: a posting goes when its offset is set
        # (an `np.isin` against the dropped seqs per term hashed them again for each of ~13k terms: 14 of
        # a 100k-fact compaction's 16 s).
        gone: dict[int, np.ndarray] = {}
        for block in np.unique(dropped >> BLOCK_BITS).tolist():
            mask = np.zeros(BLOCK_SIZE, dtype=bool)
            mask[dropped[(dropped >> BLOCK_BITS) == block] & (BLOCK_SIZE - 1)] = True
            gone[block] = mask
        plan = TermsDrop(gone, {}, {})
        for i in range(0, len(dropped), _CHUNK):
            stats, keys = self._keys_of(dropped[i:i + _CHUNK])
            for scope, delta in stats.items():
                plan.stats[scope] = plan.stats.get(scope, 0) + delta
            self._read_kept(plan, keys - plan.rows.keys())
        return plan

    def rebase_drop(self, plan: "TermsDrop", seqs: Sequence[int]) -> None:
        """Bring `plan` up to date with the facts `seqs`, indexed since it was read: the rows they were
        added to are read again (postings only ever grow between two compactions)."""
        if len(seqs):
            _, keys = self._keys_of(np.asarray(seqs, dtype=np.int64))
            self._read_kept(plan, keys & plan.rows.keys())

    def apply_drop(self, plan: "TermsDrop") -> None:
        self.db.executemany("UPDATE recall_terms SET postings = ? WHERE tenant = ? AND owner = ? AND term = ? "
                            "AND block = ?", [(kept, *key) for key, kept in plan.rows.items() if kept is not None])
        self.db.executemany("DELETE FROM recall_terms WHERE tenant = ? AND owner = ? AND term = ? AND block = ?",
                            [key for key, kept in plan.rows.items() if kept is None])
        self._count(plan.stats, -1)

    def _keys_of(self, seqs: np.ndarray) -> tuple[dict[tuple[str, str], np.ndarray], set[tuple]]:
        """(per-scope statistics, the (tenant, owner, term, block) of every postings row) of the facts `seqs`."""
        rows = self.db.execute(
            "SELECT seq, tenant_hash, entity, key, value, private FROM facts WHERE seq IN carray(?) ORDER BY seq",
            (apsw.carray(np.ascontiguousarray(seqs)),)).fetchall()
        stats, _, keys, blocks = self._analyse(_split_rows(rows))
        return stats, {(*name, block) for name, block in zip(zip(*keys.columns(keys.group)), blocks.tolist())}

    def _read_kept(self, plan: "TermsDrop", keys: Iterable[tuple]) -> None:
        """Record in `plan` what each row `keys` names keeps once the dropped postings are out (None: the
        row goes); a row left whole, or absent, is not recorded."""
        for key in sorted(keys):
            row = self.db.execute("SELECT postings FROM recall_terms WHERE tenant = ? AND owner = ? AND term = ? "
                                  "AND block = ?", key).fetchone()
            if row is None:
                plan.rows.pop(key, None)
                continue
            records = np.frombuffer(row[0], dtype=POSTING)
            kept = records[~plan.gone[key[3]][records["off"]]]
            if len(kept) == len(records):
                plan.rows.pop(key, None)
            else:
                plan.rows[key] = kept.tobytes() if len(kept) else None

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
        facts, sums = self._sums(tenant, agent)
        return ScopeStats(facts, np.maximum(sums / max(facts, 1), 1.0).astype(np.float32))

    def _sums(self, tenant: str, agent: Optional[str]) -> tuple[int, np.ndarray]:
        """(facts, summed word counts per field) of the caller's scopes."""
        owners = self._owners(agent)
        row = self.db.execute(
            f"SELECT sum(facts), sum(entity_words), sum(key_words), sum(value_words) FROM recall_term_stats "
            f"WHERE tenant = ? AND owner IN ({', '.join('?' * len(owners))})", (tenant, *owners)).fetchone()
        assert row is not None  # an aggregate always has its row
        return int(row[0] or 0), np.array([row[1] or 0, row[2] or 0, row[3] or 0], dtype=np.float64)
