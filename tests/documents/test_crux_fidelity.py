"""Document-lane behaviours ported from the Rust code (crux-mcp crc_v1.rs, corecruxctl ingest.rs), and
tenant-isolated coverage, on real data directories through the real CLI where there is one."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from cruxsql.cli import main
from cruxsql.documents import ChunkInput, DocumentInput, DocumentLane
from cruxsql.documents.response_shapes import NEXT_EXPAND, wrap_crc_v1
from cruxsql.facts.store import Store


def test_search_envelope_next_expand_is_crux_literal_template(tmp_path: Path) -> None:
    """crc_v1.rs `wrap_query` / `wrap_scan` pass `json!("query_expand {result_ids:[\\"<seg>:<doc>\\"...]}")`
    as `next.expand`: a template, whatever the hits; `wrap_expand` passes null."""
    assert NEXT_EXPAND == 'query_expand {result_ids:["<seg>:<doc>"...]}'
    with Store(tmp_path) as store:
        lane = DocumentLane(store)
        lane.ingest([DocumentInput("d", [ChunkInput("c1", "terraform drift"), ChunkInput("c2", "terraform")])])
        assert lane.query("terraform")["next"] == {"expand": NEXT_EXPAND, "resolution_pointer": None}
        assert lane.query_scan("terraform")["next"]["expand"] == NEXT_EXPAND
        assert lane.query_expand(["0:0"])["next"]["expand"] is None


def test_wrap_crc_v1_skips_hits_without_an_address() -> None:
    """crc_v1.rs `hit_to_pointer`: the id is `result_id`, else `segment_index:doc_id` when both are u64,
    else no pointer (`filter_map`); `full_cost` sums `doc_length_tokens`/`token_count` where present."""
    inner = {"results": [{"result_id": "3:8801", "score": 12.4, "doc_length_tokens": 100},
                         {"doc_id": 5, "score": 1.0, "doc_length_tokens": 7},           # no segment_index
                         {"segment_index": 2, "doc_id": 9, "token_count": 50},          # no score
                         {"segment_index": -1, "doc_id": 9, "score": 2.0}],
             "total_candidates": 4, "meta": {}}
    out = wrap_crc_v1(inner, "search")
    assert out["pointers"] == [{"id": "3:8801", "score": 12.4}, {"id": "2:9", "score": None}]
    assert out["cost_estimate"] == {"pointer": 80, "summary": 300, "full": 157}
    assert out["meta"]["total_candidates"] == 4


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    for sub in ("node_modules/pkg", "target/debug", ".git", "guides"):
        (root / sub).mkdir(parents=True)
    (root / "guides" / "guide.md").write_bytes("\ufeff# Guide\n\nTerraform drift detection.\n".encode())
    (root / "records.json").write_text(json.dumps(
        {"title": "  Terraform records ", "items": [{"body": "rollback steps"}, 3, None, "   ", True], "n": 1}))
    (root / ".hidden.md").write_text("a hidden file is walked")
    (root / "node_modules" / "pkg" / "readme.md").write_text("vendored terraform")
    (root / "target" / "debug" / "out.txt").write_text("build terraform")
    (root / ".git" / "notes.md").write_text("git terraform")
    (root / "latin1.txt").write_bytes(b"caf\xe9 terraform")
    (root / "binary.txt").write_bytes(b"terraform\x00blob")
    (root / "image.png").write_bytes(b"\x89PNG")
    os.symlink(root / "guides" / "guide.md", root / "link.md")
    return root


def test_folder_ingest_walks_like_corecruxctl(tmp_path: Path, tree: Path) -> None:
    """ingest.rs `walk_directory` / `skipped_directory_name` / `supported_extension` /
    `document_from_file` / `flatten_json_strings`: hidden directories, node_modules/ and target/ are not
    entered, symlinks are not followed, NUL-holding or non-UTF-8 files are skipped (cruxsql warns, the
    ingest goes on), a leading U+FEFF is dropped, and a .json file contributes its trimmed non-blank
    strings joined by blank lines."""
    data = tmp_path / "data"
    result = CliRunner().invoke(main, ["ingest", str(tree), "--json"], env={"CRUXSQL_DATA_DIR": str(data)})
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["skipped_files"] == [
        {"path": str(tree / "binary.txt"), "reason": "binary (holds a NUL byte)"},
        {"path": str(tree / "latin1.txt"), "reason": "not UTF-8 text (invalid byte at offset 3)"},
    ]
    assert result.stderr == (f"Warning: skipped {tree / 'binary.txt'}: binary (holds a NUL byte)\n"
                             f"Warning: skipped {tree / 'latin1.txt'}: not UTF-8 text (invalid byte at offset 3)\n")
    with Store(data) as store:
        texts = dict(store.db.execute("SELECT document_id, group_concat(chunk_id) FROM document_chunks "
                                      "GROUP BY document_id"))
        assert sorted(texts) == [".hidden.md", "guides/guide.md", "records.json"]
        lane = DocumentLane(store)
        chunks = {c.document_id: c.text for c in lane.expand([f"0:{i}" for i in range(3)])[0]}
    assert chunks["records.json"] == "Terraform records\n\nrollback steps"
    assert chunks["guides/guide.md"] == "# Guide\n\nTerraform drift detection."


def test_invalid_json_file_aborts_the_ingest_cleanly(tmp_path: Path) -> None:
    """ingest.rs `document_from_file`: invalid JSON is an error (`invalid JSON in {path}`), nothing sealed."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("fine text")
    (tmp_path / "docs" / "bad.json").write_text('{"a": NaN}')
    data = tmp_path / "data"
    result = CliRunner().invoke(main, ["ingest", str(tmp_path / "docs")], env={"CRUXSQL_DATA_DIR": str(data)})
    assert result.exit_code == 1
    assert result.output.startswith(f"Error: invalid JSON in {tmp_path / 'docs' / 'bad.json'}: ")
    assert len(result.output.splitlines()) == 1
    assert not (data / "segments").exists() or not list((data / "segments").glob("*.jsonl"))


def _two_tenants(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    with Store(data) as store:
        lane = DocumentLane(store)
        lane.ingest([DocumentInput("a", [ChunkInput("a1", "apple banana"), ChunkInput("a2", "banana split")])],
                    tenant="acme")
        lane.ingest([DocumentInput("o", [ChunkInput("o1", "apple cherry"), ChunkInput("o2", "cherry durian merger"),
                                         ChunkInput("o3", "durian takeover apple")])], tenant="other")
    return data


def test_coverage_counts_only_the_callers_tenant(tmp_path: Path) -> None:
    """Crux's `bm25_search` coverage marks a query token matched when any segment's vocabulary holds it,
    so tenant acme learns that `merger` exists in tenant other's documents. cruxsql computes coverage,
    `missing_tokens` and `gaps` from the caller's tenant only (the BM25 ranking itself is unchanged)."""
    data = _two_tenants(tmp_path)
    env = {"CRUXSQL_DATA_DIR": str(data)}
    out = json.loads(CliRunner().invoke(main, ["search", "apple merger", "--tenant", "acme", "--json",
                                               "--contract", "legacy"], env=env).stdout)
    assert out["coverage"] == {"score": 0.5, "missing_tokens": ["merger"], "below_floor": 0}
    gaps = json.loads(CliRunner().invoke(main, ["search", "apple merger", "--tenant", "acme", "--json",
                                                "--contract", "legacy", "--coverage-style", "gaps"],
                                         env=env).stdout)["coverage"]["gaps"]
    assert [g["query_terms"] for g in gaps] == [["merger"]]
    other = json.loads(CliRunner().invoke(main, ["search", "apple merger", "--tenant", "other", "--json",
                                                 "--contract", "legacy"], env=env).stdout)
    assert other["coverage"] == {"score": 1.0, "missing_tokens": [], "below_floor": 0}


def test_tenant_statistics_score_from_the_callers_documents_only(tmp_path: Path) -> None:
    """Crux (corecrux-retrieval/src/bm25.rs) computes N, avgdl and df over every tenant: acme's score for `apple` moves
    when another tenant ingests. `--tenant-statistics` scores with acme's own N=2, df=1, avgdl=2."""
    data = _two_tenants(tmp_path)
    env = {"CRUXSQL_DATA_DIR": str(data)}

    def score(*flags: str) -> float:
        out = json.loads(CliRunner().invoke(main, ["search", "apple", "--tenant", "acme", "--json", "--contract",
                                                   "legacy", "--no-dense", *flags], env=env).stdout)
        assert [r["result_id"] for r in out["results"]] == ["0:0"]
        return out["results"][0]["score"]

    f32 = np.float32
    # global: N = 5, df(apple) = 3, avgdl = 12/5; dl = 2
    idf = f32(math.log(f32(f32(5) - f32(3) + f32(0.5)) / f32(f32(3) + f32(0.5)) + f32(1)))
    norm = f32(1.2) * ((f32(1) - f32(0.75)) + (f32(0.75) * f32(2)) / (f32(12) / f32(5)))
    assert score() == float(idf * ((f32(1) * f32(2.2)) / (f32(1) + norm)))
    # acme only: N = 2, df = 1, avgdl = 2 = dl, so tf_norm = 1
    assert score("--tenant-statistics") == float(f32(math.log(f32(f32(1.5) / f32(1.5)) + f32(1))))
    with Store(data) as store:
        lane = DocumentLane(store)
        before = lane.search("apple", tenant="acme", tenant_statistics=True).hits[0].score
        lane.ingest([DocumentInput("x", [ChunkInput("x1", "apple apple apple pie")])], tenant="other")
        assert lane.search("apple", tenant="acme", tenant_statistics=True).hits[0].score == before
        assert lane.search("apple", tenant="acme").hits[0].score != before
