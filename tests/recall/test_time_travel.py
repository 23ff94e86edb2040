"""known_at keeps answering the same after the journal is compacted, and answers for the fact in the view."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

import cruxsql
from cruxsql.facts import codec, derived_tables, replay_position, timestamps
from cruxsql.governance import compaction


def test_known_at_survives_a_compaction(tmp_path: Path) -> None:
    with cruxsql.open(tmp_path) as store:
        store.store("svc", "status", "alpha")
        time.sleep(0.002)
        t1 = timestamps.now_ns()
        time.sleep(0.002)
        store.store("svc", "status", "beta")
        recall = cruxsql.Recall(store)
        before = [r["value"] for r in recall.query_facts("status", known_at=t1).rows]
        now = [r["value"] for r in recall.query_facts("status").rows]
        compaction.compact(store)
        after = [r["value"] for r in cruxsql.Recall(store).query_facts("status", known_at=t1).rows]
    assert (before, now, after) == (["alpha"], ["beta"], ["alpha"])


T0 = 1_772_000_000_000_000_000
S = 1_000_000_000


def _status(fact_id: str, value: str, at: int) -> codec.Fact:
    return codec.Fact(fact_id=fact_id, entity="svc", key="status", value=value, confidence=1.0, stored_at=at, tokens=1)


@pytest.mark.parametrize("opened_after_each_line", [False, True])
def test_a_fact_id_stored_again_after_a_replace_has_none_of_the_removed_facts_history(
        tmp_path: Path, opened_after_each_line: bool) -> None:
    # f1 is deleted, then hard-removed by a replace_latest, then a new fact with the same id is stored:
    # the deletion belonged to the removed fact, not to the new one
    lines = [codec.StoreEvent(_status("f1", "alpha", T0)),
             codec.DeleteEvent("f1", timestamps.format_event_time(T0 + S)),
             codec.ReplaceLatestEvent(_status("f2", "beta", T0 + 2 * S), ["f1"]),
             codec.StoreEvent(_status("f1", "gamma", T0 + 3 * S))]
    journal = tmp_path / "facts.jsonl"
    for i, event in enumerate(lines):
        with open(journal, "a", encoding="utf-8") as fh:
            fh.write(codec.encode_event(event) + "\n")
        if opened_after_each_line or i == len(lines) - 1:
            with cruxsql.open(tmp_path) as store:
                rows = cruxsql.Recall(store).query_facts("status", known_at=T0 + 4 * S, contract="legacy").rows
    assert sorted(r["value"] for r in rows) == ["beta", "gamma"]


def test_a_compaction_empties_the_timeline_before_it_drops_the_deleted_facts(tmp_path: Path) -> None:
    # The rewrite hooks run right before the compaction deletes the dropped facts; with the timeline
    # still there, each of those deletes went through recall_changes row by row (a trigger: 0.75 s of a
    # 1M-event compaction). The compaction starts the timeline over afterwards anyway.
    with cruxsql.open(tmp_path) as store:
        facts = [store.store("svc", f"status{i}", f"v{i}") for i in range(3)]
        store.delete(facts[0].fact_id)
        cruxsql.Recall(store).query_facts("status", known_at=timestamps.now_ns())  # builds the timeline
        db = store.db
        before = db.execute("SELECT count(*) FROM recall_changes").fetchone()[0]
        cp = replay_position.read_checkpoint(db)
        db.execute("BEGIN IMMEDIATE")
        try:
            derived_tables.run_rewrite_hooks(db, derived_tables.Rewrite(cp.generation, "0" * 32, cp.line_count, True))
            during = [db.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                      for t in ("recall_changes", "recall_event_times", "recall_timeline_state")]
        finally:
            db.execute("ROLLBACK")
        compaction.compact(store)
        after = [r["value"] for r in cruxsql.Recall(store).query_facts("status", known_at=timestamps.now_ns()).rows]
    assert before > 0
    assert during == [0, 0, 0]
    assert sorted(after) == ["v1", "v2"]
