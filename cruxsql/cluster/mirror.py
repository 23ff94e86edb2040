"""A node's mirror of the stream: the journal events the cluster holds, appended byte for byte to the
local `facts.jsonl` and replayed into the view, in stream order.

`<data_dir>/cluster-position.json` records the last stream sequence mirrored and the journal offset it
ends at; it is written after the journal's fsync, so a crash leaves it at or behind the journal, and
the next catch-up matches the journal's tail against the stream's payloads and adopts it (nothing is
appended twice).

A stream message that stores a new version is applied only when its versions are newer than its
chains' current heads, judged on the state before it: every node decides the same way, and a writer
whose message lost that race (a concurrent store through another node, unseen when it built its
version) sees it absent and builds again. So a chain's versions are 1..N exactly once.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from ..errors import JournalError
from ..facts import codec, replay
from ..facts.journal import Journal
from ..facts.store import Store
from .generation import Collector, parse_part
from .link import ClusterLink, scrub_subject

POSITION_NAME = "cluster-position.json"
FLUSH_EVERY = 2000
_HEAD_KEEPING = ('{"op":"store",', '{"op":"store_batch",', '{"op":"supersede",')
"""Lines that cannot lower a chain's head version (a delete, a consolidation or a replace can)."""
Chain = tuple[str, str, str]


@dataclass(frozen=True)
class Position:
    seq: int
    journal_offset: int


def split_lines(payload: bytes) -> list[str]:
    """The journal lines a message carries (its payload is those lines, each ending in a newline)."""
    return payload.decode("utf-8").split("\n")[:-1]


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
        the writer lock."""
        pos = self.position(store)
        last = self.link.last_seq() if until is None else until
        if last <= pos.seq:
            return pos
        pending: list[str] = []
        heads: dict[Chain, int] = {}
        dirty = False  # a pending non-store event may have changed a chain's head
        seq = first = pos.seq
        parts = Collector(self.link.group)
        scrub = scrub_subject(self.link.group)
        for msg in self.link.messages(pos.seq + 1, last):
            if msg.subject == scrub:  # the Raft log scrub's filler and end mark: no journal lines
                seq = msg.seq
                continue
            generation = parts.offer(msg)
            if parse_part(self.link.group, msg.subject) is not None:
                if generation is not None:  # it replaces everything before it, pending lines included
                    pos = self._apply_generation(store, generation, msg.seq)
                    pending, heads, dirty, seq = [], {}, False, msg.seq
                continue  # an incomplete generation's parts: the position stays before them
            lines = split_lines(msg.payload)
            facts = stored_facts(lines)
            if facts and dirty:
                pos = self._flush(store, pending, seq)
                pending, heads, dirty = [], {}, False
            if facts and not self._newer(store, facts, heads):
                seq = msg.seq
                continue
            for fact in facts:
                heads[chain_of(fact)] = max(heads.get(chain_of(fact), 0), fact.version)
            dirty = dirty or not all(line.startswith(_HEAD_KEEPING) for line in lines)
            pending += lines
            seq = msg.seq
            if len(pending) >= FLUSH_EVERY:
                pos = self._flush(store, pending, seq)
                pending, heads, dirty = [], {}, False
            if progress:
                progress(msg.seq - first, last - first)
        if seq > pos.seq:
            pos = self._flush(store, pending, seq)
        return pos

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

    def _newer(self, store: Store, facts: list[codec.Fact], heads: dict[Chain, int]) -> bool:
        """Every fact's version is above its chain's head (as it stood before this message)."""
        for fact in facts:
            chain = chain_of(fact)
            head = heads.get(chain)
            if head is None:
                head = store.db.execute(
                    "SELECT max(version) FROM facts WHERE tenant_hash = ? AND entity = ? AND key = ? AND deleted = 0",
                    chain).get or 0
            if fact.version <= head:
                return False
        return True

    def _flush(self, store: Store, lines: list[str], seq: int) -> Position:
        if lines:
            _, end = store.journal.append(lines)
        else:
            st = store.journal.stat()
            end = st.st_size if st else 0
        pos = Position(seq, end)
        self._write(pos)
        replay.replay(store.db, store.journal, store.policy)
        return pos
