"""The known_at timeline: event time per journal line and the history of every mutable fact attribute.

`Timeline` holds what `known_at` (transaction-time) queries need: the time of every journal line, and
for each attribute a later event changed (deleted, superseded_by, validity, horizon, reverified) its
value at the fact's birth and after each change. Replay extends it in each of its transactions (a
replay hook in `derived_tables.DERIVED_TABLE_HOOKS`), so it is never behind the view; reads only catch
up a view that was rewritten in place by a compaction or predates that hook.
"""

from __future__ import annotations

import json
from array import array
from operator import itemgetter
from typing import Any, Optional, cast

import apsw

from ..errors import InvalidInput
from ..facts import codec, derived_tables, timestamps
from ..facts.journal import Journal
from .derived_writes import checkpoint_generation, write_transaction


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




_DELETING = {("delete", "deleted"), ("consolidate_undo", "canonical")}
_SUPERSEDING = {"supersede", "consolidate", "clear_supersede", "consolidate_undo"}
# Ops whose applied lines change an attribute the timeline tracks.
_CHANGE_OPS = ("delete", "supersede", "consolidate", "clear_supersede", "consolidate_undo", "set_validity",
               "set_horizon", "reverify")
_SCAN_FACTS_PAST = 50_000  # new lines past which the store lines' times come from one scan of `facts`
_WINDOW_LINES = 250_000  # journal lines the timeline takes in at a time
_UNPARSED = object()


def _opt_ns(text: Optional[str]) -> Optional[int]:
    """A time as the view's `*_ns` columns hold it (clamped to 64 bits: `timestamps.column_ns`)."""
    return None if text is None else timestamps.column_ns(timestamps.parse_ns(text))


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
        generation = checkpoint_generation(db)
        state = db.execute("SELECT generation, last_line FROM recall_timeline_state WHERE id = 1").fetchone()
        max_line = db.execute("SELECT max(line_no) FROM journal_events").get or 0
        if generation is not None and state is not None and state[0] == generation and state[1] >= max_line:
            return
        write_transaction(db, self.catch_up)

    def catch_up(self) -> None:
        """Add the journal lines past the last one seen (start over after a rebuild); the caller holds
        a write transaction. Replay calls this after every batch of a tail and once at the end of a rebuild;
        `sync` only catches up views written before that (or rewritten in place by a compaction)."""
        db = self.db
        generation = checkpoint_generation(db)
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
        events: list[tuple[Any, ...]] = db.execute(
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
                    changes.append((fact_id, "validity", line_no, at, timestamps.column_ns(ev.valid_from),
                                    timestamps.column_ns(ev.valid_to), None))
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
        generation = checkpoint_generation(db)
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
            rows: list[tuple[Any, ...]] = db.execute(
                    "SELECT e.line_no, e.event_at FROM journal_events e WHERE e.line_no > ? AND e.line_no <= ? "
                    "AND NOT EXISTS (SELECT 1 FROM recall_event_times t WHERE t.line_no = e.line_no)",
                    (start, start + _WINDOW_LINES)).fetchall()
            for line_no, event_at in rows:
                at = parsed.get(event_at, _UNPARSED) if event_at else None
                if at is _UNPARSED:
                    try:
                        at = timestamps.column_ns(timestamps.parse_ns(event_at))
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
