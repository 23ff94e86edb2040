"""The store: the write API (append to the journal, then replay into the view) and basic reads.

Every mutation: take the lock, catch the view up to the journal's end, append the event(s) with
fsync, replay the appended lines into SQLite (one transaction that also advances the checkpoint),
release. An event that is not durable in the journal is never visible in the view. Once the fsync has
returned, the write has happened and is reported so, even if the view's transaction failed (the next
reader or writer replays the lines); a write reported failed appended nothing.

Reads never take the writer lock: `refresh` catches the view up only when the lock is free, and
otherwise leaves the last committed view to answer (every acknowledged write is in it, since a write
is acknowledged after its view commit, or is repaired into it by the next catch-up); `read_snapshot`
keeps a read's statements on one SQLite snapshot.
"""

from __future__ import annotations

import difflib
import json
import math
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import apsw

from ..errors import Conflict, InvalidInput, JournalPoisoned, NotFound, ReadOnlyStore
from . import codec, extension_events, replay, replay_position, timestamps, verification, view, view_file
from .appended import replay_appended
from .busy import retry_busy
from .checkpointer import WalCheckpointer
from .codec import Fact
from .faults import crash_point
from .idempotency import IdempotencyJournal, KeyRecord, check_key, request_hash
from .journal import Journal
from .privacy import (
    NamespaceOwner,
    PrivacyPolicy,
    agent_private_entity,
    check_create,
    check_supersedes_target,
    check_target,
    global_policy,
)
from .verification import VerifyReport, remove_verify_scratch

Progress = Optional[Callable[[int, int], None]]
Placement = Callable[[list["StoreRequest"]], list["StoreRequest"]]
_STORE_FACT_KEYS = ("tenant_hash", "entity", "key", "value", "source_receipt", "confidence", "private",
                    "horizon_class", "actor")

_STORE_FACT_ALIASES = {"tenant": "tenant_hash", "tenant_id": "tenant_hash", "receipt": "source_receipt",
                       "horizon": "horizon_class"}


def _with_expected_key(unknown: str) -> str:
    """`tenant (did you mean tenant_hash?)`: the StoreFact key an unknown key most likely meant."""
    meant = _STORE_FACT_ALIASES.get(unknown.lower()) or next(
        iter(difflib.get_close_matches(unknown.lower(), _STORE_FACT_KEYS, n=1, cutoff=0.7)), None)
    return f"{unknown} (did you mean {meant}?)" if meant else unknown


@dataclass
class StoreRequest:
    """Crux's `StoreFact`: what a caller asks to store."""

    entity: str
    key: str
    value: str
    tenant_hash: str = "default"
    source_receipt: Optional[str] = None
    confidence: float = 1.0
    private: bool = False
    horizon_class: Optional[str] = None
    actor: Optional[str] = None
    agent: Optional[str] = None  # set by the surface from the connection, never read from a request

    @classmethod
    def from_obj(cls, obj: Any, where: str = "request") -> "StoreRequest":
        """Validate a decoded JSON object with the StoreFact keys; errors name the bad key."""
        if not isinstance(obj, dict):
            raise InvalidInput(f"{where}: expected a JSON object with entity, key and value")
        unknown = sorted(set(obj) - set(_STORE_FACT_KEYS))
        if unknown:
            raise InvalidInput(f"{where}: unknown key(s) {', '.join(_with_expected_key(k) for k in unknown)} "
                               f"(StoreFact keys: {', '.join(_STORE_FACT_KEYS)})")
        for name in ("entity", "key", "value"):
            if not isinstance(obj.get(name), str):
                raise InvalidInput(f"{where}: `{name}` is required and must be a string")
        for name in ("tenant_hash", "source_receipt", "horizon_class", "actor"):
            if obj.get(name) is not None and not isinstance(obj[name], str):
                raise InvalidInput(f"{where}: `{name}` must be a string")
        confidence = obj.get("confidence", 1.0)
        if isinstance(confidence, bool) or not isinstance(confidence, (int, float)):
            raise InvalidInput(f"{where}: `confidence` must be a number")
        private = obj.get("private", False)
        if not isinstance(private, bool):
            raise InvalidInput(f"{where}: `private` must be true or false")
        req = cls(
            entity=obj["entity"], key=obj["key"], value=obj["value"],
            tenant_hash=obj.get("tenant_hash") or "default", source_receipt=obj.get("source_receipt"),
            confidence=float(confidence), private=private, horizon_class=obj.get("horizon_class"),
            actor=obj.get("actor"),
        )
        try:
            req.check()
        except InvalidInput as exc:
            raise InvalidInput(f"{where}: {exc}") from None
        return req

    def check(self) -> None:
        """Refuse what no fact may hold: an empty entity or key, text that is not UTF-8, a confidence
        outside 0.0..=1.0, an unknown horizon class. (An empty value is allowed: Crux stores it.)"""
        for name in ("entity", "key"):
            if not getattr(self, name).strip():
                raise InvalidInput(f"{name} must not be empty")
        for name in ("entity", "key", "value", "tenant_hash", "source_receipt", "actor"):
            text = getattr(self, name)
            if text is not None:
                try:
                    text.encode("utf-8")
                except UnicodeEncodeError:
                    raise InvalidInput(f"{name} is not valid UTF-8 text: {text!r}") from None
        check_confidence(self.confidence)
        if self.horizon_class is not None:
            codec.parse_horizon(self.horizon_class)


def check_confidence(confidence: float) -> float:
    """Confidence must be finite and within 0.0..=1.0 (Crux never checks: docs/crux-compatibility.md)."""
    if not isinstance(confidence, (int, float)) or isinstance(confidence, bool) or not math.isfinite(confidence) \
            or not 0.0 <= confidence <= 1.0:
        raise InvalidInput(f"confidence must be a finite number within 0.0..=1.0, got {confidence!r}")
    return codec.to_f32(confidence)


class Store:
    """One data directory: `facts.jsonl` (the truth) and `cruxsql.db` (the view)."""

    # set_horizon / reverify go to cruxsql's own `cruxsql-fact-events.jsonl` (extension_events.py), not
    # to facts.jsonl, whose readers include Crux daemons; a cluster node keeps them in its stream
    EXTENSIONS_IN_JOURNAL = False

    def __init__(self, data_dir: Path | str, progress: Progress = None, policy: Optional[PrivacyPolicy] = None,
                 *, read_only: bool = False, lock_timeout: Optional[float] = None,
                 on_lock_wait: Optional[Callable[[Optional[int]], None]] = None) -> None:
        """Open `data_dir`. `read_only`: for a directory that cannot be written (a snapshot, a read-only
        mount): the view is a private in-memory copy caught up with the journal, no lock is taken, and
        every write raises ReadOnlyStore. `lock_timeout` / `on_lock_wait`: see `Journal`."""
        self.data_dir = Path(data_dir)
        self.read_only = read_only
        self.policy = policy or global_policy()
        self.journal = Journal(self.data_dir, lock_timeout, on_lock_wait)
        self.extensions = extension_events.journal_for(self.data_dir)
        self.checkpointer: Optional[WalCheckpointer] = None
        # What the view was last seen caught up with (see `refresh`): the journal's stat, the view's
        # data_version and this connection's total_changes. None: check in full.
        self._caught_up: Optional[tuple] = None
        self.idempotency = IdempotencyJournal(self.data_dir)
        self._snapshot_depth = 0
        if read_only:
            self.db: apsw.Connection = view_file.open_snapshot(self.data_dir / view_file.DB_NAME)
            self.quarantined = None
            self.last_replay = replay.replay(self.db, self.journal, self.policy, progress)
            extension_events.replay(self.db, self.extensions, self.policy)
            return
        self.data_dir.mkdir(parents=True, exist_ok=True)
        with self.journal.lock_unless_busy() as free:
            if not free and self._open_beside_writer():
                return
        with self.writer_lock():
            # Under the lock: on a fresh directory, processes started together would otherwise race to
            # create the schema (a deferred read-then-write transaction fails with SQLITE_BUSY).
            self.db = view_file.open_connection(self.data_dir / view_file.DB_NAME)
            self.checkpointer = WalCheckpointer(self.db, self.data_dir / view_file.DB_NAME, self.journal.lock_if_free)
            remove_verify_scratch(self.data_dir)
            self.quarantined = self._repair_journal()
            self.last_replay = replay.replay(self.db, self.journal, self.policy, progress)
            extension_events.replay(self.db, self.extensions, self.policy)

    def _open_beside_writer(self) -> bool:
        """Open while another process holds the writer lock, without waiting for it: possible when the
        view exists with the current schema (then the repair of a torn tail and the catch-up are left to
        the first call that finds the lock free). False: the caller must wait for the lock."""
        path = self.data_dir / view_file.DB_NAME
        if not view_file.is_wal_file(path):  # absent, or still being created by the lock's holder
            return False
        db: Optional[apsw.Connection] = None
        try:
            db = view_file.open_connection(path, migrate_schema=False)
            if view_file.pending_migrations(db):
                db.close()
                return False
            view_file.migrate(db)  # applies nothing (and takes no lock); refuses a newer schema
            self.db = db
        except (apsw.BusyError, apsw.LockedError):  # a view still being created: wait for the lock
            if db is not None:
                db.close()
            return False
        self.checkpointer = WalCheckpointer(self.db, path, self.journal.lock_if_free)
        self.quarantined = None
        self.last_replay = view.ReplayStats()
        return True

    # --- lifecycle -------------------------------------------------------------------------------

    def close(self) -> None:
        if self.checkpointer is not None:
            self.checkpointer.close()
        self.db.close()
        self.journal.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @contextmanager
    def writer_lock(self) -> Iterator[None]:
        """The cross-process writer lock; hold it for every mutation of the data directory.
        (Read-only: nothing to take; no one writes through a read-only directory.)"""
        if self.read_only:
            yield
            return
        with self.journal.lock():
            yield

    def view_for_queries(self) -> "Path | apsw.Connection":
        """What the SQL console queries: the view's file, or for a read-only store its caught-up in-memory
        view itself (never a copy on disk, where erasure could not reach it)."""
        return self.db if self.read_only else self.data_dir / view_file.DB_NAME

    def refresh(self, progress: Progress = None) -> view.ReplayStats:
        """Catch the view up with lines other processes (or a Crux daemon) appended, quarantining a torn
        tail first so nothing is ever appended onto it.

        Every write starts here, so the common case is cheap: when the journal's stat (inode, size,
        mtime, ctime), the view's `data_version` (bumped by another connection's commit) and this
        connection's `total_changes` are what they were when the view was last seen to end exactly at
        the journal's end, nothing can have changed and the full check (checkpoint read, a hash of the
        journal's last 4 KiB, torn-tail probe) is skipped.

        Never waits for a writer: when another thread or process holds the writer lock, the view is left
        as it was last committed (a writer acknowledges only after its view commit, so every
        acknowledged write is in it) and is caught up by a later call. Under the lock (every write, and
        the long mutations), it catches up whenever the fast path does not say the view is current."""
        if self.read_only:
            with self.writer_lock():
                stats = replay.replay(self.db, self.journal, self.policy, progress)
                extension_events.replay(self.db, self.extensions, self.policy)
                return stats
        if self._caught_up is not None and self._caught_up == self._sync_key():
            return view.ReplayStats()
        with self.journal.lock_unless_busy() as free:
            if not free:
                return view.ReplayStats()
            return self._catch_up(progress)

    def _catch_up(self, progress: Progress = None) -> view.ReplayStats:
        """Repair the journal's end and replay its tail, then cruxsql's own fact events, into the view
        (under the lock). A replay that met SQLITE_BUSY rolled its batch back and starts again from the
        checkpoint."""
        self._repair_journal()
        stats = retry_busy(lambda: replay.replay(self.db, self.journal, self.policy, progress))
        retry_busy(lambda: extension_events.replay(self.db, self.extensions, self.policy))
        self._note_caught_up()
        return stats

    @contextmanager
    def read_snapshot(self) -> Iterator[None]:
        """Run the block's reads on one SQLite snapshot (a read transaction), so that a read made of
        several statements never sees a write, or a compaction's swap, land between two of them. Nested
        blocks share the outermost snapshot; inside a caller's own transaction, nothing is opened."""
        opened = self._snapshot_depth == 0 and self.db.getautocommit()
        if opened:
            self.db.execute("BEGIN DEFERRED")
        self._snapshot_depth += 1
        try:
            yield
        finally:
            self._snapshot_depth -= 1
            if opened and not self.db.getautocommit():
                self.db.execute("COMMIT")

    @property
    def in_snapshot(self) -> bool:
        """Whether a `read_snapshot` block is open (a write to a derived table must wait for its end)."""
        return self._snapshot_depth > 0

    def rebuild(self, progress: Progress = None) -> view.ReplayStats:
        """Recreate the fact view from the journal alone."""
        with self.writer_lock():
            if self.read_only:
                stats = replay.rebuild(self.db, self.journal, self.policy, progress)
                extension_events.replay(self.db, self.extensions, self.policy)
                return stats
            self._repair_journal()
            stats = retry_busy(lambda: replay.rebuild(self.db, self.journal, self.policy, progress))
            retry_busy(lambda: extension_events.replay(self.db, self.extensions, self.policy))
            self._note_caught_up()
            return stats

    def _sync_key(self) -> Optional[tuple]:
        st = self.journal.stat()
        if st is None:
            return None
        ext = self.extensions.stat()
        return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns,
                self.db.execute("PRAGMA data_version").get, self.db.total_changes(),
                ext and (ext.st_ino, ext.st_size, ext.st_mtime_ns))

    def _note_caught_up(self) -> None:
        """Remember the state in which the view ends exactly at the journal's end (under the lock)."""
        key = self._sync_key()
        cp = replay_position.read_checkpoint(self.db)
        self._caught_up = key if key is not None and cp is not None and cp.byte_offset == key[1] else None

    def _repair_journal(self) -> Optional[Path]:
        """Quarantine what a crash left unacknowledged at the journal's end: a torn last line, then a
        multi-line mutation cut short past what the view has replayed. Returns the last quarantine file."""
        torn = self.journal.repair_torn_tail()
        torn = self.extensions.repair_torn_tail() or torn
        replayed = replay_position.replayed_offset(self.db, self.journal)
        group = self.journal.repair_incomplete_group(replayed) if replayed is not None else None
        return group or torn

    # --- writing ---------------------------------------------------------------------------------

    def commit(self, build: Callable[[], list[codec.Event]],
               before_append: Optional[Callable[[list[codec.Event]], None]] = None) -> list[codec.Event]:
        """The one write path: under the lock, catch up, call `build()` to make events from the current
        state, append them durably, and replay them into the view in a transaction committed after the
        journal's fsync. Returns the events. `before_append(events)` runs just before the append (an
        idempotency key's intent is written there).

        The outcome is exact: an error before the fsync returned means nothing was appended (a failed
        fsync poisons the journal and takes the lines back out); once it returned, the write is reported
        done even if the view's transaction failed (SQLITE_BUSY, an I/O error): the view is caught up
        from the journal right away if it can be, else by the next reader or writer."""
        if self.read_only:
            raise ReadOnlyStore(f"{self.data_dir} is read-only: nothing can be written to it")
        with self.writer_lock():
            self.refresh()  # nothing to repair or replay when the view was seen to end at the journal's end
            events = build()
            lines = [codec.encode_event(e) for e in events]
            if before_append is not None:
                before_append(events)
            pending = self.journal.write(lines)
            self._caught_up = None
            try:
                # One view transaction for the lines just written, committed only once the journal's
                # fsync has returned: nothing is visible before it is durable. On a slow disk the fsync
                # runs on the journal's thread while this transaction is prepared (see Journal.write).
                # A failed fsync raises JournalPoisoned here and rolls the transaction back. The lines
                # are replayed from the events in hand, not read back and decoded (appended.py).
                def apply() -> None:
                    replay_appended(self.db, self.journal, self.policy, events, lines, pending.start)
                    pending.wait()
                    crash_point("store-after-append")

                self._in_write_transaction(apply)
            except JournalPoisoned:
                raise
            except Exception:
                pending.wait()  # not durable after all: JournalPoisoned, the write did not happen
                try:  # durable: the write happened; repair the view from the journal now if possible
                    self._catch_up()
                except Exception:
                    pass  # the next reader or writer finds the view behind the journal and replays
                return events
            finally:
                pending.wait()
            self._note_caught_up()
            return events

    def commit_extension(self, build: Callable[[], list[codec.Event]]) -> list[codec.Event]:
        """`commit` for the events Crux has no op for: under the lock, catch up, build, append them to
        cruxsql-fact-events.jsonl (fsynced), then apply them to the view (extension_events.py)."""
        if self.EXTENSIONS_IN_JOURNAL:
            return self.commit(build)
        if self.read_only:
            raise ReadOnlyStore(f"{self.data_dir} is read-only: nothing can be written to it")
        with self.writer_lock():
            self.refresh()
            events = build()
            self.extensions.append([codec.encode_event(e) for e in events])
            self._caught_up = None
            extension_events.replay(self.db, self.extensions, self.policy)
            self._note_caught_up()
            return events

    def _in_write_transaction(self, work: Callable[[], Any]) -> None:
        """`work()` in a view transaction that takes SQLite's write lock up front (BEGIN IMMEDIATE: it
        waits in the busy handler for a reader's derived-table write, instead of failing later with a
        stale snapshot); inside a caller's transaction, a savepoint."""
        if not self.db.getautocommit():
            with self.db:
                work()
            return
        self.db.execute("BEGIN IMMEDIATE")
        try:
            work()
            self.db.execute("COMMIT")
        except BaseException:
            if not self.db.getautocommit():
                self.db.execute("ROLLBACK")
            raise

    def chain_key(self, req: StoreRequest) -> tuple[str, str, str]:
        """The (tenant, entity, key) chain a request stores into."""
        tenant = req.tenant_hash if req.tenant_hash.strip() else "default"
        entity = agent_private_entity(req.agent, req.entity) if req.private and req.agent else req.entity
        return tenant, entity, req.key

    def _chain_heads(self, chains: list[tuple[str, str, str]]) -> dict[tuple[str, str, str], tuple[str, int]]:
        """(fact_id, version) of the newest undeleted fact of each chain that has one, in one query (a
        1,000-fact batch asked once per fact spent more time looking than writing)."""
        rows = self.db.execute(
            "SELECT c.value ->> 0, c.value ->> 1, c.value ->> 2, f.fact_id, f.version FROM json_each(?) c "
            "JOIN facts f ON f.seq = (SELECT seq FROM facts WHERE tenant_hash = c.value ->> 0 AND entity = c.value ->> 1 "
            "AND key = c.value ->> 2 AND deleted = 0 ORDER BY seq DESC LIMIT 1)",
            (json.dumps(sorted(set(chains)), ensure_ascii=False),))
        return {(t, e, k): (fact_id, version) for t, e, k, fact_id, version in rows}

    def _build_fact(self, req: StoreRequest, now: int, prev: Optional[tuple[str, int]],
                    fact_id: Optional[str] = None) -> Fact:
        """The fact a (checked) request stores, after `prev` (its chain's head) if any."""
        tenant, entity, _ = self.chain_key(req)
        horizon = codec.parse_horizon(req.horizon_class) if req.horizon_class is not None \
            else codec.default_horizon_for_entity(req.entity)
        return Fact(
            fact_id=fact_id or "f_" + uuid.uuid4().hex, tenant_hash=tenant, entity=entity, key=req.key, value=req.value,
            source_receipt=req.source_receipt, confidence=check_confidence(req.confidence), stored_at=now,
            tokens=codec.token_cost(req.value), version=prev[1] + 1 if prev else 1,
            supersedes=prev[0] if prev else None, private=self.policy.enforce(entity, req.private),
            horizon_class=horizon, actor=req.actor,
        )

    def store(self, entity: str, key: str, value: str, *, tenant: str = "default", confidence: float = 1.0,
              source_receipt: Optional[str] = None, private: bool = False, horizon_class: Optional[str] = None,
              actor: Optional[str] = None, agent: Optional[str] = None,
              owner: Optional[NamespaceOwner] = None, idempotency_key: Optional[str] = None) -> Fact:
        """Store a new version of (tenant, entity, key): a `store` line, then a `supersede` line if it
        retires a predecessor. With `private` and an `agent`, the fact is that agent's own, stored under
        `__agent::<agent>::<entity>` as Crux's `store_fact` does. An entity under a create-reserved
        prefix is refused (`ReservedEntityPrefix`) unless `owner` owns it. `idempotency_key`: see
        `store_batch`."""
        req = StoreRequest(entity, key, value, tenant, source_receipt, confidence, private, horizon_class, actor,
                           agent)
        return self.store_batch([req], as_batch=False, owner=owner, idempotency_key=idempotency_key)[0]

    def store_batch(self, requests: list[StoreRequest], as_batch: bool = True,
                    owner: Optional[NamespaceOwner] = None, idempotency_key: Optional[str] = None,
                    chain: bool = True, place: Optional[Placement] = None) -> list[Fact]:
        """Store several facts as one `store_batch` event (all built first, as Crux does). Nothing is
        stored if any request names a create-reserved entity `owner` does not own. Requests for the same
        (entity, key) chain in request order: v1, v2, ..., one head (Crux builds each from the head before
        the batch: the same version twice, two heads). `chain=False` writes what Crux's store_batch
        writes (for journals that must match a Crux daemon's, e.g. tests of what Crux data looks like).

        `idempotency_key`: a retry with the same key (same agent and tenant, same requests, within the
        window) returns the first call's facts and appends nothing (idempotency.py).

        `place(requests)`: called under the writer lock with the view caught up, returns the requests to
        store in their place (same entities, e.g. keys numbered after what is stored already, so two
        writers never take the same key); the idempotency key identifies the requests as given."""
        if not requests:
            raise InvalidInput("store_batch needs at least one request")
        for req in requests:
            check_create(req.entity, owner)
        op = "store_batch" if as_batch else "store"
        keyed = self._keyed(idempotency_key, op, requests[0].tenant_hash, requests[0].agent,
                            None if idempotency_key is None else
                            [{k: getattr(r, k) for k in (*_STORE_FACT_KEYS, "agent")} for r in requests])
        with self.writer_lock():
            fact_ids: list[Optional[str]] = [None] * len(requests)
            if keyed is not None:
                first, rec = self._first_result(keyed)
                if first is not None:
                    return [f for f in first if isinstance(f, Fact)]
                if rec is not None:
                    fact_ids = list(rec.fact_ids)
            facts = self._store_batch_locked(requests, as_batch, fact_ids, keyed, chain, place)
        return facts

    def _store_batch_locked(self, given: list[StoreRequest], as_batch: bool, fact_ids: list[Optional[str]],
                            keyed: Optional[tuple[str, str, str, str]], chain: bool,
                            place: Optional[Placement]) -> list[Fact]:
        def build() -> list[codec.Event]:
            requests = given if place is None else place(given)
            for req in requests:
                req.check()
            chains = [self.chain_key(r) for r in requests]
            heads = self._chain_heads(chains)
            facts = []
            stored_at: dict[tuple[str, str, str], int] = {}
            for req, key, fact_id in zip(requests, chains, fact_ids):
                # each fact stamped when it is built, as Crux's try_store_bulk does (build_fact reads the clock
                # once per fact: crates/corecrux-memory/src/fact_store.rs); a later request of a chain comes at
                # least 1 ns after the one before it, so every order by stored_at (a compaction's included)
                # keeps the versions in order
                born = timestamps.now_ns()
                if key in stored_at:
                    born = max(born, stored_at[key] + 1)
                fact = self._build_fact(req, born, heads.get(key), fact_id)
                if chain:
                    heads[key], stored_at[key] = (fact.fact_id, fact.version), born
                facts.append(fact)
            head: list[codec.Event] = [codec.StoreBatchEvent(facts)] if as_batch else [codec.StoreEvent(f) for f in facts]
            at = timestamps.format_event_time(timestamps.now_ns())
            return head + [codec.SupersedeEvent(f.supersedes, f.fact_id, at) for f in facts if f.supersedes]

        events = self._commit_keyed(build, keyed)
        facts = events[0].facts if as_batch and events[0].op == "store_batch" else [e.fact for e in events if e.op == "store"]
        # What replay stored is what was built (privacy and the tenant default are applied when building,
        # ids are fresh, and the batch's supersede lines only touch older facts), except where a
        # latest-only control fact removed its chain, possibly a fact of this very batch: read those back.
        if not any(f.private and f.key == "content" and f.entity.startswith(view.LATEST_ONLY_PREFIXES)
                   for f in facts):
            return facts
        stored = {f.fact_id: f for f in view.iter_facts(
            self.db, "WHERE fact_id IN carray(?)", (apsw.carray(tuple(f.fact_id for f in facts)),))}
        missing = [f.fact_id for f in facts if f.fact_id not in stored]
        if missing:
            raise NotFound(f"unknown fact id {missing[0]!r}")
        return [stored[f.fact_id] for f in facts]

    def _require(self, fact_id: str, tenant: Optional[str]) -> tuple:
        """(tenant_hash, deleted, superseded_by, entity) of a fact; NotFound names the id."""
        row = self.db.execute(
            "SELECT tenant_hash, deleted, superseded_by, entity FROM facts WHERE fact_id = ?", (fact_id,)
        ).fetchone()
        if row is None or (tenant is not None and row[0] != tenant):
            where = f" in tenant {tenant!r}" if tenant is not None else ""
            raise NotFound(f"unknown fact id {fact_id!r}{where}")
        return row

    def _consolidation_guard(self, fact_id: str) -> None:
        if self.db.execute(
            "SELECT 1 FROM consolidation_sources cs JOIN facts s ON s.fact_id = cs.source_fact_id "
            "WHERE (cs.source_fact_id = ?1 AND s.superseded_by = cs.canonical_fact_id) OR cs.canonical_fact_id = ?1 "
            "LIMIT 1", (fact_id,),
        ).fetchone():
            raise Conflict(f"fact {fact_id} is a consolidation member; undo the consolidation first")

    def _require_writable(self, fact_id: str, tenant: Optional[str], action: str,
                          owner: Optional[NamespaceOwner]) -> tuple:
        row = self._require(fact_id, tenant)
        check_target(fact_id, row[3], action, owner)
        return row

    def delete(self, fact_id: str, tenant: Optional[str] = None, owner: Optional[NamespaceOwner] = None,
               idempotency_key: Optional[str] = None, agent: Optional[str] = None) -> None:
        """Mark a fact deleted (its text stays in the journal until compaction). A daemon-owned fact is
        refused (`ReservedTarget`) unless `owner` owns it. `idempotency_key` (scoped to `tenant` and
        `agent`): a retry of a delete that happened returns quietly, appending nothing."""
        keyed = self._keyed(idempotency_key, "delete", tenant or "default", agent, fact_id)
        if keyed is not None:
            with self.writer_lock():
                first, _ = self._first_result(keyed)
                if first is None:
                    self._delete_locked(fact_id, tenant, owner, keyed)
            return
        self._delete_locked(fact_id, tenant, owner, None)

    def _delete_locked(self, fact_id: str, tenant: Optional[str], owner: Optional[NamespaceOwner],
                       keyed: Optional[tuple[str, str, str, str]]) -> None:
        def build() -> list[codec.Event]:
            row = self._require_writable(fact_id, tenant, "delete", owner)
            if row[1]:
                raise Conflict(f"fact {fact_id} is already deleted")
            self._consolidation_guard(fact_id)
            return [codec.DeleteEvent(fact_id, timestamps.format_event_time(timestamps.now_ns()))]

        self._commit_keyed(build, keyed)

    # --- idempotency keys ------------------------------------------------------------------------

    def _keyed(self, key: Optional[str], op: str, tenant: str, agent: Optional[str],
               request: Any) -> Optional[tuple[str, str, str, str]]:
        """(scope, key, op, request hash) of a keyed write, or None without a key."""
        if key is None:
            return None
        scope = f"{tenant or 'default'}\x1f{agent or ''}"
        return scope, check_key(key), op, request_hash(op, request)

    def _first_result(self, keyed: tuple[str, str, str, str]) -> tuple[Optional[list], Optional[KeyRecord]]:
        """Under the lock: the first result of a keyed write that happened ((facts or [fact_id]), record),
        or (None, record) when its key is unknown or its first attempt never reached the journal (then
        the write is made again, with the record's fact ids). Conflict when its facts are gone."""
        scope, key, op, req_hash = keyed
        self._catch_up()
        self.idempotency.load()
        rec = self.idempotency.lookup(scope, key, op, req_hash)
        if rec is None:
            return None, None
        ids = apsw.carray(tuple(rec.fact_ids))
        if op == "delete":
            row = self.db.execute("SELECT deleted FROM facts WHERE fact_id = ?", (rec.fact_ids[0],)).fetchone()
            return ([rec.fact_ids[0]] if rec.done or (row is not None and row[0]) else None), rec
        stored = {f.fact_id: f for f in view.iter_facts(self.db, "WHERE fact_id IN carray(?)", (ids,))}
        if stored:
            return [stored[i] for i in rec.fact_ids if i in stored], rec
        named = self.db.execute("SELECT 1 FROM journal_event_facts WHERE fact_id IN carray(?) LIMIT 1",
                                (ids,)).fetchone()
        if rec.done or named:
            raise Conflict(f"idempotency key {key!r}: the facts its first call stored have since been removed "
                           "(compacted or erased); nothing was stored again")
        return None, rec

    def _commit_keyed(self, build: Callable[[], list[codec.Event]],
                      keyed: Optional[tuple[str, str, str, str]]) -> list[codec.Event]:
        """`commit`, with a key's intent journaled before the append and its completion after."""
        if keyed is None:
            return self.commit(build)
        scope, key, op, req_hash = keyed

        def intend(events: list[codec.Event]) -> None:
            ids = [e.fact_id for e in events if e.op == "delete"] if op == "delete" else \
                [f.fact_id for e in events for f in codec.event_facts(e) if e.op in ("store", "store_batch")]
            self.idempotency.intend(scope, key, op, req_hash, ids)

        events = self.commit(build, before_append=intend)
        try:
            self.idempotency.finish(scope, key)
        except OSError:
            pass  # the intent and the facts in the journal already say the write happened
        return events

    def supersede(self, fact_id: str, by_fact_id: str, tenant: Optional[str] = None,
                  owner: Optional[NamespaceOwner] = None) -> None:
        """Mark `fact_id` as superseded by `by_fact_id` (both in one tenant). A daemon-owned target is
        refused (`ReservedSupersedesTarget`) unless `owner` owns it."""

        def build() -> list[codec.Event]:
            target, by = self._require(fact_id, tenant), self._require(by_fact_id, tenant)
            check_supersedes_target(fact_id, target[3], owner)
            if fact_id == by_fact_id:
                raise InvalidInput(f"fact {fact_id} cannot supersede itself")
            if target[0] != by[0]:
                raise Conflict(f"facts {fact_id} and {by_fact_id} are in different tenants")
            self._consolidation_guard(fact_id)
            return [codec.SupersedeEvent(fact_id, by_fact_id, timestamps.format_event_time(timestamps.now_ns()))]

        self.commit(build)

    def clear_supersede(self, fact_id: str, tenant: Optional[str] = None,
                        owner: Optional[NamespaceOwner] = None) -> None:
        """Make a superseded fact current again (daemon-owned facts: only their `owner`)."""

        def build() -> list[codec.Event]:
            row = self._require_writable(fact_id, tenant, "clear the supersession of", owner)
            if row[2] is None:
                raise Conflict(f"fact {fact_id} is not superseded")
            self._consolidation_guard(fact_id)
            return [codec.ClearSupersedeEvent(fact_id, timestamps.format_event_time(timestamps.now_ns()))]

        self.commit(build)

    def set_validity(self, fact_id: str, valid_from: Optional[int] = None, valid_to: Optional[int] = None,
                     tenant: Optional[str] = None, owner: Optional[NamespaceOwner] = None) -> None:
        """Set (or clear, with None) the half-open valid-time interval [valid_from, valid_to)
        (daemon-owned facts: only their `owner`)."""
        for bound in (valid_from, valid_to):
            if bound is not None:
                timestamps.check_chrono_range(bound, bound)
        if valid_from is not None and valid_to is not None and valid_to <= valid_from:
            raise InvalidInput("valid_to must be later than valid_from")

        def build() -> list[codec.Event]:
            self._require_writable(fact_id, tenant, "set the validity of", owner)
            return [codec.SetValidityEvent(fact_id, valid_from, valid_to,
                                           timestamps.format_event_time(timestamps.now_ns()))]

        self.commit(build)

    def set_horizon(self, fact_id: str, horizon_class: str, tenant: Optional[str] = None,
                    owner: Optional[NamespaceOwner] = None) -> None:
        """Change a fact's freshness horizon, durably in cruxsql-fact-events.jsonl (Crux keeps it in memory
        only and has no journal op for it; daemon-owned facts: only their `owner`)."""
        horizon = codec.parse_horizon(horizon_class)

        def build() -> list[codec.Event]:
            if self._require_writable(fact_id, tenant, "set the horizon of", owner)[1]:
                raise Conflict(f"fact {fact_id} is deleted")
            return [codec.SetHorizonEvent(fact_id, horizon, timestamps.format_event_time(timestamps.now_ns()))]

        self.commit_extension(build)

    def reverify(self, fact_id: str, tenant: Optional[str] = None, owner: Optional[NamespaceOwner] = None) -> Fact:
        """Record that a fact was re-verified now, durably in cruxsql-fact-events.jsonl (Crux keeps it in
        memory only and has no journal op for it; daemon-owned facts: only their `owner`)."""

        def build() -> list[codec.Event]:
            if self._require_writable(fact_id, tenant, "re-verify", owner)[1]:
                raise Conflict(f"fact {fact_id} is deleted")
            return [codec.ReverifyEvent(fact_id, timestamps.now_ns())]

        self.commit_extension(build)
        return self.get(fact_id)

    # --- reading ---------------------------------------------------------------------------------

    def get(self, fact_id: str, tenant: Optional[str] = None) -> Fact:
        """One fact by id (deleted ones included); NotFound names the id."""
        facts = list(view.iter_facts(self.db, "WHERE fact_id = ?", (fact_id,)))
        if not facts or (tenant is not None and facts[0].tenant_hash != tenant):
            where = f" in tenant {tenant!r}" if tenant is not None else ""
            raise NotFound(f"unknown fact id {fact_id!r}{where}")
        return facts[0]

    def history(self, entity: str, key: str, tenant: str = "default") -> list[Fact]:
        """Every version of (tenant, entity, key), deleted ones included, in version order."""
        return list(view.iter_facts(
            self.db, "WHERE tenant_hash = ? AND entity = ? AND key = ? ORDER BY version, seq", (tenant, entity, key)))

    def counts(self) -> dict[str, int]:
        """How many journal events, facts and live facts the view holds."""
        row = self.db.execute(
            "SELECT (SELECT count(*) FROM journal_events), (SELECT count(*) FROM facts), "
            "(SELECT count(*) FROM live_facts)").get
        return {"journal_events": row[0], "facts": row[1], "live_facts": row[2]}

    # --- verification ----------------------------------------------------------------------------

    def verify(self) -> VerifyReport:
        """Events by op, skipped events, corrupt lines, quarantined tails, and view == fresh replay
        (`verification.verify`)."""
        return verification.verify(self)


def open_store(data_dir: Path | str, progress: Progress = None) -> Store:
    """Open (creating if needed) the store in `data_dir`."""
    return Store(data_dir, progress=progress)
