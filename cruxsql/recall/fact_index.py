"""Derived recall indexes over the fact view: the text index kept current by bulk replay (a rebuild, a
long tail) and otherwise lazily (before each read), the known_at timeline by every replay.

* `TextIndex`: per fact, the agent-scope split and the Rust-lowercased value, key and visible entity
  (`recall_text`), plus FTS5-free trigram postings (`recall_grams`) that turn a substring term of
  three or more characters into a small candidate set. Facts' entity, key and value never change after
  insert, so the index follows `facts.seq`: it indexes every seq above the last one it saw, and starts
  over when `journal_checkpoint.generation` says the fact tables were rebuilt. A compaction that keeps
  the seqs carries it over instead (a rewrite hook in `derived_tables.DERIVED_TABLE_HOOKS`): only the dropped
  facts' rows and postings go.
  Postings are a superset; recall re-checks every candidate against the real rows. The trigram codes
  and postings themselves come from `trigrams`.
* `Timeline`: what `known_at` needs: event time per journal line, and the history of every mutable
  attribute a later event changed. Replay extends it in each of its transactions (a replay hook in
  `derived_tables.DERIVED_TABLE_HOOKS`); reads only catch up a view that was rewritten in place by a compaction
  or predates that hook.
"""

from __future__ import annotations

import json
from array import array
from concurrent.futures import Future, ThreadPoolExecutor
from operator import itemgetter
from typing import Iterable, Optional, Sequence, cast

import apsw
import numpy as np

from ..errors import InvalidInput
from ..facts import codec, derived_tables, timestamps
from ..facts.journal import Journal
from . import trigrams
from .fact_terms import FactTerms
from .scope import rust_lower, split_private_entity

BLOCK_BITS = 16
BLOCK_SIZE = 1 << BLOCK_BITS
# Facts indexed at a time. A quarter of a postings block: the rest of a block is appended to its rows
# in SQL, and the smaller sorts are about as fast in all while a full index of 1M facts peaks at
# ~150 MiB instead of ~310 MiB (a whole block per batch).
INDEX_BATCH = BLOCK_SIZE // 4


def _generation(db: apsw.Connection) -> Optional[str]:
    row = db.execute("SELECT generation FROM journal_checkpoint WHERE id = 1").fetchone()
    return row[0] if row else None


def _write_txn(db: apsw.Connection, fn):
    """Run `fn` in a write transaction taken up front (BEGIN IMMEDIATE), so two readers catching the
    index up at once serialise instead of deadlocking; inside a caller's transaction, a savepoint."""
    if not db.getautocommit():
        with db:
            return fn()
    db.execute("BEGIN IMMEDIATE")
    try:
        result = fn()
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    return result


def text_row(seq: int, entity: str, key: str, value: str) -> tuple:
    """The `recall_text` row of one fact (lowercased columns NULL when unchanged)."""
    split = split_private_entity(entity)
    owner, logical = split if split else (None, None)
    visible = logical if split else entity
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


class TextIndex:
    """Lowercased text and trigram postings for the facts of one view."""

    def __init__(self, db: apsw.Connection, batch: int = INDEX_BATCH) -> None:
        self.db = db
        self.batch = batch
        self.terms = FactTerms(db)

    # --- maintenance ------------------------------------------------------------------------------

    def _state(self) -> Optional[tuple[str, int]]:
        return self.db.execute("SELECT generation, last_seq FROM recall_index_state WHERE id = 1").fetchone()

    def _wipe(self) -> None:
        for table in ("recall_text", "recall_grams", "recall_dirty", "recall_index_state"):
            self.db.execute(f"DELETE FROM {table}")
        self.terms.wipe()

    def is_current(self) -> bool:
        generation = _generation(self.db)
        state = self._state()
        if generation is None:
            return state is None
        if state is None or state[0] != generation:
            return False
        max_seq = self.db.execute("SELECT max(seq) FROM facts").get or 0
        dirty = self.db.execute("SELECT 1 FROM recall_dirty LIMIT 1").fetchone()
        return max_seq <= state[1] and dirty is None

    def sync(self) -> int:
        """Index every fact not yet indexed (or start over after a rebuild). Returns facts indexed."""
        if self.is_current():
            return 0
        return _write_txn(self.db, self._sync_locked)

    def _sync_locked(self) -> int:
        db = self.db
        generation = _generation(db)
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
        done = 0
        max_seq = db.execute("SELECT max(seq) FROM facts").get or 0
        if max_seq - last > self.batch:
            with ThreadPoolExecutor(max_workers=1, thread_name_prefix="cruxsql-text-index") as sorter:
                done += self._index_range(last, max_seq, sorter)
        elif last < max_seq:
            done += self._index_range(last, max_seq, None)
        self.terms.index_range(last, max_seq)
        db.execute("INSERT OR REPLACE INTO recall_index_state (id, generation, last_seq) VALUES (1, ?, ?)",
                   (generation, max(max_seq, state[1] if state and state[0] == generation else 0)))
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
                    self._write_block(block, *future.result(), block_mode)
                pending = computing
                done += len(rows)
            last = hi
        for block, future, block_mode in pending:
            self._write_block(block, *future.result(), block_mode)
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
        and their seq from each of their trigrams' postings (an emptied postings row goes). Each postings
        block is read and rewritten once; the trigrams are computed _DROP_PIECE facts at a time, which
        bounds the memory of their arrays."""
        db = self.db
        self.terms.drop([r[0] for r in rows])
        db.executemany("DELETE FROM recall_text WHERE seq = ?", [(r[0],) for r in rows])
        by_block: dict[int, list[tuple]] = {}
        for row in rows:
            by_block.setdefault(row[0] >> BLOCK_BITS, []).append(row)
        for block, block_rows in sorted(by_block.items()):
            # The dropped facts go whole, so a posting goes exactly when its seq is one of theirs.
            gone = np.zeros(BLOCK_SIZE, dtype=bool)
            gone[[r[0] & (BLOCK_SIZE - 1) for r in block_rows]] = True
            grams = np.unique(np.concatenate([_row_grams(block_rows[i:i + _DROP_PIECE])
                                              for i in range(0, len(block_rows), _DROP_PIECE)]))
            updates, deletes = [], []
            for gram, blob in db.execute("SELECT gram, seqs FROM recall_grams WHERE block = ? AND gram IN carray(?)",
                                         (block, apsw.carray(grams))):
                offsets = np.frombuffer(blob, dtype="<u2")
                kept = offsets[~gone[offsets]]
                if len(kept) == len(offsets):
                    continue
                if len(kept):
                    updates.append((kept.tobytes(), gram, block))
                else:
                    deletes.append((gram, block))
            db.executemany("UPDATE recall_grams SET seqs = ? WHERE gram = ? AND block = ?", updates)
            db.executemany("DELETE FROM recall_grams WHERE gram = ? AND block = ?", deletes)

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
        order = sorted(sizes, key=sizes.get)
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
        more than `limit` candidates)."""
        out: list[np.ndarray] = []
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


def carry_text_index(db: apsw.Connection, rewrite: derived_tables.Rewrite) -> None:
    """Rewrite hook: a compaction keeps every fact's seq and text but the deleted ones', so the index
    follows it to the new generation with only those facts taken out (they are still readable here),
    instead of starting over at the next read (tens of seconds at 1M facts). It starts over as before
    when the seqs were renumbered, when it was not built for the generation being rewritten, or when
    facts await re-indexing after an in-place text change (their old postings cannot be told apart)."""
    index = TextIndex(db)
    state = index._state()
    if (state is None or rewrite.previous is None or state[0] != rewrite.previous or not rewrite.seqs_kept
            or db.execute("SELECT 1 FROM recall_dirty LIMIT 1").fetchone() is not None):
        # Not carried: emptied now, a statement per table, rather than by the new checkpoint's trigger
        # (migration 0002's recall_generation_changed). Deleted inside that INSERT, every page of
        # recall_text, the lower-cased values of the facts being erased among them, was first copied into
        # the INSERT's statement journal: a temp file outside the data directory, where erasure cannot
        # reach it (tests/test_compaction_temp_files.py).
        index._wipe()
        return
    rows = db.execute("SELECT seq, entity, key, value FROM facts WHERE deleted = 1 AND seq <= ? ORDER BY seq",
                      (state[1],)).fetchall()
    index.drop(rows)
    # text rows of facts a replace_latest removed without a new generation (never re-checked again)
    db.execute("DELETE FROM recall_text WHERE NOT EXISTS (SELECT 1 FROM facts f WHERE f.seq = recall_text.seq)")
    db.execute("UPDATE recall_index_state SET generation = ? WHERE id = 1", (rewrite.generation,))


def _empty_timeline(db: apsw.Connection) -> None:
    """Empty the known_at timeline (inside the caller's transaction)."""
    # Line numbers, times and fact ids, never a fact's content: their pages are freed without
    # secure_delete's zero-fill (a write of every page of a 1M-line timeline).
    db.execute("PRAGMA secure_delete=OFF")
    try:
        for table in ("recall_event_times", "recall_changes", "recall_timeline_state"):
            db.execute(f"DELETE FROM {table}")
    finally:
        db.execute("PRAGMA secure_delete=ON")


def forget_timeline_before_the_drop(db: apsw.Connection, rewrite: derived_tables.Rewrite) -> None:
    """Rewrite hook: a compaction starts the timeline over after its new checkpoint (`Timeline.restart`),
    so empty it now, before the dropped facts go. Otherwise deleting each of them deletes its change rows
    one at a time (the recall_changes_follow_delete trigger: 0.75 s of a 1M-event compaction), and the
    new checkpoint's trigger (migration 0002's recall_generation_changed, which empties every recall
    table) would find the old generation's timeline state."""
    _empty_timeline(db)




# --- transaction time ---------------------------------------------------------------------------

_DELETING = {("delete", "deleted"), ("consolidate_undo", "canonical")}
_SUPERSEDING = {"supersede", "consolidate", "clear_supersede", "consolidate_undo"}
# Ops whose applied lines change an attribute the timeline tracks.
_CHANGE_OPS = ("delete", "supersede", "consolidate", "clear_supersede", "consolidate_undo", "set_validity",
               "set_horizon", "reverify")
_SCAN_FACTS_PAST = 50_000  # new lines past which the store lines' times come from one scan of `facts`
_WINDOW_LINES = 250_000  # journal lines the timeline takes in at a time
_UNPARSED = object()


def _opt_ns(text: Optional[str]) -> Optional[int]:
    return None if text is None else timestamps.parse_ns(text)


# (v_int, v_int2, v_text) of each attribute's row, from a fact's `_birth_values` (index 6: None)
_BIRTH_COLUMNS = {"deleted": itemgetter(0, 6, 6), "superseded_by": itemgetter(6, 6, 1), "validity": itemgetter(2, 3, 6),
                  "horizon": itemgetter(6, 6, 4), "reverified": itemgetter(5, 6, 6)}


def _birth_values(raw: bytes, wanted: set[str]) -> dict[str, tuple]:
    """(deleted, superseded_by, valid_from, valid_to, horizon_class, reverified_at, None) of the `wanted`
    facts of a journal line that replay applied (so serde's checks already passed), reading only those
    attributes: a store_batch line carries a thousand facts."""
    obj = json.loads(raw)
    op = obj["op"]
    carried = {"store": ("fact",), "replace_latest": ("fact",), "consolidate": ("canonical",)}.get(op, ())
    objs = [obj[k] for k in carried] if op != "store_batch" else obj["facts"]
    return {o["fact_id"]: (int(o["deleted"]), o.get("superseded_by"), _opt_ns(o.get("valid_from")),
                           _opt_ns(o.get("valid_to")), o.get("horizon_class", "none"), _opt_ns(o.get("reverified_at")),
                           None)
            for o in objs if o.get("fact_id") in wanted}


def keep_text_index_current(db: apsw.Connection) -> None:
    """Bulk replay hook: index what a rebuild or a long tail brought in, in its own transaction (at 1M
    facts the first read after a rebuild spent ~15 s doing it)."""
    TextIndex(db).sync()


def keep_timeline_current(db: apsw.Connection, journal: Journal) -> None:
    """Replay hook: extend the timeline with the lines just replayed (a batch of a tail, or a whole
    rebuild), in replay's own transaction, so that no `known_at` query ever has to build it (a full build
    at 1M events takes ~10 s)."""
    Timeline(db, journal).catch_up()


class Timeline:
    """Event times and attribute histories for `known_at` (transaction-time) queries.

    The state at T is the current view with every applied event later than T undone: facts stored
    after T are invisible; deletions, supersessions, validity, horizon and re-verification changes
    after T are not yet applied. Each attribute that changed also gets a row with the fact's value at
    birth (decoded from the journal line that stored it), so "last change at or before T" is defined
    for it; an attribute that never changed has no row and reads the fact's current column.
    """

    def __init__(self, db: apsw.Connection, journal: Journal) -> None:
        self.db = db
        self.journal = journal

    def sync(self) -> None:
        db = self.db
        generation = _generation(db)
        state = db.execute("SELECT generation, last_line FROM recall_timeline_state WHERE id = 1").fetchone()
        max_line = db.execute("SELECT max(line_no) FROM journal_events").get or 0
        if generation is not None and state is not None and state[0] == generation and state[1] >= max_line:
            return
        _write_txn(db, self.catch_up)

    def catch_up(self) -> None:
        """Add the journal lines past the last one seen (start over after a rebuild); the caller holds
        a write transaction. Replay calls this after every batch of a tail and once at the end of a rebuild;
        `sync` only catches up views written before that (or rewritten in place by a compaction)."""
        db = self.db
        generation = _generation(db)
        state = db.execute("SELECT generation, last_line FROM recall_timeline_state WHERE id = 1").fetchone()
        if generation is None or state is None or state[0] != generation:
            for table in ("recall_event_times", "recall_changes", "recall_timeline_state"):
                db.execute(f"DELETE FROM {table}")
            last = 0
        else:
            last = state[1]
        if generation is None:
            return
        max_line = db.execute("SELECT max(line_no) FROM journal_events").get or 0
        if max_line <= last:
            return
        self._event_times(last, max_line)
        # the changes a window at a time: what one holds in memory (its change rows, the birth lines it
        # reads back) stays bounded however long the journal a rebuild or compaction hands over
        for start in range(last, max_line, _WINDOW_LINES):
            self._add_changes(generation, start, min(start + _WINDOW_LINES, max_line))

    def _add_changes(self, generation: str, last: int, max_line: int) -> None:
        """The attribute changes of lines (last, max_line], and max_line recorded as seen."""
        db = self.db
        # `+e.op`: the line range is the selective term (not journal_events' op index, which would
        # visit every line of those ops in the whole journal on each store)
        change_ops = ", ".join(f"'{op}'" for op in _CHANGE_OPS)
        events = db.execute(
            "SELECT e.line_no, e.op, t.at_ns, e.byte_offset, e.byte_length FROM journal_events e "
            "JOIN recall_event_times t ON t.line_no = e.line_no "
            f"WHERE e.line_no > ? AND e.line_no <= ? AND e.applied = 1 AND +e.op IN ({change_ops}) ORDER BY e.line_no",
            (last, max_line)).fetchall()
        changes: list[tuple] = []
        need_values = [(ln, off, n) for ln, op, _, off, n in events if op in ("set_validity", "set_horizon")]
        payloads = {ln: codec.decode_event(raw) for ln, raw in self.journal.read_lines(need_values)}
        roles: dict[int, list[tuple[str, str]]] = {}
        for line_no, fact_id, role in db.execute(
                "SELECT ef.line_no, ef.fact_id, ef.role FROM journal_event_facts ef JOIN journal_events e "
                f"ON e.line_no = ef.line_no WHERE ef.line_no > ? AND ef.line_no <= ? AND e.applied = 1 "
                f"AND +e.op IN ({change_ops}) ORDER BY ef.line_no", (last, max_line)):
            roles.setdefault(line_no, []).append((fact_id, role))
        for line_no, op, at, _, _ in events:
            if at is None:
                continue
            names = roles[line_no]
            for fact_id, role in names:
                if (op, role) in _DELETING:
                    changes.append((fact_id, "deleted", line_no, at, 1, None, None))
                elif op == "supersede" and role == "superseded":
                    by = next((f for f, r in names if r == "superseding"), None)
                    changes.append((fact_id, "superseded_by", line_no, at, None, None, by))
                elif op == "consolidate" and role == "source":
                    by = next((f for f, r in names if r == "canonical"), None)
                    changes.append((fact_id, "superseded_by", line_no, at, None, None, by))
                elif (op, role) in (("clear_supersede", "cleared"), ("consolidate_undo", "restored")):
                    changes.append((fact_id, "superseded_by", line_no, at, None, None, None))
                elif op == "set_validity" and role == "validity":
                    ev = cast(codec.SetValidityEvent, payloads[line_no])  # the line's op is set_validity
                    changes.append((fact_id, "validity", line_no, at, ev.valid_from, ev.valid_to, None))
                elif op == "set_horizon" and role == "horizon":
                    horizon = cast(codec.SetHorizonEvent, payloads[line_no]).horizon_class  # op: set_horizon
                    changes.append((fact_id, "horizon", line_no, at, None, None, horizon))
                elif op == "reverify" and role == "reverified":
                    changes.append((fact_id, "reverified", line_no, at, at, None, None))
        # only the changes of a fact still in the view and stored no later than the change (not one
        # removed since, nor an earlier fact of the same id); plus the value at birth of each attribute
        # that changed, unless an earlier call recorded it
        stored = self._store_lines(sorted({c[0] for c in changes}))
        changes = [c for c in changes if c[0] in stored and stored[c[0]][0] < c[2]]
        births: dict[str, set[str]] = {}
        for c in changes:
            births.setdefault(c[0], set()).add(c[1])
        born = list(births)
        for i in range(0, len(born), 10_000):
            for fact_id, attr, line_no in db.execute(
                    "SELECT fact_id, attr, line_no FROM recall_changes WHERE fact_id IN carray(?)",
                    (apsw.carray(tuple(born[i:i + 10_000])),)):
                if line_no == stored[fact_id][0]:
                    births[fact_id].discard(attr)
        changes.extend(self._birth_rows(births, stored))
        changes.sort()  # in key order: appended B-tree pages instead of random ones
        db.executemany(
            "INSERT OR REPLACE INTO recall_changes (fact_id, attr, line_no, at_ns, v_int, v_int2, v_text) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)", changes)
        db.execute("INSERT OR REPLACE INTO recall_timeline_state (id, generation, last_line) VALUES (1, ?, ?)",
                   (generation, max_line))

    def restart(self, times: "array[int]") -> None:
        """Start the timeline over for a journal just rewritten without change events (a compaction: store
        lines, provenance lines, tombstones), from its writer's event time (ns) of every line, line 1
        first (an `array('q')`, inserted by SQLite from the buffer: `carray`'s rowid is the 1-based
        position): no attribute changes to record, and no line to read back. Inside the caller's
        transaction, after the new checkpoint is written."""
        db = self.db
        _empty_timeline(db)
        if len(times):
            db.execute("INSERT INTO recall_event_times (line_no, at_ns) SELECT rowid, value FROM carray(?)",
                       (apsw.carray(times),))
        last = db.execute("SELECT max(line_no) FROM recall_event_times").get
        generation = _generation(db)
        if generation is not None and last is not None:
            db.execute("INSERT INTO recall_timeline_state (id, generation, last_line) VALUES (1, ?, ?)",
                       (generation, last))

    def _event_times(self, last: int, max_line: int) -> None:
        """`recall_event_times` for lines (last, max_line]. A `store` line's time is the stored_at of the
        fact it stored (the journal wrote its text from that very value, losslessly), so those come
        from `facts` in SQL: from a scan of `facts` when most of the journal is new (a rebuild, a
        compaction), else by fact id from the new lines. The other lines' text is parsed here."""
        db = self.db
        if max_line - last > _SCAN_FACTS_PAST:
            db.execute(
                "INSERT OR REPLACE INTO recall_event_times (line_no, at_ns) SELECT f.line_no, f.stored_at_ns "
                "FROM facts f CROSS JOIN journal_events e ON e.line_no = f.line_no "
                "WHERE f.line_no > ? AND +e.op = 'store' AND e.fact_id = f.fact_id AND e.event_at = f.stored_at",
                (last,))
        else:
            db.execute(
                "INSERT OR REPLACE INTO recall_event_times (line_no, at_ns) SELECT e.line_no, f.stored_at_ns "
                "FROM journal_events e JOIN facts f ON f.fact_id = e.fact_id "
                "WHERE e.line_no > ? AND +e.op = 'store' AND f.line_no = e.line_no AND e.event_at = f.stored_at",
                (last,))
        parsed: dict[str, Optional[int]] = {}
        for start in range(last, max_line, _WINDOW_LINES):  # the other lines' times, a window at a time
            times = []
            for line_no, event_at in db.execute(
                    "SELECT e.line_no, e.event_at FROM journal_events e WHERE e.line_no > ? AND e.line_no <= ? "
                    "AND NOT EXISTS (SELECT 1 FROM recall_event_times t WHERE t.line_no = e.line_no)",
                    (start, start + _WINDOW_LINES)).fetchall():
                at = parsed.get(event_at, _UNPARSED) if event_at else None
                if at is _UNPARSED:
                    try:
                        at = timestamps.parse_ns(event_at)
                    except InvalidInput:
                        at = None
                    if len(parsed) < 65536:
                        parsed[event_at] = at
                times.append((line_no, at))
            db.executemany("INSERT OR REPLACE INTO recall_event_times (line_no, at_ns) VALUES (?, ?)", times)

    def _store_lines(self, fact_ids: list[str]) -> dict[str, tuple[int, int, int, Optional[int]]]:
        """(line, byte offset, length, time) of the line that stored each of the sorted `fact_ids` the
        view holds. Three passes, each in its table's key order (fact id, rowid, line number), not one
        descent of four tables per fact: past the page cache (millions of facts) every random descent
        misses it, and these lookups were most of a 10M rebuild's timeline."""
        db = self.db
        rowids: list[int] = []
        for i in range(0, len(fact_ids), 10_000):
            rowids += (r[0] for r in db.execute("SELECT rowid FROM facts WHERE fact_id IN carray(?)",
                                                (apsw.carray(tuple(fact_ids[i:i + 10_000])),)))
        rowids.sort()
        line_of: dict[str, int] = {}
        for i in range(0, len(rowids), 10_000):
            line_of.update(db.execute("SELECT fact_id, line_no FROM facts WHERE rowid IN carray(?)",
                                      (apsw.carray(array("q", rowids[i:i + 10_000])),)))
        lines = sorted(set(line_of.values()))
        spans: dict[int, tuple[int, int, Optional[int]]] = {}
        for i in range(0, len(lines), 10_000):
            for line_no, *span in db.execute(
                    "SELECT e.line_no, e.byte_offset, e.byte_length, t.at_ns FROM journal_events e LEFT JOIN "
                    "recall_event_times t ON t.line_no = e.line_no WHERE e.line_no IN carray(?)",
                    (apsw.carray(array("q", lines[i:i + 10_000])),)):
                spans[line_no] = tuple(span)
        return {fact_id: (line_no, *spans[line_no]) for fact_id, line_no in line_of.items() if line_no in spans}

    def _birth_rows(self, births: dict[str, set[str]], stored: dict[str, tuple]) -> list[tuple]:
        """The rows of each fact's `births` attributes with the values its `stored` line wrote (privacy
        aside)."""
        rows: list[tuple] = []
        lines: dict[int, list[str]] = {}
        spans = {}
        for fact_id, attrs in births.items():
            line_no, offset, length, at = stored[fact_id]
            if attrs and at is not None:
                lines.setdefault(line_no, []).append(fact_id)
                spans[line_no] = (line_no, offset, length)
        for line_no, raw in self.journal.read_lines(spans.values()):
            at = stored[lines[line_no][0]][3]
            by_id = _birth_values(raw, set(lines[line_no]))
            for fact_id in lines[line_no]:
                values = by_id.get(fact_id)
                if values is None:
                    continue
                rows += [(fact_id, attr, line_no, at, *_BIRTH_COLUMNS[attr](values)) for attr in births[fact_id]]
        return rows


def index_in_the_write(db: apsw.Connection, journal: Journal) -> None:
    """Replay hook: index the facts a write (or a tail) brought in, in its own view transaction. A read
    never has to write the index, so it never waits for SQLite's write lock (a compaction holds it for
    its whole view rewrite): its snapshot holds every committed fact, indexed."""
    keep_text_index_current(db)
