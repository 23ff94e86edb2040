"""Sharing a data directory with a Crux daemon: cruxsql takes back only its own mutations cut short.

The lines appended here are the ones Crux writes (crates/corecrux-memory/src/fact_store.rs): its
ordinary new version is a `store` line, then (a separate write) a `supersede` line; its
`store_synced` is one `store` line whose fact carries `supersedes`, with no `supersede` line.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import cruxsql
from cruxsql.facts import codec, timestamps
from support.journal_files import journal_bytes, journal_text


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
    journal = journal_bytes(tmp_path)
    with cruxsql.open(tmp_path) as store:
        chain = store.history("svc", "owner")
        assert [(f.fact_id, f.value, f.version, f.supersedes, f.superseded_by) for f in chain] == [
            (v1.fact_id, "alice", 1, None, None), (v2.fact_id, "bob", 2, v1.fact_id, None)]
        assert store.journal.quarantined_tails() == []
        assert store.verify().view_matches_replay
    assert journal_bytes(tmp_path) == journal


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
    lines = journal_bytes(tmp_path).splitlines(keepends=True)
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


def test_store_batch_stamps_each_fact_when_it_is_built(tmp_path: Path) -> None:
    from cruxsql.facts.store import StoreRequest
    with cruxsql.open(tmp_path) as store:
        facts = store.store_batch([StoreRequest("svc", f"k{i}", "v") for i in range(50)])
    stamps = [f.stored_at for f in facts]
    assert stamps == sorted(stamps) and len(set(stamps)) > 1


@pytest.mark.parametrize("value, pinned", [("1", True), ("true", True), ("TrUe", True), (" 1", False),
                                           ("true\n", False), ("yes", False), ("\u0130rue", False), ("0", False)])
def test_a_pin_is_exactly_1_or_ascii_case_insensitive_true_untrimmed(tmp_path: Path, value: str,
                                                                      pinned: bool) -> None:
    from cruxsql.curation.memory_panel import PIN_OWNER, pinned_by
    from cruxsql.recall.facade import Recall
    with cruxsql.open(tmp_path) as store:
        fact = store.store("svc", "k", "v")
        store.store(f"__memory_pin::a1::{fact.fact_id}", "pinned", value, owner=PIN_OWNER)
        assert pinned_by(store, "a1", fact.fact_id, "default") is pinned
        assert Recall(store).memory_view(agent="a1").facts[0]["pinned"] is pinned


@pytest.mark.slow
def test_memory_view_answers_crux_feature_disabled_response(portal, tmp_path: Path) -> None:
    from support.mcp_clients import stdio
    with cruxsql.open(tmp_path) as store:
        store.store("svc", "k", "v")
    client = stdio(portal, tmp_path, "--agent", "a1", env={"CORECRUXD_FEATURE_MEMORY_PANEL": "0"})
    try:
        result = client.call("memory_view", {})
        # no structured rows: {} rather than absent, since memory_view declares an outputSchema (MCP requires a
        # conforming structuredContent then); the text is Crux's exactly
        assert result.is_error is False and not result.structured_content
        assert result.content[0].text == ("memory_view: memory panel explicitly disabled (unset "
                                          "CORECRUXD_FEATURE_MEMORY_PANEL to re-enable; it is on by default)")
    finally:
        client.close()


def test_doctor_counts_the_lines_a_crux_daemon_would_skip(tmp_path: Path) -> None:
    from cruxsql.governance import doctor
    with cruxsql.open(tmp_path) as store:
        fact = store.store("svc", "k", "v")
    check = next(c for c in doctor.diagnose(tmp_path).checks if c.name == "lines_crux_skips")
    assert (check.status, check.value, check.message) == (
        doctor.OK, 0.0, "every journal line is one a Crux daemon replays")
    _append(tmp_path, codec.SetHorizonEvent(fact.fact_id, "stable", "2026-01-01T00:00:00+00:00"),
            codec.ReverifyEvent(fact.fact_id, 10**18), codec.ReverifyEvent(fact.fact_id, 10**18 + 1))
    with cruxsql.open(tmp_path):  # lines an older cruxsql wrote into facts.jsonl
        pass
    check = next(c for c in doctor.diagnose(tmp_path).checks if c.name == "lines_crux_skips")
    assert (check.status, check.value) == (doctor.OK, 3.0)
    assert check.message.startswith("3 journal line(s) a Crux daemon would skip as corrupt (2 reverify, 1 set_horizon)")


def test_horizon_and_reverify_stay_out_of_facts_jsonl_and_survive_a_crux_compaction(tmp_path: Path) -> None:
    """Crux has no op for them: they go to cruxsql-fact-events.jsonl, replayed after facts.jsonl, so a
    Crux replay sees no line it skips, and a Crux compaction (from its memory, without them) loses
    nothing for cruxsql."""
    from support.crux_reference import compact, replay
    with cruxsql.open(tmp_path) as store:
        fact = store.store("svc", "k", "v")
        store.set_horizon(fact.fact_id, "volatile")
        reverified = store.reverify(fact.fact_id).reverified_at
    assert replay(tmp_path / "facts.jsonl").skipped_lines == []
    crux = replay(tmp_path / "facts.jsonl")
    assert crux.facts[fact.fact_id].horizon_class == "none"  # Crux never learns of it (it keeps it in memory)
    compact(tmp_path / "facts.jsonl", crux)
    with cruxsql.open(tmp_path) as store:
        got = store.get(fact.fact_id)
        assert (got.horizon_class, got.reverified_at) == ("volatile", reverified)
        assert store.verify().ok


def test_the_fact_events_file_is_backed_up_and_restored(tmp_path: Path) -> None:
    from cruxsql.governance import backup, restore
    with cruxsql.open(tmp_path / "data") as store:
        fact = store.store("svc", "k", "v")
        store.set_horizon(fact.fact_id, "stable")
        backup.backup(store, tmp_path / "bak")
    restore.restore(tmp_path / "bak", tmp_path / "restored")
    assert (tmp_path / "restored" / "cruxsql-fact-events.jsonl").read_bytes() == \
        (tmp_path / "data" / "cruxsql-fact-events.jsonl").read_bytes()
    (tmp_path / "restored" / "cruxsql.db").unlink()
    with cruxsql.open(tmp_path / "restored") as store:
        assert store.get(fact.fact_id).horizon_class == "stable"


def test_a_torn_last_line_of_the_fact_events_file_is_quarantined(tmp_path: Path) -> None:
    with cruxsql.open(tmp_path) as store:
        fact = store.store("svc", "k", "v")
        store.set_horizon(fact.fact_id, "stable")
    with open(tmp_path / "cruxsql-fact-events.jsonl", "ab") as fh:
        fh.write(b'{"op":"set_horizon","fact_id":"' + fact.fact_id.encode() + b'","horizon_cl')
    with cruxsql.open(tmp_path) as store:
        store.set_horizon(fact.fact_id, "volatile")
        assert store.get(fact.fact_id).horizon_class == "volatile"
        report = store.verify()
        assert [name.split(".torn.")[0] for name in report.quarantined_tails] == ["cruxsql-fact-events.jsonl"]
        assert report.corrupt_lines == [] and report.view_matches_replay
    torn = list(tmp_path.glob("cruxsql-fact-events.jsonl.torn.*"))
    assert torn[0].read_bytes().endswith(b'"horizon_cl') and torn[0].stat().st_mode & 0o777 == 0o600


def test_cruxsql_compaction_bakes_the_fact_events_in_and_leaves_the_file_consistent(tmp_path: Path) -> None:
    from cruxsql.governance import compaction
    with cruxsql.open(tmp_path) as store:
        keep = store.store("svc", "k", "v")
        gone = store.store("svc", "other", "erased value")
        store.set_horizon(keep.fact_id, "volatile")
        store.reverify(gone.fact_id)
        store.delete(gone.fact_id)
        compaction.compact(store)
        assert store.get(keep.fact_id).horizon_class == "volatile" and store.verify().ok
    line = next(json.loads(x) for x in journal_text(tmp_path).splitlines() if keep.fact_id in x)
    assert line["fact"]["horizon_class"] == "volatile"  # baked into the store line, readable by Crux
    assert b"erased value" not in (tmp_path / "cruxsql-fact-events.jsonl").read_bytes()
    (tmp_path / "cruxsql.db").unlink()
    with cruxsql.open(tmp_path) as store:  # the old events replay onto the compacted journal to the same state
        assert store.get(keep.fact_id).horizon_class == "volatile" and store.verify().ok
        assert [f.fact_id for f in store.history("svc", "other")] == []
