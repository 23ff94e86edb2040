"""Who a call acts for comes from the connection, never from a tool argument: every registered MCP tool,
sent each identity-shaped argument through the real `cruxsql mcp` process, refuses it or ignores it, and
neither reads nor writes another agent's or another tenant's facts because of it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError

import cruxsql
from cruxsql.documents import ChunkInput, DocumentInput, DocumentLane
from cruxsql.mcp.registry import discover
from support.mcp_clients import stdio
from support.journal_files import journal_bytes

pytestmark = pytest.mark.slow

BOB_SECRET = "bob-private-7f3a9c"        # bob's private fact in alice's tenant
OTHER_SECRET = "globex-only-91c2e4"      # a fact of another tenant
OTHER_DOC = "globexdocument55aa"         # a document of another tenant
PROBE = "identity-probe-value"           # what the walk's own writes store
AGENT_NAMED = {"agent": "bob", "agent_id": "bob", "actor": "bob"}
TENANT_NAMED = {"tenant": "globex", "tenant_hash": "globex"}
IDENTITY_ARGUMENTS = [*AGENT_NAMED.items(), *TENANT_NAMED.items(), ("identity", {"agent": "bob", "tenant": "globex"})]


def base_arguments(tool: str, target: str) -> dict[str, Any]:
    """A call each tool would carry out for its caller; `target` is the fact the identity argument would
    reach (bob's private one, or the other tenant's)."""
    scope = {"type": "entity_prefix", "value": "notes"}
    return {
        "memory_consolidate": {"entity": "notes", "key": "secret", "canonical_value": PROBE,
                               "target_fact_ids": [target]},
        "memory_consolidate_undo": {"canonical_fact_id": target, "source_fact_ids": [target]},
        "memory_edit": {"fact_id": target, "new_value": PROBE},
        "memory_pin": {"fact_id": target},
        "memory_history": {"entity": "notes"},
        "memory_acknowledge_use": {"turn_id": "turn-1", "fact_ids": [target]},
        "memory_forget_dry_run": {"scope": scope},
        "memory_forget": {"scope": scope, "reason": "identity walk"},
        "fact_history": {"entity": "notes", "key": "secret"},
        "query": {"query": OTHER_DOC},
        "query_scan": {"query": OTHER_DOC},
        "query_expand": {"result_ids": ["r_0"]},
        "ingest_document": {"doc_id": "probe-doc", "text": f"{PROBE} document"},
        "store_fact": {"entity": "notes", "key": "probe", "value": PROBE},
        "query_facts": {"query": "secret"},
        "recall": {"query": "secret", "fusion": "bm25"},
        "store_facts": {"facts": [{"entity": "notes", "key": "probe-batch", "value": PROBE}]},
        "store_conversation": {"conversation": "notes", "turns": [{"speaker": "probe", "text": PROBE}]},
        "get_bootstrap": {"topic": "docs"},
        "delete_fact": {"fact_id": target},
        "memory_view": {"entity": "notes"},
        "memory_freshness": {"entity": "notes"},
        "memory_set_horizon": {"fact_id": target, "horizon_class": "volatile"},
        "memory_reverify": {"fact_id": target},
        "ctx_search": {"query": "secret"},
        "ctx_read": {"path": "notes.md"},
        "ctx_doc": {"path": "notes.md"},
        "ctx_impact": {"target": "notes"},
        "relate": {"from": "notes", "relation": "about", "to": PROBE},
        "related": {"entity": "notes"},
        "ctx_context": {"task": "secret"},
        "ctx_expand": {"handle": "h_0"},
    }.get(tool, {})


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("identity") / "data"
    with cruxsql.open(d) as store:
        store.store("notes", "secret", "alice's own note")
        bob = store.store("notes", "secret", BOB_SECRET, private=True, agent="bob", actor="bob")
        other = store.store("notes", "secret", OTHER_SECRET, tenant="globex")
        DocumentLane(store).ingest([DocumentInput("globex-doc", [ChunkInput("globex-doc#0", f"{OTHER_DOC} text")])],
                                   tenant="globex")
    (d / "targets.json").write_text(json.dumps({"bob": bob.fact_id, "other": other.fact_id,
                                                "facts": json.dumps([bob.to_dict(), other.to_dict()])}))
    return d


def _answer_text(result: Any) -> str:
    return "\n".join(c.text for c in result.content) + json.dumps(result.structured_content)


def _walk(portal, data_dir: Path) -> dict[str, list[str]]:
    """Call every listed tool with each identity-shaped argument; (tool, argument) -> how it ended."""
    targets = json.loads((data_dir / "targets.json").read_text())
    alice = stdio(portal, data_dir, "--agent", "alice")
    outcomes: dict[str, list[str]] = {}
    try:
        tools = alice.tools()
        listed = sorted(t.name for t in tools)
        assert listed == sorted(discover()), "the server lists a tool the registry does not hold, or misses one"
        for t in tools:  # a new tool needs a call it would carry out, or it is only ever refused here
            missing = set(t.input_schema.get("required", [])) - set(base_arguments(t.name, "f_x"))
            assert not missing, f"base_arguments has no {sorted(missing)} for {t.name}"
        for tool in listed:
            for name, value in IDENTITY_ARGUMENTS:
                target = targets["other"] if name in TENANT_NAMED else targets["bob"]
                arguments = {**base_arguments(tool, target), name: value}
                try:
                    result = alice.call(tool, arguments)
                except MCPError as exc:  # refused as invalid params at the protocol level
                    outcomes.setdefault("refused", []).append(f"{tool}/{name}: {exc}")
                    continue
                text = _answer_text(result)
                for secret in (BOB_SECRET, OTHER_SECRET, OTHER_DOC):
                    assert secret not in text, f"{tool} with {name}={value!r} answered another identity's data"
                outcomes.setdefault("refused" if result.is_error else "ignored", []).append(f"{tool}/{name}")
    finally:
        alice.close()
    return outcomes


def test_identity_arguments_on_every_tool_are_refused_or_ignored(portal, data_dir: Path) -> None:
    before = journal_bytes(data_dir)
    targets = json.loads((data_dir / "targets.json").read_text())
    outcomes = _walk(portal, data_dir)
    assert sum(map(len, outcomes.values())) == len(discover()) * len(IDENTITY_ARGUMENTS)

    # nothing was written for bob or for the other tenant, nor to their facts
    after = journal_bytes(data_dir)
    assert after.startswith(before)
    for raw in after[len(before):].splitlines():
        line = raw.decode()
        assert targets["bob"] not in line and targets["other"] not in line, line
        assert "globex" not in line and "__agent::bob::" not in line, line
    with cruxsql.open(data_dir) as store:
        bob, other = store.get(targets["bob"]), store.get(targets["other"])
        assert json.dumps([bob.to_dict(), other.to_dict()]) == targets["facts"]
        assert store.db.execute("SELECT count(*) FROM facts WHERE tenant_hash = 'globex'").fetchone() == (1,)
        assert store.db.execute("SELECT count(*) FROM facts WHERE entity LIKE '\\_\\_agent::bob::%' ESCAPE '\\'"
                                ).fetchone() == (1,)
        probes = store.db.execute("SELECT tenant_hash, entity FROM facts WHERE value LIKE ?",
                                  (f"%{PROBE}%",)).fetchall()
        assert all(row == ("default", "notes") for row in probes), probes
        hits = DocumentLane(store).query(PROBE, "globex")
    assert PROBE not in json.dumps(hits)
