"""The recall CLI (query, bootstrap, view) against a real temporary data directory."""

from __future__ import annotations

import json

import pytest

from cruxsql.facts.store import Store
from cruxsql.recall import bootstrap_seed


@pytest.fixture
def data_dir(tmp_path):
    with Store(tmp_path) as s:
        s.store("svc", "status", "Deploy is GREEN", confidence=0.9)
        s.store("svc", "owner", "alice runs deploys", confidence=0.8)
        s.store("svc", "note", "bob's deploy worry", private=True, agent="bob")
        s.store("svc", "status", "other tenant deploy", tenant="t1")
        bootstrap_seed.seed(s, "docs", "setup", "install", "pip install cruxsql")
    return tmp_path


def run(cli, *args):
    """The shared CliRunner (conftest.py); each test checks the exit code."""
    return cli(*args, ok=False)


def test_query_json_shape(cli, data_dir):
    res = run(cli, "query", "deploy", "--json", "--contract", "legacy", "--data-dir", str(data_dir))
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert [r["value"] for r in out["rows"]] == ["Deploy is GREEN", "alice runs deploys"]
    assert list(out["rows"][0]) == ["fact_id", "entity", "key", "value", "confidence", "effective_confidence",
                                    "horizon_class", "freshness", "age_hours", "superseded_by", "actor"]
    assert out["filtered_below_threshold"] == 0 and out["matched"] == 2 and out["left_out"] == 0
    assert "crc_v1" not in out


def test_query_agent_tenant_floor_and_crc(cli, data_dir):
    d = str(data_dir)
    out = json.loads(run(cli, "query", "deploy", "--agent", "bob", "--json", "--data-dir", d).output)
    assert out["rows"][0]["entity"] == "svc" and out["rows"][0]["value"] == "bob's deploy worry"
    out = json.loads(run(cli, "query", "deploy", "--tenant", "t1", "--json", "--data-dir", d).output)
    assert [r["value"] for r in out["rows"]] == ["other tenant deploy"]
    out = json.loads(run(cli, "query", "deploy", "--min-effective-confidence", "0.85", "--json",
                         "--data-dir", d).output)
    assert len(out["rows"]) == 1 and out["filtered_below_threshold"] == 1
    out = json.loads(run(cli, "query", "deploy", "--contract", "crc-v1", "--token-budget", "4", "--json",
                         "--data-dir", d).output)
    least = out["compact"]["envelope_tokens"]          # 4 is below the least envelope: compact lines
    assert "crc_v1" not in out and out["compact"]["text"].endswith(
        f"compact: the CRC-v1 envelope needs token_budget ≥ {least}")
    out = json.loads(run(cli, "query", "deploy", "--contract", "crc-v1", "--token-budget", str(least), "--json",
                         "--data-dir", d).output)
    env = out["crc_v1"]
    assert env["contract"] == "crc-v1" and env["kind"] == "fact" and len(env["content"]) == 1
    assert env["meta"]["total_candidates"] == 2 and env["meta"]["capped"] == 1
    assert json.loads(run(cli, "query", "deploy", "--token-budget", str(least), "--json", "--data-dir", d).output) == out
    out = json.loads(run(cli, "query", "deploy", "--token-budget", "4", "--json", "--contract", "LEGACY",
                         "--data-dir", d).output)
    assert len(out["rows"]) == 1 and out["left_out"] == 1          # legacy greedy drop
    out = json.loads(run(cli, "query", "green", "--known-at", "2000-01-01T00:00:00Z", "--json",
                         "--data-dir", d).output)
    assert out["rows"] == [] and out["known_at"] == "2000-01-01T00:00:00Z"


def test_query_readable_lines(cli, data_dir):
    res = run(cli, "query", "green", "--data-dir", str(data_dir))
    assert res.exit_code == 0
    lines = res.output.splitlines()
    assert lines[0] == ("[svc] status = Deploy is GREEN (confidence=0.90, effective_confidence=0.90, "
                        "freshness=fresh, age_hours=0)")
    assert lines[1].startswith("-- 1 of 1 matching fact(s) shown")
    assert run(cli, "query", "nothing-here", "--data-dir", str(data_dir)).output.startswith("no facts found")


@pytest.mark.parametrize("args,needle", [
    (["--as-of", "yesterday"], "--as-of must be an RFC 3339 timestamp"),
    (["--known-at", "2026-02-30T00:00:00Z"], "--known-at must be an RFC 3339 timestamp"),
    (["--min-effective-confidence", "1.5"], "--min-effective-confidence must be a number in 0.0..=1.0"),
    (["--token-budget", "-5"], "Invalid value for '--token-budget': -5 is not in the range 0<=x<=2147483647."),
    (["--top-k", "-1"], "Invalid value for '--top-k': -1 is not in the range 0<=x<=2147483647."),
    (["--top-k", "99999999999999999999"], "Invalid value for '--top-k': 99999999999999999999 is not in the range"),
    (["--contract", "crc-v2"], "Invalid value for '--contract': 'crc-v2' is not one of"),
])
def test_bad_input_is_one_line_naming_the_option(cli, data_dir, args, needle):
    res = cli("query", "x", *args, "--data-dir", str(data_dir), ok=False)
    assert res.exit_code != 0
    assert needle in res.output and len(res.output.strip().splitlines()) == 1


def test_bootstrap_and_view(cli, data_dir):
    d = str(data_dir)
    out = json.loads(run(cli, "bootstrap", "--topic", "docs", "--json", "--data-dir", d).output)
    assert [f["value"] for f in out["facts"]] == ["pip install cruxsql"] and out["prefix"] == "__bootstrap__::doc:"
    assert run(cli, "bootstrap", "--topic", "docs", "--data-dir", d).output.startswith(
        "[__bootstrap__::doc:setup] install = pip install cruxsql")
    bad = cli("bootstrap", "--token-budget", "-1", "--data-dir", d, ok=False)
    assert bad.exit_code != 0 and "--token-budget" in bad.output
    out = json.loads(run(cli, "view", "--entity", "svc", "--json", "--data-dir", d).output)
    assert [f["value"] for f in out["facts"]] == ["alice runs deploys", "Deploy is GREEN"]
    assert out["returned"] == 2 and out["total_tokens"] == 5 + 4
    text = run(cli, "view", "--entity", "svc", "--key", "owner", "--data-dir", d).output
    assert text.startswith("[svc] owner = alice runs deploys (id=f_") and ", v1)" in text


def test_facts_as_csv_and_json_lines(cli, data_dir):
    d = str(data_dir)
    lines = run(cli, "query", "deploy", "--csv", "--data-dir", d).output.splitlines()
    assert lines[0] == "fact_id,entity,key,value,confidence,effective_confidence,horizon_class,freshness,age_hours," \
                       "superseded_by,actor"
    assert [line.split(",")[3] for line in lines[1:]] == ["Deploy is GREEN", "alice runs deploys"]
    out = run(cli, "view", "--entity", "svc", "--nl", "--data-dir", d).output
    rows = [json.loads(line) for line in out.splitlines()]
    assert [(r["value"], r["fact_id"].startswith("f_")) for r in rows] == [("alice runs deploys", True),
                                                                         ("Deploy is GREEN", True)]
    assert run(cli, "query", "nothing-matches", "--csv", "--data-dir", d).output == ""
