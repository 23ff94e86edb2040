"""`cruxsql curate ...` and `cruxsql consolidate [undo] ...` through the real CLI on a real data directory."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from cruxsql.facts.store import Store, StoreRequest
from support.journal_files import journal_bytes


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def run(cli):
    """The shared CliRunner on the test's data directory (conftest.py), under this module's name."""
    return cli


def seed(data: Path, *reqs: StoreRequest) -> list[str]:
    with Store(data) as store:
        return [f.fact_id for f in store.store_batch(list(reqs), chain=False)]


def test_curate_contradictions_json_csv_and_empty(run, data: Path) -> None:
    missing = run("curate", "contradictions", ok=False)
    assert missing.exit_code == 1 and missing.output.startswith("Error: ") and not data.exists()
    seed(data, StoreRequest("svc", "up", "maybe"))
    assert run("curate", "contradictions").output == "no contradiction candidates\n"
    pos, neg = seed(data, StoreRequest("svc", "up", "yes"), StoreRequest("svc", "up", "no"))
    rows = json.loads(run("curate", "contradictions", "--json").output)
    assert rows == [{"entity": "svc", "key": "up", "reason": "opposite_polarity_same_entity_key",
                     "polarity_a": "negative", "polarity_b": "positive", "fact_ids": [neg, pos], "values": ["no", "yes"]}]
    table = list(csv.reader(io.StringIO(run("curate", "contradictions", "--csv").output)))
    assert table[0] == ["entity", "key", "reason", "polarity_a", "polarity_b", "fact_ids", "values"]
    assert json.loads(table[1][5]) == [neg, pos]
    assert json.loads(run("curate", "contradictions", "--json", "--tenant", "other").output) == []
    lines = run("curate", "contradictions", "--nl").output.splitlines()
    assert [json.loads(line)["fact_ids"] for line in lines] == [[neg, pos]]


def test_curate_disagreements_and_duplicates(run, data: Path) -> None:
    a, b = seed(data, StoreRequest("svc", "replicas", "3"), StoreRequest("svc", "replicas", "7"))
    c, d = seed(data, StoreRequest("svc", "note", "Deploy canary first"), StoreRequest("svc", "summary", "deploy canary first!"))
    rows = json.loads(run("curate", "disagreements", "--json").output)
    assert [(r["reason"], r["fact_ids"], r["confidence"]) for r in rows] == \
        [("numeric_disagreement", sorted([a, b]), 0.9)]
    assert json.loads(run("curate", "disagreements", "--json", "--reason", "actor_flip_flop").output) == []
    dups = json.loads(run("curate", "duplicates", "--json").output)
    assert [(r["reason"], r["fact_ids"], r["similarity"]) for r in dups] == \
        [("exact_normalised_duplicate", sorted([c, d]), 1.0)]
    bad = run("curate", "duplicates", "--threshold", "1.5", ok=False)
    assert bad.exit_code == 1 and bad.stderr == "Error: threshold must be a number in (0, 1], got 1.5\n"
    bad = run("curate", "disagreements", "--window", "soon", ok=False)
    assert bad.exit_code == 1 and "invalid duration 'soon'" in bad.output


def test_consolidate_apply_undo_and_clean_errors(run, data: Path) -> None:
    a, b = seed(data, StoreRequest("svc", "status", "green", confidence=0.5),
                StoreRequest("svc", "status", "GREEN", confidence=0.5))
    journal = journal_bytes(data)
    bad = run("consolidate", "svc", "status", "green", "--target", a, "--target", "f_missing", ok=False)
    assert bad.exit_code == 1 and bad.output == "Error: target fact not found: f_missing\n"
    bad = run("consolidate", "svc", "status", "green", "--target", a, ok=False)
    assert bad.output.startswith("Error: current prior version must be an explicitly validated target: ")
    assert journal_bytes(data) == journal
    report = json.loads(run("consolidate", "svc", "status", "green", "--target", a, "--target", b,
                            "--id", "ops-1", "--json").output)
    cid = report["receipt"]["canonical_fact_id"]
    assert report["status"] == "consolidated" and report["receipt"]["consolidation_id"] == "ops-1"
    line = json.loads(journal_bytes(data).splitlines()[-1])
    assert line["op"] == "consolidate" and line["superseded_fact_ids"] == [a, b]
    assert line["canonical"]["source_receipt"] == "consolidation:ops-1"
    out = run("consolidate", "undo", cid, "--source", b, "--source", a).output
    assert out == f"undone: {cid} (restored {', '.join(sorted([a, b]))})\n"
    again = json.loads(run("consolidate", "undo", cid, "--source", a, "--source", b, "--json").output)
    assert again == {"status": "already_undone", "canonical_fact_id": cid, "restored_fact_ids": []}
    bad = run("consolidate", "undo", cid, "--source", a, ok=False)
    assert bad.output == f"Error: consolidation undo source set does not match canonical edges: {cid}\n"
    assert "Traceback" not in bad.output


def test_help_explains(run) -> None:
    assert "Undo a consolidation" in run("consolidate", "undo", "--help").output
    assert "--target FACT_ID" in run("consolidate", "apply", "--help").output
