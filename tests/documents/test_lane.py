"""The document lane end to end: sealing, idempotency, rebuild, verify, erasure, query/scan/expand payloads."""

from __future__ import annotations

import json
import os

import pytest

import cruxsql
from cruxsql.documents import ChunkInput, DocumentInput, DocumentLane
from cruxsql.documents.segments import ChunkRecord, Manifest, load_manifest, save_manifest, write_segment
from cruxsql.documents.response_shapes import EMPTY_INDEX_QUERY, EMPTY_INDEX_SCAN, wrap_crc_v1
from cruxsql.embeddings import read_ccxv
from cruxsql.errors import InvalidInput


@pytest.fixture
def lane(store):
    return DocumentLane(store)


def docs(*texts: str, prefix: str = "d") -> list[DocumentInput]:
    return [DocumentInput(f"{prefix}{i}", [ChunkInput(f"{prefix}{i}-c", text)]) for i, text in enumerate(texts)]


def view_tables(store) -> dict[str, list[tuple]]:
    return {
        "segments": list(store.db.execute(
            "SELECT segment_seq, segment_id, file_name, blake3, byte_size, chunk_count, total_tokens, sealed_at, "
            "tenants, doc_lengths, doc_tenants FROM document_segments ORDER BY segment_seq")),
        "chunks": list(store.db.execute("SELECT * FROM document_chunks ORDER BY segment_seq, doc_id")),
        "postings": list(store.db.execute("SELECT * FROM document_postings ORDER BY term, segment_seq")),
    }


def listed_files(lane):
    """MANIFEST.json, every segment file and its two vector sidecars (the hash embedder is the default)."""
    stems = [s.file_name.removesuffix(".jsonl") for s in lane.segments()]
    return sorted(["MANIFEST.json"] + [stem + ext for stem in stems for ext in (".jsonl", ".ccxv", ".ccxp")])


def test_each_ingest_seals_one_segment_and_reingest_is_a_noop(lane, data_dir):
    first = lane.ingest(docs("alpha beta", "gamma delta"), tenant="t1")
    assert (first.ingested, first.duplicates, first.sealed, first.segment_seq) == (2, 0, True, 1)
    again = lane.ingest(docs("alpha beta", "gamma delta"), tenant="t1")
    assert (again.ingested, again.duplicates, again.sealed, again.segment_seq) == (0, 2, False, None)
    # the same chunk ids under another tenant or corpus are different chunks
    assert lane.ingest(docs("alpha beta"), tenant="t2").ingested == 1
    assert lane.ingest(docs("alpha beta"), tenant="t1", corpus="notes").ingested == 1
    # duplicates inside one request are stored once; doc ids count only stored chunks
    mixed = [DocumentInput("x", [ChunkInput("k1", "one two"), ChunkInput("k1", "three four"),
                                 ChunkInput("d0-c", "dup")])]
    report = lane.ingest(mixed, tenant="t1")
    assert (report.ingested, report.duplicates) == (1, 2)
    assert [s.segment_seq for s in lane.segments()] == [1, 2, 3, 4]
    assert [s.chunk_count for s in lane.segments()] == [2, 1, 1, 1]
    files = sorted(p.name for p in (data_dir / "segments").iterdir())
    assert files == listed_files(lane)


@pytest.mark.parametrize("documents, message", [
    ([], "documents must not be empty"),
    ([DocumentInput("", [ChunkInput("c", "text")])], "doc_id must not be empty"),
    ([DocumentInput("d", [])], "has no chunks"),
    ([DocumentInput("d", [ChunkInput("", "text")])], "chunk_id must not be empty"),
    ([DocumentInput("d", [ChunkInput("c", " \n ")])], "text must not be empty"),
])
def test_ingest_rejects_bad_requests(lane, documents, message):
    with pytest.raises(InvalidInput, match=message):
        lane.ingest(documents)
    with pytest.raises(InvalidInput, match="concrete tenant"):
        lane.ingest(docs("x y"), tenant=" ")


def test_segment_file_holds_the_text_and_view_holds_postings_blobs(lane, store, data_dir):
    lane.ingest(docs("Terraform drift terraform", "cloud"), tenant="t1")
    segment = lane.segments()[0]
    lines = (data_dir / "segments" / segment.file_name).read_text().splitlines()
    assert json.loads(lines[0])["chunk_count"] == 2
    assert json.loads(lines[1])["text"] == "Terraform drift terraform"
    rows = {r[0]: r for r in store.db.execute("SELECT term, doc_count, doc_ids, tfs FROM document_postings")}
    assert rows["terraform"][1:] == (1, (0).to_bytes(4, "little"), (2).to_bytes(2, "little"))
    assert set(rows) == {"terraform", "drift", "cloud"}
    manifest = json.loads((data_dir / "segments" / "MANIFEST.json").read_text())
    assert manifest["segments"][0]["blake3"] == segment.blake3


def test_rebuild_from_segments_equals_the_original_index(lane, store, data_dir):
    lane.ingest(docs("alpha beta gamma", "beta beta delta"), tenant="t1")
    lane.ingest(docs("gamma epsilon", "zeta alpha"), tenant="t2")
    before = view_tables(store)
    results = lane.search("alpha beta gamma", tenant="t1")
    assert lane.rebuild() == 2
    assert view_tables(store) == before
    store.close()
    os.remove(data_dir / "cruxsql.db")
    with cruxsql.open(data_dir) as reopened:
        fresh = DocumentLane(reopened)       # opening brings the view up to the manifest
        assert view_tables(reopened) == before
        assert fresh.search("alpha beta gamma", tenant="t1") == results
        assert fresh.verify() == []


def test_verify_detects_a_flipped_byte_missing_files_and_strays(lane, store, data_dir):
    lane.ingest(docs("alpha beta"))
    lane.ingest(docs("gamma delta", prefix="e"))
    assert lane.verify() == []
    first, second = lane.segments()
    path = data_dir / "segments" / first.file_name
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    problems = lane.verify()
    assert len(problems) == 1 and "does not match the manifest" in problems[0] and first.file_name in problems[0]
    (data_dir / "segments" / second.file_name).rename(data_dir / "segments" / "seg-stray.jsonl")
    problems = lane.verify()
    assert any("missing" in p and second.file_name in p for p in problems)
    assert any("seg-stray.jsonl is not in the manifest" in p for p in problems)
    before = view_tables(store)
    with pytest.raises(cruxsql.CruxsqlError, match="does not match the manifest"):
        lane.rebuild()
    assert view_tables(store) == before          # checked before the view is touched


def test_a_corrupt_segment_does_not_stop_the_lane(lane, store, data_dir):
    lane.ingest(docs("alpha beta"))
    lane.ingest(docs("alpha gamma", prefix="e"))
    first = lane.segments()[0]
    path = data_dir / "segments" / first.file_name
    path.write_bytes(path.read_bytes().replace(b"alpha beta", b"alpha bete"))
    store.close()
    os.remove(data_dir / "cruxsql.db")
    with cruxsql.open(data_dir) as reopened:
        degraded = DocumentLane(reopened)             # the view is rebuilt without the corrupt segment
        assert [h.result_id for h in degraded.search("alpha").hits] == ["0:0"]
        problems = degraded.verify()
        assert any("does not match the manifest" in p for p in problems)
        assert any("view does not match segment" in p for p in problems)


def test_verify_reports_view_disagreement(lane, store):
    lane.ingest(docs("alpha beta", "gamma"))
    with store.db:
        store.db.execute("DELETE FROM document_chunks WHERE doc_id = 1")
    assert lane.verify() == ["view has 1 chunks for segment_seq 1, expected 2 (run rebuild)"]
    lane.rebuild()
    assert lane.verify() == []


def test_erase_tenant_removes_every_byte_of_its_text(lane, store, data_dir):
    secret = "zqxjsecretword"
    lane.ingest(docs(f"{secret} shared words", "shared only"), tenant="victim")
    lane.ingest(docs("shared keeper text", prefix="k"), tenant="keeper")
    mixed = [DocumentInput("m", [ChunkInput("m1", f"{secret} mixed words")])]
    lane.ingest(mixed, tenant="victim")
    lane.ingest(docs("keeper again shared", prefix="k2"), tenant="keeper")
    assert lane.search(secret, tenant="victim").total_candidates == 2

    counts = lane.erase_tenant("victim")
    assert counts == {"segments_rewritten": 0, "segments_removed": 2, "chunks_erased": 3}
    assert lane.verify() == []
    assert [s.segment_seq for s in lane.segments()] == [2, 4]
    assert lane.search(secret, tenant="victim").coverage.missing_tokens == [secret]
    assert [h.result_id for h in lane.search("shared", tenant="keeper").hits] == ["0:0", "1:0"]
    for path in [*data_dir.rglob("*")]:
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path
            assert b"victim" not in path.read_bytes(), path


def shared_segment(lane, data_dir, first: ChunkRecord, second: ChunkRecord) -> str:
    """Seal a segment holding two tenants' chunks (ingest seals one tenant per segment) and index it, with
    its vectors (the rebuild embeds a segment sealed without); returns its file name."""
    segdir = data_dir / "segments"
    manifest = load_manifest(segdir)
    sealed = write_segment(segdir, manifest.next_seq, "2026-01-01T00:00:00+00:00", [first, second])
    save_manifest(segdir, Manifest(manifest.next_seq + 1, [*manifest.segments, sealed.info]))
    lane.rebuild()
    return sealed.info.file_name


def test_erase_rewrites_a_segment_shared_by_tenants(lane, store, data_dir):
    lane.ingest(docs("keep this text", "other words"), tenant="keeper")
    lane.ingest(docs("uniqueterm gone"), tenant="victim")
    segdir = data_dir / "segments"
    old_file = shared_segment(
        lane, data_dir,
        ChunkRecord("keeper", "default", "x", "x1", "mixed keeper chunk", "2026-01-01T00:00:00+00:00"),
        ChunkRecord("victim", "default", "y", "y1", "uniqueterm victim chunk", "2026-01-01T00:00:00+00:00"))
    counts = lane.erase_tenant("victim")
    assert counts == {"segments_rewritten": 1, "segments_removed": 1, "chunks_erased": 2}
    assert not (segdir / old_file).exists()
    assert [s.chunk_count for s in lane.segments()] == [2, 1]
    assert lane.verify() == []
    chunks, _ = lane.expand(["1:0"], tenant="keeper")
    assert chunks[0].text == "mixed keeper chunk"
    for path in data_dir.rglob("*"):
        if path.is_file():
            assert b"uniqueterm" not in path.read_bytes(), path


def test_erase_carries_the_survivors_vectors_into_the_rewritten_segment(lane, data_dir):
    segdir = data_dir / "segments"
    shared_segment(
        lane, data_dir,
        ChunkRecord("victim", "default", "y", "y1", "uniqueterm victim chunk", "2026-01-01T00:00:00+00:00"),
        ChunkRecord("keeper", "default", "x", "x1", "mixed keeper chunk", "2026-01-01T00:00:00+00:00"))
    before = load_manifest(segdir).segments[0].vectors
    keeper_vector = read_ccxv(segdir / before["file_name"])["vector"][1].copy()   # doc_id 1 before the erasure

    lane.erase_tenant("victim")
    after = load_manifest(segdir).segments[0].vectors
    assert after is not None and after["file_name"] != before["file_name"]
    carried = read_ccxv(segdir / after["file_name"])
    assert carried["doc_id"].tolist() == [0]                                     # renumbered: the only chunk
    assert carried["vector"][0].tolist() == keeper_vector.tolist()
    assert after["profile_hash"] == before["profile_hash"]
    assert lane.query("mixed", tenant="keeper", contract="legacy")["meta"]["score_space"] == "bm25_dense_fused"
    assert lane.verify() == []


def test_the_names_other_packages_import_from_the_lane_module_stay_there():
    from cruxsql.documents import ingest, lane, segment_view, tenants

    assert (lane.ChunkInput, lane.DocumentInput, lane.IngestReport) == (
        ingest.ChunkInput, ingest.DocumentInput, ingest.IngestReport)
    assert (lane.DEFAULT_TENANT, lane.DEFAULT_CORPUS) == (tenants.DEFAULT_TENANT, ingest.DEFAULT_CORPUS) == (
        "default", "default")
    assert lane.SegmentSummary is segment_view.SegmentSummary
    assert cruxsql.DocumentLane is lane.DocumentLane


def test_query_budget_buys_pointers_at_40_tokens(lane):
    lane.ingest(docs(*[f"common word{i} filler text here" for i in range(30)]))
    full = lane.query("common", limit=30, contract="legacy")
    assert len(full["results"]) == 30 and full["total_candidates"] == 30
    shaped = lane.query("common", limit=30, token_budget=200, contract="legacy")
    assert [r["rank"] for r in shaped["results"]] == [1, 2, 3, 4, 5]         # 200 // 40
    assert shaped["total_candidates"] == 30
    assert len(lane.query("common", limit=30, token_budget=10, contract="legacy")["results"]) == 1
    assert len(lane.query("common", limit=3, token_budget=4000, contract="legacy")["results"]) == 3


def test_scan_charges_whole_documents_and_returns_at_least_one(lane):
    # doc lengths 5, 3 and 6 tokens; identical scores are avoided by repeating the query word
    lane.ingest(docs("alpha alpha alpha bb cc", "alpha dd ee", "alpha ff gg hh ii jj"))
    scan = lane.query_scan("alpha", token_budget=7, contract="legacy")
    assert [h["result_id"] for h in scan["scan"]] == ["0:0"]
    assert (scan["tokens_returned"], scan["budget_truncated"], scan["total_candidates"]) == (5, True, 3)
    assert lane.query_scan("alpha", token_budget=8, contract="legacy")["tokens_returned"] == 8
    tiny = lane.query_scan("alpha", token_budget=1, contract="legacy")
    assert len(tiny["scan"]) == 1 and tiny["budget_truncated"] is True
    unbounded = lane.query_scan("alpha", contract="legacy")
    assert (unbounded["tokens_returned"], unbounded["budget_truncated"]) == (14, False)
    assert list(unbounded) == ["scan", "total_candidates", "tokens_returned", "budget_truncated", "meta"]


def test_expand_returns_text_and_typed_errors(lane):
    lane.ingest(docs("alpha beta", "gamma delta"), tenant="t1")
    lane.ingest(docs("epsilon zeta"), tenant="t2")
    payload = lane.query_expand(["0:1", "1:0", "2:0", "0:7", "0-1", "a:b:c", "x:0", "0:-1", "", "+0:+0"],
                                tenant="t1", contract="legacy")
    assert [c["text"] for c in payload["chunks"]] == ["gamma delta", "alpha beta"]
    assert payload["chunks"][0]["token_count"] == 2 and payload["tokens_loaded"] == 4
    assert [(e["result_id"], e["error_kind"], e["error"]) for e in payload["errors"]] == [
        ("1:0", "tenant_mismatch", "tenant mismatch"),
        ("2:0", "evicted", "segment not found"),
        ("0:7", "evicted", "doc_id out of range"),
        ("0-1", "invalid_format", "invalid result_id format"),
        ("a:b:c", "invalid_format", "invalid result_id format"),
        ("x:0", "evicted", "segment not found"),
        ("0:-1", "evicted", "doc_id out of range"),
        ("", "invalid_format", "invalid result_id format"),
    ]
    clean = lane.query_expand(["0:0"], tenant="t1", contract="legacy")
    assert "errors" not in clean and list(clean) == ["chunks", "tokens_loaded", "meta"]


def test_crc_v1_envelopes(lane):
    lane.ingest(docs("terraform module drift detect infrastructure", "terraform workspace manage cloud"))
    envelope = lane.query("terraform quantum", limit=5)
    assert envelope["contract"] == "crc-v1" and envelope["kind"] == "search"
    assert envelope["pointers"] == [{"id": "0:1", "score": envelope["pointers"][0]["score"]},
                                    {"id": "0:0", "score": envelope["pointers"][1]["score"]}]
    assert envelope["cost_estimate"] == {"pointer": 80, "summary": 300, "full": 9}
    assert envelope["next"]["expand"] == 'query_expand {result_ids:["<seg>:<doc>"...]}'
    meta = envelope["meta"]
    assert list(meta)[-2:] == ["coverage", "total_candidates"]
    assert meta["coverage"] == {"score": 0.5, "missing_tokens": ["quantum"], "below_floor": 0}
    assert meta["provenance"]["contributing_segments"] == 1
    gaps = lane.query("terraform quantum", coverage_style="gaps", contract="legacy")["coverage"]
    assert gaps == {"score": 0.5, "below_floor": 0, "gaps": [
        {"query_terms": ["quantum"], "match_quality": "none",
         "suggestion": "No documents in corpus contain 'quantum'"}]}
    scan_meta = lane.query_scan("terraform")["meta"]
    assert list(scan_meta)[-3:] == ["budget_truncated", "total_candidates", "tokens_returned"]
    expanded = lane.query_expand(["0:0", "9:9"], contract="crc-v1")
    assert expanded["kind"] == "addressed" and expanded["agent_decision"] is None
    assert expanded["content"] == [{"id": "0:0", "text": "terraform module drift detect infrastructure"}]
    assert list(expanded["meta"])[-2:] == ["errors", "tokens_loaded"]
    for contract in ("legacy", " V0 ", "none", "OFF"):
        assert "results" in lane.query("terraform", contract=contract)


def test_wrap_keeps_meta_keys_already_present():
    inner = {"results": [], "total_candidates": 3, "meta": {"total_candidates": 99}}
    assert wrap_crc_v1(inner, "search")["meta"] == {"total_candidates": 99, "score_space": "bm25_lexical"}


def test_empty_index_messages(lane):
    assert lane.query("anything") == EMPTY_INDEX_QUERY
    assert lane.query_scan("anything") == EMPTY_INDEX_SCAN
    assert lane.query_expand(["0:0"], contract="legacy")["errors"][0]["error_kind"] == "evicted"


def test_a_crash_before_the_manifest_commit_leaves_no_trace(lane, store, data_dir):
    lane.ingest(docs("alpha beta"))
    segdir = data_dir / "segments"
    (segdir / "seg-00000000000000000009-00000000000000000000000000000000.jsonl").write_text("{}\n")
    (segdir / ".seg-x.jsonl.1234.partial").write_text("half")
    assert len(lane.verify()) == 2
    lane.ingest(docs("gamma", prefix="g"))
    assert lane.verify() == []
    assert sorted(p.name for p in segdir.iterdir()) == listed_files(lane)


def test_a_crash_after_the_manifest_commit_is_indexed_on_open(lane, store, data_dir):
    lane.ingest(docs("alpha beta"))
    segdir = data_dir / "segments"
    manifest = load_manifest(segdir)
    sealed = write_segment(segdir, manifest.next_seq, "2026-01-01T00:00:00+00:00", [
        ChunkRecord("default", "default", "late", "late-1", "alpha omega", "2026-01-01T00:00:00+00:00")])
    save_manifest(segdir, Manifest(manifest.next_seq + 1, [*manifest.segments, sealed.info]))
    assert any("view does not match" in p for p in lane.verify())
    reopened = DocumentLane(store)           # the view catches up with the manifest
    assert [h.result_id for h in reopened.search("omega").hits] == ["1:0"]
    assert reopened.verify() == []


def test_another_connection_sees_new_segments(lane, data_dir):
    lane.ingest(docs("alpha beta"))
    with cruxsql.open(data_dir) as other_store:
        other = DocumentLane(other_store)
        assert [h.result_id for h in other.search("alpha").hits] == ["0:0"]
        lane.ingest(docs("alpha alpha", prefix="x"))
        assert [h.result_id for h in other.search("alpha").hits] == ["1:0", "0:0"]
        assert other.search("alpha") == lane.search("alpha")
