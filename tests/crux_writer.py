"""A stand-in for a Crux daemon writing into a shared data directory, the way
crates/corecrux-memory/src/fact_store.rs writes: `writeln!` of each line (the JSON, then the newline:
two writes); a new version as a `store` line, then, in a later write, the `supersede` line of its
predecessor (`store` then `mark_superseded`), with a pause between; `store_synced` as one `store` line
whose fact carries `supersedes`; and its compaction (replay, rewrite to a temp file, rename).

Crux itself takes no lock. Two writers that each put a line out in two writes can interleave inside a
line, which glues their lines together and loses both (nothing cruxsql can prevent from its side), so
this stand-in holds cruxsql's writer lock (LOCK) around each line's two writes and around its
compaction, and releases it in the pause between a version's two lines.

    python tests/crux_writer.py DATA_DIR SECONDS ACK_FILE
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from crux_reference import compact, replay  # noqa: E402

from cruxsql.facts import codec, timestamps  # noqa: E402

PAUSE_S = 0.02
COMPACT_EVERY_S = 2.5


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
