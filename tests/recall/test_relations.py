"""Relations between entities, stored as facts: `relate` / `related` through the MCP SDK client against a
real `cruxsql mcp`, the official memory server's relations kept through `import mcp-memory`, the CLI alike,
and a relation erased, exported and versioned as a fact."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cruxsql.facts.store import Store
from cruxsql.recall.relations import RELATION_KEYS, related
from support.mcp_clients import server_env, stdio
from support.journal_files import journal_text

pytestmark = pytest.mark.slow

CLI = [sys.executable, "-m", "cruxsql"]
# what the official MCP memory server writes (memory.jsonl)
GRAPH = "\n".join(json.dumps(o) for o in [
    {"type": "entity", "name": "John_Smith", "entityType": "person", "observations": ["Speaks Spanish"]},
    {"type": "entity", "name": "Anthropic", "entityType": "organization", "observations": ["Based in SF"]},
    {"type": "entity", "name": "SF", "entityType": "city", "observations": []},
    {"type": "relation", "from": "John_Smith", "to": "Anthropic", "relationType": "works_at"},
    {"type": "relation", "from": "Anthropic", "to": "SF", "relationType": "located_in"},
]) + "\n"


def cli(data_dir: Path, *args: str) -> subprocess.CompletedProcess:
    done = subprocess.run(CLI + [*args, "--data-dir", str(data_dir)], env=server_env(), capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done


def test_relate_and_related_over_mcp_both_directions_and_depth(portal, tmp_path: Path) -> None:
    client = stdio(portal, tmp_path / "store", "--agent", "alice", "--tenant", "acme")
    try:
        first = client.call("relate", {"from": "checkout", "relation": "calls", "to": "payments-api"})
        assert not first.is_error and first.structured_content["version"] == 1
        client.text("relate", {"from": "payments-api", "relation": "uses", "to": "postgres"})
        again = client.call("relate", {"from": "checkout", "relation": "calls", "to": "payments-api"})
        assert again.structured_content["version"] == 2               # the next version, not a duplicate
        near = client.call("related", {"entity": "payments-api"})
        assert near.content[0].text.splitlines() == [
            f"payments-api -[uses]-> postgres · {near.structured_content['edges'][0]['fact_id']}",
            f"checkout -[calls]-> payments-api · {again.structured_content['fact_id']}"]
        assert [e["hop"] for e in near.structured_content["edges"]] == [1, 1]
        far = client.call("related", {"entity": "postgres", "depth": 2}).structured_content
        assert [(e["from"], e["to"], e["hop"]) for e in far["edges"]] == [
            ("payments-api", "postgres", 1), ("checkout", "payments-api", 2)]
        assert client.call("related", {"entity": "postgres", "depth": 4}).is_error
        assert client.call("relate", {"from": "a", "relation": "x:y", "to": "b"}).is_error
        cut = client.call("related", {"entity": "payments-api", "token_budget": 30}).structured_content
        assert len(cut["edges"]) == 1 and cut["left_out"] == 1
    finally:
        client.close()


def test_the_official_servers_relations_stay_relations_through_import(portal, tmp_path: Path) -> None:
    data_dir = tmp_path / "store"
    (tmp_path / "memory.jsonl").write_text(GRAPH)
    cli(data_dir, "import", "mcp-memory", str(tmp_path / "memory.jsonl"), "--create")
    client = stdio(portal, data_dir)
    try:
        graph = client.call("related", {"entity": "John_Smith", "depth": 2}).structured_content
    finally:
        client.close()
    assert [(e["from"], e["relation"], e["to"]) for e in graph["edges"]] == [
        ("John_Smith", "works_at", "Anthropic"), ("Anthropic", "located_in", "SF")]
    exported = cli(data_dir, "export", "facts", "--format", "mcp-memory").stdout
    relations = [json.loads(line) for line in exported.splitlines() if '"relation"' in line]
    assert {(r["from"], r["relationType"], r["to"]) for r in relations} == {
        ("John_Smith", "works_at", "Anthropic"), ("Anthropic", "located_in", "SF")}


def test_the_cli_relates_and_a_deleted_relation_is_gone(tmp_path: Path) -> None:
    data_dir = tmp_path / "store"
    made = cli(data_dir, "relate", "checkout", "calls", "payments-api").stdout.strip()
    fact_id = made.rsplit(" ", 1)[1]
    assert made == f"checkout -[calls]-> payments-api · {fact_id}"
    listed = json.loads(cli(data_dir, "related", "payments-api", "--json").stdout)
    assert [e["from"] for e in listed["edges"]] == ["checkout"]
    cli(data_dir, "delete", fact_id)
    assert cli(data_dir, "related", "payments-api").stdout == "no relations of payments-api (within 1 hop(s))\n"
    with Store(data_dir) as store:         # the reverse look-up uses the partial index on the target
        plan = " ".join(str(r) for r in store.db.execute(
            f"EXPLAIN QUERY PLAN SELECT fact_id FROM facts WHERE {RELATION_KEYS} AND value = ?", ("x",)))
        assert "facts_relation_target" in plan
        assert related(store, "checkout").edges == []


def test_recall_follows_one_hop_when_asked(portal, tmp_path: Path) -> None:
    client = stdio(portal, tmp_path / "store", "--agent", "alice", "--tenant", "acme")
    try:
        client.text("store_fact", {"entity": "payments-api", "key": "database", "value": "postgres 16"})
        client.text("relate", {"from": "payments-api", "relation": "owned_by", "to": "team-payments"})
        client.text("relate", {"from": "checkout", "relation": "calls", "to": "payments-api"})
        plain = client.text("recall", {"query": "payments database"})
        followed = client.text("recall", {"query": "payments database", "follow_relations": True})
        small = client.text("recall", {"query": "payments database", "follow_relations": True, "token_budget": 60})
    finally:
        client.close()
    assert "related:" not in plain
    assert followed.startswith(plain.splitlines()[0])
    assert [line.split(" · ")[0] for line in followed.splitlines() if line.startswith("related:")] == [
        "related: payments-api -[owned_by]-> team-payments", "related: checkout -[calls]-> payments-api"]
    assert len(small) // 4 <= 60 and "postgres 16" in small


def test_erasing_an_entity_erases_the_relations_naming_it_both_ways(tmp_path: Path) -> None:
    data_dir = tmp_path / "store"
    cli(data_dir, "relate", "checkout", "owned_by", "Maria Okafor")
    cli(data_dir, "relate", "Maria Okafor", "works_at", "acme")
    cli(data_dir, "relate", "checkout", "calls", "payments-api")
    cli(data_dir, "erase", "--entity-prefix", "Maria Okafor", "--tenant", "default", "--reason", "gdpr")
    assert cli(data_dir, "related", "Maria Okafor").stdout == "no relations of Maria Okafor (within 1 hop(s))\n"
    assert cli(data_dir, "related", "checkout").stdout.startswith("checkout -[calls]-> payments-api · ")
    assert "Maria" not in journal_text(data_dir)      # the name left the journal too


def test_a_held_relation_survives_retention_and_erasure_from_either_end(tmp_path: Path) -> None:
    data_dir = tmp_path / "store"
    cli(data_dir, "relate", "checkout", "calls", "payments-api")
    cli(data_dir, "relate", "ledger", "reads", "Maria Okafor")
    cli(data_dir, "relate", "search", "uses", "elastic")
    cli(data_dir, "hold", "place", "--tenant", "default", "--entity-prefix", "checkout", "--reason", "audit")
    cli(data_dir, "hold", "place", "--tenant", "default", "--entity-prefix", "Maria", "--reason", "litigation")
    cli(data_dir, "retention", "apply", "--tenant", "default", "--older-than", "0s")
    assert cli(data_dir, "related", "payments-api").stdout.startswith("checkout -[calls]-> payments-api · ")
    assert cli(data_dir, "related", "search").stdout == "no relations of search (within 1 hop(s))\n"
    held = subprocess.run(CLI + ["erase", "--entity-prefix", "Maria", "--tenant", "default", "--reason", "x",
                                 "--data-dir", str(data_dir)], env=server_env(), capture_output=True, text=True,
                          timeout=60)
    assert held.returncode == 3, held.stderr          # the hold on its target holds the relation back
    assert cli(data_dir, "related", "Maria Okafor").stdout.startswith("ledger -[reads]-> Maria Okafor · ")
