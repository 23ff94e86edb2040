"""The document-lane commands through click's CliRunner, against a real temporary data directory."""

from __future__ import annotations

import functools
import json

import pytest



@pytest.fixture
def run(cli):
    """The shared CliRunner on the test's data directory (conftest.py); each test checks the exit code."""
    return functools.partial(cli, ok=False)


@pytest.fixture
def notes(tmp_path):
    root = tmp_path / "notes"
    (root / "sub").mkdir(parents=True)
    (root / ".hidden").mkdir()
    (root / "deploy.md").write_text("# Deploy\n\nTerraform drift detection runs nightly.\n\n## Rollback\n\n"
                                    "Kubernetes rollback steps.\n")
    (root / "sub" / "notes.txt").write_text("Quantum tunnelling notes, nothing about infrastructure.")
    (root / ".hidden" / "secret.md").write_text("terraform hidden")
    (root / "image.png").write_bytes(b"\x89PNG\r\n")
    return root


def test_ingest_folder_then_reingest_is_a_noop(run, notes):
    first = run("ingest", str(notes))
    assert first.exit_code == 0, first.output
    assert first.stdout.startswith("3 chunks from 2 documents ingested into 1 new segment(s); 0 already stored")
    again = run("ingest", str(notes), "--json")
    assert json.loads(again.stdout) == {"documents": 2, "ingested": 0, "duplicates": 3, "segments_sealed": 0,
                                        "skipped_files": [],
                                        "segments": []}
    listing = json.loads(run("segments", "list", "--json").stdout)
    assert [(s["segment_index"], s["segment_seq"], s["chunk_count"], s["tenants"]) for s in listing] == \
        [(0, 1, 3, "default")]
    run("ingest", "-", "--tenant", "acme", input='{"doc_id": "a", "text": "acme notes"}\n')
    csv_lines = run("segments", "list", "--csv").stdout.splitlines()
    assert csv_lines[0] == "segment_index,segment_seq,tenants,chunk_count,total_tokens,byte_size,sealed_at,file_name," \
                           "blake3"
    assert [line.split(",")[:4] for line in csv_lines[1:]] == [["0", "1", "default", "3"], ["1", "2", "acme", "1"]]


def test_search_text_and_json(run, notes):
    run("ingest", str(notes))
    text = run("search", "terraform quantum ufo")
    assert text.exit_code == 0, text.output
    lines = text.stdout.splitlines()
    assert lines[0].split()[:2] == ["1.", "0:0"] and "deploy.md" in lines[0]
    assert "Terraform drift detection" in lines[1]
    assert lines[-1] == "coverage 0.67 · no document of tenant 'default' contains: ufo · 2 candidate(s)"
    gaps = run("search", "terraform quantum ufo", "--coverage-style", "gaps").stdout.splitlines()
    assert gaps[-1] == "coverage 0.67 · gap: ufo · 2 candidate(s)"
    envelope = json.loads(run("search", "terraform quantum ufo", "--json").stdout)
    assert envelope["contract"] == "crc-v1" and [p["id"] for p in envelope["pointers"]] == ["0:0", "0:2"]
    legacy = json.loads(run("search", "terraform ufo", "--json", "--contract", "legacy",
                            "--coverage-style", "gaps", "--min-score", "100").stdout)
    assert legacy["results"] == [] and legacy["coverage"]["below_floor"] == 1
    assert legacy["coverage"]["gaps"][0]["query_terms"] == ["ufo"]
    budget = json.loads(run("search", "terraform quantum", "--json", "--token-budget", "40").stdout)
    assert len(budget["pointers"]) == 1


def test_scan_and_expand(run, notes):
    run("ingest", str(notes))
    scan = run("scan", "terraform quantum", "--token-budget", "5")
    assert scan.exit_code == 0, scan.output
    assert scan.stdout.splitlines()[-1].endswith("of 2 candidate(s) · truncated by the budget")
    scan_json = json.loads(run("scan", "terraform quantum", "--json", "--contract", "legacy").stdout)
    assert scan_json["budget_truncated"] is False and len(scan_json["scan"]) == 2
    expanded = run("expand", "0:1")
    assert expanded.exit_code == 0
    assert expanded.stdout.startswith("== 0:1  deploy.md (default, chunk deploy.md#1:")
    assert "Kubernetes rollback steps." in expanded.stdout
    bad = run("expand", "0:1", "7:0", "nope")
    assert bad.exit_code == 1
    assert bad.stderr == "Error: 7:0: no segment 7\nError: nope: invalid result_id format\n"
    missing_doc = run("expand", "0:99")
    assert missing_doc.exit_code == 1 and missing_doc.stderr == "Error: 0:99: no document 99 in segment 0\n"
    as_json = json.loads(run("expand", "0:1", "0:0", "--json", "--tenant", "other").stdout)
    assert [e["error_kind"] for e in as_json["meta"]["errors"]] == ["tenant_mismatch", "tenant_mismatch"]


def test_ingest_jsonl_from_stdin(run):
    lines = [
        json.dumps({"doc_id": "a", "chunks": [{"chunk_id": "a1", "text": "alpha beta"},
                                              {"chunk_id": "a2", "text": "gamma delta"}]}),
        json.dumps({"doc_id": "b.md", "text": "# One\nfirst part\n# Two\nsecond part"}),
        "",
    ]
    result = run("ingest", "-", "--tenant", "acme", "--corpus", "wiki", "--json", input="\n".join(lines))
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["ingested"] == 4
    hits = json.loads(run("search", "second", "--tenant", "acme", "--json", "--contract", "legacy").stdout)
    assert [h["result_id"] for h in hits["results"]] == ["0:3"]
    assert json.loads(run("search", "second", "--json").stdout)["pointers"] == []


@pytest.mark.parametrize("args, stdin, message", [
    (("ingest", "-"), "{not json\n", "Error: stdin line 1: not JSON"),
    (("ingest", "-"), '{"doc_id": "a"}\n', "Error: stdin line 1: needs either chunks or text"),
    (("ingest", "-"), '{"doc_id": "a", "chunks": []}\n', "Error: stdin line 1: document 'a' has no chunks"),
    (("ingest", "/no/such/path"), None, "Error: /no/such/path: no such file or folder"),
    (("search", "x", "--tenant", "*"), None, "Error: tenant '*' must name one concrete tenant"),
    (("search", "x", "--limit", "-1"), None, "Invalid value for '--limit'"),
    (("search", "x", "--coverage-style", "bogus"), None, "Invalid value for '--coverage-style'"),
])
def test_bad_input_fails_with_one_line(run, args, stdin, message):
    run("init")
    result = run(*args, input=stdin)
    assert result.exit_code != 0
    assert message in result.stderr


def test_empty_index_and_erase(run, notes):
    run("init")
    assert run("search", "anything").stdout == "index is empty \u2014 ingest data first\n"
    assert run("scan", "anything").stdout == "index is empty\n"
    run("ingest", str(notes), "--tenant", "victim")
    erased = run("documents", "erase", "--tenant", "victim")
    assert erased.exit_code == 0, erased.output
    assert erased.stdout == "erased 3 chunk(s) of tenant 'victim': 0 segment(s) rewritten, 1 removed\n"
    assert json.loads(run("segments", "list", "--json").stdout) == []


def test_large_inputs_are_sealed_in_requests_within_crux_limits(run, tmp_path, monkeypatch):
    monkeypatch.setattr("cruxsql.documents.sources.MAX_DOCUMENTS", 2)
    monkeypatch.setattr("cruxsql.documents.sources.MAX_CHUNKS", 3)
    folder = tmp_path / "many"
    folder.mkdir()
    for i in range(5):
        (folder / f"n{i}.txt").write_text(f"note number {i}")
    (folder / "long.md").write_text("# A\none\n# B\ntwo\n# C\nthree\n# D\nfour\n")   # 4 chunks: a request alone
    summary = json.loads(run("ingest", str(folder), "--json").stdout)
    assert summary["ingested"] == 9 and summary["segments_sealed"] == 4
    assert [s["ingested"] for s in summary["segments"]] == [4, 2, 2, 1]
