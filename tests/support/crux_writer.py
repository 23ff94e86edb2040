"""A stand-in for a Crux daemon writing into a shared data directory, the way
crates/corecrux-memory/src/fact_store.rs writes: `writeln!` of each line (the JSON, then the newline:
two writes); a new version as a `store` line, then, in a later write, the `supersede` line of its
predecessor (`store` then `mark_superseded`), with a pause between; `store_synced` as one `store` line
whose fact carries `supersedes`; and its compaction (replay, rewrite to a temp file, rename).

Crux itself takes no lock. Two writers that each put a line out in two writes can interleave inside a
line, which glues their lines together and loses both (nothing cruxsql can prevent from its side), so
this stand-in holds cruxsql's writer lock (LOCK) around each line's two writes and around its
compaction, and releases it in the pause between a version's two lines.

    python tests/support/crux_writer.py DATA_DIR SECONDS ACK_FILE
"""

from __future__ import annotations

import fcntl
import os
import sys
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for support.crux_reference
from support.crux_reference import compact, replay  # noqa: E402

from cruxsql.facts import codec, timestamps  # noqa: E402

PAUSE_S = 0.02
COMPACT_EVERY_S = 2.5


def crux_store_line(fact_id: str, *, stored_at: str = "2026-03-01T08:00:00.123456789Z", confidence: str = "1.0",
                    tokens: str = "1", value: str = "v", tail: str = "") -> bytes:
    """A `store` line as Crux's `append_journal` writes it (serde_json, field order of `Fact`), the
    values given as the text serde writes: chrono's `write_rfc3339` (AutoSi fraction, `Z`; a year outside
    0..=9999 with its sign), ryu's f32 (`-0.0` keeps its sign), a usize's decimal digits. `tail`: the
    skip-if-none fields after horizon_class, already as text. Written here by hand, not by the codec, so
    that a test holds cruxsql to Crux's bytes rather than to its own."""
    return (b'{"op":"store","fact":{"fact_id":"' + fact_id.encode() + b'","tenant_hash":"default","entity":"crux",'
            b'"key":"' + fact_id.encode() + b'","value":"' + value.encode() + b'","source_receipt":null,"confidence":'
            + confidence.encode() + b',"stored_at":"' + stored_at.encode() + b'","tokens":' + tokens.encode()
            + b',"deleted":false,"version":1,"private":false,"horizon_class":"none"' + tail.encode() + b"}}")


# A journal a Crux daemon writes with the edges of every value range (tests/facts/test_crux_value_ranges.py): the usual
# "forever" validity (`set_validity(valid_to = 9999-12-31T23:59:59Z)`), a year-0001 time, `tokens` =
# u64::MAX, a -0.0 confidence, a leap second (chrono writes 0.5 s as `.500`); and two ordinary facts, one
# to erase and one old enough for a retention run.
VALUE_RANGE_LINES = [
    crux_store_line("f_forever"),
    b'{"op":"set_validity","fact_id":"f_forever","valid_from":"2026-03-01T08:00:00.123456789Z",'
    b'"valid_to":"9999-12-31T23:59:59Z","set_at":"2026-03-01T08:00:01.000000001+00:00"}',
    crux_store_line("f_ancient", stored_at="2026-03-01T08:00:02Z", tail=',"valid_from":"0001-01-01T00:00:00Z"'),
    crux_store_line("f_tokens", stored_at="2026-03-01T08:00:03Z", tokens="18446744073709551615"),
    crux_store_line("f_negzero", stored_at="2026-03-01T08:00:04Z", confidence="-0.0"),
    crux_store_line("f_leap", stored_at="2016-12-31T23:59:60.500Z",
                    tail=',"last_accessed_at":"2016-12-31T23:59:60.000000001Z"'),
    crux_store_line("f_erase_me", stored_at="2026-03-01T08:00:05Z", value="erase-me-4c1d9e"),
    crux_store_line("f_old", stored_at="2000-01-01T00:00:00Z", value="old-enough-7f3a"),
]
# The lines Crux's `compact_journal` writes for the facts that stay: each store line unchanged, the
# validity baked into f_forever's.
VALUE_RANGE_KEPT = [
    crux_store_line("f_forever", tail=',"valid_from":"2026-03-01T08:00:00.123456789Z","valid_to":"9999-12-31T23:59:59Z"'),
    *(VALUE_RANGE_LINES[i] for i in (2, 3, 4, 5)),
]


def main() -> None:
    data, seconds, ack_path = Path(sys.argv[1]), float(sys.argv[2]), Path(sys.argv[3])
    journal = data / "facts.jsonl"
    lock_fd = os.open(data / "LOCK", os.O_RDWR | os.O_CREAT, 0o644)

    @contextmanager
    def locked() -> Iterator[None]:
        fcntl.flock(lock_fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock_fd, fcntl.LOCK_UN)

    def writeln(event: codec.Event) -> None:
        fd = os.open(journal, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, codec.encode_event(event).encode())
            os.write(fd, b"\n")
        finally:
            os.close(fd)

    heads: dict[str, codec.Fact] = {}
    deadline = time.monotonic() + seconds
    next_compaction = time.monotonic() + COMPACT_EVERY_S
    with open(ack_path, "a") as ack:
        i = 0
        while time.monotonic() < deadline:
            key = f"c{i % 4}"
            prev = heads.get(key)
            value = f"crux {i}"
            fact = codec.Fact(fact_id="f_" + uuid.uuid4().hex, entity="crux", key=key, value=value, confidence=1.0,
                              stored_at=timestamps.now_ns(), tokens=codec.token_cost(value),
                              version=prev.version + 1 if prev else 1, supersedes=prev.fact_id if prev else None)
            with locked():
                writeln(codec.StoreEvent(fact))
            if prev is not None and i % 3 != 2:  # an ordinary new version: its second write after a pause
                time.sleep(PAUSE_S)
                with locked():
                    writeln(codec.SupersedeEvent(prev.fact_id, fact.fact_id,
                                                 timestamps.format_event_time(timestamps.now_ns())))
            # (i % 3 == 2: store_synced, the one line alone)
            heads[key] = fact
            ack.write(f"store {fact.fact_id}\n")
            ack.flush()
            if time.monotonic() >= next_compaction:
                with locked():
                    compact(journal, replay(journal))
                ack.write("compacted\n")
                ack.flush()
                next_compaction = time.monotonic() + COMPACT_EVERY_S
            i += 1
            time.sleep(0.005)


if __name__ == "__main__":
    main()
