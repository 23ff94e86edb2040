"""Imports from other memory stores: the documented mapping, idempotent, dry run, bad input by line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cruxsql.facts.store import Store
from cruxsql.interchange.mcp_memory import observation_key
from support.cli_process import run_cruxsql
from support.journal_files import journal_bytes

pytestmark = pytest.mark.slow

# Shapes from the MCP reference memory server's README (`memory.jsonl`, one object a line).
MEMORY_JSONL = "\n".join(json.dumps(o) for o in [
    {"type": "entity", "name": "John_Smith", "entityType": "person",
     "observations": ["Speaks fluent Spanish", "Graduated in 2019", "Prefers morning meetings"]},
    {"type": "entity", "name": "Anthropic", "entityType": "organization", "observations": ["Based in SF"]},
    {"type": "relation", "from": "John_Smith", "to": "Anthropic", "relationType": "works_at"},
]) + "\n"

# mem0 1.x `Memory.get_all()` output.
MEM0_JSON = json.dumps({"results": [
    {"id": "892db2ae-06d9-49e5-8b3e-585ef9b85b8e", "memory": "Is a vegetarian", "hash": "3f1a",
     "metadata": None, "created_at": "2024-07-26T10:29:36.630547-07:00", "updated_at": None, "user_id": "alex"},
    {"id": "8f2c0a11-2b64-4e3c-9a1e-2e5d3b9f7c10", "memory": "Allergic to nuts", "user_id": "alex"},
    {"id": "agent-mem-1", "memory": "Answers in British English", "agent_id": "support-bot"},
]})


def _cli(data_dir: Path, *args: str, input: str | None = None):
    create = ["--create"] if args[0] == "import" else []       # an import into a new store says so
    return run_cruxsql(data_dir, *args, *create, input=input)


def _live(data_dir: Path) -> list[tuple]:
    with Store(data_dir) as store:
        return sorted(store.db.execute(
            "SELECT tenant_hash, entity, key, value, source_receipt FROM live_facts"))


def test_mcp_memory_mapping_and_idempotence(tmp_path):
    (tmp_path / "memory.jsonl").write_text(MEMORY_JSONL)
    first = _cli(tmp_path / "d", "import", "mcp-memory", str(tmp_path / "memory.jsonl"), "--tenant", "acme")
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == "stored 7 fact(s) from memory.jsonl; 0 already present, 0 duplicate(s) in the input"
    facts = _live(tmp_path / "d")
    assert facts == sorted([
        ("acme", "John_Smith", "entity_type", "person", "mcp-memory:memory.jsonl#L1"),
        ("acme", "John_Smith", observation_key("Speaks fluent Spanish"), "Speaks fluent Spanish",
         "mcp-memory:memory.jsonl#L1"),
        ("acme", "John_Smith", observation_key("Graduated in 2019"), "Graduated in 2019", "mcp-memory:memory.jsonl#L1"),
        ("acme", "John_Smith", observation_key("Prefers morning meetings"), "Prefers morning meetings",
         "mcp-memory:memory.jsonl#L1"),
        ("acme", "Anthropic", "entity_type", "organization", "mcp-memory:memory.jsonl#L2"),
        ("acme", "Anthropic", observation_key("Based in SF"), "Based in SF", "mcp-memory:memory.jsonl#L2"),
        ("acme", "John_Smith", "relation:works_at:Anthropic", "Anthropic", "mcp-memory:memory.jsonl#L3"),
    ])
    journal = journal_bytes(tmp_path / "d")
    again = _cli(tmp_path / "d", "import", "mcp-memory", str(tmp_path / "memory.jsonl"), "--tenant", "acme")
    assert again.stdout.strip() == "stored 0 fact(s) from memory.jsonl; 7 already present, 0 duplicate(s) in the input"
    assert journal_bytes(tmp_path / "d") == journal


def test_mem0_mapping_idempotence_and_dry_run(tmp_path):
    (tmp_path / "export.json").write_text(MEM0_JSON)
    dry = _cli(tmp_path / "d", "import", "mem0", str(tmp_path / "export.json"), "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    plan = json.loads(dry.stdout)
    assert (plan["to_store"], plan["stored"]) == (3, 0)
    assert [(f["entity"], f["key"], f["value"]) for f in plan["facts"]] == [
        ("user:alex", "memory:892db2ae-06d9-49e5-8b3e-585ef9b85b8e", "Is a vegetarian"),
        ("user:alex", "memory:8f2c0a11-2b64-4e3c-9a1e-2e5d3b9f7c10", "Allergic to nuts"),
        ("agent:support-bot", "memory:agent-mem-1", "Answers in British English"),
    ]
    assert not (tmp_path / "d" / "facts.jsonl").exists() or journal_bytes(tmp_path / "d") == b""
    assert _cli(tmp_path / "d", "import", "mem0", str(tmp_path / "export.json")).returncode == 0
    assert _cli(tmp_path / "d", "import", "mem0", str(tmp_path / "export.json")).stdout.startswith(
        "stored 0 fact(s) from export.json; 3 already present")
    assert sorted(f[4] for f in _live(tmp_path / "d")) == sorted(
        ["mem0:agent-mem-1", "mem0:892db2ae-06d9-49e5-8b3e-585ef9b85b8e", "mem0:8f2c0a11-2b64-4e3c-9a1e-2e5d3b9f7c10"])


def test_bad_input_names_the_line_and_writes_nothing(tmp_path):
    bad = MEMORY_JSONL + '{"type": "entity", "name": "", "entityType": "x"}\n'
    (tmp_path / "memory.jsonl").write_text(bad)
    result = _cli(tmp_path / "d", "import", "mcp-memory", str(tmp_path / "memory.jsonl"))
    assert result.returncode == 1
    assert result.stderr.strip() == "Error: memory.jsonl line 4: `name` must be a non-empty string"
    assert not (tmp_path / "d" / "facts.jsonl").exists() or journal_bytes(tmp_path / "d") == b""
    missing = _cli(tmp_path / "d", "import", "mem0", str(tmp_path / "nope.json"))
    assert missing.returncode == 1 and missing.stderr.strip() == f"Error: no such file: {tmp_path / 'nope.json'}"
    (tmp_path / "bad.json").write_text('{"results": [{"id": 1}]}')
    assert _cli(tmp_path / "d", "import", "mem0", str(tmp_path / "bad.json")).stderr.strip() == \
        "Error: bad.json memory #0: `memory` must be a non-empty string"
    huge = "9" * 5000  # past Python's int digit limit: json.loads raises a bare ValueError
    (tmp_path / "huge.json").write_text('{"results": [{"id": ' + huge + ', "memory": "x"}]}')
    (tmp_path / "huge.jsonl").write_text('{"type": "entity", "name": "a", "entityType": ' + huge + '}\n')
    for kind, name, where in (("mem0", "huge.json", "huge.json"), ("mcp-memory", "huge.jsonl", "huge.jsonl line 1")):
        result = _cli(tmp_path / "d", "import", kind, str(tmp_path / name))
        assert result.returncode == 1 and result.stderr == f"Error: {where}: not JSON (a number of more than 4300 digits)\n"
        assert "Traceback" not in result.stderr and len(result.stderr.splitlines()) == 1


def test_export_facts_round_trips_through_store_batch_and_mcp_memory(tmp_path):
    (tmp_path / "memory.jsonl").write_text(MEMORY_JSONL)
    assert _cli(tmp_path / "a", "import", "mcp-memory", str(tmp_path / "memory.jsonl")).returncode == 0
    assert _cli(tmp_path / "a", "store", "svc", "owner", "alice", "--confidence", "0.95").returncode == 0
    assert _cli(tmp_path / "a", "store", "user:1", "email", "a@example.com", "--private").returncode == 0
    exported = _cli(tmp_path / "a", "export", "facts")
    assert exported.returncode == 0
    lines = [json.loads(line) for line in exported.stdout.splitlines()]
    assert len(lines) == 8 and all(not line["private"] for line in lines)        # private left out by default
    assert lines[-1] == {"entity": "svc", "key": "owner", "value": "alice", "tenant_hash": "default",
                         "source_receipt": None, "confidence": 0.95, "private": False, "horizon_class": "none",
                         "actor": None}
    assert _cli(tmp_path / "b", "init").returncode == 0      # a second store is asked for (cli/known_stores.py)
    assert _cli(tmp_path / "b", "store-batch", "-", input=exported.stdout).returncode == 0
    assert _cli(tmp_path / "b", "export", "facts").stdout == exported.stdout
    graph = _cli(tmp_path / "a", "export", "facts", "--format", "mcp-memory").stdout
    (tmp_path / "graph.jsonl").write_text(graph)
    again = _cli(tmp_path / "a", "import", "mcp-memory", str(tmp_path / "graph.jsonl"))
    # the graph's own facts are already there; svc/owner comes back as svc's type and an "owner: alice" observation
    assert again.stdout.startswith("stored 2 fact(s) from graph.jsonl; 7 already present")
