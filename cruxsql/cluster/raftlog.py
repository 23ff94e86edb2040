"""Getting every replica's Raft log past erased entries.

JetStream's secure delete overwrites a message's bytes in every replica's stream store, but each
replica also keeps the message in its stream's Raft log (`<store_dir>/jetstream/$SYS/_js_/<group>/msgs/`)
until it installs a snapshot and compacts that log up to its applied index. In nats-server 2.14-2.15
a stream's replica does that (`monitorStream` in `server/jetstream_cluster.go`): on a timer of 2 minutes
plus up to 1 minute of jitter (`compactInterval`), on becoming leader only when it has no snapshot yet
(`NeedSnapshot`), at a clean shutdown, and — on every replica, right after applying entries — once its
log holds `compactNumMin` = 65,536 entries or more than `compactSizeMin` = 8 MiB
(`if ne >= compactNumMin || nb > compactSizeMin ... { doSnapshot() }`). No client API asks a replica
to snapshot (`JetStreamSnapshotStream` is a Go method used by the server's tests).

So the scrub crosses the size threshold: after the erasure, 9 MB of random (incompressible: Raft
entries over 8 KB are s2-compressed) filler messages on a subject of the stream that nothing reads
make every replica snapshot and compact its log, then the filler is purged. A marker message
published before the filler tells when a replica's log has been compacted: once the marker (securely
deleted from the stream store) is in none of the servers' files, every entry before it — the erased
ones — is gone too. The servers' storage directories can be checked only from a host that sees them
(`cruxsql node --server-store-dir`); the scrub publishes another round of filler while any still holds
the marker, and gives up after `SCRUB_WAIT_SECONDS` with one error naming the files.
Measured on nats-server 2.15.1 (loopback, R3): 7 MB of filler never triggers it, 9 MB cleans all three
logs within ~0.5 s; left alone, a log keeps the bytes for minutes.
"""

from __future__ import annotations

import os
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import nats.js.errors

from ..errors import CruxsqlError
from .link import ClusterLink

FILLER_MESSAGE_BYTES = 1_000_000
FILLER_ROUND_BYTES = 9_000_000
"""Above nats-server's `compactSizeMin` (8 MiB = 8,388,608 bytes) of Raft log, whatever the log held before."""
SCRUB_WAIT_SECONDS = 30.0
ROUND_WAIT_SECONDS = 5.0


class RaftLogsNotScrubbed(CruxsqlError):
    """A NATS server's files still hold a Raft log entry from before the erasure after the wait."""


@dataclass
class ScrubReport:
    stream: str
    filler_bytes: int = 0
    rounds: int = 0
    seconds: float = 0.0
    checked_dirs: list[str] = field(default_factory=list)
    clean: Optional[bool] = None
    """True: no checked directory holds the marker; None: no directory was visible to check."""


def files_holding(directories: list[Path], needle: bytes) -> list[str]:
    """Every file under `directories` whose bytes contain `needle` (files vanishing meanwhile skipped)."""
    found = []
    for directory in directories:
        for path in sorted(Path(directory).rglob("*")):
            try:
                if path.is_file() and needle in path.read_bytes():
                    found.append(str(path))
            except OSError:
                continue
    return found


def scrub_raft_logs(link: ClusterLink, stream: str, subject: str, store_dirs: list[Path],
                    wait: float = SCRUB_WAIT_SECONDS) -> ScrubReport:
    """Make every replica of `stream` compact its Raft log past everything published so far (see the
    module's docstring); `subject` is one of the stream's subjects that nothing reads. With
    `store_dirs`, wait until none of their files holds the marker, else raise RaftLogsNotScrubbed."""
    report = ScrubReport(stream, checked_dirs=[str(d) for d in store_dirs])
    started = time.monotonic()
    marker = f"cruxsql-raft-scrub-marker-{uuid.uuid4().hex}".encode()
    js = link._js

    async def publish(payload: bytes) -> int:
        return (await js.publish(subject, payload, stream=stream)).seq

    marker_seq = link._retry(lambda: publish(marker))
    while True:
        for _ in range(FILLER_ROUND_BYTES // FILLER_MESSAGE_BYTES):
            link._retry(lambda: publish(os.urandom(FILLER_MESSAGE_BYTES)))
            report.filler_bytes += FILLER_MESSAGE_BYTES
        report.rounds += 1
        if report.rounds == 1:
            _erase(link, stream, marker_seq)
        if not store_dirs:
            break
        round_end = time.monotonic() + ROUND_WAIT_SECONDS
        holding = files_holding(store_dirs, marker)
        while holding and time.monotonic() < min(round_end, started + wait):
            time.sleep(0.1)
            holding = files_holding(store_dirs, marker)
        if not holding:
            report.clean = True
            break
        if time.monotonic() >= started + wait:
            _purge(link, stream, subject)
            raise RaftLogsNotScrubbed(
                f"after {wait:.0f} s and {report.rounds} round(s) of filler, these NATS server files still hold "
                f"Raft log entries of stream {stream} from before the erasure: {', '.join(holding)}")
    _purge(link, stream, subject)
    report.seconds = round(time.monotonic() - started, 3)
    return report


def _erase(link: ClusterLink, stream: str, seq: int) -> None:
    async def delete() -> None:
        try:
            await link._js.delete_msg(stream, seq)
        except nats.js.errors.NotFoundError:
            pass
    link._retry(delete)


def _purge(link: ClusterLink, stream: str, subject: str) -> None:
    """Drop the filler, then leave one empty message on `subject` as the stream's last: a node's mirror
    skips it, and so reaches the stream's last sequence instead of waiting on purged ones."""
    async def purge() -> Any:
        await link._js.purge_stream(stream, subject=subject)
        return await link._js.publish(subject, b"", stream=stream)
    link._retry(purge)


def describe(report: ScrubReport) -> str:
    """One line saying what the scrub did (for stderr when it could not check the directories)."""
    did = (f"Raft logs of stream {report.stream}: {report.filler_bytes / 1e6:.0f} MB of filler made every "
           f"replica compact past the erased entries ({report.rounds} round(s), {report.seconds} s), then purged")
    if report.clean:
        return f"{did}; no file under {len(report.checked_dirs)} server storage director(ies) holds them"
    return (f"{did}; the NATS servers' storage directories were not checked (not visible here: bind them with "
            f"`cruxsql node --server-store-dir`)")


def note(report: ScrubReport) -> None:
    if report.clean is None:
        print(f"note: {describe(report)}", file=sys.stderr, flush=True)
