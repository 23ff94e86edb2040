"""A compaction's live `store` lines built from a snapshot of the view, without the writer lock.

Building the compacted journal's live section (SQLite concatenating every live fact's line, `store_lines`)
is the part of a compaction that needs nothing but a consistent read of the view, so `prebuild` does it
before the writer lock is taken, inside one read transaction (`Store.read_snapshot`), into an unnamed
temp file in the data directory (O_TMPFILE: it is gone once closed, also after a crash, and never
named where a concurrent compaction's clean-up or a backup could meet it).

Alongside, also without the lock, it writes the compacted journal's event rows for those lines into
two shadow tables of the view (see "the shadow event tables" below), and keeps each line's fact id,
`stored_at`, seq and length, and the lines' running blake3 every `batch` lines. In the same snapshot, the
derived tables plan what their rewrite hooks will write (`derived_tables.run_rewrite_preparations`:
the text index's drop of the deleted facts), handed to them only when the tail is judged plain (below).

Under the lock, after the view has caught up with the lines appended meanwhile (the tail),
`live_chunks` yields exactly what `store_lines.live_chunks` would yield from the view now: a fact no
tail line names keeps its snapshot line byte for byte (its row cannot have changed), and the facts the
tail names (stored, deleted, superseded, superseding, cleared, re-validated) are read again, their
lines merged in at their place in the (`stored_at`, `fact_id`) order. Nothing else is read from the
view under the lock: the leading lines that precede every named fact (`unchanged`, most of them when
the tail only adds facts and new versions of recent ones) are copied from the file as they are,
already hashed, with the event rows the shadow tables hold; only the lines after them are handled
one by one.

Correctness over speed: when the tail holds anything whose effect on facts it does not name (an op
other than store, store_batch, delete, supersede, clear_supersede and set_validity; a delete or
supersession while consolidations exist; a latest-only control fact, which removes its chain), when
cruxsql's own fact events moved, when the journal was rewritten or the view rebuilt since the
snapshot (another compaction: a new generation), or when the view's live facts are not exactly the
snapshot's less and plus the named ones (counted), `live_chunks` returns None and the caller builds
every line under the lock, as before. A snapshot file that does not read back as written raises
`PrebuildStale` before anything is renamed or committed (the compaction fails, changing nothing).
"""

from __future__ import annotations

import bisect
import heapq
import os
import re
import tempfile
import uuid
from array import array
from dataclasses import dataclass
from itertools import accumulate
from operator import itemgetter, lt
from typing import IO, TYPE_CHECKING, Any, Callable, Iterator, Optional, cast

import apsw
import blake3

from ..facts import derived_tables, event_indexes, extension_events, replay_position, view
from ..facts.busy import retry_busy
from ..facts.own_journal import Position
from ..recall.text_index import TextIndex
from . import store_lines

if TYPE_CHECKING:
    from ..facts.store import Store

# Tail ops whose every effect on a fact row is on a fact the line names (journal_event_facts).
_NAMED_EFFECT_OPS = frozenset({"store", "store_batch", "delete", "supersede", "clear_supersede", "set_validity"})
# ... of which these take consolidation members into account (view.Applier), touching facts they do not name.
_CONSOLIDATION_AWARE_OPS = frozenset({"delete", "supersede", "clear_supersede"})
_READ_LINES = 20_000  # fact ids decoded at a time
_COPY_BYTES = 8 << 20


class PrebuildStale(Exception):
    """The view's live facts are not what the snapshot's lines plus the tail say: nothing was changed."""


def _packed(texts: list[str], into: bytearray, ends: array) -> None:
    """Append `texts` (UTF-8) to `into`, end to end, the i-th ending at `ends[i]`."""
    encoded = [t.encode("utf-8") for t in texts]
    base = len(into)
    ends.extend(base + end for end in accumulate(map(len, encoded)))
    into += b"".join(encoded)


def _unpacked(blob: bytes, ends: array, i: int, j: int) -> list[str]:
    starts = ends[i - 1] if i else 0
    bounds = [starts, *ends[i:j]]
    return [blob[a:b].decode("utf-8") for a, b in zip(bounds, bounds[1:])]


@dataclass
class PrebuiltLines:
    """The live `store` lines of the view as of `checkpoint`, in compaction order (in `file`), and what
    compaction's bookkeeping needs of each line's fact: its id and `stored_at` text (UTF-8, end to end,
    the i-th ending at `id_ends[i]` / `at_ends[i]`: a third of a list of str's memory), `stored_at_ns`,
    seq and the line's length (without its newline). ~60 MB at 1M facts."""

    file: IO[bytes]
    ids: bytes
    id_ends: array
    ats: bytes
    at_ends: array
    ns: array
    seqs: array
    lengths: array
    checkpoint: replay_position.Checkpoint
    own_events_at: Optional[Position]
    db: apsw.Connection
    marks: list[tuple[int, int, Any]]  # (line, byte offset, blake3 of the bytes before it) every `batch` lines
    sorted_upto: int  # the leading lines whose seqs increase (replay's order)
    linkable: bool  # `file` is a `Journal.unnamed_file`, fsynced: the compacted journal can be made of it
    prepared: dict[str, Any]  # the derived tables' rewrite work planned in the snapshot (`Rewrite.prepared`)
    shadow: Optional[str] = None  # the prefix of the shadow event tables (`events`, `event_facts`)
    shadow_indexes: tuple[str, ...] = ()  # the live event tables' indexes (their SQL) the shadow ones mirror
    unchanged: int = 0  # set by `live_chunks`: the leading lines the tail leaves as the snapshot has them

    def __len__(self) -> int:
        return len(self.id_ends)

    def fact_ids(self) -> Iterator[str]:
        for i in range(0, len(self), _READ_LINES):
            yield from _unpacked(self.ids, self.id_ends, i, min(len(self), i + _READ_LINES))

    def prefix(self, lines: int) -> tuple[int, Any]:
        """(size, blake3 hasher over them) of the first `lines` lines, from the hashes kept every `batch`
        lines (at most a batch of lines is hashed here)."""
        line, offset, hasher = max((m for m in self.marks if m[0] <= lines), key=itemgetter(0))
        end = offset + sum(self.lengths[line:lines]) + lines - line
        hasher = hasher.copy()
        self.file.seek(offset)
        hasher.update(self.file.read(end - offset))
        return end, hasher

    def emit_prefix(self, size: int, emit: Callable[[bytes], Any]) -> None:
        """Emit the file's first `size` bytes (whole lines, as `prefix` measured them)."""
        self.file.seek(0)
        while size:
            data = self.file.read(min(size, _COPY_BYTES))
            if not data:
                raise PrebuildStale("the snapshot's lines file is short")
            emit(data)
            size -= len(data)

    def close(self) -> None:
        """Close the lines file and drop the shadow event tables if they were not swapped in."""
        self.file.close()
        if self.shadow is not None:
            drop_shadow_tables(self.db, self.shadow)


def prebuild(store: Store, batch: int) -> Optional[PrebuiltLines]:
    """The live lines from one read snapshot of the view, without the writer lock (None: nothing to build
    from, e.g. an empty journal). The view is first caught up if the lock is free (never waited for)."""
    if store.read_only:
        return None
    store.refresh()
    # and recall's text index, with the facts writes left to a later read (`text_index.INDEX_EVERY`), so
    # that its drop of the deleted facts is planned in the snapshot whole (if the lock is free, as above)
    TextIndex(store.db).catch_up()
    # (those of killed compactions hold the alternate index names this snapshot's shadow tables need)
    remove_stale_shadow_tables(store.db)
    with store.read_snapshot():
        cp = replay_position.read_checkpoint(store.db)
        if cp is None:
            return None
        own = extension_events.position(store.db, store.extensions.name, cp.generation)
        fh, linkable = _lines_file(store)
        ids, ats, id_ends, at_ends = bytearray(), bytearray(), array("q"), array("q")
        ns, seqs, lengths = array("q"), array("q"), array("q")
        hasher, marks, offset = blake3.blake3(), [], 0
        try:
            for rows in store_lines.live_chunks(store.db, batch):
                marks.append((len(lengths), offset, hasher.copy()))
                lines = [row[0] for row in rows]
                blob = b"\n".join(lines) + b"\n"
                fh.write(blob)
                hasher.update(blob)
                offset += len(blob)
                lengths.extend(map(len, lines))
                _packed([row[1] for row in rows], ids, id_ends)
                _packed([row[2] for row in rows], ats, at_ends)
                ns.extend(row[3] for row in rows)
                seqs.extend(row[4] for row in rows)
            fh.flush()
            if linkable:
                os.fsync(fh.fileno())  # (it may become the compacted journal's head: `Journal.rewrite_onto`)
            prepared = derived_tables.run_rewrite_preparations(store.db)
        except BaseException:
            fh.close()
            raise
    marks.append((len(lengths), offset, hasher))
    rises = list(map(lt, seqs, seqs[1:]))
    sorted_upto = rises.index(False) + 1 if False in rises else len(seqs)
    pre = PrebuiltLines(fh, bytes(ids), id_ends, bytes(ats), at_ends, ns, seqs, lengths, cp, own, store.db, marks,
                        sorted_upto, linkable, prepared)
    try:
        pre.shadow, pre.shadow_indexes = _fill_shadow_tables(pre, batch)
    except BaseException:
        pre.close()
        raise
    return pre


def _lines_file(store: Store) -> tuple[IO[bytes], bool]:
    """The unnamed file the snapshot's lines go to, and whether `Journal.rewrite_onto` can name it."""
    try:
        fh = store.journal.unnamed_file()
    except OSError:  # no O_TMPFILE here: a temp file, unlinked at once
        return tempfile.TemporaryFile(dir=store.data_dir), False
    return fh, os.path.exists(f"/proc/self/fd/{fh.fileno()}")


# --- the shadow event tables -----------------------------------------------------------------------
#
# The compacted journal's event rows (journal_events, journal_event_facts) for the snapshot's live
# lines, written without the writer lock into two tables of the view named
# `compaction_next_<pid>_<hex>_events` / `..._event_facts`, in transactions of `batch` rows (a writer's
# view commit waits for one of them at most). Under the lock, the rows past the lines the tail changed
# are cut and written again, and the two tables replace the old ones by DROP + RENAME in the
# compaction's view transaction: readers see the old tables or the new ones. They hold line numbers,
# offsets, ops, fact ids and times, never a fact's content.
#
# They are made with the live tables' indexes, so that none is built under the lock (at 1M events,
# 1.4 s of sorting), each under its live twin's alternate name (facts/event_indexes.py). Filled in
# batches, the indexes grow row by row (random inserts), which costs more in all than one sort but holds
# SQLite's write lock for a batch at a time, never for a whole index.

SHADOW_PREFIX = "compaction_next_"
_TABLES = (("events", "journal_events"), ("event_facts", "journal_event_facts"))
_REFERENCE = re.compile(r'REFERENCES "?journal_events"? ?\(')


def shadow_table(prefix: str, which: str) -> str:
    return f'"{prefix}{which}"'


def _shadow_index_creates(db: apsw.Connection, prefix: str, live: list[str]) -> Optional[list[str]]:
    """The CREATE INDEX of each live event-table index on its shadow table, under its alternate name;
    None when one is not of the form this code knows or an alternate name is taken (another
    compaction's snapshot phase holds it): the caller then builds them under the lock."""
    taken = {name for (name,) in db.execute("SELECT name FROM sqlite_master")}
    shadow_of = {table: which for which, table in _TABLES}
    creates = []
    for sql in live:
        head = event_indexes.parse(sql)
        if head is None or event_indexes.alternate(head[2]) in taken:
            return None
        creates.append(cast(str, event_indexes.create(sql, event_indexes.alternate(head[2]),
                                                      shadow_table(prefix, shadow_of[head[3]]))))
    return creates


def _fill_shadow_tables(pre: PrebuiltLines, batch: int) -> tuple[Optional[str], tuple[str, ...]]:
    """(the shadow tables' prefix, the live indexes they mirror); (None, ()) when they could not be made."""
    db = pre.db
    schema: dict[str, str] = dict(cast(list[tuple[str, str]], db.execute(
        "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name IN "
        "('journal_events', 'journal_event_facts')").fetchall()))
    prefix = f"{SHADOW_PREFIX}{os.getpid()}_{uuid.uuid4().hex[:12]}_"
    creates = []
    for which, table in _TABLES:
        # (a table a compaction swapped in has its name quoted: `CREATE TABLE "journal_events" (`)
        head = re.match(rf'CREATE TABLE "?{table}"? \(', str(schema.get(table, "")))
        if head is None:
            return None, ()  # not the schema this code knows: the rows are built under the lock instead
        # journal_event_facts' reference to journal_events made a reference to the shadow table (a
        # rebuild deleting journal_events meanwhile would otherwise find these rows referencing its
        # lines); the RENAME that swaps them in makes it journal_events again
        body, refs = _REFERENCE.subn(f"REFERENCES {shadow_table(prefix, 'events')} (", schema[table][head.end():])
        if refs != (which == "event_facts") or "REFERENCES" in _REFERENCE.sub("", schema[table]):
            return None, ()
        creates.append(f"CREATE TABLE {shadow_table(prefix, which)} (" + body)
    live: list[str] = []
    indexes: Optional[list[str]] = None
    starts = array("q", accumulate((n + 1 for n in pre.lengths), initial=0))
    for i in [-1, *range(0, len(pre), batch)]:  # -1: the CREATE TABLEs
        db.execute("BEGIN IMMEDIATE")
        try:
            if i < 0:
                # (the indexes' names looked up in the transaction that takes them: another compaction's
                # snapshot phase cannot take one in between)
                live = [sql for _, sql in event_indexes.live(db)]
                indexes = _shadow_index_creates(db, prefix, live)
                for sql in creates + (indexes or []):
                    db.execute(sql)
            else:
                j = min(len(pre), i + batch)
                ids = _unpacked(pre.ids, pre.id_ends, i, j)
                db.executemany(
                    f"INSERT INTO {shadow_table(prefix, 'events')} (line_no, byte_offset, byte_length, op, "
                    "fact_id, event_at, applied, skip_reason) VALUES (?, ?, ?, 'store', ?, ?, 1, NULL)",
                    zip(range(i + 1, j + 1), starts[i:j], [n + 1 for n in pre.lengths[i:j]], ids,
                        _unpacked(pre.ats, pre.at_ends, i, j)))
                db.executemany(f"INSERT INTO {shadow_table(prefix, 'event_facts')} (line_no, fact_id, role) "
                               "VALUES (?, ?, 'stored')", zip(range(i + 1, j + 1), ids))
            db.execute("COMMIT")
        except BaseException as exc:
            if not db.getautocommit():
                db.execute("ROLLBACK")
            if i >= 0:
                drop_shadow_tables(db, prefix)
            if isinstance(exc, apsw.Error):
                return None, ()  # the rows are built under the lock instead, as without the tables
            raise
    return prefix, tuple(live) if indexes is not None else ()


def adopt_shadow_indexes(db: apsw.Connection, pre: PrebuiltLines, live: list[str]) -> bool:
    """Whether the shadow tables carry the live tables' indexes `live` (their SQL, sorted), so that none
    need be built after the swap; when not (they changed since the snapshot, or were never made), any
    index the shadow tables have is dropped. Inside the compaction's view transaction."""
    assert pre.shadow is not None
    tables = tuple(pre.shadow + which for which, _ in _TABLES)
    made = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL "
                                           "AND tbl_name IN (?, ?)", tables)}
    wanted = {event_indexes.alternate(head[2]) for head in map(event_indexes.parse, live) if head is not None}
    if pre.shadow_indexes and tuple(live) == pre.shadow_indexes and made == wanted:
        return True
    for name in sorted(made):
        db.execute(f'DROP INDEX "{name}"')
    return False


def shadow_tables_present(db: apsw.Connection, prefix: str) -> bool:
    return db.execute("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN (?, ?)",
                      tuple(prefix + which for which, _ in _TABLES)).get == len(_TABLES)


def drop_shadow_tables(db: apsw.Connection, prefix: str) -> None:
    """Drop a compaction's shadow event tables, if still there (pages freed without secure_delete's
    zero-fill: they hold no fact content)."""
    def drop() -> None:
        db.execute("PRAGMA secure_delete=OFF")
        try:
            with db:
                for which, _ in reversed(_TABLES):
                    db.execute(f"DROP TABLE IF EXISTS {shadow_table(prefix, which)}")
        finally:
            db.execute("PRAGMA secure_delete=ON")

    if db.getautocommit():
        retry_busy(drop)


def remove_stale_shadow_tables(db: apsw.Connection) -> list[str]:
    """Drop the shadow event tables of compactions that no longer run (killed in their snapshot phase);
    those of a live process are left alone. Returns the prefixes dropped."""
    stale = set()
    names = cast(list[tuple[str]], db.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND substr(name, 1, ?) = ?",
        (len(SHADOW_PREFIX), SHADOW_PREFIX)).fetchall())
    for (name,) in names:
        pid, tag, _ = (name[len(SHADOW_PREFIX):].split("_", 2) + ["", ""])[:3]
        if pid.isdigit() and not _alive(int(pid)):
            stale.add(f"{SHADOW_PREFIX}{pid}_{tag}_")
    for prefix in sorted(stale):
        drop_shadow_tables(db, prefix)
    return sorted(stale)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _tail_names(store: Store, pre: PrebuiltLines) -> Optional[set[str]]:
    """The facts the lines after the snapshot name, or None when their effects are not all on those."""
    db = store.db
    cp = replay_position.read_checkpoint(db)
    then = pre.checkpoint
    if (cp is None or cp.generation != then.generation or cp.inode != then.inode or cp.line_count < then.line_count
            or extension_events.position(db, store.extensions.name, cp.generation) != pre.own_events_at):
        return None
    ops = {op for (op,) in db.execute("SELECT DISTINCT op FROM journal_events WHERE line_no > ?", (then.line_count,))}
    if not ops <= _NAMED_EFFECT_OPS:
        return None
    if ops & _CONSOLIDATION_AWARE_OPS and db.execute("SELECT 1 FROM consolidation_sources LIMIT 1").fetchone():
        return None
    names = {fid for (fid,) in db.execute(
        "SELECT DISTINCT fact_id FROM journal_event_facts WHERE line_no > ?", (then.line_count,))}
    prefixes = view.LATEST_ONLY_PREFIXES
    if db.execute(
            "SELECT 1 FROM journal_event_facts j JOIN facts f ON f.fact_id = j.fact_id WHERE j.line_no > ? AND ("
            + " OR ".join("substr(f.entity, 1, ?) = ?" for _ in prefixes) + ") LIMIT 1",
            (then.line_count, *[v for p in prefixes for v in (len(p), p)])).fetchone():
        return None
    return names


def _snapshot_rows(pre: PrebuiltLines, batch: int, begin: int = 0) -> Iterator[list[tuple]]:
    """The snapshot's `store_lines.live_chunks` rows from its line `begin` (0-based) on, `batch` at a
    time, read back from its file."""
    pre.file.seek(sum(pre.lengths[:begin]) + begin)
    for i in range(begin, len(pre), batch):
        j = min(len(pre), i + batch)
        data = pre.file.read(sum(pre.lengths[i:j]) + j - i)
        lines = data.split(b"\n")
        if lines.pop() != b"" or len(lines) != j - i or list(map(len, lines)) != pre.lengths[i:j].tolist():
            raise PrebuildStale("the snapshot's lines file is not what was written")
        yield list(zip(lines, _unpacked(pre.ids, pre.id_ends, i, j), _unpacked(pre.ats, pre.at_ends, i, j),
                       pre.ns[i:j], pre.seqs[i:j]))


_ORDER = itemgetter(3, 1)  # (stored_at_ns, fact_id): the compacted journal's order


def _snapshot_places(store: Store, pre: PrebuiltLines, names: set[str]) -> list[int]:
    """The snapshot's line indexes (sorted) of the facts `names` it holds, found by their `stored_at_ns`
    (which never changes) rather than by decoding every id."""
    if not names:
        return []
    found = []
    for fid, ns in store.db.execute("SELECT fact_id, stored_at_ns FROM facts WHERE fact_id IN carray(?)",
                                    (apsw.carray(tuple(names)),)):
        lo, hi = bisect.bisect_left(pre.ns, ns), bisect.bisect_right(pre.ns, ns)
        found += [i for i, at in zip(range(lo, hi), _unpacked(pre.ids, pre.id_ends, lo, hi)) if at == fid]
    return sorted(found)


def live_chunks(store: Store, pre: PrebuiltLines, batch: int,
                after_unchanged: bool = False) -> Optional[Iterator[list[tuple]]]:
    """Under the writer lock, the view caught up: `store_lines.live_chunks(store.db, batch)`'s rows (in
    chunks of about `batch`), the snapshot's rows reused for every fact the tail leaves alone and the
    rows of those it names read again and merged in at their place; None when the snapshot cannot be
    used. Nothing but the named facts is read from the view: their count must make up the view's live
    facts exactly, or the snapshot is not used. Sets `pre.unchanged`, the leading lines that are the
    snapshot's own; `after_unchanged`: the rows after those only (the caller writes those lines from
    `prefix` and `emit_prefix`)."""
    names = _tail_names(store, pre)
    if names is None:
        return None
    fresh = sorted(store_lines.live_lines_of(store.db, sorted(names)).values(), key=_ORDER)
    named_at = _snapshot_places(store, pre, names)
    named_then = len(named_at)
    # the leading lines that stay as the snapshot has them: those before the first named fact's and
    # before the place of the first fact read again
    first_fresh = bisect.bisect_left(pre.ns, _ORDER(fresh[0])[0]) if fresh else len(pre)
    pre.unchanged = min(named_at[0] if named_at else len(pre), first_fresh)
    # (all facts less the deleted ones: two covering indexes counted, not the table's 1M rows read; 0.3 s)
    live = store.db.execute("SELECT (SELECT count(*) FROM facts) - (SELECT count(*) FROM facts WHERE deleted = 1)").get
    if live != len(pre) - named_then + len(fresh):
        return None

    def chunks() -> Iterator[list[tuple]]:
        at = 0  # fresh[at:] is still to be merged in
        for rows in _snapshot_rows(pre, batch, pre.unchanged if after_unchanged else 0):
            kept = [row for row in rows if row[1] not in names] if names else rows
            last = _ORDER(rows[-1])
            upto = at
            while upto < len(fresh) and _ORDER(fresh[upto]) < last:
                upto += 1
            if upto > at:
                kept = list(heapq.merge(kept, fresh[at:upto], key=_ORDER))
                at = upto
            if kept:
                yield kept
        if at < len(fresh):
            yield fresh[at:]

    return chunks()
