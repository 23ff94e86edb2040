"""Recall's text index over the fact view, kept current by reads, by batches of writes and by bulk replay.

`TextIndex`: per fact, the agent-scope split and the Rust-lowercased value, key and visible entity
(`recall_text`), plus FTS5-free trigram postings (`recall_grams`) that turn a substring term of
three or more characters into a small candidate set. Facts' entity, key and value never change after
insert, so the index follows `facts.seq`: it indexes every seq above the last one it saw, and starts
over when `journal_checkpoint.generation` says the fact tables were rebuilt. A compaction that keeps
the seqs carries it over instead (a rewrite hook in `derived_tables.DERIVED_TABLE_HOOKS`): only the dropped
facts' rows and postings go. Postings are a superset; recall re-checks every candidate against the real
rows. The trigram codes and postings themselves come from `trigrams`.

Who indexes (docs/architecture.md, "Recall's indexes after the write"): a write's own transaction writes
only its facts' `recall_text` rows, unless it leaves `INDEX_EVERY` facts or more unindexed (then it
indexes them all, once for the batch). A read scans the unindexed tail itself (`open_tail`: every tail
fact is a trigram candidate, and its word postings are analysed in memory, `unindexed_tail`); it indexes
a tail only of `INDEX_EVERY` facts or more, and only if SQLite's write lock is free (`catch_up`).
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from operator import itemgetter
from typing import Iterable, Optional, Sequence

import apsw
import numpy as np

from ..facts import derived_tables
from ..facts.busy import not_waiting
from ..facts.faults import crash_point
from ..facts.journal import Journal
from . import trigrams
from .derived_writes import checkpoint_generation, write_transaction
from .fact_terms import FactTerms, TermsDrop
from .scope import rust_lower, split_private_entity
from .unindexed_tail import TermsWithTail

BLOCK_BITS = 16
BLOCK_SIZE = 1 << BLOCK_BITS
# Facts indexed at a time. A quarter of a postings block: the rest of a block is appended to its rows
# in SQL, and the smaller sorts are about as fast in all while a full index of 1M facts peaks at
# ~150 MiB instead of ~310 MiB (a whole block per batch).
INDEX_BATCH = BLOCK_SIZE // 4
# Facts a write may leave unindexed (with those of the writes before it), which reads scan: one that
# finds as many indexes them all in its own transaction. Bounds what a read scans (a few ms for 255
# facts, where indexing them costs 10-25 ms) while a single write pays only its text row (~0.05 ms
# instead of ~2 ms).
INDEX_EVERY = 256


def text_row(seq: int, entity: str, key: str, value: str) -> tuple:
    """The `recall_text` row of one fact (lowercased columns NULL when unchanged)."""
    split = split_private_entity(entity)
    owner, logical = split if split else (None, None)
    visible = split[1] if split else entity
    lc_value, lc_key, lc_entity = rust_lower(value), rust_lower(key), rust_lower(visible)
    return (seq, owner, logical, None if lc_value == value else lc_value, None if lc_key == key else lc_key,
            None if lc_entity == entity else lc_entity)


def _indexed_strings(row: tuple, text: tuple) -> tuple[str, str, str]:
    """The lowercased value, key and visible entity whose trigrams index the fact `row` (seq, entity, key,
    value), from its `text_row` `text` (a NULL column: the stored text was already lowercase)."""
    _, entity, key, value = row
    return (text[3] if text[3] is not None else value, text[4] if text[4] is not None else key,
            text[5] if text[5] is not None else entity)


_DROP_PIECE = 2048


def _row_grams(rows: Sequence[tuple]) -> np.ndarray:
    """The distinct trigram codes of the indexed text of `rows` (seq, entity, key, value)."""
    strings: list[str] = []
    for row in rows:
        strings += _indexed_strings(row, text_row(*row))
    codes, _ = trigrams.postings(strings, np.repeat(np.array([r[0] for r in rows], dtype=np.int64), 3))
    return np.unique(codes)


@dataclass
class IndexDrop:
    """The writes that take the facts `seqs` out of the index (`TextIndex.plan_drop`): per trigram
    postings row (gram, block) what it keeps (None: the row goes), and the word postings' (`terms`)."""

    seqs: np.ndarray
    grams: dict[tuple[int, int], Optional[bytes]]
    terms: TermsDrop


class TextIndex:
    """Lowercased text and trigram postings for the facts of one view."""

    def __init__(self, db: apsw.Connection, batch: int = INDEX_BATCH) -> None:
        self.db = db
        self.batch = batch
        self.terms = FactTerms(db)
        # seqs of the facts the read in progress sees beyond the index (`open_tail`), None when none
        self.tail: Optional[np.ndarray] = None

    # --- maintenance ------------------------------------------------------------------------------

    def _state(self) -> Optional[tuple[str, int]]:
        return self.db.execute("SELECT generation, last_seq FROM recall_index_state WHERE id = 1").fetchone()

    def _wipe(self) -> None:
        for table in ("recall_text", "recall_grams", "recall_dirty", "recall_index_state"):
            self.db.execute(f"DELETE FROM {table}")
        self.terms.wipe()

    def is_current(self) -> bool:
        generation = checkpoint_generation(self.db)
        state = self._state()
        if generation is None:
            return state is None
        if state is None or state[0] != generation:
            return False
        max_seq = self.db.execute("SELECT max(seq) FROM facts").get or 0
        dirty = self.db.execute("SELECT 1 FROM recall_dirty LIMIT 1").fetchone()
        return max_seq <= state[1] and dirty is None

    def _extendable(self, state: Optional[tuple[str, int]]) -> bool:
        """Whether the index at `state` only lacks facts above its last seq (no start-over due)."""
        return (state is not None and state[0] == checkpoint_generation(self.db)
                and self.db.execute("SELECT 1 FROM recall_dirty LIMIT 1").fetchone() is None)

    def sync(self) -> int:
        """Index every fact not yet indexed (or start over after a rebuild). Returns facts indexed."""
        if self.is_current():
            return 0
        return write_transaction(self.db, self._sync_locked)

    def catch_up(self, *, scan_below: int = 0) -> None:
        """Before a read's snapshot: index the facts writes left unindexed if SQLite's write lock is free at
        this moment; else leave them to the read's own tail scan (`open_tail`), so the read never waits for
        a writer. With `scan_below`, a tail of fewer facts is left to the scan even when the lock is free
        (a read's: scanning a few hundred facts costs less than rewriting the postings they join, which the
        write that reaches `INDEX_EVERY` does once for the batch). An index that must start over (a new
        generation, text changed in place: every write path rebuilds it in its own transaction, so only a
        view changed by an older version shows one) is built as before, waiting for the lock."""
        if self.is_current():
            return
        state = self._state()
        if not self._extendable(state):
            self.sync()
            return
        assert state is not None
        if (self.db.execute("SELECT max(seq) FROM facts").get or 0) - state[1] < scan_below:
            return
        try:
            with not_waiting(self.db):
                write_transaction(self.db, self._sync_locked)
        except apsw.BusyError:
            pass  # a writer holds the lock: the read scans the tail

    def open_tail(self) -> None:
        """Inside the read's snapshot: the facts it sees beyond the index (`tail`), which `candidates` and
        the word postings (`terms`) then include, or none."""
        state = self._state()
        max_seq = self.db.execute("SELECT max(seq) FROM facts").get or 0
        if state is None or max_seq <= state[1] or not self._extendable(state):
            self.tail, self.terms = None, FactTerms(self.db)
            return
        self.tail = np.arange(state[1] + 1, max_seq + 1, dtype=np.int64)
        self.terms = TermsWithTail(self.db, state[1], max_seq)

    def defer_to_readers(self) -> bool:
        """In a write's transaction: when the index only lacks fewer than `INDEX_EVERY` facts, write their
        `recall_text` rows (which a read's tail scan joins) and leave their postings to a later read or
        write. False when the index must be brought up to date now (`sync`). One statement reads what
        `_extendable` and the tail's bounds need: this runs in every write."""
        row = self.db.execute(
            "SELECT s.generation = c.generation AND NOT EXISTS (SELECT 1 FROM recall_dirty), s.last_seq, "
            "(SELECT max(seq) FROM facts), (SELECT max(seq) FROM recall_text) "
            "FROM recall_index_state s, journal_checkpoint c WHERE s.id = 1 AND c.id = 1").fetchone()
        if row is None or not row[0] or (row[2] or 0) - row[1] >= INDEX_EVERY:
            return False
        _, last, max_seq, texted = row
        texted = max(last, texted or 0)
        if texted < max_seq:
            self._add_text(self.db.execute("SELECT seq, entity, key, value FROM facts WHERE seq > ? AND seq <= ? "
                                           "ORDER BY seq", (texted, max_seq)).fetchall())
        return True

    def _sync_locked(self) -> int:
        db = self.db
        generation = checkpoint_generation(db)
        state = self._state()
        if generation is None:
            if state is not None:
                self._wipe()
            return 0
        # Text changed in place (recall_dirty): the word postings of the old text cannot be told apart
        # from the new, so the index starts over.
        if state is None or state[0] != generation or db.execute("SELECT 1 FROM recall_dirty LIMIT 1").fetchone():
            self._wipe()
            last = 0
            state = None
        else:
            last = state[1]
        if state is not None and last < (db.execute("SELECT max(seq) FROM facts").get or 0):
            crash_point("text-index-catch-up")  # written and acknowledged, not yet indexed
        return self._extend(generation, last)

    def _extend(self, generation: str, last: int) -> int:
        """Index the facts above seq `last` (the index's last seq, or 0 after a wipe) and record the index
        at `generation`, up to the newest. Returns facts indexed."""
        done = 0
        max_seq = self.db.execute("SELECT max(seq) FROM facts").get or 0
        if max_seq - last > self.batch:
            with ThreadPoolExecutor(max_workers=1, thread_name_prefix="cruxsql-text-index") as sorter:
                done += self._index_range(last, max_seq, sorter)
        elif last < max_seq:
            done += self._index_range(last, max_seq, None)
        self.terms.index_range(last, max_seq)
        self.db.execute("INSERT OR REPLACE INTO recall_index_state (id, generation, last_seq) VALUES (1, ?, ?)",
                        (generation, max(max_seq, last)))
        return done

    def _index_range(self, last: int, max_seq: int, sorter: Optional[ThreadPoolExecutor]) -> int:
        """Index the facts with seqs above `last` up to `max_seq`, a batch at a time. With a `sorter`, the
        postings of one batch are computed on its thread (numpy's sorts release the GIL) while this one
        reads and lowercases the next batch's text; postings are still written batch after batch."""
        done = 0
        pending: list[tuple[int, Future, str]] = []
        while last < max_seq:
            # batches never straddle a postings block, so a fresh block is written with plain inserts
            hi = min(max_seq, ((((last + 1) >> BLOCK_BITS) + 1) << BLOCK_BITS) - 1, last + self.batch)
            rows = self.db.execute(
                "SELECT seq, entity, key, value FROM facts WHERE seq > ? AND seq <= ? ORDER BY seq", (last, hi)
            ).fetchall()
            mode = "insert" if last == 0 or ((last + 1) & (BLOCK_SIZE - 1)) == 0 else "append"
            if sorter is None:
                done += self._index_rows(rows, mode)
            else:
                computing = [(block, sorter.submit(trigrams.postings, strings, owners), mode)
                             for block, strings, owners in self._add_text(rows)]
                for block, future, block_mode in pending:
                    codes, seqs = future.result()
                    self._write_block(block, codes, seqs, block_mode)
                pending = computing
                done += len(rows)
            last = hi
        for block, future, block_mode in pending:
            codes, seqs = future.result()
            self._write_block(block, codes, seqs, block_mode)
        return done

    def _index_rows(self, rows: Sequence[tuple], mode: str) -> int:
        """Index `rows` (seq, entity, key, value). mode: `insert` (a block nobody wrote yet) or `append`
        (seqs above every seq already in the block: concatenate in SQL)."""
        for block, strings, owners in self._add_text(rows):
            self._write_block(block, *trigrams.postings(strings, owners), mode)
        return len(rows)

    def _add_text(self, rows: Sequence[tuple]) -> list[tuple[int, list[str], np.ndarray]]:
        """Write the `recall_text` rows of `rows` (seq, entity, key, value); return the strings to index
        and their seqs, grouped by postings block (dirty re-indexing can span several)."""
        if not rows:
            return []
        text_rows = [text_row(*r) for r in rows]
        self.db.executemany(
            "INSERT OR REPLACE INTO recall_text (seq, owner, visible_entity, lc_value, lc_key, lc_entity) "
            "VALUES (?, ?, ?, ?, ?, ?)", text_rows)
        strings: list[str] = []
        owners: list[int] = []
        for row, t in zip(rows, text_rows):
            strings += _indexed_strings(row, t)
            owners += (row[0], row[0], row[0])
        owner_arr = np.array(owners, dtype=np.int64)
        blocks = owner_arr >> BLOCK_BITS
        if blocks[0] == blocks[-1]:
            return [(int(blocks[0]), strings, owner_arr)]
        groups = []
        for block in np.unique(blocks):
            sel = np.flatnonzero(blocks == block)
            groups.append((int(block), [strings[i] for i in sel], owner_arr[sel]))
        return groups

    def _write_block(self, block: int, codes: np.ndarray, seqs: np.ndarray, mode: str) -> None:
        if not len(codes):
            return
        offsets = (seqs & (BLOCK_SIZE - 1)).astype("<u2")
        starts = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]])
        bounds = np.r_[starts, len(codes)]
        grams = codes[starts]
        blobs = [offsets[bounds[i]:bounds[i + 1]].tobytes() for i in range(len(starts))]
        rows = zip(grams.tolist(), [block] * len(blobs), blobs)
        if mode == "insert":
            self.db.executemany("INSERT INTO recall_grams (gram, block, seqs) VALUES (?, ?, ?)", rows)
        else:
            self.db.executemany(
                "INSERT INTO recall_grams (gram, block, seqs) VALUES (?, ?, ?) ON CONFLICT (gram, block) "
                "DO UPDATE SET seqs = CAST(seqs || excluded.seqs AS BLOB)", rows)

    def drop(self, rows: Sequence[tuple]) -> None:
        """Take the facts `rows` (seq, entity, key, value, as indexed) out of the index: their text row
        and their seq from each of their trigrams' postings (an emptied postings row goes)."""
        self.apply_drop(self.plan_drop(rows))

    def plan_drop(self, rows: Sequence[tuple]) -> "IndexDrop":
        """What `drop` writes, read and computed without writing anything. Each postings block is read
        once; the trigrams are computed _DROP_PIECE facts at a time, which bounds the memory of their
        arrays."""
        seqs = np.array([r[0] for r in rows], dtype=np.int64)
        plan = IndexDrop(seqs, {}, self.terms.plan_drop(seqs))
        by_block: dict[int, list[tuple]] = {}
        for row in rows:
            by_block.setdefault(row[0] >> BLOCK_BITS, []).append(row)
        for block, block_rows in sorted(by_block.items()):
            # The dropped facts go whole, so a posting goes exactly when its seq is one of theirs.
            grams = np.unique(np.concatenate([_row_grams(block_rows[i:i + _DROP_PIECE])
                                              for i in range(0, len(block_rows), _DROP_PIECE)]))
            self._read_kept_grams(plan, block, grams)
        return plan

    def rebase_drop(self, plan: "IndexDrop", rows: Sequence[tuple]) -> None:
        """Bring `plan` up to date with the facts `rows` (seq, entity, key, value), indexed since it was
        read: the postings rows they were added to are read again."""
        self.terms.rebase_drop(plan.terms, [r[0] for r in rows])
        by_block: dict[int, list[tuple]] = {}
        for row in rows:
            by_block.setdefault(row[0] >> BLOCK_BITS, []).append(row)
        for block, block_rows in by_block.items():
            if block in plan.terms.gone:
                grams = _row_grams(block_rows)
                self._read_kept_grams(plan, block, grams[np.isin(grams, [g for g, b in plan.grams if b == block])])

    def _read_kept_grams(self, plan: "IndexDrop", block: int, grams: np.ndarray) -> None:
        if not len(grams):  # (carray refuses an empty buffer)
            return
        gone = plan.terms.gone[block]
        for gram, blob in self.db.execute("SELECT gram, seqs FROM recall_grams WHERE block = ? AND gram IN carray(?)",
                                          (block, apsw.carray(np.ascontiguousarray(grams, dtype=np.int64)))):
            offsets = np.frombuffer(blob, dtype="<u2")
            kept = offsets[~gone[offsets]]
            if len(kept) < len(offsets):
                plan.grams[gram, block] = kept.tobytes() if len(kept) else None

    def apply_drop(self, plan: "IndexDrop") -> None:
        db = self.db
        self.terms.apply_drop(plan.terms)
        db.executemany("DELETE FROM recall_text WHERE seq = ?", [(seq,) for seq in plan.seqs.tolist()])
        # in the primary key's (gram, block) order: the plan is read block by block, and a pass over
        # the table per block touched every page once per block (0.15 s of 0.5 at 1M facts)
        rows = sorted(plan.grams.items(), key=itemgetter(0))
        db.executemany("UPDATE recall_grams SET seqs = ? WHERE gram = ? AND block = ?",
                       [(kept, *key) for key, kept in rows if kept is not None])
        db.executemany("DELETE FROM recall_grams WHERE gram = ? AND block = ?", [key for key, kept in rows if kept is None])

    # --- lookups ----------------------------------------------------------------------------------

    def gram_sizes(self, grams: np.ndarray) -> dict[int, int]:
        """How many postings each trigram has (from blob lengths, without reading the blobs)."""
        sizes = {g: 0 for g in grams.tolist()}
        for gram, nbytes in self.db.execute(
                "SELECT gram, sum(length(seqs)) FROM recall_grams WHERE gram IN carray(?) GROUP BY gram",
                (apsw.carray(np.ascontiguousarray(grams, dtype=np.int64)),)):
            sizes[gram] = nbytes // 2
        return sizes

    def gram_postings(self, grams: Iterable[int]) -> dict[int, np.ndarray]:
        """seqs (sorted, unique) per trigram code; missing grams map to an empty array."""
        wanted = np.ascontiguousarray(np.fromiter(grams, dtype=np.int64))
        parts: dict[int, list[np.ndarray]] = {}
        for gram, block, blob in self.db.execute(
                "SELECT gram, block, seqs FROM recall_grams WHERE gram IN carray(?) ORDER BY gram, block",
                (apsw.carray(wanted),)):
            parts.setdefault(gram, []).append(
                np.frombuffer(blob, dtype="<u2").astype(np.int64) + (block << BLOCK_BITS))
        out = {}
        for g in wanted.tolist():
            chunks = parts.get(g)
            if not chunks:
                out[g] = np.empty(0, np.int64)
                continue
            seqs = chunks[0] if len(chunks) == 1 else np.concatenate(chunks)
            # appends keep each block ascending; only re-indexing can leave duplicates or disorder
            out[g] = seqs if len(seqs) < 2 or bool(np.all(seqs[1:] > seqs[:-1])) else np.unique(seqs)
        return out

    def term_candidates(self, term: str, limit: Optional[int] = None) -> Optional[np.ndarray]:
        """Seqs whose lowercased value, key or visible entity may contain `term` (a superset), or None
        when the term is too short for trigrams or (with `limit`) its rarest trigram has more than
        `limit` postings, so that a scan is cheaper. Only the rarer trigrams are read: intersecting
        with very common ones prunes little, and every candidate is re-checked anyway."""
        grams = trigrams.term_grams(term)
        if grams is None:
            return None
        if len(grams) == 1 and limit is None:
            return self.gram_postings(grams.tolist())[int(grams[0])]
        sizes = self.gram_sizes(grams)
        order = sorted(sizes, key=lambda gram: sizes[gram])
        rarest = sizes[order[0]]
        if rarest == 0:
            return np.empty(0, np.int64)
        if limit is not None and rarest > limit:
            return None
        chosen = [g for g in order if sizes[g] <= max(64, 16 * rarest)][:4]
        postings = self.gram_postings(chosen)
        result = postings[chosen[0]]
        for g in chosen[1:]:
            if not len(result):
                break
            result = np.intersect1d(result, postings[g], assume_unique=True)
        return result

    def candidates(self, terms: Iterable[str], limit: Optional[int] = None) -> Optional[np.ndarray]:
        """Union over OR-terms of their candidates; None if any term needs a scan (too short, or
        more than `limit` candidates). Every fact of the read's unindexed `tail` is a candidate."""
        out: list[np.ndarray] = [] if self.tail is None else [self.tail]
        total = 0
        for term in terms:
            c = self.term_candidates(term, limit)
            if c is None:
                return None
            total += len(c)
            if limit is not None and total > limit:
                return None
            out.append(c)
        if not out:
            return np.empty(0, np.int64)
        return out[0] if len(out) == 1 else np.unique(np.concatenate(out))


@dataclass
class PreparedCarry:
    """A compaction's drop of the deleted facts from the index, planned from its snapshot of the view
    (`prepare_carry`): the index was then at `generation`, indexed up to `last_seq`."""

    generation: str
    last_seq: int
    drop: IndexDrop


def prepare_carry(db: apsw.Connection) -> Optional[PreparedCarry]:
    """Prepare-rewrite hook, run in a compaction's read snapshot before the writer lock: plan the drop
    `carry_text_index` would make, which is most of the index's work under the lock (the postings rows
    of the deleted facts' words and trigrams, read one by one). None when the index would start over."""
    index = TextIndex(db)
    state = index._state()
    if state is None or db.execute("SELECT 1 FROM recall_dirty LIMIT 1").fetchone() is not None:
        return None
    return PreparedCarry(state[0], state[1], index.plan_drop(_deleted_rows(db, state[1])))


def _deleted_rows(db: apsw.Connection, upto: int, planned: Optional[np.ndarray] = None) -> list[tuple]:
    """(seq, entity, key, value) of the deleted facts indexed (seq <= `upto`), but those `planned`."""
    # The seqs first, from facts_seq_scope alone (migration 0037), then the rows of those not planned:
    # at 1M facts, reading all 51k deleted facts' rows to keep the few deleted since a compaction's
    # snapshot took 0.3 s of its writer lock.
    seqs = np.fromiter((seq for (seq,) in db.execute("SELECT seq FROM facts WHERE deleted = 1 AND seq <= ?",
                                                     (upto,))), dtype=np.int64)
    if planned is not None and len(planned):
        seqs = seqs[~np.isin(seqs, planned)]
    if not len(seqs):  # (carray refuses an empty buffer)
        return []
    return db.execute("SELECT seq, entity, key, value FROM facts WHERE seq IN carray(?) ORDER BY seq",
                      (apsw.carray(np.ascontiguousarray(seqs)),)).fetchall()


def carry_text_index(db: apsw.Connection, rewrite: derived_tables.Rewrite) -> None:
    """Rewrite hook: a compaction keeps every fact's seq and text but the deleted ones', so the index
    follows it to the new generation with only those facts taken out (they are still readable here),
    instead of starting over at the next read (tens of seconds at 1M facts). It starts over as before
    when the seqs were renumbered, when it was not built for the generation being rewritten, or when
    facts await re-indexing after an in-place text change (their old postings cannot be told apart).

    With the drop planned from the compaction's snapshot (`prepare_carry`; handed over only when the
    lines appended since changed no fact's text in place), only the facts indexed since are analysed
    here: the rows they were added to are read again, and the facts deleted since are dropped as usual."""
    index = TextIndex(db)
    state = index._state()
    if (state is None or rewrite.previous is None or state[0] != rewrite.previous or not rewrite.seqs_kept
            or db.execute("SELECT 1 FROM recall_dirty LIMIT 1").fetchone() is not None):
        # Not carried: emptied now, a statement per table, rather than by the new checkpoint's trigger
        # (migration 0002's recall_generation_changed). Deleted inside that INSERT, every page of
        # recall_text, the lower-cased values of the facts being erased among them, was first copied into
        # the INSERT's statement journal: a temp file outside the data directory, where erasure cannot
        # reach it (tests/governance/test_compaction_temp_files.py).
        index._wipe()
        return
    # the facts writes left to a later read (`INDEX_EVERY`) indexed first, so that those the compaction
    # drops go from the index like the others and the index it carries over is current
    index._extend(state[0], state[1])
    state = index._state()
    assert state is not None  # just written
    prepared = rewrite.prepared.get(PREPARE_HOOK)
    if (isinstance(prepared, PreparedCarry) and prepared.generation == state[0] and prepared.last_seq <= state[1]
            and _still_deleted(db, prepared.drop.seqs)):
        index.rebase_drop(prepared.drop, db.execute(
            "SELECT seq, entity, key, value FROM facts WHERE seq > ? AND seq <= ? ORDER BY seq",
            (prepared.last_seq, state[1])).fetchall())
        index.apply_drop(prepared.drop)
        index.drop(_deleted_rows(db, state[1], prepared.drop.seqs))  # the facts deleted since
    else:
        index.drop(_deleted_rows(db, state[1]))
    # text rows of facts a replace_latest removed without a new generation (never re-checked again)
    db.execute("DELETE FROM recall_text WHERE NOT EXISTS (SELECT 1 FROM facts f WHERE f.seq = recall_text.seq)")
    db.execute("UPDATE recall_index_state SET generation = ? WHERE id = 1", (rewrite.generation,))


def _still_deleted(db: apsw.Connection, seqs: np.ndarray) -> bool:
    return not len(seqs) or db.execute("SELECT count(*) FROM facts WHERE deleted = 1 AND seq IN carray(?)",
                                       (apsw.carray(np.ascontiguousarray(seqs)),)).get == len(seqs)


PREPARE_HOOK = f"{__name__}:prepare_carry"


def keep_text_index_current(db: apsw.Connection) -> None:
    """Bulk replay hook: index what a rebuild or a long tail brought in, in its own transaction (at 1M
    facts the first read after a rebuild spent ~15 s doing it)."""
    TextIndex(db).sync()


def index_in_the_write(db: apsw.Connection, journal: Journal) -> None:
    """Replay hook: in a write's own transaction, the facts' text rows, and their postings only once
    `INDEX_EVERY` facts await them (`TextIndex.defer_to_readers`; reads index or scan the rest); in any
    other replay (another process's lines, a rebuild, a compaction), everything it brought in."""
    if derived_tables.replaying_own_write() and TextIndex(db).defer_to_readers():
        return
    keep_text_index_current(db)
