"""A Store whose writes go through the cluster: build the events from this node's caught-up view,
publish them (acknowledged once a quorum of the stream has them), then mirror the stream up to that
message before returning, so the writing node reads its own write.

A mutation of one version chain is published on that chain's subject with the chain's last sequence
this node has applied as the expected last subject sequence: a concurrent write of the chain through
another node makes the publish fail, and the mutation is built again from the newer state.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import IO, Any, Callable, Optional

import blake3

from ..errors import Conflict, ReadOnlyStore
from ..facts import codec, view
from ..facts.store import Progress, Store
from .config import ClusterConfig, read_config
from .documents import FleetSegments
from .link import ChainMoved, ClusterLink, ClusterUnavailable, scrub_subject, subject_prefix
from .generation import publish_generation
from .mirror import Mirror, Position, chain_of, rewrite_journal, split_lines, stored_facts
from .raftlog import note, scrub_raft_logs

MAX_ATTEMPTS = 50


def chain_subject(group: str, tenant: str, entity: str, key: str) -> str:
    digest = blake3.blake3(json.dumps([tenant, entity, key]).encode("utf-8")).hexdigest()[:32]
    return f"{subject_prefix(group)}.chain.{digest}"


def _referenced_ids(obj: Any) -> set[str]:
    """Every fact id an encoded event names (fact_id, by_fact_id, ..._fact_ids), nested facts included."""
    found: set[str] = set()
    if isinstance(obj, dict):
        for name, value in obj.items():
            if "fact_id" in name and isinstance(value, str):
                found.add(value)
            else:
                found |= _referenced_ids(value)
    elif isinstance(obj, list):
        for value in obj:
            found |= _referenced_ids(value)
    return found


class ClusterStore(Store):
    """The data directory of a cluster node; `cluster.json` in it says which cluster."""

    # the replicated stream is cruxsql's own: horizon changes and re-verifications travel in it, so every
    # node applies them (a node's facts.jsonl mirrors the stream, written by no Crux daemon)
    EXTENSIONS_IN_JOURNAL = True

    def __init__(self, data_dir: Path | str, config: ClusterConfig, progress: Progress = None,
                 link: Optional[ClusterLink] = None, **options: Any) -> None:
        """`link`: a connection to `config`'s cluster already made (the store closes it), else one is made."""
        try:
            super().__init__(data_dir, progress=progress, **options)
        except BaseException:
            if link is not None:
                link.close()
            raise
        if self.read_only:
            if link is not None:
                link.close()
            raise ReadOnlyStore(f"{data_dir} is read-only: a cluster node mirrors the stream into it")
        self.config = config
        self.journal.rewrite = self._rewrite_as_generation  # type: ignore[method-assign]
        self.journal.rewrite_onto = self._rewrite_onto_as_generation  # type: ignore[method-assign]
        if link is not None:
            self.link = link
        try:
            if link is None:
                self.link = ClusterLink(config.urls, config.group)
            self.link.ensure_stream(config.replicas)
            self.mirror = Mirror(self.data_dir, self.link)
            self.segment_replica = FleetSegments(self.link, config.group, config.replicas,
                                                 config.store_paths())
            with self.writer_lock():
                self.mirror.catch_up(self, progress=progress)
        except BaseException:
            if hasattr(self, "link"):
                self.link.close()
            super().close()
            raise

    def close(self) -> None:
        self.link.close()
        super().close()

    def refresh(self, progress: Progress = None) -> view.ReplayStats:
        """Catch up with the local journal, then with the stream."""
        with self.writer_lock():
            stats = super().refresh(progress)
            self.mirror.catch_up(self, progress=progress)
            return stats

    def commit(self, build: Callable[[], list[codec.Event]],
               before_append: Optional[Callable[[list[codec.Event]], None]] = None) -> list[codec.Event]:
        """Build from this node's view, publish, mirror up to the acknowledged message. A mutation of one
        chain needs only that chain current here (its subject's last sequence says whether it is); any
        other is built after catching up with the whole stream."""
        caught_up = False
        for _ in range(MAX_ATTEMPTS):
            with self.writer_lock():
                Store.refresh(self)
                through = 0
                if caught_up:
                    through = self.link.last_seq()
                    self.mirror.catch_up(self, until=through)
                pos = self.mirror.position(self)
                events = build()
                lines = [codec.encode_event(e) for e in events]
                subject = self._subject(lines)
                expected_chain = expected_stream = None
                if ".chain." in subject:
                    expected_chain = self.link.last_subject_seq(subject)
                    if expected_chain > pos.seq:
                        self.mirror.catch_up(self, until=expected_chain)
                        continue  # the chain moved since this node last mirrored: build again
                elif not caught_up:
                    caught_up = True
                    continue
                else:
                    # built on the whole stream up to `through` (the position stays before a trailing
                    # incomplete generation): a message landing in between refuses the publish
                    expected_stream = through
            if before_append is not None:  # (an idempotency key's intent: kept by this node)
                before_append(events)
            payload = "".join(line + "\n" for line in lines).encode("utf-8")
            try:
                seq: Optional[int] = self._publish(subject, payload, expected_chain, expected_stream)
            except ChainMoved:
                seq = None  # lost the race: the stream moved since the build
                caught_up = True
            with self.writer_lock():
                self.mirror.catch_up(self, until=seq)
                if self._applied(lines, seq):
                    return events
        raise Conflict(f"gave up after {MAX_ATTEMPTS} attempts: other nodes keep writing the same facts")

    def _applied(self, lines: list[str], seq: Optional[int]) -> bool:
        """Whether the mutation published at `seq` (None: refused) is in this node's view, asked by identity,
        not by journal offset (a generation mirrored meanwhile rewrites the journal). A mutation that stores
        no fact is applied by every node once in the stream; one that stores facts is applied unless its
        versions lost their race, and its new fact ids (fresh for every build) say which."""
        facts = stored_facts(lines)
        if not facts:
            return seq is not None
        row = self.db.execute("SELECT 1 FROM facts WHERE fact_id = ?", (facts[0].fact_id,)).fetchone()
        return row is not None

    def _rewrite_as_generation(self, write_lines: Callable[[Callable], None],
                               whole_lines: bool = False) -> tuple[Path, int]:
        """Journal.rewrite on a node (compaction, erasure, retention): the new journal is published as a new
        stream generation, then this node's journal is rewritten to the same bytes; the older messages
        holding lines the compaction dropped are securely deleted (bytes overwritten on every replica's
        stream store), the rest purged, and every replica's Raft log compacted past them (raftlog.py).
        The caller holds the writer lock and has caught up."""
        data = bytearray()
        # `whole_lines`: emit takes bytes of newline-terminated lines (compaction), as in Journal.rewrite
        write_lines(data.extend if whole_lines else lambda line: data.extend(line.encode("utf-8") + b"\n"))
        after = self.mirror.position(self).seq
        first, last = publish_generation(self.link, self.config.group, bytes(data), after)
        lines = split_lines(bytes(data))
        path, size = rewrite_journal(self.journal, lines)
        self.mirror.advance(Position(last, size))
        kept, erased = set(lines), 0
        for msg in self.link.messages(1, first - 1):
            if any(line not in kept for line in split_lines(msg.payload)):
                self.link.erase(msg.seq)  # it carries what the compaction dropped: overwrite its bytes
                erased += 1
        self.link.purge_before(first)
        if erased:  # ... and in every replica's Raft log
            note(scrub_raft_logs(self.link, self.link.stream, scrub_subject(self.config.group),
                                 self.config.store_paths()))
        return path, size

    def _rewrite_onto_as_generation(self, head: IO[bytes], head_size: int,
                                    write_rest: Callable[[Callable], None]) -> tuple[Path, int]:
        """Journal.rewrite_onto on a node (a compaction whose head was written before the lock): the head's
        bytes and the rest go out as one new generation, as `_rewrite_as_generation`."""
        head.seek(0)
        prefix = head.read(head_size)

        def write_lines(emit: Callable) -> None:
            emit(prefix)
            write_rest(emit)

        return self._rewrite_as_generation(write_lines, whole_lines=True)

    def _publish(self, subject: str, payload: bytes, expected_chain: Optional[int],
                 expected_stream: Optional[int]) -> int:
        """Publish until acknowledged (the link retries through a leader election); a retry after a lost
        acknowledgement reuses the message id, so the stream stores the mutation once."""
        return self.link.publish(subject, payload, blake3.blake3(payload).hexdigest(), expected_chain,
                                 expected_stream)

    def _subject(self, lines: list[str]) -> str:
        """The chain subject when every fact the mutation names is in one version chain, else multi."""
        chains = {chain_of(f) for f in stored_facts(lines)}
        new_ids = {f.fact_id for f in stored_facts(lines)}
        for line in lines:
            for fact_id in _referenced_ids(json.loads(line)) - new_ids:
                row = self.db.execute("SELECT tenant_hash, entity, key FROM facts WHERE fact_id = ?",
                                      (fact_id,)).fetchone()
                if row is not None:
                    chains.add(tuple(row))
        if len(chains) == 1:
            return chain_subject(self.config.group, *next(iter(chains)))
        return f"{subject_prefix(self.config.group)}.multi"


def open_cluster_store(data_dir: Path | str, config: Optional[ClusterConfig] = None, **options: Any) -> ClusterStore:
    """Open a node's data directory; `config` defaults to the directory's `cluster.json`."""
    config = config or read_config(Path(data_dir))
    if config is None:
        raise ClusterUnavailable(f"{data_dir} is not bound to a cluster (no cluster.json): start "
                                 f"`cruxsql node --cluster nats://...` on it first")
    return ClusterStore(data_dir, config, **options)
