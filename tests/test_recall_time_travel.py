"""known_at keeps answering the same after the journal is compacted."""

from __future__ import annotations

import time
from pathlib import Path

import cruxsql
from cruxsql.facts import timestamps
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
