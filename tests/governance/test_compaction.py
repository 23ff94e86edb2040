"""Compaction: byte-identical re-serialisation, view == fresh replay, tombstones, history shapes."""

from __future__ import annotations

import json

import pytest
from support.journal_files import journal_bytes
from support.retention_builders import FIXTURE_OWNER, append_events, fact_state, random_history

from cruxsql.errors import NotFound
from cruxsql.facts import codec, replay_position, view
from cruxsql.facts.journal import Journal
from cruxsql.facts.store import Store, StoreRequest
from cruxsql.governance import compaction, compaction_snapshot

CRUX_LINES = [
    # as a Crux daemon writes them (serde_json's output of JournalEvent): ms / ns fractions, source receipts, actors
    '{"op":"store","fact":{"fact_id":"f_9b1c4e2a7d3f4b6e8a0c1d2e3f4a5b6c","tenant_hash":"default","entity":"deployment",'
    '"key":"strategy","value":"canary deployment with evaluator programme","source_receipt":"crx_123","confidence":0.95,'
    '"stored_at":"2026-05-27T10:11:12.123456789Z","tokens":11,"deleted":false,"version":1,"private":false,'
    '"horizon_class":"none"}}',
    '{"op":"store","fact":{"fact_id":"f_0d4e61b2c3a94f0e9d8c7b6a5f4e3d2c","tenant_hash":"default","entity":"deployment",'
    '"key":"strategy","value":"blue-green \\"quoted\\" \u00fcnicode \\u0001","source_receipt":null,"confidence":1.0,'
    '"stored_at":"2026-05-27T10:15:00.500Z","tokens":3,"deleted":false,"version":2,'
    '"supersedes":"f_9b1c4e2a7d3f4b6e8a0c1d2e3f4a5b6c","private":false,"horizon_class":"none","actor":"claude-work"}}',
    '{"op":"store_batch","facts":[{"fact_id":"f_aa11bb22cc33dd44ee55ff6677889900","tenant_hash":"default",'
    '"entity":"authority::passport","key":"record","value":"passport","source_receipt":"ad_mr_test","confidence":1.0,'
    '"stored_at":"2026-05-27T12:00:00.111222333Z","tokens":2,"deleted":false,"version":1,"private":true,'
    '"horizon_class":"none","actor":"reviewer"},{"fact_id":"f_bb22cc33dd44ee55ff66778899001122","tenant_hash":"acme",'
    '"entity":"authority::request","key":"record","value":"approved","source_receipt":"ad_mr_test","confidence":0.3,'
    '"stored_at":"2026-05-27T12:00:00Z","tokens":2,"deleted":false,"version":1,"private":false,'
    '"horizon_class":"stable","valid_from":"2026-06-01T00:00:00Z","access_count":3,'
    '"last_accessed_at":"2026-05-28T00:00:00.000001Z"}]}',
]


def _store_fact_jsons(data: bytes) -> list[str]:
    """The fact objects of every store / store_batch line, as the exact bytes in the journal."""
    out = []
    for line in data.decode("utf-8").splitlines():
        event = codec.decode_event(line.encode("utf-8"))
        for fact in codec.event_facts(event):
            out.append(fact.to_json())
            assert fact.to_json() in line  # the codec reproduces the journal's own bytes
    return out


def test_no_deletions_reproduces_every_store_line_byte_identically(tmp_path):
    (tmp_path / "facts.jsonl").write_text("\n".join(CRUX_LINES) + "\n", encoding="utf-8")
    store = Store(tmp_path)
    store.store("user:1", "name", "Ada \u2603 \"quoted\"", confidence=0.95, source_receipt="crx_9", actor="agent:x")
    store.store_batch([StoreRequest("user:2", "k", "v" * 300, tenant_hash="t2"),
                       StoreRequest("notes", "n", "private by prefix", private=True, agent="bob")])
    before = journal_bytes(tmp_path)
    originals = _store_fact_jsons(before)
    report = compaction.compact(store)
    after = journal_bytes(tmp_path).decode("utf-8")
    assert report.facts_dropped == 0 and report.tombstones_kept == 0
    assert report.facts_retained == len(originals) == 7
    store_lines = [line for line in after.splitlines() if line.startswith('{"op":"store","fact":')]
    assert len(store_lines) == len(originals)
    for fact_json in originals:
        assert '{"op":"store","fact":' + fact_json + "}" in store_lines
    # sorted by (stored_at, fact_id)
    keys = [(codec.decode_event(l.encode()).fact.stored_at, codec.decode_event(l.encode()).fact.fact_id)
            for l in store_lines]
    assert keys == sorted(keys)
    # access counts the journal carried stay exactly as they were (nothing else is baked in)
    assert '"access_count":3,"last_accessed_at":"2026-05-28T00:00:00.000001Z"' in after
    assert store.verify().ok


def test_compacted_journal_shape_supersede_and_tombstones(tmp_path):
    store = Store(tmp_path)
    a = store.store("user:1", "name", "first MARKER_FIRST_VERSION")
    b = store.store("user:1", "name", "second")
    gone = store.store("user:9", "ssn", "MARKER_ERASE_ME_123")
    store.delete(gone.fact_id)
    assert b"MARKER_ERASE_ME_123" in journal_bytes(tmp_path)
    report = compaction.compact(store)
    data = journal_bytes(tmp_path)
    assert b"MARKER_ERASE_ME_123" not in data
    assert b"MARKER_FIRST_VERSION" in data  # superseded versions are live history, kept
    lines = [json.loads(l) for l in data.decode().splitlines()]
    # no re-stamped supersede line: the store line carries superseded_by (Crux reads it the same way)
    assert [l["op"] for l in lines] == ["store", "store", "delete"]
    assert lines[0]["fact"]["fact_id"] == a.fact_id and lines[0]["fact"]["superseded_by"] == b.fact_id
    assert lines[2] == {"op": "delete", "fact_id": gone.fact_id, "deleted_at": lines[2]["deleted_at"]}
    assert lines[2]["deleted_at"].endswith("+00:00")
    assert (report.facts_dropped, report.facts_retained, report.tombstones_kept) == (1, 2, 1)
    assert report.bytes_after == len(data) < report.bytes_before
    with pytest.raises(NotFound):
        store.get(gone.fact_id)
    assert store.get(a.fact_id).superseded_by == b.fact_id
    assert store.verify().ok


@pytest.mark.slow
def test_verify_is_clean_right_after_a_compaction(tmp_path):
    """Every line of a compacted journal replays: nothing skipped, tombstones reported as such."""
    store = Store(tmp_path)
    random_history(store, 3, steps=120)
    assert store.db.execute("SELECT count(*) FROM facts WHERE superseded_by IS NOT NULL").fetchone()[0] > 5
    assert store.db.execute("SELECT count(*) FROM facts WHERE deleted = 1").fetchone()[0] > 5
    report = compaction.compact(store)
    verify = store.verify()
    assert verify.ok and verify.skipped_events == [] and verify.tombstones == report.tombstones_kept > 0
    # a fresh open of the compacted journal (no view) agrees: every line applied or a tombstone
    (tmp_path / "cruxsql.db").unlink()
    for suffix in ("-wal", "-shm"):
        (tmp_path / f"cruxsql.db{suffix}").unlink(missing_ok=True)
    fresh = Store(tmp_path)
    rows = fresh.db.execute("SELECT op, applied, skip_reason FROM journal_events WHERE applied = 0").fetchall()
    assert rows == [("delete", 0, view.TOMBSTONE)] * report.tombstones_kept
    assert fresh.verify().ok


def test_corrupt_lines_block_compaction_unless_dropped_into_quarantine(tmp_path):
    store = Store(tmp_path)
    store.store("a", "k", "v")
    corrupt = [b'{"op":"store","fact":{broken', b'{"op":"future_op","fact_id":"f_1"}', b"\xff\xfe not utf-8"]
    with (tmp_path / "facts.jsonl").open("ab") as fh:
        for line in corrupt:
            fh.write(line + b"\n")
    store.store("b", "k", "after the corrupt lines")
    before = journal_bytes(tmp_path)
    with pytest.raises(compaction.CorruptLinesPresent) as err:
        compaction.compact(store)
    assert str(err.value).startswith("the journal has 3 corrupt line(s) (line 2, 3, 4) that compaction would drop")
    assert journal_bytes(tmp_path) == before and list(tmp_path.glob("facts.jsonl.corrupt.*")) == []
    report = compaction.compact(store, drop_corrupt=True)
    kept = tmp_path / report.corrupt_lines_file
    assert report.corrupt_lines_dropped == 3 and kept.name.startswith("facts.jsonl.corrupt.")
    assert kept.read_bytes() == b"".join(line + b"\n" for line in corrupt)  # byte for byte, in order
    assert kept.stat().st_mode & 0o777 == 0o600
    assert all(line not in journal_bytes(tmp_path) for line in corrupt)
    assert store.verify().ok


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(6))
def test_random_history_compacts_to_view_equal_to_fresh_replay(tmp_path, seed):
    store = Store(tmp_path)
    random_history(store, seed)
    corrupt = b'{"op":"store","fact":{broken\n'
    (tmp_path / "facts.jsonl").open("ab").write(corrupt)  # a corrupt middle line
    store.store("late", "k", "after corrupt line")
    live_before = {k: v for k, v in fact_state(store).items() if not v["deleted"]}
    gen_before = store.db.execute("SELECT generation FROM journal_checkpoint").fetchone()[0]
    report = compaction.compact(store, drop_corrupt=True)
    assert report.view_update == "direct"
    assert report.corrupt_lines_dropped == 1
    assert (tmp_path / report.corrupt_lines_file).read_bytes() == corrupt
    verify = store.verify()
    assert verify.view_matches_replay, verify.differences
    assert not verify.corrupt_lines
    assert fact_state(store) == live_before  # no live fact lost or changed
    assert store.db.execute("SELECT generation FROM journal_checkpoint").fetchone()[0] != gen_before
    # reopening replays nothing and rebuilds nothing
    store.close()
    reopened = Store(tmp_path)
    assert reopened.last_replay.events == 0 and not reopened.last_replay.rebuilt
    # a second compaction is stable and appends keep working
    compaction.compact(reopened)
    reopened.store("after", "k", "v")
    assert reopened.verify().view_matches_replay
    assert fact_state(reopened) == {**live_before, **{k: v for k, v in fact_state(reopened).items()
                                                      if k not in live_before}}


@pytest.mark.slow
def test_direct_view_update_equals_rebuild(tmp_path):
    dirs = []
    for mode in ("direct", "rebuild"):
        d = tmp_path / mode
        store = Store(d)
        random_history(store, 42, steps=80)
        report = compaction.compact(store, view_update=mode)
        assert report.view_update == mode
        assert store.verify().view_matches_replay
        dirs.append(store)
    # each is also identical to a from-scratch rebuild of its own journal (seq values may keep their old
    # numbers when the replay order did not change; their order is what replay defines)
    q = "SELECT fact_id, line_no, row_number() OVER (ORDER BY seq) FROM facts ORDER BY fact_id"
    for store in dirs:
        expected = store.db.execute(q).fetchall()
        store.rebuild()
        assert store.db.execute(q).fetchall() == expected


def test_consolidation_provenance_survives(tmp_path):
    store = Store(tmp_path)
    s1 = store.store("proj", "status", "draft")
    s2 = store.store("proj", "status2", "review")
    canonical = codec.Fact(fact_id="f_" + "c" * 32, entity="proj", key="status", value="settled", confidence=0.8,
                           stored_at=s2.stored_at + 1, tokens=2, version=2, supersedes=s1.fact_id,
                           horizon_class="stable", actor="agent:codex")
    from support.retention_builders import now_text
    append_events(store, [codec.ConsolidateEvent(canonical, [s1.fact_id, s2.fact_id], now_text())])
    report = compaction.compact(store)
    assert report.provenance_lines == 1
    lines = journal_bytes(tmp_path).decode().splitlines()
    prov = json.loads(lines[-1])
    assert prov["op"] == "consolidation_provenance" and prov["source_fact_ids"] == [s1.fact_id, s2.fact_id]
    assert prov["tenant_hash"] == "default"
    rows = store.db.execute("SELECT source_fact_id FROM consolidation_sources ORDER BY position").fetchall()
    assert [r[0] for r in rows] == [s1.fact_id, s2.fact_id]
    assert store.verify().view_matches_replay
    with pytest.raises(Exception, match="consolidation member"):
        store.delete(s1.fact_id)


def test_latest_only_chain_keeps_only_the_last_snapshot(tmp_path, monkeypatch):
    """Replay prunes a latest-only control chain to its last fact, so the view never holds two and the
    direct view update is exact (there is no rebuild fallback to reach)."""
    monkeypatch.setenv("CORECRUXD_SHARE_PREFIXES_OVERRIDE", "")
    store = Store(tmp_path)
    store.store("__repo_scan__::t::r", "content", "snapshot 1", private=True, owner=FIXTURE_OWNER)
    last = store.store("__repo_scan__::t::r", "content", "snapshot 2", private=True, owner=FIXTURE_OWNER)
    assert [r[0] for r in store.db.execute("SELECT fact_id FROM facts")] == [last.fact_id]
    report = compaction.compact(store)
    assert report.view_update == "direct" and report.facts_retained == 1
    assert b"snapshot 1" not in journal_bytes(tmp_path)
    verify = store.verify()
    assert verify.view_matches_replay and verify.skipped_events == []


def test_empty_store_compacts_to_empty_journal(tmp_path):
    store = Store(tmp_path)
    f = store.store("a", "b", "only")
    store.delete(f.fact_id)
    compaction.compact(store)
    # a second pass drops the tombstone-only facts too: nothing left but tombstones of unknown ids
    report = compaction.compact(store)
    assert report.facts_retained == 0
    assert journal_bytes(tmp_path) == b""
    assert store.verify().view_matches_replay
    store.store("a", "b", "again")
    assert store.verify().view_matches_replay


def test_sql_built_store_lines_equal_the_codec_encoding(tmp_path):
    """Every live fact's compacted `store` line, built by SQLite, is byte for byte the codec's encoding of
    the same fact: Crux-written lines, a random history, every optional field, confidences that need
    f32 shortest-form rendering, and strings with quotes, backslashes, every control character,
    U+2028, non-ASCII and astral text."""
    from cruxsql.facts import view
    from cruxsql.governance import store_lines
    (tmp_path / "facts.jsonl").write_text("\n".join(CRUX_LINES) + "\n", encoding="utf-8")
    store = Store(tmp_path)
    random_history(store, 7, steps=150)
    for conf in (0.0, -0.0, 1e-7, 0.1, 0.333333343267, 1.0):
        f = store.store("conf", "k", "v", confidence=abs(conf) if conf else conf)
        store.set_validity(f.fact_id, 1, None)
    odd = "".join(map(chr, range(32))) + '"\\/\u2028\u2029\x7f é 東京 \U0001f600 \\u0000'
    store.store(odd, "k" + odd, "v" + odd, source_receipt="r" + odd, actor="a" + odd)
    store.store("plain", "k", "v", source_receipt=None, actor=None, private=True, horizon_class="volatile")
    store.db.execute("UPDATE facts SET access_count = 3, last_accessed_at = stored_at, "
                     "last_accessed_at_ns = stored_at_ns WHERE rowid % 5 = 0")
    expected = {r[0]: b'{"op":"store","fact":' + view.fact_from_row(r[1:]).to_json().encode() + b"}"
                for r in store.db.execute(f"SELECT fact_id, {view.FACT_SELECT} FROM facts WHERE deleted = 0")}
    got = {fid: line for rows in store_lines.live_chunks(store.db, 7) for line, fid, *_ in rows}
    assert len(expected) > 80 and got == expected
    assert any(b'"access_count":3' in line for line in got.values())
    assert any(b"\\u001f" in line and b"\xe2\x80\xa8" in line for line in got.values())
    assert store_lines.total_bytes(store.db) == sum(len(line) + 1 for line in got.values())


def test_another_open_store_keeps_working_after_a_compaction(tmp_path):
    first = Store(tmp_path)
    f = first.store("user:1", "k", "v1")
    gone = first.store("user:2", "k", "GONE_IN_OTHER_HANDLE")
    first.delete(gone.fact_id)
    second = Store(tmp_path)  # e.g. another process on the same data directory
    compaction.compact(second)
    # the first handle's next write lands in the new journal; nobody rebuilds (the shared view carries
    # the new fingerprint)
    g = first.store("user:1", "k", "v2")
    assert first.get(g.fact_id).supersedes == f.fact_id
    stats = second.refresh()
    assert not stats.rebuilt and second.get(g.fact_id).value == "v2"  # one shared view: already replayed
    assert first.verify().view_matches_replay and second.verify().view_matches_replay
    assert b"GONE_IN_OTHER_HANDLE" not in journal_bytes(tmp_path)


def test_seq_kept_when_order_holds_and_renumbered_when_not(tmp_path):
    from cruxsql.facts import timestamps
    store = Store(tmp_path / "a")
    for i in range(5):
        store.store("e", f"k{i}", f"v{i}")
    report = compaction.compact(store)
    assert not report.seq_renumbered and store.verify().view_matches_replay
    # a fact whose stored_at is older than facts stored before it (clock skew, a synced fact)
    store = Store(tmp_path / "b")
    first = store.store("e", "k", "first")
    late = codec.Fact(fact_id="f_" + "0" * 32, entity="e", key="k", value="back-dated", confidence=1.0,
                      stored_at=first.stored_at - 10**9, tokens=3)
    append_events(store, [codec.StoreEvent(late)])
    store.store("e", "k", "third")
    report = compaction.compact(store)
    assert report.seq_renumbered
    assert [r[0] for r in store.db.execute("SELECT seq FROM facts ORDER BY seq")] == [1, 2, 3]
    assert store.db.execute("SELECT fact_id FROM facts WHERE seq = 1").fetchone()[0] == late.fact_id
    assert store.verify().view_matches_replay
    assert timestamps.format_fact_time(late.stored_at) in journal_bytes(tmp_path / "b").decode().splitlines()[0]


def test_a_held_snapshot_pruned_from_the_view_still_blocks_compaction(tmp_path, monkeypatch):
    """A latest-only snapshot replaced by a newer one lives only in the journal; a hold covering it
    blocks the compaction that would erase it (found by re-reading its journal line)."""
    from cruxsql.governance import legal_holds
    monkeypatch.setenv("CORECRUXD_SHARE_PREFIXES_OVERRIDE", "")
    store = Store(tmp_path)
    old = store.store("__repo_scan__::t::r", "content", "PRUNED_SNAPSHOT_1", private=True, owner=FIXTURE_OWNER)
    store.store("__repo_scan__::t::r", "content", "snapshot 2", private=True, owner=FIXTURE_OWNER)
    hold, _ = legal_holds.place_hold(store, "default", "litigation", ["__repo_scan__::"])
    before = journal_bytes(tmp_path)
    with pytest.raises(compaction.LegalHoldBlocked) as err:
        compaction.compact(store)
    assert err.value.covered == [(old.fact_id, [hold.hold_id])]
    assert journal_bytes(tmp_path) == before
    legal_holds.release(store, hold.hold_id)
    compaction.compact(store)
    assert b"PRUNED_SNAPSHOT_1" not in journal_bytes(tmp_path)


@pytest.mark.parametrize("fail_at", ["writing", "writing-from-snapshot", "after-rename"])
def test_a_failure_inside_compaction_rolls_the_view_back_or_rebuilds_it(tmp_path, monkeypatch, fail_at):
    store = Store(tmp_path)
    random_history(store, 5, steps=60)
    state_before, journal_before = fact_state(store), journal_bytes(tmp_path)
    if fail_at == "writing":  # before the commit point: the old journal and the old view stay
        monkeypatch.setattr(compaction_snapshot, "prebuild", lambda store, batch: None)
        monkeypatch.setattr(compaction, "_live_chunks", lambda db: (_ for _ in ()).throw(OSError("disk full")))
    elif fail_at == "writing-from-snapshot":  # the same, appending onto the file of the snapshot's lines
        real_onto = Journal.rewrite_onto

        def fail_while_appending(journal, head, head_size, write_rest):
            def write_part(emit):
                emit(b"{}\n")
                raise OSError("disk full")
            return real_onto(journal, head, head_size, write_part)

        monkeypatch.setattr(Journal, "rewrite_onto", fail_while_appending)
    else:  # after the rename: the new journal is the truth and the view is rebuilt from it at once
        real = replay_position.write_checkpoint
        calls = []

        def fail_once(*args):  # the direct update's checkpoint fails; the rebuild's succeeds
            calls.append(args)
            if len(calls) == 1:
                raise OSError("disk full")
            return real(*args)

        monkeypatch.setattr(replay_position, "write_checkpoint", fail_once)
    with pytest.raises(OSError, match="disk full"):
        compaction.compact(store)
    monkeypatch.undo()
    if fail_at != "after-rename":
        assert journal_bytes(tmp_path) == journal_before
        assert fact_state(store) == state_before
        assert list(tmp_path.glob("facts.jsonl.compact-*")) == []
    else:
        assert journal_bytes(tmp_path) != journal_before
        assert len(calls) == 2  # the direct update's, then the rebuild's
        assert fact_state(store) == {k: v for k, v in state_before.items() if not v["deleted"]}
    verify = store.verify()
    assert verify.view_matches_replay and not store.refresh().rebuilt
    store.store("after", "k", "v")
    assert store.verify().view_matches_replay


def test_cli_compact_then_verify_strict_is_clean(tmp_path):
    from click.testing import CliRunner

    from cruxsql.cli import main
    runner = CliRunner()
    env = {"CRUXSQL_DATA_DIR": str(tmp_path)}

    def run(*args):
        return runner.invoke(main, list(args), env=env)

    for value in ("alice", "bob", "carol"):
        assert run("store", "svc", "owner", value).exit_code == 0
    gone = run("store", "svc", "ssn", "GONE_VALUE").output.split()[0]
    assert run("delete", gone).exit_code == 0
    with (tmp_path / "facts.jsonl").open("ab") as fh:
        fh.write(b'{"op":"store","fact":{broken\n')
    journal = journal_bytes(tmp_path)
    refused = run("compact")
    assert refused.exit_code == 1 and journal_bytes(tmp_path) == journal
    assert refused.output == ("Error: the journal has 1 corrupt line(s) (line 8) that compaction would drop; run "
                              "`cruxsql verify` to see them, or pass --drop-corrupt to move them to a quarantine "
                              "file first\n")
    report = json.loads(run("compact", "--drop-corrupt", "--json").output)
    assert report["corrupt_lines_dropped"] == 1 and report["corrupt_lines_file"].startswith("facts.jsonl.corrupt.")
    strict = run("verify", "--strict", "--json")
    assert strict.exit_code == 0, strict.output
    verify = json.loads(strict.output)
    assert verify["ok"] is True and verify["skipped_events"] == [] and verify["tombstones"] == 1
    assert verify["events_by_op"] == {"delete": 1, "store": 3}


def test_compaction_leaves_the_known_at_timeline_current_and_equal_to_one_built_from_scratch(tmp_path) -> None:
    from cruxsql.recall.timeline import Timeline

    store = Store(tmp_path)
    a = store.store("svc", "owner", "alice")
    b = store.store("svc", "owner", "bob")
    c = store.store("svc", "region", "eu")
    store.set_validity(c.fact_id, valid_from=a.stored_at)
    store.delete(b.fact_id)
    store.store_batch([StoreRequest(f"e{i}", "k", f"v{i}") for i in range(5)])
    compaction.compact(store)
    db = store.db
    cp = replay_position.read_checkpoint(db)
    assert db.execute("SELECT generation, last_line FROM recall_timeline_state").fetchall() == \
        [(cp.generation, cp.line_count)]
    tables = ("recall_event_times", "recall_changes")
    kept = {t: sorted(db.execute(f"SELECT * FROM {t}").fetchall()) for t in tables}
    assert len(kept["recall_event_times"]) == cp.line_count
    stored = dict(db.execute("SELECT line_no, stored_at_ns FROM facts"))
    assert all(kept["recall_event_times"][i][1] == stored[line] for i, line in enumerate(sorted(stored)))
    with db:
        for t in (*tables, "recall_timeline_state"):
            db.execute(f"DELETE FROM {t}")
        Timeline(db, store.journal).catch_up()
    assert {t: sorted(db.execute(f"SELECT * FROM {t}").fetchall()) for t in tables} == kept
    store.close()


def test_estimated_size_is_the_size_compaction_writes(tmp_path):
    """`estimate_bytes_after` (retention's report) sums the SQL-built store lines and the tail lines
    without writing anything: exactly the bytes the compaction then writes."""
    store = Store(tmp_path)
    random_history(store, 11, steps=120)
    store.store("odd", "k\x01", "é \u2028 \"q\" \\ 東京")
    before = journal_bytes(tmp_path)
    estimate = compaction.estimate_bytes_after(store)
    assert journal_bytes(tmp_path) == before
    assert compaction.compact(store).bytes_after == estimate == len(journal_bytes(tmp_path))
