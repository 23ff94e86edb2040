"""A node's mirror of the stream: the journal events the cluster holds, appended byte for byte to the
local `facts.jsonl` and replayed into the view, in stream order.

`<data_dir>/cluster-position.json` records the last stream sequence mirrored and the journal offset it
ends at; it is written after the journal's fsync, so a crash leaves it at or behind the journal, and
the next catch-up matches the journal's tail against the stream's payloads and adopts it (nothing is
appended twice).

A stream message that stores a new version is applied only when its versions are newer than its
chains' current heads, judged on the state before it: every node decides the same way, and a writer
whose message lost that race (a concurrent store through another node, unseen when it built its
version) sees it absent and builds again. So a chain's versions are 1..N exactly once. Heads are read
from the view and followed in memory across the messages judged together (`Heads`), so that judging
many at once decides as judging each after the one before was applied (tests/cluster/test_catchup.py).

A node far behind goes by the bulk path (`_BulkSink`): the lines decoded once, appended in large fsynced
chunks, and replayed from the decoded lines into one view transaction (`bulk.range_replay`); a node a
few messages behind appends and replays each stretch (`_RowSink`).
"""

from __future__ import annotations

import gc
import json
import os
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, ContextManager, Iterator, NamedTuple, Optional

import apsw

from ..errors import InvalidInput, JournalError
from ..facts import bulk, codec, replay, replay_position, view
from ..facts.bulk import decode_appended
from ..facts.faults import crash_point
from ..facts.journal import MAX_RECORD_BYTES, Journal
from ..facts.store import Store
from .generation import Collector, PartName, parse_part, part_subject_prefix
from .link import ClusterLink, scrub_subject

POSITION_NAME = "cluster-position.json"
FLUSH_EVERY = 2000
"""Lines a node fewer than BULK_FROM messages behind appends and replays at once, at most."""
BULK_FROM = 2000
"""Messages behind from which a catch-up goes by the bulk path."""
CHUNK_BYTES = 8 * 1024 * 1024
"""Bytes the bulk path appends (and fsyncs) to the journal at once."""
_STORES = (b'{"op":"store",', b'{"op":"store_batch",')
_HEAD_KEEPING = _STORES + (b'{"op":"supersede",',)
"""Lines that cannot lower a chain's head version (a delete, a consolidation or a replace can)."""
Chain = tuple[str, str, str]
_SCRUB = PartName("", 0, 0)
"""Marks the Raft log scrub's messages among a batch's (generation parts have their PartName)."""


@dataclass(frozen=True)
class Position:
    seq: int
    journal_offset: int


def split_lines(payload: bytes) -> list[str]:
    """The journal lines a message carries (its payload is those lines, each ending in a newline)."""
    return payload.decode("utf-8").split("\n")[:-1]


def split_raw(payload: bytes) -> list[bytes]:
    """`split_lines`, each line left in bytes (UnicodeDecodeError for a payload that is not UTF-8, as there)."""
    if not payload.isascii():
        payload.decode("utf-8")
    return payload.split(b"\n")[:-1]


def rewrite_journal(journal: Journal, lines: list[str]) -> tuple[Path, int]:
    """Atomically replace the journal with `lines` (the base `Journal.rewrite`, one event per line)."""
    def write_lines(emit: Callable[[str], None]) -> None:
        for line in lines:
            emit(line)
    return Journal.rewrite(journal, write_lines)


def stored_facts(lines: list[str]) -> list[codec.Fact]:
    """The facts that store events among `lines` create (undecodable lines carry none)."""
    facts = []
    for line in lines:
        if line.startswith(('{"op":"store",', '{"op":"store_batch",')):
            try:
                facts += codec.event_facts(codec.decode_event(line.encode("utf-8")))
            except codec.CorruptLine:
                pass
    return facts


def chain_of(fact: codec.Fact) -> Chain:
    return (fact.tenant_hash, fact.entity, fact.key)


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for the block (if it was on). A bulk catch-up keeps tens of
    thousands of decoded lines, payloads and heads alive at once, and the collections its allocations
    trigger traverse them again and again: ~2 s of CPU per 100,000 messages (27 full collections), vs
    ~0.6 s in a local rebuild of the same lines. It makes next to no cyclic garbage (after 20,000 stored
    messages, `gc.collect()` found no unreachable object), and the collector resumes when the block ends."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


class Mirror:
    def __init__(self, data_dir: Path, link: ClusterLink) -> None:
        self.path = Path(data_dir) / POSITION_NAME
        self.link = link

    def _read(self) -> Optional[Position]:
        try:
            obj = json.loads(self.path.read_text(encoding="utf-8"))
            return Position(int(obj["seq"]), int(obj["journal_offset"]))
        except FileNotFoundError:
            return None
        except (ValueError, KeyError, TypeError):
            return None  # torn by a crash: adopt the journal from the start

    def _write(self, pos: Position) -> None:
        """Replace the position file, without fsync: it is written after the journal's fsync, so a crash
        leaves it at this position or an earlier one (or unreadable: the start), and catching up from an
        earlier position adopts the journal's tail. It is never ahead of the journal."""
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps({"stream": self.link.stream, "seq": pos.seq,
                                   "journal_offset": pos.journal_offset}) + "\n", encoding="utf-8")
        os.replace(tmp, self.path)

    def position(self, store: Store) -> Position:
        """Where the mirror stands, adopting a journal tail a crash left past the recorded position.
        The caller holds the writer lock."""
        st = store.journal.stat()
        size = st.st_size if st else 0
        pos = self._read() or Position(0, 0)
        if size == pos.journal_offset:
            return pos
        return self._adopt(store, pos)

    def _adopt(self, store: Store, pos: Position) -> Position:
        """Match the journal past `pos` against the stream: messages whose bytes come next were appended
        (others were rejected when applied), and a generation the journal starts with was applied."""
        data = store.journal.path.read_bytes() if store.journal.stat() else b""
        at, seq = pos.journal_offset, pos.seq
        parts = Collector(self.link.group)
        for msg in self.link.messages(pos.seq + 1, self.link.last_seq()):
            generation = parts.offer(msg)
            if parse_part(self.link.group, msg.subject) is not None:
                if generation is not None:
                    if not data.startswith(generation):
                        break  # crashed before its rename: the next catch-up applies it
                    at, seq = len(generation), msg.seq
                continue
            if at == len(data):
                break
            if data.startswith(msg.payload, at):
                at += len(msg.payload)
            seq = msg.seq  # a message whose bytes are not next was rejected when it was applied
        if at != len(data):
            raise JournalError(f"{store.journal.path}: its bytes past the mirrored position are not in the stream "
                               f"{self.link.stream} (a data directory joins a cluster empty, or as a copy of a "
                               f"node of the same cluster)")
        adopted = Position(seq, at)
        self._write(adopted)
        return adopted

    def catch_up(self, store: Store, until: Optional[int] = None,
                 progress: Optional[Callable[[int, int], None]] = None) -> Position:
        """Mirror stream messages up to `until` (default: the stream's last sequence). The caller holds
        the writer lock. A node BULK_FROM messages behind or more appends them in large fsynced chunks
        and replays them in bulk (one view transaction); one fewer behind appends and replays each
        stretch between its flushes (a write's own message: one line, row by row)."""
        pos = self.position(store)
        last = self.link.last_seq() if until is None else until
        if last <= pos.seq:
            return pos
        cp = replay_position.read_checkpoint(store.db)
        st = store.journal.stat()
        if last - pos.seq >= BULK_FROM or (cp.byte_offset if cp else 0) != (st.st_size if st else 0):
            replay.replay(store.db, store.journal, store.policy)  # heads are judged on the view
            cp = replay_position.read_checkpoint(store.db)
        if last - pos.seq >= BULK_FROM:
            defer = last - pos.seq >= (cp.line_count if cp else 0)
            with collector_paused():
                return self._mirror(store, _BulkSink(self, store, pos, defer=defer), last, progress)
        return self._mirror(store, _RowSink(self, store, pos), last, progress)

    def _mirror(self, store: Store, sink: "_Sink", last: int, progress: Optional[Callable[[int, int], None]]) -> Position:
        """Judge the messages after the sink's position up to `last` and give the sink those accepted."""
        pos = sink.pos
        heads = Heads(store, sink.index_chains)
        parts = Collector(self.link.group)
        scrub, generations = scrub_subject(self.link.group), part_subject_prefix(self.link.group)
        first = pos.seq
        try:
            for batch in self.link.batches(pos.seq + 1, last):
                kinds = [_SCRUB if msg.subject == scrub else parse_part(self.link.group, msg.subject)
                         if msg.subject.startswith(generations) else None for msg in batch]
                decoded = [[decode_appended(raw) for raw in split_raw(msg.payload)] if kind is None else []
                           for msg, kind in zip(batch, kinds)]
                facts_of = [stored(lines) for lines in decoded]
                heads.look_up([f for facts in facts_of for f in facts])
                for msg, kind, decoded_lines, facts in zip(batch, kinds, decoded, facts_of):
                    if kind is _SCRUB:  # the Raft log scrub's filler and end mark: no journal lines
                        sink.seq = msg.seq
                        continue
                    # a write abandons a generation's parts collected so far
                    generation = parts.offer(msg) if kind is not None or parts.collecting else None
                    if kind is not None:
                        if generation is not None:  # it replaces everything before it, pending lines included
                            sink.generation(generation, msg.seq)
                            heads.forget()
                        continue  # an incomplete generation's parts: the position stays before them
                    if facts and heads.dirty:
                        sink.flush()
                        heads.forget()
                    sink.seq = msg.seq  # judged: a message whose lines are not accepted is skipped
                    if not facts or heads.newer(facts):
                        heads.accept(decoded_lines, facts)
                        sink.add(msg.payload, decoded_lines)
                    if progress:
                        progress(msg.seq - first, last - first)
                if sink.end_of_batch():
                    heads.applied()
        except BaseException:
            sink.abandon()
            raise
        return sink.finish()

    def _apply_generation(self, store: Store, data: bytes, seq: int) -> Position:
        """Replace the journal with a generation's bytes (crash-atomic), rebuild the view from it, and
        truncate the WAL (secure_delete zeroed the old rows' cells; the WAL still held copies)."""
        lines = split_lines(data)
        _, size = rewrite_journal(store.journal, lines)
        pos = Position(seq, size)
        self._write(pos)
        replay.replay(store.db, store.journal, store.policy)
        store.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the rebuild's WAL frames held the old rows
        return pos

    def advance(self, pos: Position) -> None:
        """Record a position the caller reached itself (the compacting node, after its own rewrite)."""
        self._write(pos)


class Stored(NamedTuple):
    """A fact a store line creates, as the acceptance rule sees it."""

    fact_id: str
    chain: Chain  # as the line names it (the head it is judged against)
    version: int
    raises: Optional[Chain]  # the chain whose head it becomes once applied; None: it may lower a head


def stored(lines: list[bulk.Decoded]) -> list[Stored]:
    """The facts the store lines among `lines` create (a corrupt line carries none)."""
    facts: list[Stored] = []
    for d in lines:
        if d.payload is None or not d.raw.startswith(_STORES):
            continue
        if d.op is not None:
            for v in d.payload:  # type: ignore[attr-defined]  # line_decoder.decode_fast's fact values
                facts.append(Stored(v[0], (v[1], v[2], v[3]), v[11], _raised(v[1], v[2], v[3], v[10])))
        else:
            for f in codec.event_facts(d.payload):  # type: ignore[arg-type]  # the codec's event
                facts.append(Stored(f.fact_id, chain_of(f), f.version,
                                    _raised(f.tenant_hash, f.entity, f.key, f.deleted)))
    return facts


def _raised(tenant: str, entity: str, key: str, deleted: bool) -> Optional[Chain]:
    """The view's chain whose head a stored fact raises (its tenant defaulted); None for a fact stored
    deleted, or one that may be a latest-only control fact (that removes its chain first)."""
    if deleted or (key == "content" and entity.startswith(view.LATEST_ONLY_PREFIXES)):
        return None
    return (tenant or "default", entity, key)


class Heads:
    """Each version chain's head (its highest live version) as the view has it once the messages
    accepted so far are applied: read from the view, then followed in memory while accepted messages
    can only raise heads; once one may lower a head (`dirty`), the caller applies them and `forget`s."""

    def __init__(self, store: Store, before_reading: Callable[[], None]) -> None:
        """`before_reading`: called before heads are first read from the view by chain."""
        self.db = store.db
        self.before_reading = before_reading
        # the view holds no fact: every head is one followed here (until `forget`), none is read
        self.complete = self.db.execute("SELECT 1 FROM facts LIMIT 1").fetchone() is None
        self.heads: dict[Chain, int] = {}
        self.in_view: Optional[set[str]] = set()  # ids among those looked up that the view holds (None: ask it)
        self.accepted: set[str] = set()  # ids accepted since the view last held every accepted line
        self.dirty = False

    def look_up(self, facts: list[Stored]) -> None:
        """Read the heads and ids `facts` need from the view, one statement each."""
        chains = set() if self.complete else {c for f in facts for c in (f.chain, f.raises)
                                               if c is not None and c not in self.heads}
        if chains:
            self.before_reading()
            self.heads.update(((t, e, k), v or 0) for t, e, k, v in self.db.execute(
                "SELECT j.value ->> 0, j.value ->> 1, j.value ->> 2, (SELECT max(version) FROM facts "
                "WHERE tenant_hash = j.value ->> 0 AND entity = j.value ->> 1 AND key = j.value ->> 2 "
                "AND deleted = 0) FROM json_each(?) j", (json.dumps(sorted(chains)),)))
        ids = tuple({f.fact_id for f in facts})
        self.in_view = {r[0] for r in self.db.execute("SELECT fact_id FROM facts WHERE fact_id IN carray(?)",
                                                      (apsw.carray(ids),))} if ids else set()

    def applied(self) -> None:
        """The view holds every line accepted so far (the accepted ids need not be kept)."""
        self.accepted = set()

    def head(self, chain: Chain) -> int:
        if chain not in self.heads:
            if self.complete:
                return 0
            self.before_reading()
            self.heads[chain] = self.db.execute(
                "SELECT max(version) FROM facts WHERE tenant_hash = ? AND entity = ? AND key = ? AND deleted = 0",
                chain).get or 0
        return self.heads[chain]

    def newer(self, facts: list[Stored]) -> bool:
        """Every fact's version is above its chain's head (as it stood before this message)."""
        heads = self.heads
        for f in facts:
            head = heads.get(f.chain)
            if f.version <= (self.head(f.chain) if head is None else head):
                return False
        return True

    def accept(self, lines: list[bulk.Decoded], facts: list[Stored]) -> None:
        heads, accepted, in_view = self.heads, self.accepted, self.in_view
        for f in facts:
            if f.fact_id in accepted or (f.fact_id in in_view if in_view is not None else self._in_view(f.fact_id)):
                continue  # a duplicate id: the view keeps the fact it has
            accepted.add(f.fact_id)
            if f.raises is None:
                self.dirty = True
                continue
            head = heads.get(f.raises)
            if head is None:
                head = self.head(f.raises)
            if f.version > head:
                heads[f.raises] = f.version
        for d in lines:
            if not d.raw.startswith(_HEAD_KEEPING):
                self.dirty = True

    def _in_view(self, fact_id: str) -> bool:
        if self.in_view is not None:
            return fact_id in self.in_view
        return self.db.execute("SELECT 1 FROM facts WHERE fact_id = ?", (fact_id,)).fetchone() is not None

    def forget(self) -> None:
        """The view now holds every accepted line, and changed in a way not followed here: read heads
        and ids from it again."""
        self.heads, self.in_view, self.accepted, self.dirty, self.complete = {}, None, set(), False, False


class _Sink:
    """Where a catch-up's accepted lines go: appended to the journal, and replayed into the view."""

    def __init__(self, mirror: Mirror, store: Store, pos: Position) -> None:
        self.mirror, self.store, self.pos = mirror, store, pos
        self.seq = pos.seq  # the last message judged, its lines (if accepted) added
        self.lines: list[str] = []  # accepted, not appended yet

    def add(self, payload: bytes, decoded: list[bulk.Decoded]) -> None:
        """A message accepted: its `payload`, and its lines `decoded`."""
        raise NotImplementedError

    def _append_lines(self) -> int:
        """Append the lines accepted since the last append; returns the journal's size."""
        if self.lines:
            _, end = self.store.journal.append(self.lines)
            self.lines = []
            return end
        st = self.store.journal.stat()
        return st.st_size if st else 0

    def index_chains(self) -> None:
        """The view's version chains are about to be read (their index, if deferred, is built first)."""

    def end_of_batch(self) -> bool:
        """After each fetched batch; returns whether the view now holds every line accepted."""
        return False

    def flush(self) -> None:
        """Make the view hold every line accepted so far (for the next judgements)."""
        raise NotImplementedError

    def generation(self, data: bytes, seq: int) -> None:
        raise NotImplementedError

    def finish(self) -> Position:
        raise NotImplementedError

    def abandon(self) -> None:
        """After a failure: what was appended is replayed by the next catch-up (`catch_up` replays the
        journal first when the view is behind it)."""

    def _append(self) -> None:
        """Append the accepted lines (fsync), then record the position: at `seq`, every line is in."""
        end = self._append_lines()
        crash_point("mirror-after-append")
        self.pos = Position(self.seq, end)
        self.mirror._write(self.pos)
        crash_point("mirror-after-position")


class _RowSink(_Sink):
    """A few messages: each stretch between flushes appended, then replayed (`replay.replay`)."""

    def add(self, payload: bytes, decoded: list[bulk.Decoded]) -> None:
        self.lines += split_lines(payload)
        if len(self.lines) >= FLUSH_EVERY:
            self.flush()

    def flush(self) -> None:
        self._append()
        replay.replay(self.store.db, self.store.journal, self.store.policy)

    def generation(self, data: bytes, seq: int) -> None:
        self.lines = []
        self.pos = self.mirror._apply_generation(self.store, data, seq)
        self.seq = seq

    def finish(self) -> Position:
        if self.seq > self.pos.seq:
            self.flush()
        return self.pos


class _BulkSink(_Sink):
    """Many messages: lines appended and fsynced CHUNK_BYTES at a time, replayed from the decoded lines
    in hand into one view transaction (`bulk.range_replay`) that commits after the last append."""

    def __init__(self, mirror: Mirror, store: Store, pos: Position, defer: bool) -> None:
        super().__init__(mirror, store, pos)
        self.payloads: list[bytes] = []  # accepted messages', not appended yet
        self.decoded: list[bulk.Decoded] = []  # accepted lines, not given to the range replay yet
        self.bytes = 0  # of the lines appended since the last chunk
        self._open(defer)

    def _open(self, defer: bool) -> None:
        self._block: Optional[ContextManager[bulk.RangeReplay]] = bulk.range_replay(
            self.store.db, self.store.journal, self.store.policy, defer)
        self.ranged = self._block.__enter__()

    def add(self, payload: bytes, decoded: list[bulk.Decoded]) -> None:
        if len(payload) > MAX_RECORD_BYTES:  # as Journal.append refuses it
            for d in decoded:
                if d.length - 1 > MAX_RECORD_BYTES:
                    raise InvalidInput(f"fact journal record exceeds the {MAX_RECORD_BYTES}-byte append ceiling "
                                       f"({d.length - 1} bytes)")
        self.payloads.append(payload)
        self.decoded += decoded

    def _append_lines(self) -> int:
        if self.payloads:
            _, end = self.store.journal.append_lines(b"".join(self.payloads))
            self.payloads = []
            return end
        return super()._append_lines()

    def _hand_over(self) -> None:
        start = self.ranged.offset
        self.ranged.add(self.decoded)
        self.decoded = []
        self.bytes += self.ranged.offset - start

    def end_of_batch(self) -> bool:
        self._hand_over()
        if self.bytes >= CHUNK_BYTES:
            self._append()
            self.bytes = 0
        if self.ranged.pending >= bulk.BATCH_LINES:
            self.ranged.apply()
            return True
        return False

    def flush(self) -> None:
        self._hand_over()
        self.ranged.apply()

    def index_chains(self) -> None:
        self.ranged.index_chains()

    def _commit(self) -> None:
        self._hand_over()
        self._append()
        block, self._block = self._block, None
        if block is not None:
            block.__exit__(None, None, None)

    def generation(self, data: bytes, seq: int) -> None:
        self._commit()  # what came before the generation: replaced by it at once
        self.pos = self.mirror._apply_generation(self.store, data, seq)
        self.seq = seq
        self._open(False)

    def finish(self) -> Position:
        self._commit()
        return self.pos

    def abandon(self) -> None:
        block, self._block = self._block, None
        if block is not None:
            block.__exit__(*sys.exc_info())  # rolled back
