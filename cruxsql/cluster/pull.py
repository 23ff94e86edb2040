"""Fetching a stretch of the stream through an ephemeral pull consumer, in this process (`Pull`, used by
`link.ClusterLink.batches`) or in a child process that writes the batches to a pipe (`ApartFetch`).

A long catch-up fetches apart: nats-py parses every message and its headers in Python (~10 µs of CPU a
message), and in the node's process that runs on the NATS loop's thread, under the GIL the replay needs
(the replay measured 20-30% slower beside it). The child imports nothing of cruxsql (run by path: the
package's import alone takes a second), so this module needs only nats-py and the standard library. The
child delivers what its consumer delivers, in order, and stops at anything else (nothing there now, a
timeout, a lost connection): the caller goes on from the next sequence in its own process, where the
retries and the leader's answers for erased messages are.

The pipe carries frames: `<BII` (kind, count, blob bytes); a batch (kind 1) is followed by `count`
records `<QHI` (stream sequence, subject bytes, payload bytes) and the blob (each message's subject
then payload); kind 0 ends the stream of frames.
"""

from __future__ import annotations

import asyncio
import json
import os
import select
import struct
import subprocess
import sys
from typing import Any, Iterator, NamedTuple, Optional

import nats
import nats.aio.msg
import nats.errors
from nats.js import api

HEAD = struct.Struct("<BII")
RECORD = struct.Struct("<QHI")
_BATCH, _END = 1, 0
# run by path with the interpreter's own sys.path: `-c` would put the working directory first and
# a script's own directory (this package's, with modules named config, store...) would shadow others
_BOOT = "import runpy, sys; sys.path.pop(0); runpy.run_path(sys.argv[1], run_name='__main__')"


class StreamMessage(NamedTuple):
    seq: int
    subject: str
    payload: bytes


class Pull:
    """An ephemeral pull consumer from one sequence, whose fetched messages a subscription's callback
    collects (nats-py's `fetch` awaits each message on its own: ~4x the time per message)."""

    def __init__(self, nc: Any, stream: str, name: str, timeout: float, batch: int, max_bytes: int,
                 prefetch: int) -> None:
        self.nc, self.stream, self.name, self.timeout = nc, stream, name, timeout
        self.batch, self.max_bytes = batch, max_bytes
        # batches fetched ahead (`produce`): a list of messages, [] when none was there, None for a failure
        self.ready: asyncio.Queue[Optional[list[StreamMessage]]] = asyncio.Queue(prefetch)

    @classmethod
    async def open(cls, nc: Any, js: Any, stream: str, start: int, timeout: float, batch: int, max_bytes: int,
                   prefetch: int) -> "Pull":
        config = api.ConsumerConfig(deliver_policy=api.DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=start,
                                    ack_policy=api.AckPolicy.NONE, inactive_threshold=30.0, mem_storage=True,
                                    num_replicas=1)
        info = await js.add_consumer(stream, config)
        return cls(nc, stream, info.name, timeout, batch, max_bytes, prefetch)

    async def produce(self, start: int, end: int) -> None:
        """Fetch start..end batch after batch into `ready`, until the end, a fetch finding nothing, or a failure."""
        try:
            while start <= end:
                got = [m for m in await self.fetch(min(self.batch, end - start + 1), 0.0) if m.seq <= end]
                await self.ready.put(got)
                if not got:
                    return
                start = got[-1].seq + 1
        except asyncio.CancelledError:
            raise
        except Exception:  # a timeout, the connection lost...: the caller starts a new consumer
            await self.ready.put(None)

    async def fetch(self, want: int, wait: float) -> list[StreamMessage]:
        """Up to `want` messages: those there now (`wait` 0), else the first to come within `wait` s.
        Each request has its own inbox, so a late reply to an earlier one is never taken for this one's."""
        nc = self.nc
        got: list[StreamMessage] = []
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        limited = [True]  # a message larger than max_bytes is asked for alone, without the limit

        async def take(msg: Any) -> None:
            if done.done():
                return
            if not msg.reply:  # a status (no more messages, request expired, batch full of bytes...)
                if not got and limited[0] and (msg.headers or {}).get("Status") == "409" \
                        and "MaxBytes" in (msg.headers or {}).get("Description", ""):
                    limited[0] = False
                    await ask(1)
                    return
                done.set_result(None)
                return
            got.append(StreamMessage(stream_seq(msg.reply), msg.subject, msg.data))
            if len(got) >= want:
                done.set_result(None)

        inbox = nc.new_inbox()

        async def ask(batch: int) -> None:
            request: dict[str, Any] = {"batch": batch}
            if limited[0]:
                request["max_bytes"] = self.max_bytes
            if wait:
                request["expires"] = int(wait * 1e9)
            else:
                request["no_wait"] = True
            await nc.publish(f"$JS.API.CONSUMER.MSG.NEXT.{self.stream}.{self.name}",
                             json.dumps(request).encode(), reply=inbox)

        sub = await nc.subscribe(inbox, cb=take, pending_msgs_limit=self.batch * 4,
                                 pending_bytes_limit=self.max_bytes * 4)
        try:
            await ask(want)
            await asyncio.wait_for(done, wait + self.timeout)
        finally:
            try:
                await sub.unsubscribe()
            except nats.errors.Error:
                pass  # the connection closed meanwhile: the subscription is gone with it
        return got


def stream_seq(reply: str) -> int:
    """The stream sequence in a JetStream message's reply subject (`$JS.ACK.<stream>.<consumer>.<delivered>.
    <stream seq>...`, or the form with domain and account hash)."""
    tokens = reply.split(".")
    return int(tokens[5] if len(tokens) == 9 else tokens[nats.aio.msg.Msg.Ack.StreamSeq])


# --- fetching apart ------------------------------------------------------------------------------------


class ApartFetch:
    """A child process fetching start..end, started at once (its interpreter and nats-py take a few tenths
    of a second to start: the caller can fetch the first batches itself until it is `ready`)."""

    def __init__(self, urls: list[str], stream: str, start: int, end: int, timeout: float, batch: int,
                 max_bytes: int, prefetch: int) -> None:
        self.start, self.end = start, end
        self.patience = 2 * timeout + 10  # connecting, creating the consumer, one fetch
        request = {"urls": urls, "stream": stream, "start": start, "end": end, "timeout": timeout, "batch": batch,
                   "max_bytes": max_bytes, "prefetch": prefetch}
        self.child: Optional[subprocess.Popen[bytes]] = None
        try:
            self.child = subprocess.Popen([sys.executable, "-c", _BOOT, os.path.abspath(__file__)],
                                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                          bufsize=0)
            assert self.child.stdin is not None
            self.child.stdin.write(json.dumps(request).encode("utf-8") + b"\n")  # credentials never in argv
            self.child.stdin.close()
        except OSError:  # no interpreter to start (an embedded one), or the child gone already
            self.close()

    def ready(self) -> bool:
        """Whether the child has written something (or ended), or there is no child."""
        if self.child is None or self.child.stdout is None:
            return True
        return bool(select.select([self.child.stdout.fileno()], [], [], 0)[0])

    def batches(self) -> Iterator[list[StreamMessage]]:
        """Its batches, in order, until the child stops (at the end, or at anything it does not handle: the
        caller goes on from the sequence after the last batch). A child silent for longer than its own
        fetch's timeout allows is taken as stopped."""
        if self.child is None or self.child.stdout is None:
            return
        fd, start = self.child.stdout.fileno(), self.start
        while True:
            head = _read(fd, HEAD.size, self.patience)
            if head is None:
                return
            kind, count, size = HEAD.unpack(head)
            if kind != _BATCH or not count:
                return
            table = _read(fd, RECORD.size * count, self.patience)
            blob = _read(fd, size, self.patience) if table is not None else None
            if table is None or blob is None:
                return
            got = _messages(table, blob)
            if got is None or got[0].seq < start or got[-1].seq > self.end:
                return
            start = got[-1].seq + 1
            yield got

    def close(self) -> None:
        """Stop the child (killed if still running) and reap it."""
        child, self.child = self.child, None
        if child is not None:
            if child.poll() is None:
                child.kill()
            child.wait()
            for pipe in (child.stdin, child.stdout):
                if pipe is not None:
                    try:
                        pipe.close()
                    except OSError:  # a request the child never read: nothing more to say
                        pass


def _messages(table: bytes, blob: bytes) -> Optional[list[StreamMessage]]:
    """A batch frame's messages; None when the records do not add up to the blob."""
    got, at = [], 0
    for seq, subject_bytes, payload_bytes in RECORD.iter_unpack(table):
        subject_end = at + subject_bytes
        got.append(StreamMessage(seq, blob[at:subject_end].decode("utf-8"), blob[subject_end:subject_end + payload_bytes]))
        at = subject_end + payload_bytes
    return got if at == len(blob) else None


def _read(fd: int, size: int, patience: float) -> Optional[bytes]:
    """Exactly `size` bytes from `fd`; None at its end, or when none came for `patience` seconds."""
    buf = bytearray()
    while len(buf) < size:
        if not select.select([fd], [], [], patience)[0]:
            return None
        chunk = os.read(fd, min(size - len(buf), 1 << 20))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def _frame(got: list[StreamMessage]) -> bytes:
    subjects = [m.subject.encode("utf-8") for m in got]
    table = b"".join([RECORD.pack(m.seq, len(s), len(m.payload)) for m, s in zip(got, subjects)])
    blob = b"".join([part for m, s in zip(got, subjects) for part in (s, m.payload)])
    return HEAD.pack(_BATCH, len(got), len(blob)) + table + blob


def _write(out: Any, data: bytes) -> None:
    out.write(data)
    out.flush()


async def _serve(request: dict[str, Any]) -> None:
    """The child: fetch the range and write its batches to stdout, then the end frame."""
    out = sys.stdout.buffer
    loop = asyncio.get_running_loop()
    nc = await nats.connect(servers=request["urls"], connect_timeout=2, allow_reconnect=False,
                            max_reconnect_attempts=0, error_cb=_quiet)
    try:
        pull = await Pull.open(nc, nc.jetstream(timeout=request["timeout"]), request["stream"], request["start"],
                               request["timeout"], request["batch"], request["max_bytes"], request["prefetch"])
        producing = asyncio.ensure_future(pull.produce(request["start"], request["end"]))
        sent = request["start"] - 1
        while sent < request["end"]:  # `produce` puts nothing more once it reached the end
            got = await pull.ready.get()
            if got is not None and not got:
                # nothing there now: the consumer's server may lag behind the stream (a replica catching up
                # after a restart), so wait for one batch, as the node's own loop does, before stopping
                got = [m for m in await pull.fetch(min(request["batch"], request["end"] - sent), request["timeout"])
                       if m.seq <= request["end"]]
                if got:
                    producing = asyncio.ensure_future(pull.produce(got[-1].seq + 1, request["end"]))
            if not got:
                break
            # written by the executor's thread, so fetching goes on while the parent reads
            await loop.run_in_executor(None, _write, out, _frame(got))
            sent = got[-1].seq
        producing.cancel()
    finally:
        await loop.run_in_executor(None, _write, out, HEAD.pack(_END, 0, 0))
        await nc.close()


async def _quiet(exc: Exception) -> None:
    """nats-py logs connection errors by default; the parent learns of a failure from the frames."""


if __name__ == "__main__":
    asyncio.run(_serve(json.loads(sys.stdin.buffer.readline())))
