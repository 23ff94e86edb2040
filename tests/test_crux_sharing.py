"""Sharing a data directory with a Crux daemon: cruxsql takes back only its own mutations cut short.

The lines appended here are the ones Crux writes (crates/corecrux-memory/src/fact_store.rs): its
ordinary new version is a `store` line, then (a separate write) a `supersede` line; its
`store_synced` is one `store` line whose fact carries `supersedes`, with no `supersede` line.
"""

from __future__ import annotations

import os
from pathlib import Path

import cruxsql
from cruxsql.facts import codec, timestamps


def _crux_version(prev: codec.Fact, value: str) -> codec.Fact:
    return prev.copy(fact_id="f_" + os.urandom(16).hex(), value=value, version=prev.version + 1,
                     supersedes=prev.fact_id, stored_at=timestamps.now_ns(), tokens=codec.token_cost(value))


def _append(data_dir: Path, *events: codec.Event) -> None:
    with open(data_dir / "facts.jsonl", "ab") as fh:
        for event in events:
            fh.write(codec.encode_event(event).encode() + b"\n")


def test_a_synced_store_line_carrying_supersedes_is_replayed_not_quarantined(tmp_path: Path) -> None:
    with cruxsql.open(tmp_path) as store:
        v1 = store.store("svc", "owner", "alice")
    v2 = _crux_version(v1, "bob")
    _append(tmp_path, codec.StoreEvent(v2))  # store_synced: one line, no supersede line
    journal = (tmp_path / "facts.jsonl").read_bytes()
    with cruxsql.open(tmp_path) as store:
        chain = store.history("svc", "owner")
        assert [(f.fact_id, f.value, f.version, f.supersedes, f.superseded_by) for f in chain] == [
            (v1.fact_id, "alice", 1, None, None), (v2.fact_id, "bob", 2, v1.fact_id, None)]
        assert store.journal.quarantined_tails() == []
        assert store.verify().view_matches_replay
    assert (tmp_path / "facts.jsonl").read_bytes() == journal


def test_crux_new_version_between_its_two_writes_then_after_both(tmp_path: Path) -> None:
    with cruxsql.open(tmp_path) as store:
        v1 = store.store("svc", "owner", "alice")
        v2 = _crux_version(v1, "bob")
        _append(tmp_path, codec.StoreEvent(v2))  # Crux's first write ...
        store.refresh()  # ... seen by a reader before the second
        assert [(f.value, f.superseded_by) for f in store.history("svc", "owner")] == [("alice", None),
                                                                                      ("bob", None)]
        store.store("other", "k", "cruxsql writes between Crux's two writes")
        _append(tmp_path, codec.SupersedeEvent(v1.fact_id, v2.fact_id,
                                               timestamps.format_event_time(timestamps.now_ns())))
        store.refresh()
        assert [(f.value, f.superseded_by) for f in store.history("svc", "owner")] == [
            ("alice", v2.fact_id), ("bob", None)]
    with cruxsql.open(tmp_path) as store:
        assert store.journal.quarantined_tails() == []
        assert store.verify().ok


def test_a_cut_short_group_followed_by_another_writers_line_is_left_to_replay(tmp_path: Path) -> None:
    """cruxsql's own group cut short, then a line of Crux's after it: the group is no longer the tail
    (Crux has replayed it), so it is replayed as Crux would, and nothing is quarantined."""
    with cruxsql.open(tmp_path) as store:
        v1 = store.store("svc", "owner", "alice")
        store.store("svc", "owner", "bob")
    lines = (tmp_path / "facts.jsonl").read_bytes().splitlines(keepends=True)
    assert len(lines) == 3
    (tmp_path / "cruxsql.db").unlink()
    with open(tmp_path / "facts.jsonl", "wb") as fh:
        fh.write(b"".join(lines[:2]))  # the store line of bob's group, not its supersede line
    _append(tmp_path, codec.StoreEvent(_crux_version(v1, "carol").copy(version=1, supersedes=None, key="other")))
    with cruxsql.open(tmp_path) as store:
        assert [f.value for f in store.history("svc", "owner")] == ["alice", "bob"]
        assert store.journal.quarantined_tails() == []


def test_a_stale_intent_matches_nothing(tmp_path: Path) -> None:
    """The intent of an append that completed names bytes the journal holds in full: a later shorter
    journal (truncated by hand, here) is not taken for cruxsql's own group cut short unless its lines
    are exactly that group's."""
    with cruxsql.open(tmp_path) as store:
        store.store("svc", "owner", "alice")
        store.store("svc", "owner", "bob")
    intent = (tmp_path / "cruxsql-write-intent").read_bytes()
    assert intent.startswith(b"cruxsql-write-intent-v1 ") and b"bob" not in intent
    with cruxsql.open(tmp_path) as store:
        assert store.journal.quarantined_tails() == []
        assert len(store.history("svc", "owner")) == 2
