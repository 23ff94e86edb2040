"""Erasure reaches every copy: byte-level marker search over every file of the data directory."""

from __future__ import annotations

import json
from pathlib import Path

import blake3
import pytest
from support.retention_builders import all_file_bytes, append_events, now_text

from cruxsql.facts import codec
from cruxsql.facts.store import Store
from cruxsql.governance import audit_export, erasure, erasure_proof, erasure_scan, legal_holds
from support.journal_files import journal_bytes


def _count(data_dir: Path, marker: bytes) -> dict[str, int]:
    out = {}
    for name, data in all_file_bytes(data_dir).items():
        n = data.count(marker) + data.lower().count(marker.lower()) * (marker != marker.lower())
        if n:
            out[name] = n
    return out


def _populate(store: Store) -> dict[str, list]:
    kept = [store.store("user:keep", f"k{i}", f"KEPT_MARKER_{i:03d} Alice's note") for i in range(4)]
    erased = [store.store("user:bob", f"k{i}", f'ERASED_MARKER_{i:03d} Bob "quoted" \u00dcn\u00efcode') for i in range(4)]
    # a new version: the superseded one must go too
    erased.append(store.store("user:bob", "k0", "ERASED_MARKER_100 Bob v2"))
    # a long value SQLite spills across overflow pages
    erased.append(store.store("user:bob", "cv", "ERASED_MARKER_LONG " + "".join(f"{i:05d}" for i in range(3000))))
    other_tenant = store.store("user:bob", "k0", "KEPT_MARKER_T2 other tenant", tenant="t2")
    return {"kept": kept + [other_tenant], "erased": erased}


def test_erased_markers_are_gone_from_every_file_and_kept_ones_remain(tmp_path):
    store = Store(tmp_path)
    facts = _populate(store)
    # exports cruxsql wrote into the data directory, in all three formats
    (tmp_path / "exports").mkdir()
    for fmt in ("jsonl", "csv", "sqlite"):
        audit_export.export_audit(store, audit_export.AuditQuery(), fmt, tmp_path / "exports" / f"audit.{fmt}")
    # a quarantined torn tail holding an erased value, and a stale compaction temp file
    store.close()
    with open(tmp_path / "facts.jsonl", "ab") as fh:
        fh.write(b'{"op":"store","fact":{"fact_id":"f_x","value":"ERASED_MARKER_001 Bob \\"quo')
    (tmp_path / "facts.jsonl.compact-00000000000000000000000000000000.tmp").write_bytes(
        b"ERASED_MARKER_002 stale temp copy")
    store = Store(tmp_path)
    assert store.journal.quarantined_tails()
    from cruxsql.recall.text_index import TextIndex
    TextIndex(store.db).sync()  # the recall lane's lowercased copies of every value
    assert store.db.execute("SELECT count(*) FROM recall_text WHERE lc_value LIKE 'erased_marker%'").fetchone()[0]
    for marker in (b"ERASED_MARKER_000", b"ERASED_MARKER_LONG", b"KEPT_MARKER_000"):
        assert _count(tmp_path, marker), marker  # present before

    report = erasure.erase(store, erasure.Selection(tenant="default", entity_prefixes=("user:bob",)),
                           reason="DSR-17 data subject request", actor="dpo")

    files = all_file_bytes(tmp_path)
    assert "cruxsql.db" in files and "facts.jsonl" in files
    for fact in facts["erased"]:
        marker = fact.value[:17].encode()
        hits = {name: data.count(marker) for name, data in files.items() if marker in data}
        assert hits == {}, (marker, hits)
        assert fact.value[:17].lower().encode() not in b"".join(files.values())
    assert b"ERASED_MARKER" not in b"".join(files.values())
    assert b"".join(f"{i:05d}".encode() for i in range(1000, 1100)) not in b"".join(files.values())
    for fact in facts["kept"]:
        assert fact.value.encode() in files["facts.jsonl"]
        assert fact.value[:14].encode() in files["cruxsql.db"] + files.get("cruxsql.db-wal", b"")
    # exports re-written without the erased facts but with the kept ones
    for fmt in ("jsonl", "csv", "sqlite"):
        data = files[f"exports/audit.{fmt}"]
        assert b"ERASED_MARKER" not in data and b"KEPT_MARKER_001" in data
    assert report["verification"]["ok"] and report["verification"]["hits"] == []
    assert report["ok"] and report["errors"] == []
    assert report["counts"]["facts_erased"] == len(facts["erased"]) == report["counts"]["facts_deleted_now"]
    stores = report["stores"]
    assert len(stores["exports"]["rewritten"]) == 3
    # the torn tail held only the erased value's fragment after its JSON head: cut to the end of its line
    [torn] = stores["quarantine_files"]["rewritten"]
    assert torn["file"].startswith("facts.jsonl.torn.") and torn["bytes_after"] < torn["bytes_before"]
    assert "facts.jsonl.compact-00000000000000000000000000000000.tmp" in stores["temp_files"]["removed"]
    assert stores["view"]["wal_checkpointed"] and stores["view"]["fact_rows_removed"] == len(facts["erased"])
    assert stores["journal"]["bytes_after"] < stores["journal"]["bytes_before"]
    assert report["journal"]["after"]["blake3"] == blake3.blake3(journal_bytes(tmp_path)[
        :report["journal"]["after"]["bytes"]]).hexdigest()
    # the report names ids and hashes, never values
    text = json.dumps(report)
    assert "ERASED_MARKER" not in text and "user:bob" not in text
    assert {e["fact_id"] for e in report["erased_facts"]} == {f.fact_id for f in facts["erased"]}
    assert all(e["content_hash"].startswith("blake3:") for e in report["erased_facts"])
    # view == fresh replay, kept facts intact, verify --erasure passes; the rewritten torn tail stays quarantined
    checked = store.verify()
    assert checked.view_matches_replay and checked.quarantined_tails == [torn["file"]]
    assert store.get(facts["kept"][0].fact_id).value == facts["kept"][0].value
    result = erasure_proof.verify_erasure(store)
    assert result["ok"] and result["chain_ok"] and result["reports"] == 1 and result["needles"] > 0


def test_verify_erasure_finds_reintroduced_content(tmp_path):
    store = Store(tmp_path)
    secret = "SECRET_MARKER_9 the subject's phone +44 7700 900123"
    f = store.store("user:carol", "phone", secret)
    erasure.erase(store, erasure.Selection(fact_ids=(f.fact_id,)), reason="DSR")
    assert erasure_proof.verify_erasure(store)["ok"]
    # an operator copies the value back into the data directory by hand
    (tmp_path / "notes.txt").write_bytes(b"xx" + json.dumps(secret)[1:-1].encode() + b"yy")
    result = erasure_proof.verify_erasure(store)
    assert not result["ok"]
    assert [(h["file"], h["offset"], h["fact_id"]) for h in result["hits"]] == [("notes.txt", 2, f.fact_id)]
    # a lowercased copy (as the recall index keeps text) is found too
    (tmp_path / "notes.txt").write_bytes(b"...." + secret.lower().encode())
    hit = erasure_proof.verify_erasure(store)["hits"][0]
    assert (hit["offset"], hit["form"]) == (4, "lower")


def test_report_chain_and_tamper_detection(tmp_path):
    store = Store(tmp_path)
    a = store.store("u:1", "k", "FIRST_ERASED_VALUE_XYZ")
    b = store.store("u:2", "k", "SECOND_ERASED_VALUE_XYZ")
    r1 = erasure.erase(store, erasure.Selection(fact_ids=(a.fact_id,)), reason="one", request_id="req-1")
    r2 = erasure.erase(store, erasure.Selection(fact_ids=(b.fact_id,)), reason="two", request_id="req-2")
    assert r1["prev_report_hash"] is None
    assert r2["prev_report_hash"] == r1["report_hash"] == erasure_proof.report_hash(r1)
    stored = erasure_proof.stored_reports(store.db)
    assert [r["request_id"] for r in stored] == ["req-1", "req-2"]
    row = store.db.execute("SELECT private, tenant_hash, source_receipt FROM facts WHERE entity = ?",
                           ("__erasure_report__::req-1",)).fetchone()
    assert row == (1, "default", "req-1")
    assert erasure_proof.verify_erasure(store)["chain_ok"]
    with pytest.raises(Exception, match="already exists"):
        erasure.erase(store, erasure.Selection(fact_ids=(b.fact_id,)), reason="again", request_id="req-2")
    # a forged report (edited content) breaks the chain check
    forged = dict(stored[1])
    forged.pop("_fact_id")
    forged["reason"] = "edited"
    store.store("__erasure_report__::req-2", "report", json.dumps(forged), private=True, owner=erasure_proof.OWNER)
    result = erasure_proof.verify_erasure(store)
    assert not result["chain_ok"] and not result["ok"]


def test_erasure_holds_back_held_facts_and_undoes_consolidations(tmp_path):
    store = Store(tmp_path)
    held = store.store("user:dan", "contract", "HELD_MARKER_0001 contract text")
    store.store("user:erin", "note", "FREE_MARKER_0001 erin")
    s1 = store.store("proj", "a", "SOURCE_MARKER_1 draft")
    s2 = store.store("proj", "b", "SOURCE_MARKER_2 review")
    canonical = codec.Fact(fact_id="f_" + "c" * 32, entity="proj", key="a", value="CANON_MARKER merged",
                           confidence=0.8, stored_at=s2.stored_at + 1, tokens=5, version=2)
    append_events(store, [codec.ConsolidateEvent(canonical, [s1.fact_id, s2.fact_id], now_text())])
    hold, _ = legal_holds.place_hold(store, "default", "litigation 7", ["user:dan"], "counsel")
    report = erasure.erase(store, erasure.Selection(tenant="default", entity_prefixes=("user:", "proj")),
                           reason="tenant cleanup")
    assert report["held_back"] == [{"fact_id": held.fact_id, "hold_ids": [hold.hold_id]}]
    assert report["holds_blocking"] == [hold.hold_id]
    assert report["counts"]["consolidations_undone"] == 1
    data = b"".join(all_file_bytes(tmp_path).values())
    assert b"HELD_MARKER_0001" in data
    for marker in (b"FREE_MARKER_0001", b"SOURCE_MARKER_1", b"SOURCE_MARKER_2", b"CANON_MARKER"):
        assert marker not in data, marker
    assert store.get(held.fact_id).deleted is False
    assert store.verify().view_matches_replay


def test_erase_requires_a_selection_and_reason(tmp_path):
    store = Store(tmp_path)
    with pytest.raises(Exception, match="needs a selection"):
        erasure.erase(store, erasure.Selection(), reason="x")
    with pytest.raises(Exception, match="reason is required"):
        erasure.erase(store, erasure.Selection(tenant="default"), reason=" ")
    with pytest.raises(Exception, match="invalid cutoff"):
        erasure.Selection(older_than="ninety days")


def test_short_and_shared_values_are_reported_not_scanned(tmp_path):
    store = Store(tmp_path)
    short = store.store("u:1", "k", "abc")
    shared = store.store("u:2", "k", "the same value twice")
    store.store("u:3", "k", "the same value twice")
    report = erasure.erase(store, erasure.Selection(fact_ids=(short.fact_id, shared.fact_id)), reason="x")
    scan = {e["fact_id"]: e["scan"] for e in report["erased_facts"]}
    assert scan[short.fact_id].startswith("not scanned: shorter than 8")
    assert scan[shared.fact_id] == "not scanned: a retained fact holds the same value"
    assert report["verification"]["ok"]


def test_values_a_retained_fact_contains_are_reported_not_scanned_and_the_rest_verified(tmp_path):
    """Erasing a value that a retained fact's value, entity or key contains (as written or lowercased)
    cannot be proven by a byte scan: it is reported, and the erasure of the rest still verifies."""
    store = Store(tmp_path)
    inside_value = store.store("person:1", "email", "alice@example.io")
    store.store("team", "contact", "write to alice@example.io or bob")
    inside_entity = store.store("person:1", "handle", "bob-the-builder")
    store.store("user:bob-the-builder", "role", "admin")
    lowered = store.store("person:1", "code", "Zeta-Project-X")
    store.store("project", "code", "ZETA-PROJECT-X")
    alone = store.store("person:1", "phone", "+44 7700 900123")
    report = erasure.erase(store, erasure.Selection(entity_prefixes=("person:",)), reason="x")
    scan = {e["fact_id"]: e["scan"] for e in report["erased_facts"]}
    contains = "not scanned: a retained fact's entity, key or value contains it"
    assert [scan[f.fact_id] for f in (inside_value, inside_entity, lowered, alone)] == [contains] * 3 + ["scanned"]
    assert report["verification"]["ok"] and report["ok"]
    assert b"+44 7700 900123" not in b"".join(all_file_bytes(tmp_path).values())


def test_scanner_finds_needles_across_block_boundaries(tmp_path, monkeypatch):
    monkeypatch.setattr(erasure_scan, "_SCAN_BLOCK", 64)
    value = "BOUNDARY_MARKER_abcdefghijklmnopqrstuvwxyz"
    needles = erasure_scan.needles_for("f_1", value)
    for offset in range(50, 70):
        path = tmp_path / f"f{offset}"
        path.write_bytes(b"\0" * offset + value.encode() + b"\0" * 5)
        result = erasure_scan.scan_directory(tmp_path, needles)
        assert [h["offset"] for h in result.hits if h["file"] == path.name] == [offset]
        path.unlink()


def test_erase_tenant_documents_reaches_segments_and_view(tmp_path):
    from cruxsql.documents.lane import ChunkInput, DocumentInput, DocumentLane
    store = Store(tmp_path)
    lane = DocumentLane(store)
    lane.ingest([DocumentInput("doc-a", [ChunkInput("c1", "DOCGONE_MARKER alpha contract clause one"),
                                         ChunkInput("c2", "DOCGONE_MARKER beta termination clause two")])],
                tenant="acme")
    lane.ingest([DocumentInput("doc-b", [ChunkInput("c1", "DOCKEEP_MARKER gamma unrelated tenant text")])],
                tenant="other")
    fact = store.store("user:acme", "k", "FACTGONE_MARKER acme fact", tenant="acme")
    assert b"DOCGONE_MARKER" in b"".join(all_file_bytes(tmp_path).values())
    report = erasure.erase(store, erasure.Selection(tenant="acme"), reason="tenant offboarding", documents=True)
    assert report["stores"]["documents"]["chunks_erased"] == 2
    assert report["stores"]["documents"]["chunk_needles"] > 0
    data = b"".join(all_file_bytes(tmp_path).values())
    assert b"DOCGONE_MARKER" not in data and b"FACTGONE_MARKER" not in data
    assert b"DOCKEEP_MARKER" in data
    # Vector sidecars: the erased chunks' embeddings are gone byte for byte, the kept chunk's remains.
    from cruxsql.embeddings import LocalHashEmbedder
    embed = LocalHashEmbedder().embed_one
    assert embed("DOCGONE_MARKER alpha contract clause one").tobytes() not in data
    assert embed("DOCGONE_MARKER beta termination clause two").tobytes() not in data
    assert embed("DOCKEEP_MARKER gamma unrelated tenant text").tobytes() in data
    assert lane.verify() == []
    assert report["verification"]["ok"] and erasure_proof.verify_erasure(store)["ok"]
    assert [e["fact_id"] for e in report["erased_facts"]] == [fact.fact_id]
    with pytest.raises(Exception, match="--documents needs --tenant"):
        erasure.erase(store, erasure.Selection(fact_ids=("f_x",)), reason="x", documents=True)


def test_vacuum_option(tmp_path):
    store = Store(tmp_path)
    f = store.store("u", "k", "VACUUM_MARKER_VALUE_1")
    report = erasure.erase(store, erasure.Selection(fact_ids=(f.fact_id,)), reason="x", vacuum=True)
    assert report["stores"]["view"]["vacuumed"] is True and report["stores"]["view"]["wal_checkpointed"] is True
    assert b"VACUUM_MARKER" not in b"".join(all_file_bytes(tmp_path).values())


def test_large_report_lists_spill_into_part_facts(tmp_path, monkeypatch):
    monkeypatch.setattr(erasure_proof, "SPILL_BYTES", 300)
    store = Store(tmp_path)
    facts = [store.store(f"user:{i}", "k", f"SPILL_MARKER_{i:03d} some erased text") for i in range(6)]
    hold, _ = legal_holds.place_hold(store, "default", "keep these", ["user:held"])
    held = [store.store(f"user:held{i}", "k", f"HELD_{i}") for i in range(8)]
    report = erasure.erase(store, erasure.Selection(entity_prefixes=("user:",)), reason="x", request_id="big-1")
    assert report["needles"] == [] and report["erased_facts"] == []
    assert len(report["needles_parts"]) > 1 and len(report["erased_facts_parts"]) > 1
    erased, problems = erasure_proof.load_list(store.db, report, "erased_facts")
    assert problems == [] and sorted(e["fact_id"] for e in erased) == sorted(f.fact_id for f in facts)
    held_back, problems = erasure_proof.load_list(store.db, report, "held_back")
    assert problems == [] and sorted(h["fact_id"] for h in held_back) == sorted(f.fact_id for f in held)
    assert report["held_back"] == [] and report["holds_blocking"] == [hold.hold_id]
    result = erasure_proof.verify_erasure(store)
    assert result["ok"] and result["needles"] == sum(p["count"] for p in report["needles_parts"])
    # a part edited afterwards breaks the chain check
    store.store("__erasure_report__::big-1", "needles-0", "[]", private=True, owner=erasure_proof.OWNER)
    result = erasure_proof.verify_erasure(store)
    assert not result["ok"] and "needles-0 does not match its hash" in result["chain_errors"][0]
