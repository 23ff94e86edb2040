"""A reference of Crux's own journal handling for tests: its replay rules and its compaction, written
from crates/corecrux-memory/src/fact_store.rs (replay_journal_with_record_limit, compact_journal),
for the ops a shared directory sees here (store, store_batch, delete, supersede, clear_supersede,
set_validity); the other ops count as lines Crux skips. Lines are decoded with the codec, which
reads exactly what serde reads."""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from cruxsql.facts import codec, timestamps
from cruxsql.facts.codec import Fact


@dataclass
class CruxState:
    facts: dict[str, Fact] = field(default_factory=dict)
    skipped_lines: list[int] = field(default_factory=list)  # parse failures: Crux's corruption flag
    # lines serde reads whose values a Fact here cannot hold (an f32 confidence overflowing to infinity):
    # Crux replays them; this reference only counts them
    unheld_lines: list[int] = field(default_factory=list)


def replay(journal: Path) -> CruxState:
    """What a Crux daemon holds after replaying `journal` (an unterminated last line is ignored: Crux
    quarantines it before replay)."""
    state = CruxState()
    data = journal.read_bytes() if journal.exists() else b""
    lines = data.split(b"\n")[:-1]
    for line_no, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            event = codec.decode_event(raw)
        except codec.UnrepresentableLine:
            state.unheld_lines.append(line_no)
            continue
        except codec.CorruptLine:
            state.skipped_lines.append(line_no)
            continue
        op = event.op
        facts = state.facts
        if op in ("store", "store_batch"):
            for fact in codec.event_facts(event):
                facts.setdefault(fact.fact_id, fact.copy())  # a duplicate id is skipped
        elif op == "delete":
            if event.fact_id in facts:
                facts[event.fact_id].deleted = True
        elif op == "supersede":
            target, by = facts.get(event.fact_id), facts.get(event.by_fact_id)
            if target is not None and by is not None and target.tenant_hash == by.tenant_hash:
                target.superseded_by = event.by_fact_id
        elif op == "clear_supersede":
            if event.fact_id in facts:
                facts[event.fact_id].superseded_by = None
        elif op == "set_validity":
            if event.fact_id in facts:
                facts[event.fact_id].valid_from, facts[event.fact_id].valid_to = event.valid_from, event.valid_to
        else:
            state.skipped_lines.append(line_no)  # an op this Crux has no variant for
    return state


def compact(journal: Path, state: CruxState) -> None:
    """Crux's compact_journal from `state`: live facts by (stored_at, fact_id), each a `store` line and,
    when superseded, a `supersede` line stamped now; then a value-free `delete` per deleted id; temp
    file in the same directory, fsync, rename, directory fsync."""
    now = timestamps.format_event_time(timestamps.now_ns())
    live = sorted((f for f in state.facts.values() if not f.deleted), key=lambda f: (f.stored_at, f.fact_id))
    out = []
    for fact in live:
        out.append(codec.encode_event(codec.StoreEvent(fact)))
        if fact.superseded_by is not None:
            out.append(codec.encode_event(codec.SupersedeEvent(fact.fact_id, fact.superseded_by, now)))
    for fact_id in sorted(f.fact_id for f in state.facts.values() if f.deleted):
        out.append(codec.encode_event(codec.DeleteEvent(fact_id, now)))
    tmp = journal.with_name(f"facts.jsonl.compact-{uuid.uuid4().hex}.tmp")
    with open(tmp, "wb") as fh:
        fh.write("".join(line + "\n" for line in out).encode())
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, journal)
    fd = os.open(journal.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
