"""The journal bytes `store_batch` writes stay exactly what they were (tests/golden/store_batch_journal.jsonl,
written by cruxsql before the write path was made faster) for a fixed clock and fixed fact ids."""

from __future__ import annotations

import contextlib
import itertools
import uuid
from pathlib import Path
from typing import Iterator

import cruxsql
from cruxsql.facts import timestamps
from support.journal_files import journal_bytes

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "store_batch_journal.jsonl"
_VALUES = ("plain", 'say "hi": now', "back\\slash", "\x01\x1f control", "tab\there\nnewline", "ünïcode ✓ 😀",
           "", "[WIP] {draft}", "</script>", "\u2028 separators \u2029", "x" * 300)
_CONFIDENCES = (1.0, 0.9, 0.0, -0.0, 0.1, 0.3333, 1e-7, 0.5, 0.95, 0.7, 0.123456789)
_ENTITIES = ("svc", "proj", "incident:9", "bench:latency", "execplan:rollout", "user ünïcode")
# three batches: chains inside a batch and across batches (supersede lines), every optional field, tenants
REQUESTS = [[{"entity": _ENTITIES[(b + i) % len(_ENTITIES)], "key": ("owner", "status", "note")[i % 3],
              "value": _VALUES[(b * 7 + i) % len(_VALUES)], "confidence": _CONFIDENCES[(b + i) % len(_CONFIDENCES)],
              "tenant_hash": ("default", "t1", "", "  ")[i % 4], "source_receipt": (None, "crx_1")[i % 2],
              "private": i % 5 == 0, "horizon_class": (None, "stable", "volatile", "medium", "none")[i % 5],
              "actor": (None, "ops", "agent-ü")[i % 3], "agent": (None, "a1")[i % 7 == 0]}
             for i in range(40 + b)] for b in range(3)]


@contextlib.contextmanager
def deterministic(batch: int) -> Iterator[None]:
    """During one call: a clock that ticks 1,000,017 ns per reading and uuid4s counted, both from where
    `batch` starts (each call starts afresh: what reads the clock outside a call does not move the bytes)."""
    ticks = itertools.count(timestamps.parse_ns("2026-03-01T08:00:00Z") + batch * 3_600 * 10**9, 1_000_017)
    ids = itertools.count(batch * 1000 + 1)
    real_now, real_uuid4 = timestamps.now_ns, uuid.uuid4
    timestamps.now_ns = lambda: next(ticks)  # type: ignore[assignment]
    uuid.uuid4 = lambda: uuid.UUID(int=next(ids), version=4)  # type: ignore[assignment]
    try:
        yield
    finally:
        timestamps.now_ns, uuid.uuid4 = real_now, real_uuid4  # type: ignore[assignment]


def write_journal(data: Path) -> bytes:
    with cruxsql.open(data) as store:
        for b, batch in enumerate(REQUESTS):
            requests = [cruxsql.StoreRequest(**r) for r in batch]
            with deterministic(b):
                store.store_batch(requests)
    return journal_bytes(data)


def test_store_batch_writes_the_journal_bytes_it_wrote_before(tmp_path: Path) -> None:
    written = write_journal(tmp_path)
    assert written.count(b'"op":"store_batch"') == 3 and written.count(b'"op":"supersede"') > 20
    assert written == GOLDEN.read_bytes()


if __name__ == "__main__":  # (re)write the golden file with the cruxsql on PYTHONPATH
    import sys
    import tempfile
    with tempfile.TemporaryDirectory() as scratch:
        GOLDEN.write_bytes(write_journal(Path(scratch)))
    print(f"wrote {GOLDEN} with {cruxsql.__file__}", file=sys.stderr)
