"""The connection to the JetStream cluster, for synchronous callers: nats-py runs on an asyncio loop in a
background thread; every method submits a coroutine there and waits for its result.

Stream layout of one tenant group `G`: stream `CRUXSQL_G` on subjects `cruxsql.G.>`; a mutation that
touches one version chain goes on `cruxsql.G.chain.<digest>`, any other on `cruxsql.G.multi`; the Raft log scrub's filler goes on
`cruxsql.G.scrub`, which no node applies. Nodes
report themselves in the key-value bucket `CRUXSQL_G_NODES`.
"""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Callable, Coroutine, Iterator, Optional, TypeVar

import nats
import nats.errors
import nats.js.errors
from nats.js import api

from ..errors import CruxsqlError, InvalidInput
from .config import redact_all
from .pull import ApartFetch, Pull, StreamMessage

T = TypeVar("T")
WRONG_LAST_SEQUENCE = (10071,)
"""JetStream's error codes for an expected last (subject) sequence that is not the last one."""
NO_SUITABLE_PEERS = 10005
"""JetStream's "no suitable peers for placement": also answered while a peer is offline or catching up."""
DUPLICATE_WINDOW_SECONDS = 120.0
FETCH_BATCH = 4096
FETCH_BYTES = 16 * 1024 * 1024
"""A fetch asks for up to this many messages and bytes (a larger message comes alone)."""
PREFETCH_BATCHES = 4
APART_FROM = 2000
"""Messages from which a range is fetched by a child process (`pull.ApartFetch`), off this one's GIL."""


class ClusterUnavailable(CruxsqlError):
    """The cluster did not answer (no quorum, servers down, timeout): nothing was acknowledged."""


class ClusterRefused(CruxsqlError):
    """JetStream answered with an error (e.g. three replicas asked of a single server)."""

    def __init__(self, message: str, err_code: Optional[int]) -> None:
        super().__init__(message)
        self.err_code = err_code


class ChainMoved(CruxsqlError):
    """Another node wrote the version chain since this node last applied it (expected-last-sequence)."""


@dataclass(frozen=True)
class StreamState:
    name: str
    last_seq: int
    first_seq: int
    messages: int
    leader: Optional[str]
    replicas: list[dict[str, Any]]


def stream_name(group: str) -> str:
    return f"CRUXSQL_{group}"


def subject_prefix(group: str) -> str:
    return f"cruxsql.{group}"


def scrub_subject(group: str) -> str:
    """The stream's subject for the Raft log scrub's filler (see raftlog.py): no node applies it."""
    return f"{subject_prefix(group)}.scrub"


class ClusterLink:
    """One NATS connection (reconnecting across the given servers) and its JetStream context."""

    def __init__(self, urls: list[str], group: str = "default", timeout: float = 2.0,
                 patience: float = 30.0) -> None:
        """`timeout`: one request's wait; `patience`: how long idempotent requests (reads, publishes with
        a message id) keep retrying while the cluster elects a new leader or a server comes back."""
        self.urls, self.group, self.timeout, self.patience = urls, group, timeout, patience
        self.stream = stream_name(group)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="cruxsql-nats", daemon=True)
        self._thread.start()
        try:
            # the first connection tries each server twice; once connected, reconnect for ever (a node
            # rides out any server's restart)
            self._nc = self._run(nats.connect(servers=urls, connect_timeout=2, reconnect_time_wait=0.25,
                                              max_reconnect_attempts=1, allow_reconnect=True,
                                              error_cb=self._quiet, disconnected_cb=self._none,
                                              reconnected_cb=self._none, closed_cb=self._none),
                                  2.0 * len(urls) + 3)
        except nats.errors.Error as exc:  # a URL nats-py cannot use (config.check_url catches the known ones)
            self._stop_loop()
            raise InvalidInput(f"--cluster: {redact_all(urls)}: {exc}") from None
        except BaseException:
            self._stop_loop()
            raise
        self._nc.options["max_reconnect_attempts"] = -1
        self._js = self._nc.jetstream(timeout=timeout)

    @staticmethod
    async def _quiet(exc: Exception) -> None:
        """nats-py logs reconnect errors by default; a node riding out a server's death stays quiet."""

    @staticmethod
    async def _none() -> None:
        pass

    def _run(self, coro: Coroutine[Any, Any, T], timeout: Optional[float] = None) -> T:
        return self._result(self._submit(coro), timeout)

    def _submit(self, coro: Coroutine[Any, Any, T]) -> "Future[T]":
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def _result(self, future: "Future[T]", timeout: Optional[float] = None) -> T:
        try:
            return future.result(timeout if timeout is not None else self.timeout + 5)
        except (asyncio.TimeoutError, TimeoutError, nats.errors.TimeoutError, nats.errors.NoServersError,
                nats.errors.ConnectionClosedError, nats.errors.NoRespondersError, nats.js.errors.NoStreamResponseError,
                nats.js.errors.ServiceUnavailableError, ConnectionError, OSError) as exc:
            future.cancel()
            raise ClusterUnavailable(f"the NATS cluster at {redact_all(self.urls)} did not answer: "
                                     f"{type(exc).__name__} {exc}".rstrip()) from None
        except nats.js.errors.NotFoundError:
            raise
        except nats.js.errors.APIError as exc:
            raise ClusterRefused(f"JetStream refused the request: {exc.description} (error {exc.err_code})",
                                 exc.err_code) from None

    def _retry(self, make: Callable[[], Coroutine[Any, Any, T]]) -> T:
        deadline = time.monotonic() + self.patience
        while True:
            try:
                return self._run(make())
            except ClusterUnavailable:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def close(self) -> None:
        try:
            self._run(self._nc.close(), 5)
        except CruxsqlError:
            pass
        self._stop_loop()

    def _stop_loop(self) -> None:
        async def drain() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        try:
            asyncio.run_coroutine_threadsafe(drain(), self._loop).result(5)
        except (asyncio.TimeoutError, TimeoutError):
            pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        if not self._thread.is_alive():
            self._loop.close()

    # --- the stream ------------------------------------------------------------------------------

    def ensure_stream(self, replicas: int) -> None:
        """Create the group's stream if missing (file storage, `replicas` copies, direct gets allowed)."""
        config = api.StreamConfig(name=self.stream, subjects=[f"{subject_prefix(self.group)}.>"],
                                  storage=api.StorageType.FILE, num_replicas=replicas,
                                  duplicate_window=DUPLICATE_WINDOW_SECONDS, allow_direct=True)

        async def ensure() -> None:
            try:
                await self._js.stream_info(self.stream)
            except nats.js.errors.NotFoundError:
                await self._js.add_stream(config)
        deadline = time.monotonic() + self.patience
        while True:
            try:
                self._retry(ensure)
                return
            except ClusterRefused as exc:
                if exc.err_code == NO_SUITABLE_PEERS and time.monotonic() < deadline:
                    time.sleep(0.25)  # a peer (re)joining the meta group is not yet current: placement waits
                    continue
                raise ClusterRefused(f"cannot create the stream {self.stream} with {replicas} replica(s): {exc} "
                                     f"(a single server takes --replicas 1)", exc.err_code) from None

    def publish(self, subject: str, payload: bytes, msg_id: str, expected_subject_seq: Optional[int],
                expected_last_seq: Optional[int] = None) -> int:
        """Publish and wait for the stream's acknowledgement (a quorum has it); returns its sequence.
        A retried `msg_id` within the duplicate window is stored once. Raises ChainMoved when
        `expected_subject_seq` is not the subject's last sequence (or `expected_last_seq` the stream's)."""
        headers: dict[str, str] = {api.Header.MSG_ID: msg_id}
        if expected_subject_seq is not None:
            headers[api.Header.EXPECTED_LAST_SUBJECT_SEQUENCE] = str(expected_subject_seq)
        if expected_last_seq is not None:
            headers[api.Header.EXPECTED_LAST_SEQUENCE] = str(expected_last_seq)
        try:
            ack = self._retry(lambda: self._js.publish(subject, payload, stream=self.stream, headers=dict(headers)))
        except ClusterRefused as exc:
            if exc.err_code in WRONG_LAST_SEQUENCE or "wrong last sequence" in str(exc):
                raise ChainMoved(f"{subject}: the stream moved past the expected sequence") from None
            raise
        return ack.seq

    def state(self) -> StreamState:
        info = self._retry(lambda: self._js.stream_info(self.stream))
        cluster = info.cluster
        replicas = [{"name": p.name, "current": p.current, "offline": bool(p.offline), "lag": p.lag or 0}
                    for p in (cluster.replicas or [])] if cluster else []
        return StreamState(self.stream, info.state.last_seq, info.state.first_seq, info.state.messages,
                           cluster.leader if cluster else None, replicas)

    def last_seq(self) -> int:
        return self.state().last_seq

    def messages(self, start: int, end: int) -> Iterator[StreamMessage]:
        """Messages with sequence start..end inclusive, in order (erased or purged ones are absent)."""
        for batch in self.batches(start, end):
            yield from batch

    def batches(self, start: int, end: int) -> Iterator[list[StreamMessage]]:
        """`messages(start, end)` in batches of up to FETCH_BATCH messages (FETCH_BYTES), up to
        PREFETCH_BATCHES of them fetched ahead while the caller handles earlier ones; from APART_FROM
        messages, by a child process as far as it gets (then here). A few messages are asked of the
        leader one by one."""
        if end < start:
            return
        if end - start < 8:
            found = [m for m in map(self.get, range(start, end + 1)) if m is not None]
            if found:
                yield found
            return
        if end - start + 1 >= APART_FROM:
            apart = ApartFetch(self.urls, self.stream, start, end, self.timeout, FETCH_BATCH, FETCH_BYTES,
                               PREFETCH_BATCHES)
            try:
                for batch in self._lead(apart, start, end):
                    start = batch[-1].seq + 1
                    yield batch
                for batch in apart.batches() if start <= end else ():
                    if batch[0].seq < start:  # its first batch(es): fetched here already
                        batch = [m for m in batch if m.seq >= start]
                    if batch:
                        start = batch[-1].seq + 1
                        yield batch
            finally:
                apart.close()
        pull: Optional[Pull] = None
        producing: Optional["Future[None]"] = None
        try:
            while start <= end:
                try:
                    if pull is None:
                        pull = self._retry(lambda: self._open_pull(start))  # noqa: B023 (called within this iteration)
                    if producing is None:
                        producing = self._submit(pull.produce(start, end))
                    got = self._run(pull.ready.get(), 2 * self.timeout + 5)
                    if got is not None and not got:  # nothing there now: wait for some (the consumer's server may lag)
                        producing = None
                        got = [m for m in self._run(pull.fetch(min(FETCH_BATCH, end - start + 1), self.timeout),
                                                    2 * self.timeout + 5) if m.seq <= end]
                        if not got:
                            # the range's rest holds no message for that consumer: erased, or not there yet
                            # (the leader says which, one message at a time)
                            message, pull = self.get(start), None
                            start += 1
                            if message is not None:
                                yield [message]
                            continue
                    if got is None:
                        raise ClusterUnavailable("a fetch failed")
                except ClusterUnavailable:
                    if producing is not None:
                        producing.cancel()
                    producing, pull = None, None  # the consumer's server went away: a new consumer from `start`
                    if self.last_seq() < start:
                        return
                    continue
                start = got[-1].seq + 1
                yield got
        finally:
            if producing is not None:
                producing.cancel()

    def _lead(self, apart: ApartFetch, start: int, end: int) -> Iterator[list[StreamMessage]]:
        """Batches from `start` fetched here while the child starts (until it has written something, or
        a fetch here finds nothing or fails: the child, then this process's own loop, go on)."""
        pull: Optional[Pull] = None
        while start <= end and not apart.ready():
            try:
                if pull is None:
                    pull = self._run(self._open_pull(start))
                got = [m for m in self._run(pull.fetch(min(FETCH_BATCH, end - start + 1), 0.0), 2 * self.timeout + 5)
                       if m.seq <= end]
            except (ClusterUnavailable, ClusterRefused, nats.js.errors.NotFoundError):
                return
            if not got:
                return
            start = got[-1].seq + 1
            yield got

    async def _open_pull(self, start: int) -> Pull:
        return await Pull.open(self._nc, self._js, self.stream, start, self.timeout, FETCH_BATCH, FETCH_BYTES,
                               PREFETCH_BATCHES)

    def get(self, seq: int) -> Optional[StreamMessage]:
        """One message, asked of the stream leader: a direct get may be answered by a replica that has not
        applied it yet, and a message taken for erased would never be mirrored."""
        try:
            raw = self._retry(lambda: self._js.get_msg(self.stream, seq))
        except nats.js.errors.NotFoundError:
            return None
        return StreamMessage(raw.seq or seq, raw.subject or "", raw.data or b"")

    def last_subject_seq(self, subject: str) -> int:
        """The sequence of the last message on `subject` (0 when it has none). A replica may answer (a
        direct get): a stale answer only makes the expected-sequence publish fail and be retried."""
        try:
            raw = self._retry(lambda: self._js.get_last_msg(self.stream, subject, direct=True))
        except nats.js.errors.NotFoundError:
            return 0
        return raw.seq or 0

    def erase(self, seq: int) -> None:
        """Delete one message with its bytes overwritten on every replica (JetStream's secure delete)."""
        try:
            self._retry(lambda: self._js.delete_msg(self.stream, seq))
        except nats.js.errors.NotFoundError:
            pass

    def purge_before(self, seq: int) -> None:
        """Remove every message before `seq` from the stream (on every replica)."""
        self._retry(lambda: self._js.purge_stream(self.stream, seq=seq))

    # --- requests between nodes (core NATS) ------------------------------------------------------

    def serve(self, subject: str) -> None:
        """Queue every request sent to `subject`; `requests()` hands them to the caller's thread."""
        self._requests: "queue.SimpleQueue[tuple[str, bytes]]" = queue.SimpleQueue()

        async def take(msg: Any) -> None:
            self._requests.put((msg.reply, msg.data))
        self._retry(lambda: self._nc.subscribe(subject, cb=take))

    def requests(self) -> list[tuple[str, bytes]]:
        out = []
        while not self._requests.empty():
            out.append(self._requests.get())
        return out

    def reply(self, reply_to: str, payload: bytes) -> None:
        async def send() -> None:
            await self._nc.publish(reply_to, payload)
            await self._nc.flush()
        self._run(send())

    def gather(self, subject: str, payload: bytes, expect: int, timeout: float) -> list[bytes]:
        """Send one request and collect replies until `expect` came or `timeout` passed."""
        async def ask() -> list[bytes]:
            got: list[bytes] = []
            enough = asyncio.Event()

            async def take(msg: Any) -> None:
                got.append(msg.data)
                if len(got) >= expect:
                    enough.set()
            inbox = self._nc.new_inbox()
            sub = await self._nc.subscribe(inbox, cb=take)
            await self._nc.publish(subject, payload, reply=inbox)
            try:
                await asyncio.wait_for(enough.wait(), timeout)
            except asyncio.TimeoutError:
                pass
            await sub.unsubscribe()
            return got
        return self._run(ask(), timeout + self.timeout + 5)

    # --- node registry ---------------------------------------------------------------------------

    def _nodes(self, replicas: int):
        async def bucket():
            name = f"{self.stream}_NODES"
            try:
                return await self._js.key_value(name)
            except nats.js.errors.BucketNotFoundError:
                return await self._js.create_key_value(bucket=name, history=1, replicas=replicas)
        return bucket()

    def report_node(self, name: str, record: bytes, replicas: int) -> None:
        async def put() -> None:
            kv = await self._nodes(replicas)
            await kv.put(name, record)
        self._retry(put)

    def node_reports(self, replicas: int) -> dict[str, bytes]:
        async def read() -> dict[str, bytes]:
            kv = await self._nodes(replicas)
            # The bucket's keys from its stream's subject counts (one request), not `kv.keys()`: that
            # watches the bucket through a consumer and, under load, could end before the first key
            # and report none.
            prefix = f"$KV.{self.stream}_NODES."
            info = await self._js.stream_info(f"KV_{self.stream}_NODES", subjects_filter=prefix + ">")
            out = {}
            for subject in sorted(info.state.subjects or {}):
                try:
                    entry = await kv.get(subject[len(prefix):])
                except nats.js.errors.KeyNotFoundError:
                    continue  # deleted since the count was taken
                out[entry.key] = entry.value or b""
            return out
        return self._retry(read)
