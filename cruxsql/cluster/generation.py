"""A new stream generation: how compaction (and so erasure and retention) rewrites a journal that is a
replicated stream.

The node that compacts holds the writer lock, has mirrored the whole stream (up to sequence P), renders
the compacted journal and publishes it as parts on `cruxsql.<group>.generation.<id>.<i>.<n>`: part 1
expects the stream's last sequence to be P, each later part the previous part's sequence, so a write
arriving meanwhile makes the generation incomplete (and the compaction fail, changing nothing). Once
part n is acknowledged, the compacting node rewrites its own journal to the same bytes, and the
messages before part 1 are purged. Every other node, mirroring part n right after parts 1..n-1,
replaces its journal with the parts' bytes (crash-atomic rename) and rebuilds and scrubs its view; an
incomplete generation (parts interrupted by any other message) is skipped by every node alike.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Optional

from ..errors import Conflict
from .link import ChainMoved, ClusterLink, StreamMessage, subject_prefix

PART_BYTES = 512 * 1024
"""Bytes per part at most (line boundaries permitting): under NATS's default 1 MiB payload limit."""


@dataclass(frozen=True)
class PartName:
    generation: str
    part: int
    parts: int


def part_subject(group: str, name: PartName) -> str:
    return f"{part_subject_prefix(group)}{name.generation}.{name.part}.{name.parts}"


def part_subject_prefix(group: str) -> str:
    """What every part's subject starts with."""
    return f"{subject_prefix(group)}.generation."


def parse_part(group: str, subject: str) -> Optional[PartName]:
    head = part_subject_prefix(group)
    if not subject.startswith(head):
        return None
    tokens = subject[len(head):].split(".")
    if len(tokens) != 3 or not tokens[1].isdigit() or not tokens[2].isdigit():
        return None
    return PartName(tokens[0], int(tokens[1]), int(tokens[2]))


def split_parts(data: bytes, limit: int = PART_BYTES) -> list[bytes]:
    """`data` (whole lines) cut into parts of at most `limit` bytes at line ends (a longer line alone)."""
    parts, start = [], 0
    while start < len(data):
        end = start + limit
        if end >= len(data):
            end = len(data)
        else:
            cut = data.rfind(b"\n", start, end)
            end = cut + 1 if cut >= start else data.index(b"\n", end) + 1
        parts.append(data[start:end])
        start = end
    return parts or [b""]


def publish_generation(link: ClusterLink, group: str, data: bytes, after_seq: int) -> tuple[int, int]:
    """Publish `data` as a generation following sequence `after_seq`; returns (first, last) sequence.
    Raises Conflict when another message got in first (the generation is then incomplete: skipped)."""
    parts = split_parts(data)
    generation = uuid.uuid4().hex
    expected, first = after_seq, 0
    for i, payload in enumerate(parts, 1):
        name = PartName(generation, i, len(parts))
        try:
            expected = link.publish(part_subject(group, name), payload, f"{generation}-{i}", None,
                                    expected_last_seq=expected)
        except ChainMoved:
            raise Conflict("writes reached the cluster while compacting: nothing was changed; run it again") from None
        first = first or expected
    return first, expected


@dataclass
class Collector:
    """The parts of one generation seen so far, in stream order."""

    group: str
    name: Optional[PartName] = None
    payloads: list[bytes] = field(default_factory=list)
    last_seq: int = 0
    first_seq: int = 0

    def offer(self, msg: StreamMessage) -> Optional[bytes]:
        """Take a message; returns the generation's bytes when it completes one. Any message that does
        not continue the parts so far (another generation, a write) abandons them."""
        part = parse_part(self.group, msg.subject)
        continues = part is not None and self.name is not None and part.generation == self.name.generation \
            and part.part == len(self.payloads) + 1 and msg.seq == self.last_seq + 1
        if not continues:
            self.name, self.payloads = None, []
            if part is None or part.part != 1:
                return None
            self.name, self.first_seq = part, msg.seq
        self.payloads.append(msg.payload)
        self.last_seq = msg.seq
        if self.name is not None and len(self.payloads) == self.name.parts:
            data = b"".join(self.payloads)
            self.name, self.payloads = None, []
            return data
        return None

    @property
    def collecting(self) -> bool:
        return self.name is not None
