"""Audit export: events touching a selection, in order, with the state each produced; jsonl / csv / sqlite."""

from __future__ import annotations

import csv
import json
import sqlite3

import blake3
import pytest

from cruxsql.errors import InvalidInput
from cruxsql.facts import timestamps
from cruxsql.facts.store import Store
from cruxsql.governance import audit_export, export_manifest
from support.journal_files import journal_bytes


def _history(store: Store):
    a1 = store.store("user:1", "name", "Ada")
    a2 = store.store("user:1", "name", "Ada Lovelace")
    b = store.store("user:2", "email", "b@example.com", tenant="acme")
    p = store.store("user:1", "secret", "private note", private=True)
    store.set_validity(a2.fact_id, 10**18, None)
    store.delete(a1.fact_id)
    store.reverify(a2.fact_id)
    return a1, a2, b, p


def _jsonl(path):
    return [json.loads(l) for l in path.read_text(encoding="utf-8").splitlines()]


def test_jsonl_events_in_order_with_resulting_state(tmp_path):
    store = Store(tmp_path / "data")
    a1, a2, b, p = _history(store)
    out = tmp_path / "audit.jsonl"
    summary = audit_export.export_audit(store, audit_export.AuditQuery(tenant="default"), "jsonl", out)
    events = _jsonl(out)
    assert [e["op"] for e in events] == ["store", "store", "supersede", "set_validity", "delete", "reverify"]
    assert [e["line_no"] for e in events] == sorted(e["line_no"] for e in events)
    assert summary.events == 6 and summary.recorded_in_manifest and summary.outside_data_dir
    first = events[0]["facts"][0]
    assert first["fact_id"] == a1.fact_id and first["role"] == "stored" and first["state"]["value"] == "Ada"
    sup = events[2]
    assert {(f["fact_id"], f["role"]) for f in sup["facts"]} == {(a1.fact_id, "superseded"), (a2.fact_id, "superseding")}
    assert [f for f in sup["facts"] if f["role"] == "superseded"][0]["state"]["superseded_by"] == a2.fact_id
    assert events[3]["facts"][0]["state"]["valid_from"] == timestamps.format_fact_time(10**18)
    assert events[4]["facts"][0]["state"]["deleted"] is True
    assert events[5]["facts"][0]["state"]["reverified_at"] == timestamps.format_fact_time(
        store.get(a2.fact_id).reverified_at)
    # private facts and other tenants are left out
    text = out.read_text()
    assert "private note" not in text and "b@example.com" not in text
    # line hashes match the journal, and the chain links them
    # (numbered on past facts.jsonl's last line: the events of cruxsql's own cruxsql-fact-events.jsonl)
    lines = journal_bytes(tmp_path / "data").splitlines() + \
        (tmp_path / "data" / "cruxsql-fact-events.jsonl").read_bytes().splitlines()
    chain = ""
    for e in events:
        assert e["line_blake3"] == blake3.blake3(lines[e["line_no"] - 1]).hexdigest()
        chain = blake3.blake3((chain + e["line_blake3"]).encode()).hexdigest()
        assert e["chain_blake3"] == chain
    assert summary.chain_head == chain
    # include_private brings the private fact in
    audit_export.export_audit(store, audit_export.AuditQuery(include_private=True), "jsonl", out)
    assert "private note" in out.read_text() and "b@example.com" in out.read_text()


def test_prefix_since_until(tmp_path):
    store = Store(tmp_path / "data")
    _history(store)
    mid = timestamps.now_ns()
    late = store.store("user:1", "late", "after the cut")
    out = tmp_path / "a.jsonl"
    audit_export.export_audit(store, audit_export.AuditQuery(entity_prefixes=("user:2",)), "jsonl", out)
    assert [e["facts"][0]["state"]["value"] for e in _jsonl(out)] == ["b@example.com"]
    audit_export.export_audit(store, audit_export.AuditQuery(since=timestamps.format_fact_time(mid)), "jsonl", out)
    assert [e["facts"][0]["fact_id"] for e in _jsonl(out)] == [late.fact_id]
    audit_export.export_audit(store, audit_export.AuditQuery(until=timestamps.format_fact_time(mid)), "jsonl", out)
    assert late.fact_id not in out.read_text()
    with pytest.raises(InvalidInput, match="before --since"):
        audit_export.AuditQuery(since="2026-01-02T00:00:00Z", until="2026-01-01T00:00:00Z")
    with pytest.raises(InvalidInput, match="unknown export format"):
        audit_export.export_audit(store, audit_export.AuditQuery(), "xml", out)


def test_csv_rows(tmp_path):
    store = Store(tmp_path / "data")
    a1, a2, _, _ = _history(store)
    out = tmp_path / "audit.csv"
    audit_export.export_audit(store, audit_export.AuditQuery(tenant="default"), "csv", out)
    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    assert list(rows[0])[:11] == list(audit_export.EVENT_COLUMNS) + ["fact_id", "role"]
    assert [(r["op"], r["role"]) for r in rows] == [
        ("store", "stored"), ("store", "stored"), ("supersede", "superseded"), ("supersede", "superseding"),
        ("set_validity", "validity"), ("delete", "deleted"), ("reverify", "reverified")]
    # booleans 0/1 and NULL as empty, as every cruxsql CSV writes them
    assert rows[5]["fact_id"] == a1.fact_id and rows[5]["deleted"] == "1" and rows[0]["deleted"] == "0"
    assert rows[0]["applied"] == "1" and rows[0]["private"] == "0" and rows[0]["skip_reason"] == ""


def test_sqlite_export_is_datasette_ready(tmp_path):
    store = Store(tmp_path / "data")
    a1, a2, _, _ = _history(store)
    out = tmp_path / "audit.db"
    summary = audit_export.export_audit(store, audit_export.AuditQuery(tenant="default"), "sqlite", out)
    assert summary.facts == 2 and summary.events == 6
    con = sqlite3.connect(out)
    try:
        pk = lambda t: [r[1] for r in sorted(con.execute(f"PRAGMA table_info({t})"), key=lambda r: r[5]) if r[5]]
        assert pk("events") == ["line_no"] and pk("facts") == ["fact_id"]
        assert pk("event_facts") == ["line_no", "fact_id", "role"]
        fks = {(r[2], r[3], r[4]) for r in con.execute("PRAGMA foreign_key_list(event_facts)")}
        assert fks == {("events", "line_no", "line_no"), ("facts", "fact_id", "fact_id")}
        assert con.execute("PRAGMA foreign_key_check").fetchall() == []
        indexes = {r[1] for t in ("events", "event_facts", "facts") for r in con.execute(f"PRAGMA index_list({t})")}
        assert {"idx_events_op", "idx_event_facts_fact_id", "idx_facts_tenant_hash_entity_key"} <= indexes
        assert con.execute("SELECT value, deleted FROM facts WHERE fact_id = ?", (a1.fact_id,)).fetchone() == ("Ada", 1)
        assert con.execute("SELECT count(*) FROM event_facts WHERE fact_id = ?", (a2.fact_id,)).fetchone()[0] == 4
        info = dict(con.execute("SELECT key, value FROM export_info"))
        assert json.loads(info["query"])["tenant"] == "default"
    finally:
        con.close()


def test_export_inside_data_dir_is_recorded_and_cannot_clobber_the_store(tmp_path):
    store = Store(tmp_path)
    _history(store)
    (tmp_path / "exports").mkdir()
    summary = audit_export.export_audit(store, audit_export.AuditQuery(), "jsonl", tmp_path / "exports" / "a.jsonl")
    assert summary.recorded_in_manifest
    assert [e["format"] for e in export_manifest.recorded_exports(tmp_path)] == ["jsonl"]
    with pytest.raises(InvalidInput, match="overwrite the store"):
        audit_export.export_audit(store, audit_export.AuditQuery(), "sqlite", tmp_path / "cruxsql.db")
    with pytest.raises(InvalidInput, match="overwrite the store"):
        audit_export.export_audit(store, audit_export.AuditQuery(), "jsonl", tmp_path / "facts.jsonl")
    with pytest.raises(InvalidInput, match="directory .* does not exist"):
        audit_export.export_audit(store, audit_export.AuditQuery(), "jsonl", tmp_path / "missing" / "a.jsonl")
    assert not (tmp_path / "missing").exists()


def test_recorded_exports_follow_a_moved_data_directory(tmp_path):
    from cruxsql.governance import erasure
    with Store(tmp_path / "old") as store:
        kept = store.store("user:1", "name", "KEPT_EXPORT_VALUE")
        gone = store.store("user:2", "name", "GONE_EXPORT_VALUE")
        (tmp_path / "old" / "exports").mkdir()
        audit_export.export_audit(store, audit_export.AuditQuery(), "jsonl", tmp_path / "old" / "exports" / "a.jsonl")
    manifest = json.loads((tmp_path / "old" / export_manifest.MANIFEST_NAME).read_text())
    assert [e["path"] for e in manifest] == ["exports/a.jsonl"]
    (tmp_path / "old").rename(tmp_path / "new")
    moved = tmp_path / "new"
    assert [e["path"] for e in export_manifest.recorded_exports(moved)] == [str(moved.resolve() / "exports/a.jsonl")]
    with Store(moved) as store:
        report = erasure.erase(store, erasure.Selection(fact_ids=(gone.fact_id,)), reason="moved")
    assert report["ok"] and report["stores"]["exports"]["rewritten"] == [str(moved.resolve() / "exports/a.jsonl")]
    data = (moved / "exports" / "a.jsonl").read_bytes()
    assert b"GONE_EXPORT_VALUE" not in data and kept.value.encode() in data


@pytest.mark.slow
@pytest.mark.parametrize("seed", [3, 11])
def test_final_states_in_the_export_equal_the_view(tmp_path, seed):
    from support.retention_builders import random_history
    store = Store(tmp_path / "data")
    random_history(store, seed, steps=150)
    out = tmp_path / "audit.db"
    audit_export.export_audit(store, audit_export.AuditQuery(include_private=True), "sqlite", out)
    con = sqlite3.connect(out)
    try:
        cols = ", ".join(audit_export.STATE_COLUMNS)
        exported = {r[0]: list(r[1:]) for r in con.execute(f"SELECT fact_id, {cols} FROM facts")}
        events = con.execute("SELECT count(*) FROM events").fetchone()[0]
    finally:
        con.close()
    in_view = [r[0] for r in store.db.execute("SELECT fact_id FROM facts")]
    own = tmp_path / "data" / "cruxsql-fact-events.jsonl"
    own_events = len(own.read_bytes().splitlines()) if own.exists() else 0
    assert events == store.db.execute("SELECT count(*) FROM journal_events").fetchone()[0] + own_events
    for fid in in_view:
        expected = audit_export.flat_state(store.get(fid))
        expected[5], expected[8] = int(expected[5]), int(expected[8])  # booleans as SQLite stores them
        assert exported[fid] == expected, fid
