"""Replay of the lines a write just appended, from the events in hand instead of the journal's bytes.

Every write appends its events, then replays exactly those lines into the view. Reading them back and
decoding them (a `store_batch` line of 1,000 facts is ~300 KB of JSON) only recovers what the writer
already holds, so the store hands its events over and they go through the bulk path's rules
(`bulk.BulkApplier.apply_decoded`) as if decoded. That equivalence is exact, not assumed: a fact, a
`supersede` or a `delete` is taken as it is only when each of its values reads back unchanged from
the text the codec wrote (a fact time is in the view's range, the confidence is already an f32, the
integers fit serde's types); any other line, or any other op, is decoded from its bytes as replay
would. tests/facts/test_appended_replay.py compares the view after such writes with a fresh replay.
"""

from __future__ import annotations

from typing import Optional, Sequence

import apsw

from . import bulk, codec, derived_tables, replay, replay_position, timestamps, view
from .codec import Event, Fact
from .faults import crash_point
from .journal import Journal
from .privacy import PrivacyPolicy

_U32_MAX = 2**32 - 1
_TOKENS_MAX = 2**63 - 1


class _Times:
    """Fact times as the codec writes them, each checked once to read back as the same nanoseconds."""

    def __init__(self) -> None:
        self._texts: dict[int, Optional[str]] = {}

    def text(self, ns: int) -> Optional[str]:
        if ns not in self._texts:
            in_column = type(ns) is int and timestamps.MIN_NS <= ns <= timestamps.MAX_NS
            text = timestamps.format_fact_time(ns) if in_column else None
            self._texts[ns] = text if text is not None and timestamps.canonical_fact_time_ns(text) == ns else None
        return self._texts[ns]


def _fact_values(f: Fact, times: _Times) -> Optional[tuple]:
    """`bulk.fact_values` of the line that wrote `f`, from `f` itself; None if any value might read back
    differently from the text (then the line is decoded instead)."""
    if (type(f.confidence) is not float or codec.to_f32(f.confidence) != f.confidence
            or f.confidence != f.confidence or view.confidence_exact(f.confidence) is not None
            or f.horizon_class not in codec.HORIZON_CLASSES
            or type(f.tokens) is not int or not 0 <= f.tokens <= _TOKENS_MAX
            or type(f.version) is not int or not 0 <= f.version <= _U32_MAX
            or type(f.access_count) is not int or not 0 <= f.access_count <= _U32_MAX
            or type(f.deleted) is not bool or type(f.private) is not bool):
        return None
    stored_at = times.text(f.stored_at)
    optional = []
    for ns in (f.reverified_at, f.valid_from, f.valid_to, f.last_accessed_at):
        text = None if ns is None else times.text(ns)
        if ns is not None and text is None:
            return None
        optional.append((text, ns))
    if stored_at is None:
        return None
    (rv, rv_ns), (vf, vf_ns), (vt, vt_ns), (la, la_ns) = optional
    return (f.fact_id, f.tenant_hash, f.entity, f.key, f.value, f.source_receipt, f.confidence, stored_at,
            f.stored_at, f.tokens, int(f.deleted), f.version, f.supersedes, int(f.private), f.horizon_class,
            rv, rv_ns, f.superseded_by, f.actor, vf, vf_ns, vt, vt_ns, f.access_count, la, la_ns, None, None)


def _payload(event: Event, times: _Times) -> Optional[tuple[str, object]]:
    """(op, payload) as `line_decoder.decode_fast` gives them for the line that wrote `event`, or None."""
    op = event.op
    if event.op in ("store", "store_batch"):
        facts = [event.fact] if event.op == "store" else event.facts
        values = [_fact_values(f, times) for f in facts]
        return None if any(v is None for v in values) else (op, values)
    if event.op == "supersede":
        return op, (event.fact_id, event.by_fact_id, event.superseded_at)
    if event.op == "delete":
        return op, (event.fact_id, event.deleted_at)
    return None


def replay_appended(db: apsw.Connection, journal: Journal, policy: PrivacyPolicy, events: Sequence[Event],
                    lines: Sequence[str], start: int) -> view.ReplayStats:
    """Replay `events`, just appended as `lines` at byte `start` by this writer (under the lock, inside
    the caller's transaction), as replaying those lines would: rows, skips, links, checkpoint, hooks.
    When the view does not end exactly at `start`, the journal is replayed from the view's checkpoint."""
    cp = replay_position.read_checkpoint(db)
    if cp is None or cp.byte_offset != start:
        return replay.replay(db, journal, policy)
    stats = view.ReplayStats()
    applier = view.Applier(db, policy, cp.next_seq)
    applier_bulk = bulk.BulkApplier(applier, stats)
    times = _Times()
    items = []
    offset, line_no = start, cp.line_count + 1
    for event, line in zip(events, lines):
        raw = line.encode("utf-8")
        length = len(raw) + 1
        fast = _payload(event, times)
        if fast is not None:
            items.append((line_no, offset, length, fast[0], fast[1], raw))
        else:
            item = applier_bulk.decode_line(raw, line_no, offset, length)
            if item is not None:
                items.append(item)
        offset += length
        line_no += 1
    with db:
        applier_bulk.apply_decoded(items)
        applier.sanitize_links()
        replay_position.write_checkpoint(db, journal, offset, line_no - 1, applier.next_seq, cp.generation)
        derived_tables.run_replay_hooks(db, journal, own_write=True)
        crash_point("replay-before-commit")
    return stats
