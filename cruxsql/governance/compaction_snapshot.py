"""A compaction's live `store` lines built from a snapshot of the view, without the writer lock.

Building the compacted journal's live section (SQLite concatenating every live fact's line, `store_lines`)
is the part of a compaction that needs nothing but a consistent read of the view, so `prebuild` does it
before the writer lock is taken, inside one read transaction (`Store.read_snapshot`), into an unnamed
temp file in the data directory (O_TMPFILE: it is gone once closed, also after a crash, and never
named where a concurrent compaction's clean-up or a backup could meet it).

Under the lock, after the view has caught up with the lines appended meanwhile (the tail),
`live_chunks` yields exactly what `store_lines.live_chunks` would yield from the view now: a fact no
tail line names keeps its snapshot line byte for byte (its row cannot have changed), and the facts the
tail names (stored, deleted, superseded, superseding, cleared, re-validated) are read again, their
lines put at their place in the (`stored_at`, `fact_id`) order. Only the facts' order columns are read
for the rest (no line is concatenated under the lock).

Correctness over speed: when the tail holds anything whose effect on facts it does not name (an op
other than store, store_batch, delete, supersede, clear_supersede and set_validity; a delete or
supersession while consolidations exist; a latest-only control fact, which removes its chain), when
cruxsql's own fact events moved, or when the journal was rewritten or the view rebuilt since the
snapshot (another compaction: a new generation), `live_chunks` returns None and the caller builds every
line under the lock, as before. The order is checked again while the lines are written: a snapshot line
that does not fall where the view's order puts it raises `PrebuildStale` before anything is renamed
or committed (the compaction fails, changing nothing).
"""

from __future__ import annotations

import tempfile
from array import array
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Iterator, Optional

from ..facts import checkpoint, extension_events, view
from ..facts.own_journal import Position
from . import store_lines

if TYPE_CHECKING:
    from ..facts.store import Store

# Tail ops whose every effect on a fact row is on a fact the line names (journal_event_facts).
_NAMED_EFFECT_OPS = frozenset({"store", "store_batch", "delete", "supersede", "clear_supersede", "set_validity"})
# ... of which these take consolidation members into account (view.Applier), touching facts they do not name.
_CONSOLIDATION_AWARE_OPS = frozenset({"delete", "supersede", "clear_supersede"})
_READ_CHUNK = 4 << 20


class PrebuildStale(Exception):
    """The view's live facts are not what the snapshot's lines plus the tail say: nothing was changed."""


@dataclass
class PrebuiltLines:
    """The live `store` lines of the view as of `checkpoint`, in compaction order, and their facts' ids
    (UTF-8, end to end in `ids`, the i-th ending at `ends[i]`: a third of a list of str's memory, ~35 MB
    at 1M facts)."""

    file: IO[bytes]
    ids: bytes
    ends: array
    checkpoint: checkpoint.Checkpoint
    own_events_at: Optional[Position]

    def __len__(self) -> int:
        return len(self.ends)

    def fact_ids(self) -> Iterator[str]:
        start, ids = 0, self.ids
        for end in self.ends:
            yield ids[start:end].decode("utf-8")
            start = end

    def close(self) -> None:
        self.file.close()


def prebuild(store: Store, batch: int) -> Optional[PrebuiltLines]:
    """The live lines from one read snapshot of the view, without the writer lock (None: nothing to build
    from, e.g. an empty journal). The view is first caught up if the lock is free (never waited for)."""
    if store.read_only:
        return None
    store.refresh()
    with store.read_snapshot():
        cp = checkpoint.read_checkpoint(store.db)
        if cp is None:
            return None
        own = extension_events.position(store.db, store.extensions.name, cp.generation)
        fh = tempfile.TemporaryFile(dir=store.data_dir)
        ids, ends = bytearray(), array("q")
        try:
            for rows in store_lines.live_chunks(store.db, batch):
                fh.write(b"\n".join(row[0] for row in rows) + b"\n")
                for row in rows:
                    ids += row[1].encode("utf-8")
                    ends.append(len(ids))
            fh.flush()
        except BaseException:
            fh.close()
            raise
    return PrebuiltLines(fh, bytes(ids), ends, cp, own)


def _tail_names(store: Store, pre: PrebuiltLines) -> Optional[set[str]]:
    """The facts the lines after the snapshot name, or None when their effects are not all on those."""
    db = store.db
    cp = checkpoint.read_checkpoint(db)
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


def _snapshot_lines(pre: PrebuiltLines, skip: set[str]) -> Iterator[tuple[str, bytes]]:
    """(fact_id, line) of the snapshot's lines, in order, but those of `skip`."""
    ids = pre.fact_ids()
    pre.file.seek(0)
    pending = b""
    while True:
        chunk = pre.file.read(_READ_CHUNK)
        if not chunk:
            break
        buf = pending + chunk
        end = buf.rfind(b"\n") + 1
        pending = buf[end:]
        if end:
            for line in buf[:end - 1].split(b"\n"):
                fid = next(ids)
                if fid not in skip:
                    yield fid, line
    if pending or next(ids, None) is not None:
        raise PrebuildStale("the snapshot's lines file is short")


def _check_order(store: Store, pre: PrebuiltLines, names: set[str], batch: int) -> bool:
    """Whether the view's live facts but `names` are exactly the snapshot's facts but `names`, in order."""
    kept = (fid for fid in pre.fact_ids() if fid not in names)
    for rows in store_lines.live_order_chunks(store.db, batch):
        for fid, *_ in rows:
            if fid not in names and next(kept, None) != fid:
                return False
    return next(kept, None) is None


def live_chunks(store: Store, pre: PrebuiltLines, batch: int) -> Optional[Iterator[list[tuple]]]:
    """Under the writer lock, the view caught up: `store_lines.live_chunks(store.db, batch)`'s rows, the
    snapshot's lines reused for every fact the tail leaves alone; None when the snapshot cannot be used."""
    names = _tail_names(store, pre)
    if names is None or not _check_order(store, pre, names, batch):
        return None
    fresh = store_lines.live_lines_of(store.db, sorted(names))

    def chunks() -> Iterator[list[tuple]]:
        old = _snapshot_lines(pre, names)
        for rows in store_lines.live_order_chunks(store.db, batch):
            out = []
            for fid, stored_at, stored_ns, seq in rows:
                if fid in names:
                    out.append(fresh[fid])
                    continue
                was, line = next(old, (None, b""))
                if was != fid:
                    raise PrebuildStale(f"fact {fid} is not where the snapshot's lines have it")
                out.append((line, fid, stored_at, stored_ns, seq))
            yield out
        if next(old, None) is not None:
            raise PrebuildStale("the snapshot's lines hold a fact the view no longer has live")

    return chunks()
