"""The fact commands of the `cruxsql` CLI, on a real data directory."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from support.journal_builders import fact_obj, line, write_journal
from support.journal_files import journal_bytes, journal_lines, journal_text


@pytest.fixture
def run(cli):
    """The shared CliRunner on the test's data directory (conftest.py), under this module's name."""
    return cli


def test_store_get_history_and_json(run) -> None:
    first = run("store", "deployment", "strategy", "canary", "--confidence", "0.95", "--actor", "ops").output
    fact_id, _, version = first.split()[:3]
    assert fact_id.startswith("f_") and version == "1"
    second = json.loads(run("store", "deployment", "strategy", "blue-green", "--json").output)
    assert second["version"] == 2 and second["supersedes"] == fact_id and second["source_receipt"] is None
    got = json.loads(run("get", fact_id).output)
    assert got["superseded_by"] == second["fact_id"] and got["confidence"] == 0.95 and got["actor"] == "ops"
    rows = json.loads(run("history", "deployment", "strategy", "--json").output)
    assert [(r["version"], r["value"], r["confidence"]) for r in rows] == [(1, "canary", 0.95), (2, "blue-green", 1.0)]
    assert rows[0]["status"] == f"superseded by {second['fact_id']}" and rows[1]["status"] == "current"
    table = run("history", "deployment", "strategy").output.splitlines()
    assert table[0].split() == ["version", "fact_id", "stored_at", "value", "confidence", "status"]


def test_sql_is_read_only_and_pipes(run) -> None:
    run("store", "svc", "owner", "alice")
    run("store", "svc", "team", "core, infra")
    out = run("sql", "SELECT key, value FROM live_facts ORDER BY key", "--csv").output
    assert list(csv.reader(io.StringIO(out))) == [["key", "value"], ["owner", "alice"], ["team", "core, infra"]]
    assert json.loads(run("sql", "SELECT count(*) AS n FROM facts", "--json").output) == [{"n": 2}]
    assert json.loads(run("sql", "SELECT * FROM facts WHERE 0", "--json").output) == []
    bad = run("sql", "DELETE FROM facts", ok=False)
    assert bad.exit_code == 1 and bad.output == "Error: read-only SQL console: DELETE facts is not allowed\n"
    assert json.loads(run("sql", "SELECT count(*) AS n FROM facts", "--json").output) == [{"n": 2}]
    assert run("sql", "SELEC nonsense", ok=False).exit_code == 1


def test_mutations_and_errors(run) -> None:
    a = run("store", "e", "a", "1").output.split()[0]
    b = run("store", "e", "b", "2").output.split()[0]
    assert run("supersede", a, "--by", b).output.strip() == f"{a} superseded by {b}"
    assert "no longer superseded" in run("clear-supersede", a).output
    assert run("set-validity", a, "--from", "2026-01-01T00:00:00+01:00").output.strip() == \
        f"{a} valid 2025-12-31T23:00:00Z .. +inf"
    assert run("set-horizon", a, "stable").output.strip() == f"{a} horizon stable"
    assert "reverified at" in run("reverify", a).output
    assert run("delete", a).output.strip() == f"deleted {a}"
    for args, message in [
        (("get", "f_missing"), "unknown fact id 'f_missing'"),
        (("delete", a), "already deleted"),
        (("set-validity", b, "--to", "next week"), "--to: not an RFC 3339 timestamp: 'next week'"),
        (("set-horizon", b, "hourly"), "invalid horizon class 'hourly'"),
        (("store", "e", "k", "v", "--confidence", "1.5"), "confidence must be"),
        (("store", "e", "k", "v", "--horizon", "weekly"), "Invalid value for '--horizon'"),
    ]:
        result = run(*args, ok=False)
        assert result.exit_code != 0 and message in result.output, (args, result.output)
        assert "Traceback" not in result.output


def test_store_batch_from_stdin_is_one_event(run, tmp_path: Path) -> None:
    lines = "\n".join([json.dumps({"entity": "e", "key": "k", "value": "a"}),
                       json.dumps({"entity": "e", "key": "k2", "value": "b", "confidence": 0.5, "tenant_hash": "t"}),
                       ""])
    out = run("store-batch", "-", input=lines).output.splitlines()
    assert len(out) == 2
    events = journal_lines(tmp_path / "data")
    assert [e["op"] for e in events] == ["store_batch"] and len(events[0]["facts"]) == 2
    bad = run("store-batch", "-", input='{"entity":"e","key":"k","value":"a"}\n{"entity":"e"}\n', ok=False)
    assert bad.exit_code == 1 and "line 2: `key`" in bad.output
    assert len(journal_text(tmp_path / "data").splitlines()) == 1


def test_verify_reports_and_strict_fails_on_corruption(run, tmp_path: Path) -> None:
    data = tmp_path / "data"
    write_journal(data, [line("store", fact=fact_obj("f_1")), "garbage", line("delete", fact_id="f_1", deleted_at="x")])
    with open(data / "facts.jsonl", "ab") as fh:
        fh.write(b'{"op":"del')
    report = json.loads(run("verify", "--json").output)
    assert report["events_by_op"] == {"delete": 1, "store": 1}
    assert [c["line_no"] for c in report["corrupt_lines"]] == [2]
    assert len(report["quarantined_tails"]) == 1 and report["view_matches_replay"] and not report["ok"]
    text = run("verify").output
    assert "line 2 (byte" in text and "view matches a fresh replay: yes" in text
    assert run("verify", "--strict", ok=False).exit_code == 1


def test_verify_strict_passes_on_a_clean_store_and_rebuild_reports(run) -> None:
    run("init")
    run("store", "e", "k", "v")
    run("store", "e", "k", "w")
    assert run("verify", "--strict").exit_code == 0
    assert run("rebuild").output.startswith("rebuilt from 3 events (3 applied, 0 skipped")
    assert "3 journal events, 2 facts (1 live)" in run("init").output


def test_help_explains_every_command(run) -> None:
    out = run("--help").output
    for command in ("init", "store", "store-batch", "get", "history", "delete", "supersede", "clear-supersede",
                    "set-validity", "set-horizon", "reverify", "sql", "verify", "rebuild"):
        assert f"  {command} " in out
    assert "CRUXSQL_DATA_DIR" in run("store", "--help").output


def test_rebuild_restores_the_document_lane_and_verify_checks_segments(run, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "notes.md").write_text("# Deploy\n\nWe deploy with a canary rollout every Tuesday.\n")
    run("ingest", str(docs))
    run("store", "svc", "owner", "alice")
    data = tmp_path / "data"
    for name in ("cruxsql.db", "cruxsql.db-wal", "cruxsql.db-shm"):
        (data / name).unlink(missing_ok=True)
    assert "and 1 segments" in run("rebuild").output
    assert "canary rollout" in run("search", "canary").output
    assert run("verify", "--strict").exit_code == 0
    segment = next((data / "segments").glob("seg-*"))
    raw = bytearray(segment.read_bytes())
    raw[len(raw) // 2] ^= 0x01
    segment.write_bytes(bytes(raw))
    report = json.loads(run("verify", "--json").output)
    assert not report["ok"] and any("does not match the manifest" in p for p in report["segment_problems"])
    assert run("verify", "--strict", ok=False).exit_code == 1


def test_verify_erasure_scans_the_data_directory(run, tmp_path: Path) -> None:
    erased = run("store", "user:42", "email", "marker-ALPHA-123@example.com").output.split()[0]
    run("store", "user:43", "email", "keep-BETA-456@example.com")
    run("erase", "--all-tenants", "--fact-id", erased, "--reason", "data-subject request 17")
    result = json.loads(run("verify", "--erasure", "--json").output)
    assert result["ok"] and result["reports"] == 1 and result["hits"] == []
    data = tmp_path / "data"
    assert not any(b"marker-ALPHA-123" in p.read_bytes() for p in data.rglob("*") if p.is_file())
    # put the erased value back into a file of the data directory: verification must catch it
    (data / "stray-copy.txt").write_text("left over: marker-ALPHA-123@example.com\n")
    failed = run("verify", "--erasure", ok=False)
    assert failed.exit_code == 1 and "ERASURE NOT VERIFIED" in failed.output


def test_input_the_store_cannot_hold_is_refused_cleanly(run, tmp_path: Path) -> None:
    fact_id = run("store", "e", "k", "v").output.split()[0]
    journal = journal_bytes(tmp_path / "data")
    out_of_range = run("set-validity", fact_id, "--to", "+262144-01-01T00:00:00Z", ok=False)
    assert out_of_range.exit_code == 1 and "outside chrono's range" in out_of_range.output
    bad_file = tmp_path / "bad.jsonl"
    bad_file.write_bytes(b'{"entity":"e","key":"k","value":"' + bytes([0xFF, 0xFE]) + b'"}\n')
    not_utf8 = run("store-batch", str(bad_file), ok=False)
    assert not_utf8.exit_code == 1 and f"{bad_file} line 1: not UTF-8 text (invalid byte at offset 33)" in not_utf8.output
    surrogate = run("store", "e", "k", "\udcff", ok=False)
    assert surrogate.exit_code == 1 and "not valid UTF-8" in surrogate.output
    pragma = run("sql", "PRAGMA journal_mode=DELETE", ok=False)
    assert pragma.exit_code == 1 and "read-only SQL console: PRAGMA journal_mode=DELETE" in pragma.output
    for result in (out_of_range, not_utf8, surrogate, pragma):
        assert "Traceback" not in result.output
    assert journal_bytes(tmp_path / "data") == journal


def test_store_batch_errors_name_the_line_and_store_nothing(run, tmp_path) -> None:
    run("init")
    journal = (tmp_path / "data" / "facts.jsonl")
    before = journal.read_bytes() if journal.exists() else b""
    good = '{"entity": "e", "key": "k", "value": "v"}\n'
    for bad_line, message in [
        ('{"entity": "", "key": "k", "value": "v"}', "Error: stdin line 3: entity must not be empty"),
        ('{"entity": "e", "key": "k", "value": "v", "confidence": 1.5}',
         "Error: stdin line 3: confidence must be a finite number within 0.0..=1.0, got 1.5"),
        ('{"entity": "e", "key": "k", "value": "v", "horizon_class": "hourly"}',
         "Error: stdin line 3: invalid horizon class"),
    ]:
        result = run("store-batch", "-", input=good + "\n" + bad_line + "\n", ok=False)
        assert result.exit_code == 1 and result.stderr.startswith(message), result.stderr
        assert (journal.read_bytes() if journal.exists() else b"") == before
