"""Compaction builds the live facts' lines from a snapshot without the writer lock, and carries over
the lines appended meanwhile (cruxsql/governance/compaction_snapshot.py)."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, TypeVar

import apsw
import pytest
from support.mcp_clients import server_env
from support.retention_builders import FIXTURE_OWNER, fact_state, random_history

from cruxsql.errors import Conflict
from cruxsql.facts import event_indexes
from cruxsql.facts.store import Store, StoreRequest
from cruxsql.governance import compaction, compaction_snapshot, store_lines
from support.journal_files import journal_bytes, journal_text

T = TypeVar("T")


def _lines_under_the_lock(store: Store, pre: compaction_snapshot.PrebuiltLines, batch: int):
    with store.writer_lock():
        store.refresh()
        got = compaction_snapshot.live_chunks(store, pre, batch)
        want = [row for rows in store_lines.live_chunks(store.db, batch) for row in rows]
        return (None if got is None else [row for rows in got for row in rows]), want


def test_snapshot_lines_plus_a_plain_tail_are_the_lines_the_view_gives_now(tmp_path: Path) -> None:
    store = Store(tmp_path)
    facts = store.store_batch([StoreRequest(f"svc:{i % 7}", f"k{i % 5}", f"value {i}") for i in range(60)])
    for fact in facts[:6]:
        store.delete(fact.fact_id)
    pre = compaction_snapshot.prebuild(store, 7)
    assert pre is not None and len(pre) == 54 and set(pre.fact_ids()) == {f.fact_id for f in facts[6:]}
    # the tail: new facts, new versions (their predecessors' superseded_by changes), a delete, a validity
    # change, a supersession cleared
    store.store("svc:new", "k", "after the snapshot")
    head = store.store("svc:1", "k1", "a new version")
    store.delete(facts[10].fact_id)
    store.set_validity(facts[20].fact_id, 10**18, 2 * 10**18)
    store.clear_supersede(head.supersedes)
    got, want = _lines_under_the_lock(store, pre, 7)
    assert got is not None and got == want and len(want) == 55
    pre.close()


def _plain_history(store: Store, rng: random.Random, steps: int) -> None:
    """Stores, batches, new versions, deletes, supersessions set and cleared, validity: the ops whose every
    effect is on the facts their line names."""
    for i in range(steps):
        live = [r[0] for r in store.db.execute("SELECT fact_id FROM facts WHERE deleted = 0 ORDER BY seq")]
        roll = rng.random()
        if roll < 0.4 or len(live) < 2:
            store.store(f"e{rng.randrange(4)}", f"k{rng.randrange(3)}", f"v{i} \u00e9\"q\"",
                        tenant=rng.choice(["default", "acme"]))
        elif roll < 0.55:
            store.store_batch([StoreRequest(f"e{rng.randrange(4)}", "k0", f"b{i}.{j}") for j in range(3)])
        elif roll < 0.7:
            store.delete(rng.choice(live))
        elif roll < 0.8:
            a, b = rng.sample(live, 2)
            try:
                store.supersede(a, b)
            except Conflict:  # two tenants
                pass
        elif roll < 0.9:
            gone = [r[0] for r in store.db.execute("SELECT fact_id FROM facts WHERE superseded_by IS NOT NULL")]
            if gone:
                store.clear_supersede(rng.choice(gone))
        else:
            store.set_validity(rng.choice(live), 10**18 + i, None)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_snapshot_lines_after_a_random_plain_tail_are_the_lines_the_view_gives_now(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    store = Store(tmp_path)
    _plain_history(store, rng, 80)
    pre = compaction_snapshot.prebuild(store, 4)
    assert pre is not None
    _plain_history(store, rng, 40)
    got, want = _lines_under_the_lock(store, pre, 4)
    assert got is not None and got == want
    pre.close()


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_snapshot_lines_after_any_tail_are_exact_or_not_used(tmp_path: Path, seed: int) -> None:
    store = Store(tmp_path)
    random_history(store, seed, steps=80)
    pre = compaction_snapshot.prebuild(store, 5)
    assert pre is not None
    random_history(store, seed + 100, steps=25)  # consolidations, horizons, control facts: often not usable
    got, want = _lines_under_the_lock(store, pre, 5)
    assert got is None or got == want
    pre.close()


def test_snapshot_not_used_after_another_compaction_or_a_fact_event_of_cruxsqls_own(tmp_path: Path,
                                                                                   monkeypatch) -> None:
    monkeypatch.setenv("CORECRUXD_SHARE_PREFIXES_OVERRIDE", "")
    store = Store(tmp_path)
    facts = store.store_batch([StoreRequest("svc", f"k{i}", f"v{i}") for i in range(10)])
    store.delete(facts[0].fact_id)
    pre = compaction_snapshot.prebuild(store, 100)
    assert pre is not None
    compaction.compact_unchecked(store)  # a new generation, a new journal
    assert _lines_under_the_lock(store, pre, 100)[0] is None
    pre = compaction_snapshot.prebuild(store, 100)
    store.set_horizon(facts[3].fact_id, "volatile", owner=FIXTURE_OWNER)  # cruxsql-fact-events.jsonl
    assert _lines_under_the_lock(store, pre, 100)[0] is None
    pre = compaction_snapshot.prebuild(store, 100)
    store.store("__repo_scan__::t::r", "content", "scan", private=True, owner=FIXTURE_OWNER)  # removes its chain
    assert _lines_under_the_lock(store, pre, 100)[0] is None


def test_a_compaction_from_a_snapshot_writes_what_one_under_the_lock_writes(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    store = Store(a)
    random_history(store, 7, steps=120)
    store.close()
    subprocess.run(["cp", "-r", str(a), str(b)], check=True)
    with Store(a) as sa, Store(b) as sb:
        reports = []
        for s, snapshot in ((sa, True), (sb, False)):
            pre = compaction_snapshot.prebuild(s, 9) if snapshot else None
            with s.writer_lock():
                reports.append(compaction.compact_unchecked(s, prebuilt=pre))
        assert [r.lines_from_snapshot for r in reports] == [True, False]
        stores = [[line for line in journal_bytes(d).splitlines() if line.startswith(b'{"op":"store"')]
                  for d in (a, b)]
        assert stores[0] == stores[1] and stores[0]
        assert fact_state(sa) == fact_state(sb)
        assert sa.verify().ok


@pytest.mark.slow
@pytest.mark.parametrize("seed,batch", [(1, 4), (2, 4), (3, 20_000), (4, 20_000)])
def test_a_compaction_after_a_tail_keeps_the_snapshot_head_and_writes_the_rest(tmp_path: Path, monkeypatch,
                                                                               seed: int, batch: int) -> None:
    """The leading lines the tail left alone come from the snapshot's file with their shadow event rows;
    the rest is written under the lock: the journal and the view are what a compaction under the lock
    writes. batch 4: the snapshot's file is copied and the rows cut in shadow tables filled 4 rows a
    transaction; 20,000: the file itself becomes the journal."""
    monkeypatch.setattr(compaction, "_BATCH", batch)
    rng = random.Random(seed)
    store = Store(tmp_path)
    _plain_history(store, rng, 70)
    pre = compaction_snapshot.prebuild(store, batch)
    assert pre is not None
    order = [r[0] for r in store.db.execute("SELECT fact_id FROM facts WHERE deleted = 0 "
                                            "ORDER BY stored_at_ns, fact_id")]
    store.delete(order[3])  # the 4th line goes: the head kept is the 3 lines before it
    store.set_validity(order[10], 10**18, None)
    store.store_batch([StoreRequest("after", f"k{i}", f"stored after the snapshot {i}") for i in range(5)])
    want = [row[0] for rows in store_lines.live_chunks(store.db, 100) for row in rows]
    state = {fid: f for fid, f in fact_state(store).items() if not f["deleted"]}
    with store.writer_lock():
        report = compaction.compact_unchecked(store, prebuilt=pre)
    pre.close()
    assert report.lines_from_snapshot and report.lines_kept_from_snapshot == 3
    got = [line for line in journal_bytes(tmp_path).splitlines() if line.startswith(b'{"op":"store"')]
    assert got == want
    assert fact_state(store) == state
    verified = store.verify()
    assert verified.ok and verified.view_matches_replay, verified.differences
    assert not store.db.execute("SELECT name FROM sqlite_master WHERE name LIKE 'compaction_next%'").fetchall()


def _text_index_rows(store: Store) -> tuple:
    """recall's whole text index, row by row (statistics of scopes left without facts aside)."""
    return tuple(sorted(tuple(r) for r in store.db.execute(f"SELECT * FROM {table}")) for table in (
        "recall_text", "recall_grams", "recall_terms", "recall_term_stats WHERE facts > 0"))


def test_the_text_index_drop_planned_from_the_snapshot_leaves_what_a_fresh_index_holds(tmp_path: Path,
                                                                                       monkeypatch) -> None:
    """The deleted facts' postings are planned in the snapshot (`text_index.prepare_carry`); under the lock
    only the rows the tail's facts were added to are read again, and the facts the tail deleted dropped as
    usual. The tail stores facts with the dropped facts' words in the same postings block (their rows
    changed after the plan read them), deletes some (one of its own), and supersedes one: the index left
    equals one built from scratch over the compacted view."""
    from cruxsql.recall.text_index import TextIndex

    store = Store(tmp_path)
    words = ["alpha", "beta", "gamma", "Été", "delta-9", "x_y", "omega"]
    facts = store.store_batch([StoreRequest(f"svc:{i % 5}", f"k{i}", f"{words[i % 7]} {words[i * 3 % 7]} v{i % 11}",
                                            tenant_hash=("default", "acme")[i % 2]) for i in range(120)])
    facts.append(store.store("note", "n", "alpha private", private=True, agent="bot"))
    for fact in facts[::6]:
        store.delete(fact.fact_id)
    pre = compaction_snapshot.prebuild(store, 7)
    assert pre is not None and pre.prepared
    tail = store.store_batch([StoreRequest(f"svc:{i % 3}", f"t{i}", f"{words[i % 7]} zircon v{i % 11}",
                                           tenant_hash=("default", "acme")[i % 2]) for i in range(9)])
    store.store("note", "n", "alpha private again", private=True, agent="bot")
    extra = [facts[1], facts[8], tail[2]]
    for fact in extra:
        store.delete(fact.fact_id)
    seq_of = dict(store.db.execute("SELECT fact_id, seq FROM facts"))
    dropped: list[list[int]] = []
    drop = TextIndex.drop
    monkeypatch.setattr(TextIndex, "drop", lambda self, rows: (dropped.append([r[0] for r in rows]), drop(self, rows)))
    with store.writer_lock():
        report = compaction.compact_unchecked(store, prebuilt=pre)
    pre.close()
    assert report.lines_from_snapshot and not report.seq_renumbered
    # under the lock: only the facts the tail deleted (the rest was planned in the snapshot)
    assert dropped == [sorted(seq_of[f.fact_id] for f in extra)]
    carried = _text_index_rows(store)
    assert any(row[2] == "zircon" for row in carried[2])  # (the tail's words are in it)
    index = TextIndex(store.db)
    with store.db:
        index._wipe()
    index.sync()
    assert carried == _text_index_rows(store)


@pytest.mark.slow
@pytest.mark.parametrize("run", ["erasure", "retention"])
def test_an_erasure_and_a_retention_run_take_their_compactions_snapshot_before_the_writer_lock(
        tmp_path: Path, monkeypatch, run: str) -> None:
    """Writers wait for an erasure's (or a retention run's) locked part only: its compaction's snapshot
    phase runs before it takes the writer lock, and the compaction under the lock carries its own
    deletions over from that snapshot. The values still go from the journal and every other copy."""
    from cruxsql.governance import erasure, retention

    store = Store(tmp_path)
    facts = store.store_batch([StoreRequest(f"user:{i % 4}", f"k{i}", f"secret-value-{i:03d}") for i in range(40)])
    store.delete(facts[0].fact_id)
    locks_held: list[int] = []
    prebuild = compaction_snapshot.prebuild
    monkeypatch.setattr(compaction_snapshot, "prebuild",
                        lambda s, batch: (locks_held.append(s.journal._lock_depth), prebuild(s, batch))[1])
    reports: list[compaction.CompactionReport] = []
    unchecked = compaction.compact_unchecked
    monkeypatch.setattr(compaction, "compact_unchecked", lambda *a, **k: reports.append(unchecked(*a, **k)) or reports[-1])
    if run == "erasure":
        report = erasure.erase(store, erasure.Selection(entity_prefixes=("user:1",)), reason="dsr")
        gone = [f for f in facts if f.entity == "user:1"] + [facts[0]]
    else:
        time.sleep(1.1)
        report = retention.apply(store, "1s")
        gone = facts
    assert locks_held == [0]  # one snapshot, taken without the writer lock
    assert len(reports) == 1 and reports[0].lines_from_snapshot and reports[0].facts_dropped == len(gone)
    assert report["ok"], report["verification"]
    journal = journal_bytes(tmp_path)
    assert not [f.value for f in gone if f.value.encode() in journal]
    assert all(f.value.encode() in journal for f in facts if f not in gone)
    verified = store.verify()
    assert verified.ok and verified.view_matches_replay, verified.differences


def test_an_erasure_or_a_retention_run_with_nothing_to_erase_takes_no_snapshot(tmp_path: Path, monkeypatch) -> None:
    """A snapshot costs a pass over the whole view (tens of seconds at 1M facts): not taken when a first
    look at the committed view finds nothing to erase."""
    from cruxsql.governance import erasure, retention

    store = Store(tmp_path)
    store.store_batch([StoreRequest(f"user:{i}", "k", f"value {i}") for i in range(10)])
    taken: list[int] = []
    prebuild = compaction_snapshot.prebuild
    monkeypatch.setattr(compaction_snapshot, "prebuild", lambda s, batch: (taken.append(1), prebuild(s, batch))[1])
    assert "outcome" in erasure.erase(store, erasure.Selection(entity_prefixes=("nobody:",)), reason="dsr")
    assert retention.apply(store, "30d")["counts"]["facts_erased"] == 0
    assert taken == []


def test_shadow_tables_of_a_killed_snapshot_phase_are_dropped_by_the_next_compaction(tmp_path: Path,
                                                                                       monkeypatch) -> None:
    """A killed snapshot phase's shadow tables are dropped by the next compaction's snapshot phase, so that
    the alternate index names they hold are free for its own shadow tables (no index built under the lock)."""
    store = Store(tmp_path)
    facts = store.store_batch([StoreRequest("svc", f"k{i}", f"v{i}") for i in range(20)])
    store.delete(facts[0].fact_id)
    child = subprocess.run([sys.executable, "-c", "import os, sys\n"
                            "from cruxsql.facts.store import Store\n"
                            "from cruxsql.governance import compaction_snapshot\n"
                            "pre = compaction_snapshot.prebuild(Store(sys.argv[1]), 5)\n"
                            "print(pre.shadow, flush=True)\n"
                            "os._exit(0)  # as if killed: nothing is closed or dropped", str(tmp_path)],
                           env=server_env(), capture_output=True, text=True, timeout=60)
    prefix = child.stdout.strip()
    assert child.returncode == 0 and prefix.startswith(compaction_snapshot.SHADOW_PREFIX), child.stderr
    assert compaction_snapshot.shadow_tables_present(store.db, prefix)
    under, _, report = _compact_recording_index_builds(store, monkeypatch)
    assert report.lines_kept_from_snapshot == 19 and under == []
    assert not store.db.execute("SELECT name FROM sqlite_master WHERE name LIKE 'compaction_next%'").fetchall()
    assert store.verify().ok


WRITER = r"""
import json, sys, time
from contextlib import contextmanager
from pathlib import Path
from cruxsql.facts.store import Store
data, out = sys.argv[1], Path(sys.argv[2])
stop = out.with_name("stop")
done = []
with Store(data) as store:
    i = 0
    while not stop.exists():
        started = time.time()
        fact = store.store("writer", f"k{i % 20}", f"acknowledged {i}")
        done.append((started, time.time(), fact.fact_id, f"k{i % 20}"))
        i += 1
        if i == 1:
            out.with_name("ready").touch()
out.write_text(json.dumps(done))
"""

COMPACT = r"""
import json, sys, time
from cruxsql.facts.store import Store
from cruxsql.governance import compaction, compaction_snapshot
real = compaction_snapshot.prebuild
def slow_prebuild(store, batch):
    pre = real(store, batch)
    time.sleep(float(sys.argv[2]))  # a slow snapshot build (a big store): the writer goes on meanwhile
    return pre
compaction_snapshot.prebuild = slow_prebuild
with Store(sys.argv[1]) as store:
    started = time.time()
    report = compaction.compact(store)
    print(json.dumps({"started": started, "ended": time.time(), "from_snapshot": report.lines_from_snapshot,
                      "dropped": report.facts_dropped, "seconds": report.seconds, "locked": report.seconds_locked}))
"""


def _beside_a_writer(tmp_path: Path, data: Path, work: Callable[[], T]) -> tuple[T, list]:
    """`work()`'s result, run while a writer process stores in a loop (WRITER), and the writes it
    acknowledged: (started, ended, fact_id, key) each."""
    out = tmp_path / "writer.json"
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(data), str(out)], env=server_env())
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "ready").exists():
            assert writer.poll() is None and time.monotonic() < deadline
            time.sleep(0.02)
        result = work()
        time.sleep(0.3)
    finally:
        (tmp_path / "stop").touch()
        writer.wait(timeout=60)
    assert writer.returncode == 0
    return result, json.loads(out.read_text())


def _compact_in_a_process(data: Path, slow_snapshot_s: float) -> dict:
    comp = subprocess.run([sys.executable, "-c", COMPACT, str(data), str(slow_snapshot_s)], env=server_env(),
                          capture_output=True, text=True, timeout=120)
    assert comp.returncode == 0, comp.stderr
    return json.loads(comp.stdout)


@pytest.mark.slow
def test_a_writer_goes_on_while_a_compaction_builds_from_its_snapshot_and_loses_nothing(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with Store(data) as store:
        facts = store.store_batch([StoreRequest(f"svc:{i % 50}", f"k{i % 13}", f"value {i} " + "x" * 80)
                                   for i in range(3000)])
        for fact in facts[::10]:
            store.delete(fact.fact_id)
    result, done = _beside_a_writer(tmp_path, data, lambda: _compact_in_a_process(data, 1.5))
    assert result["from_snapshot"] and result["dropped"] == 300
    took = result["ended"] - result["started"]
    during = [end - start for start, end, *_ in done if end > result["started"] and start < result["ended"]]
    # the writer went on during the compaction (most of whose time was its snapshot phase) and no single
    # store() waited anything like the compaction's length
    assert len(during) >= 10, during
    assert max(during) < 0.6 * took, (max(during), took)
    # every acknowledged write is in the compacted journal and the view, each key's last write its only head
    journal = journal_text(data)
    with Store(data) as store:
        for _, _, fact_id, _ in done:
            assert fact_id in journal
            assert store.get(fact_id).value.startswith("acknowledged")
        last = {key: fact_id for _, _, fact_id, key in done}
        heads = dict(store.db.execute("SELECT key, fact_id FROM facts WHERE entity = 'writer' AND deleted = 0 "
                                      "AND superseded_by IS NULL"))
        assert heads == last
        report = store.verify()
        assert report.ok and report.view_matches_replay, report.differences
        store.rebuild()  # the journal alone says the same
        assert dict(store.db.execute("SELECT key, fact_id FROM facts WHERE entity = 'writer' AND deleted = 0 "
                                     "AND superseded_by IS NULL")) == last


@pytest.mark.slow
def test_a_writer_waits_for_a_small_part_of_a_compaction_only(tmp_path: Path) -> None:
    """The writer lock is held for a small part of a compaction: its lines, their bytes on disk (fsynced),
    their event rows and their bookkeeping are all done before it, from the snapshot
    (compaction_snapshot.py). A writer storing in a loop beside it: its longest store() is a fraction of
    the compaction's time without the lock. (Before: the lines were re-read, written, fsynced and their
    rows inserted under the lock, so a store() waited longer than the whole lock-free part: ratios of
    0.82-1.8 measured here, against 0.09-0.84 now, at load 4-5 on 2 cores: the best of three compactions
    is compared.)"""
    data = tmp_path / "data"
    with Store(data) as store:
        for batch in range(8):  # few deletes: what is left under the lock is mostly the swap itself
            store.store_batch([StoreRequest(f"svc:{i % 40}", f"k{batch}.{i}", f"value {batch} {i} " + "x" * 1500)
                               for i in range(1000)])

    def three_compactions() -> list[dict]:
        results = []
        for _ in range(3):
            with Store(data) as store:
                for (fact_id,) in store.db.execute("SELECT fact_id FROM facts WHERE entity = 'svc:7' AND deleted = 0 "
                                                   "ORDER BY seq LIMIT 8").fetchall():
                    store.delete(fact_id)
            time.sleep(0.3)
            results.append(_compact_in_a_process(data, 0))
        return results

    results, done = _beside_a_writer(tmp_path, data, three_compactions)
    ratios = []
    for result in results:
        during = [end - start for start, end, *_ in done if end > result["started"] and start < result["ended"]]
        assert len(during) >= 3, during
        ratios.append(max(during) / (result["seconds"] - result["locked"]))
    assert min(ratios) < 0.6, (ratios, results)
    with Store(data) as store:
        assert {store.get(fact_id).value for _, _, fact_id, _ in done} == {f"acknowledged {i}" for i in range(len(done))}
        assert store.verify().ok


def _event_indexes(store: Store) -> dict[str, str]:
    """name -> definition (the SQL from its column list on) of the event tables' indexes."""
    return {name: sql[sql.index("("):] for name, sql in event_indexes.live(store.db)}


def _compact_recording_index_builds(store: Store, monkeypatch) -> tuple[list[str], list[str], compaction.CompactionReport]:
    """Compact; (the CREATE INDEX statements run under the writer lock, those run before it, the report)."""
    held = {"now": False}
    under, before = [], []
    lock = store.writer_lock

    @contextmanager
    def recording_lock():
        with lock():
            held["now"] = True
            try:
                yield
            finally:
                held["now"] = False

    def trace(event: dict) -> None:
        if event["sql"].startswith("CREATE INDEX"):
            (under if held["now"] else before).append(event["sql"])

    monkeypatch.setattr(store, "writer_lock", recording_lock)
    store.db.trace_v2(apsw.SQLITE_TRACE_STMT, trace)
    try:
        report = compaction.compact(store)
    finally:
        store.db.trace_v2(0, None)
        monkeypatch.undo()
    assert report.lines_from_snapshot
    return under, before, report


def test_the_event_tables_indexes_are_built_before_the_lock_under_names_that_flip(tmp_path: Path, monkeypatch) -> None:
    """The shadow event tables get the live tables' indexes under alternate names, so that no index is
    built under the writer lock; each compaction flips the names, and the definitions stay."""
    store = Store(tmp_path)
    facts = store.store_batch([StoreRequest(f"svc:{i % 5}", f"k{i}", f"value {i}") for i in range(40)])
    created = _event_indexes(store)
    assert set(created) == {"journal_event_facts_fact", "journal_events_op_time"}
    for round_no, fact in enumerate(facts[:2]):
        store.delete(fact.fact_id)
        under, before, _ = _compact_recording_index_builds(store, monkeypatch)
        assert under == [] and len(before) == 2, (under, before)
        flipped = event_indexes.alternate if round_no == 0 else str
        assert _event_indexes(store) == {flipped(name): definition for name, definition in created.items()}
        plan = " ".join(str(r) for r in store.db.execute(
            "EXPLAIN QUERY PLAN SELECT line_no FROM journal_event_facts WHERE fact_id = ?", ("x",)))
        assert "USING" in plan and "INDEX" in plan, plan
        verified = store.verify()
        assert verified.ok and verified.view_matches_replay, verified.differences


def test_event_indexes_changed_since_the_snapshot_are_built_under_the_lock_as_they_are_now(tmp_path: Path) -> None:
    store = Store(tmp_path)
    facts = store.store_batch([StoreRequest("svc", f"k{i}", f"value {i}") for i in range(30)])
    store.delete(facts[0].fact_id)
    pre = compaction_snapshot.prebuild(store, 7)
    assert pre is not None and pre.shadow is not None and len(pre.shadow_indexes) == 2
    with store.db:  # as a newer cruxsql's migration might, after the snapshot
        store.db.execute("CREATE INDEX journal_events_at ON journal_events (event_at)")
    want = _event_indexes(store)
    with store.writer_lock():
        report = compaction.compact_unchecked(store, prebuilt=pre)
    pre.close()
    assert report.lines_from_snapshot and report.lines_kept_from_snapshot == 29
    assert _event_indexes(store) == want
    assert not store.db.execute("SELECT name FROM sqlite_master WHERE name LIKE 'compaction_next%'").fetchall()
    assert store.verify().ok
