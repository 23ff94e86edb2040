"""What keeps recall fast at a million facts: the known_at timeline extended by replay itself (so no
query has to build it), and memory_view's bounded count."""

from __future__ import annotations

from pathlib import Path

from cruxsql.facts import codec, timestamps
from cruxsql.facts.codec import Fact
from cruxsql.facts.store import Store
from cruxsql.recall.timeline import Timeline
from cruxsql.recall.facade import MEMORY_VIEW_COUNT_CAP, Recall

T0 = timestamps.parse_ns("2026-03-01T00:00:00Z")
H = 3_600_000_000_000

TIMELINE_TABLES = ("recall_event_times", "recall_changes", "recall_timeline_state")


def _fact(i: int, **extra) -> Fact:
    return Fact(fact_id=f"f_{i:03d}", tenant_hash="default", entity=f"svc{i % 3}", key="status",
                value=f"value {i}", confidence=1.0, stored_at=T0 + i * H, tokens=2, **extra)


def _journal(path: Path) -> list[str]:
    """Stores, then later changes of every kind known_at undoes (with times of their own)."""
    at = timestamps.format_event_time
    lines = [codec.encode_event(codec.StoreEvent(_fact(i))) for i in range(6)]
    lines += [
        codec.encode_event(codec.DeleteEvent("f_000", at(T0 + 10 * H))),
        codec.encode_event(codec.SupersedeEvent("f_001", "f_004", at(T0 + 11 * H))),
        codec.encode_event(codec.SetValidityEvent("f_002", T0, T0 + 20 * H, at(T0 + 12 * H))),
        codec.encode_event(codec.SetHorizonEvent("f_003", "volatile", at(T0 + 13 * H))),
        codec.encode_event(codec.ReverifyEvent("f_005", T0 + 14 * H)),
    ]
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return lines


def _timeline(store: Store) -> dict[str, list[tuple]]:
    return {t: sorted(store.db.execute(f"SELECT * FROM {t}").fetchall(), key=repr) for t in TIMELINE_TABLES}


def test_replay_keeps_the_known_at_timeline_current(tmp_path: Path) -> None:
    lines = _journal(tmp_path / "facts.jsonl")
    with Store(tmp_path) as store:
        generation = store.db.execute("SELECT generation FROM journal_checkpoint").fetchone()[0]
        replayed = _timeline(store)
        # every line has its time and the state names the last one, before any recall call
        assert replayed["recall_timeline_state"] == [(1, generation, len(lines))]
        assert len(replayed["recall_event_times"]) == len(lines)
        assert sorted({(c[0], c[1]) for c in replayed["recall_changes"] if c[2] > 6}) == [
            ("f_000", "deleted"), ("f_001", "superseded_by"), ("f_002", "validity"), ("f_003", "horizon"),
            ("f_005", "reverified")]
        # ... and equal to what the lazy build derives from the same view
        with store.db:
            for table in TIMELINE_TABLES:
                store.db.execute(f"DELETE FROM {table}")
        Timeline(store.db, store.journal).sync()
        assert _timeline(store) == replayed

        # a write through the Store extends it too, with no Recall in sight
        store.delete("f_002")
        state = store.db.execute("SELECT last_line FROM recall_timeline_state").fetchone()[0]
        assert state == len(lines) + 1
        assert store.db.execute("SELECT attr, v_int FROM recall_changes WHERE fact_id = 'f_002' AND line_no = ?",
                                (state,)).fetchall() == [("deleted", 1)]

        recall = Recall(store)
        ids = [r["fact_id"] for r in recall.query_facts("value", known_at=T0 + 10 * H + 1, top_k=20).rows]
        assert sorted(ids) == ["f_001", "f_002", "f_003", "f_004", "f_005"]


def test_memory_view_counts_up_to_the_cap(tmp_path: Path) -> None:
    n = MEMORY_VIEW_COUNT_CAP + 5
    (tmp_path / "facts.jsonl").write_text(
        "".join(codec.encode_event(codec.StoreEvent(_fact(i))) + "\n" for i in range(n)), encoding="utf-8")
    with Store(tmp_path) as store:
        recall = Recall(store)
        view = recall.memory_view(top_k=3)
        assert [f["id"] for f in view.facts] == [f"f_{n - 1:03d}", f"f_{n - 2:03d}", f"f_{n - 3:03d}"]
        assert (view.matched, view.left_out, view.capped) == (MEMORY_VIEW_COUNT_CAP, MEMORY_VIEW_COUNT_CAP - 3, True)
        assert view.to_dict()["capped"] is True
        exact = recall.memory_view("svc1", top_k=3)   # 335 facts: under the cap, counted exactly
        assert (exact.matched, exact.left_out, exact.capped) == (335, 332, False)
