"""Crux's value ranges: a journal a Crux daemon writes with a `9999-12-31T23:59:59Z` validity,
a year-0001 time, `tokens` = u64::MAX, a -0.0 confidence and a leap second is read exactly by both replay
paths, passes `verify --strict`, and keeps those lines byte for byte through an erasure, a compaction
and a retention run; a line Crux reads that cruxsql cannot represent is carried over, never quarantined."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.crux_reference import replay as crux_replay
from support.crux_writer import VALUE_RANGE_KEPT, VALUE_RANGE_LINES, crux_store_line

import cruxsql
from cruxsql.facts import codec, replay, timestamps, view
from cruxsql.governance import compaction
from support.journal_files import journal_bytes

U64_MAX = 2**64 - 1
EXACT = {  # fact -> the text its JSON must hold, as Crux wrote it
    "f_forever": '"valid_to":"9999-12-31T23:59:59Z"',
    "f_ancient": '"valid_from":"0001-01-01T00:00:00Z"',
    "f_tokens": '"tokens":18446744073709551615',
    "f_negzero": '"confidence":-0.0',
    "f_leap": '"stored_at":"2016-12-31T23:59:60.500Z"',
}


def _write(path: Path, lines: list[bytes]) -> None:
    with path.open("ab") as fh:
        fh.write(b"".join(line + b"\n" for line in lines))


def _exact_values(store: cruxsql.Store) -> dict[str, str]:
    """Each fact's JSON as `Store.get`, `iter_facts` and `to_json` give it (they must agree)."""
    by_get = {fid: store.get(fid).to_json() for fid in EXACT}
    by_iter = {f.fact_id: f.to_json() for f in view.iter_facts(store.db) if f.fact_id in EXACT}
    assert by_get == by_iter
    return by_get


@pytest.mark.parametrize("path", ["row", "bulk"])
def test_both_replay_paths_read_every_crux_value_exactly(tmp_path: Path, monkeypatch, path: str) -> None:
    # the incremental replay of lines a Crux daemon appended, by the row path or the bulk path
    monkeypatch.setattr(replay, "ROW_PATH_MAX_BYTES", 0 if path == "bulk" else 1 << 30)
    with cruxsql.open(tmp_path) as store:
        store.store("svc", "owner", "alice")
        _write(tmp_path / "facts.jsonl", VALUE_RANGE_LINES)
        store.refresh()
        assert store.db.execute("SELECT count(*) FROM journal_corrupt_lines").get == 0
        values = _exact_values(store)
        for fact_id, text in EXACT.items():
            assert text in values[fact_id], (fact_id, values[fact_id])
        forever = store.get("f_forever")
        assert forever.valid_to == timestamps.parse_ns("9999-12-31T23:59:59Z")
        assert forever.valid_at(timestamps.now_ns()) and store.get("f_tokens").tokens == U64_MAX
        assert str(store.get("f_negzero").confidence) == "-0.0"
        assert timestamps.format_fact_time(store.get("f_leap").last_accessed_at) == "2016-12-31T23:59:60.000000001Z"
        # SQL over the view: the *_ns columns clamp (so comparisons with any in-range instant hold), the text
        # and *_exact columns are exact
        row = store.db.execute("SELECT valid_to, valid_to_ns, valid_to_ns > ? FROM facts WHERE fact_id = 'f_forever'",
                               (timestamps.now_ns(),)).fetchone()
        assert row == ("9999-12-31T23:59:59Z", timestamps.MAX_NS, 1)
        assert store.db.execute("SELECT valid_from_ns FROM facts WHERE fact_id = 'f_ancient'").get == timestamps.MIN_NS
        assert store.db.execute("SELECT tokens, tokens_exact FROM facts WHERE fact_id = 'f_tokens'").fetchone() == \
            (2**63 - 1, "18446744073709551615")
        assert store.db.execute("SELECT confidence, confidence_exact FROM facts WHERE fact_id = 'f_negzero'"
                                ).fetchone() == (0.0, "-0.0")
        # a full rebuild, both ways, gives the same view
        for row_by_row in (True, False):
            replay.rebuild(store.db, store.journal, store.policy, row_by_row=row_by_row)
            assert _exact_values(store) == values
        report = store.verify()
        assert report.ok and report.view_matches_replay and not report.differences


@pytest.mark.slow
def test_a_shared_journal_keeps_crux_lines_byte_for_byte_through_erase_compact_and_retention(
        tmp_path: Path, run_cli, data_dir: Path) -> None:
    data_dir.mkdir(parents=True, exist_ok=True)
    journal = data_dir / "facts.jsonl"
    _write(journal, VALUE_RANGE_LINES)
    run_cli("verify", "--strict", ok=True)
    erased = run_cli("erase", "--all-tenants", "--fact-id", "f_erase_me", "--reason", "test", ok=True)
    assert "erasure verified" in erased.stdout
    run_cli("compact", ok=True)
    retention = run_cli("retention", "apply", "--all-tenants", "--older-than", "2010-01-01T00:00:00Z", "--json",
                        ok=True)
    assert json.loads(retention.stdout)["counts"]["facts_erased"] == 1  # f_old
    run_cli("verify", "--strict", ok=True)
    lines = journal.read_bytes().split(b"\n")[:-1]
    stores = [line for line in lines if line.startswith(b'{"op":"store"') and b'"entity":"crux"' in line]
    assert sorted(stores) == sorted(VALUE_RANGE_KEPT)  # byte for byte, nothing else of Crux's stored
    assert not list(data_dir.glob("facts.jsonl.corrupt.*"))
    assert b"erase-me-4c1d9e" not in journal.read_bytes() and b"old-enough-7f3a" not in journal.read_bytes()
    # a Crux daemon replaying the journal cruxsql left holds every fact as it wrote it
    crux = crux_replay(journal)
    assert crux.skipped_lines == []
    assert {fid: f.to_json() for fid, f in crux.facts.items() if not f.deleted and f.entity == "crux"} == \
        {json.loads(line)["fact"]["fact_id"]: line[len(b'{"op":"store","fact":'):-1].decode() for line in VALUE_RANGE_KEPT}
    with cruxsql.open(data_dir) as store:
        assert {fid: store.get(fid).to_json() for fid in EXACT} == \
            {fid: f.to_json() for fid, f in crux.facts.items() if fid in EXACT}


@pytest.mark.slow
def test_a_line_crux_reads_but_cruxsql_cannot_represent_is_carried_over_not_quarantined(
        tmp_path: Path, run_cli, data_dir: Path) -> None:
    """serde reads a confidence of 1e39 as an f32 infinity; the view cannot hold it. An erasure (which
    compacts with drop_corrupt) keeps that line in the journal, byte for byte, and says so."""
    data_dir.mkdir(parents=True, exist_ok=True)
    infinite = crux_store_line("f_infinite", stored_at="2026-03-01T08:00:06Z", confidence="1e39")
    truly_corrupt = b'{"op":"store","fact":{"fact_id":"f_bad"'
    _write(data_dir / "facts.jsonl", [VALUE_RANGE_LINES[0], infinite, truly_corrupt, VALUE_RANGE_LINES[6]])
    erased = run_cli("erase", "--all-tenants", "--fact-id", "f_erase_me", "--reason", "test", ok=True)
    assert "carried over     1 line(s) Crux reads and cruxsql cannot represent, kept byte for byte (old line 2;" \
        in erased.stdout
    lines = journal_bytes(data_dir).split(b"\n")[:-1]
    assert infinite in lines and truly_corrupt not in lines
    quarantined = list(data_dir.glob("facts.jsonl.corrupt.*"))
    assert len(quarantined) == 1 and quarantined[0].read_bytes() == truly_corrupt + b"\n"
    with cruxsql.open(data_dir) as store:
        report = compaction.compact(store)  # no --drop-corrupt needed: nothing would be dropped
        assert report.lines_carried_over == [lines.index(infinite) + 1] and report.corrupt_lines_dropped == 0
        assert store.verify().view_matches_replay
    assert infinite in journal_bytes(data_dir).split(b"\n")
    crux = crux_replay(data_dir / "facts.jsonl")  # what a Crux daemon replays: every line, that one included
    assert crux.skipped_lines == [] and len(crux.unheld_lines) == 1
    assert codec.UNREPRESENTABLE in run_cli("verify").stdout


def test_a_leap_second_is_rendered_as_written_by_get_iter_facts_and_to_json(tmp_path: Path) -> None:
    _write(tmp_path / "facts.jsonl", [VALUE_RANGE_LINES[5]])
    with cruxsql.open(tmp_path) as store:
        fact = store.get("f_leap")
        assert fact.to_json() == VALUE_RANGE_LINES[5][len(b'{"op":"store","fact":'):-1].decode()
        assert [f.to_json() for f in view.iter_facts(store.db)] == [fact.to_json()]
        assert fact.to_dict()["last_accessed_at"] == "2016-12-31T23:59:60.000000001Z"


def test_a_store_from_before_the_migration_is_rebuilt_with_the_lines_it_had_marked_corrupt(tmp_path: Path) -> None:
    """Migration 0055: a view that recorded corrupt lines (or a zero confidence, maybe -0.0) replays the
    journal at its next open, so what the earlier version refused comes back exactly."""
    _write(tmp_path / "facts.jsonl", VALUE_RANGE_LINES)
    with cruxsql.open(tmp_path) as store:  # the view as the version before 0055 left it
        db = store.db
        db.execute("UPDATE facts SET confidence_exact = NULL, tokens_exact = NULL")
        db.execute("DELETE FROM facts WHERE fact_id IN ('f_forever', 'f_tokens')")
        db.execute("INSERT INTO journal_corrupt_lines (line_no, byte_offset, byte_length, reason) "
                   "VALUES (4, 0, 1, 'tokens above 2^63-1')")
        db.execute("ALTER TABLE facts DROP COLUMN tokens_exact")
        db.execute("ALTER TABLE facts DROP COLUMN confidence_exact")
        db.execute("DELETE FROM schema_migrations WHERE version = 55")
    with cruxsql.open(tmp_path) as store:
        assert store.db.execute("SELECT count(*) FROM journal_corrupt_lines").get == 0
        values = _exact_values(store)
        for fact_id, text in EXACT.items():
            assert text in values[fact_id]
        assert store.verify().view_matches_replay


def test_memory_view_renders_a_leap_second_and_a_far_time_as_written(tmp_path: Path) -> None:
    """memory_view writes `stored_at` with `to_rfc3339()`: chrono keeps the leap second (`:60.500+00:00`) and
    the year; the view's stored_at_ns alone would give `:59.999999999` and 2262."""
    from cruxsql.recall import Recall

    far = crux_store_line("f_far", stored_at="9999-12-31T23:59:59Z")
    _write(tmp_path / "facts.jsonl", [VALUE_RANGE_LINES[5], far])
    with cruxsql.open(tmp_path) as store:
        facts = Recall(store).memory_view("crux").facts
        assert {f["id"]: f["stored_at"] for f in facts} == {
            "f_leap": "2016-12-31T23:59:60.500+00:00", "f_far": "9999-12-31T23:59:59+00:00"}
