"""`recall` and `store_facts` through the MCP SDK's own client against a real `cruxsql mcp` process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cruxsql.recall.tokens import estimate_tokens
from mcp_clients import stdio


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mcp-recall")


@pytest.fixture(scope="module")
def agent(portal, data_dir):
    client = stdio(portal, data_dir, "--agent", "alice", "--tools", "core", env={"CRUXSQL_EMBEDDER": "none"})
    yield client
    client.close()


def test_both_tools_are_core_and_declare_their_output(agent) -> None:
    tools = {t.name: t for t in agent.tools()}
    assert tools["recall"].output_schema["required"] == ["ids", "total", "offset", "returned", "has_more",
                                                         "next_offset"]
    assert tools["store_facts"].output_schema["required"] == ["stored", "fact_ids"]
    assert "prefer it to query_facts for questions" in tools["recall"].description


def test_store_facts_is_one_batch_line_and_recall_finds_the_answer(agent, data_dir: Path) -> None:
    before = (data_dir / "facts.jsonl").read_bytes() if (data_dir / "facts.jsonl").exists() else b""
    facts = [{"entity": f"svc-{i}", "key": "database", "value": f"PostgreSQL {i}"} for i in range(30)]
    facts += [{"entity": "payments-api", "key": "database", "value": "CockroachDB"},
              {"entity": "payments-api", "key": "owner", "value": "Maria Okafor", "private": True}]
    stored = agent.call("store_facts", {"facts": facts})
    assert not stored.is_error and stored.structured_content["stored"] == 32
    lines = (data_dir / "facts.jsonl").read_bytes()[len(before):].splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["op"] == "store_batch"   # one append for the batch

    answer = agent.call("recall", {"query": "which database does payments-api use?", "top_k": 3})
    assert not answer.is_error
    first = answer.content[0].text.splitlines()[0]
    assert first.startswith("payments-api · database · CockroachDB · ") and first.endswith(
        answer.structured_content["ids"][0])
    assert answer.structured_content["ids"][0] not in answer.structured_content["ids"][1:]
    page = agent.call("recall", {"query": "database", "top_k": 3}).structured_content
    assert page["has_more"] and page["next_offset"] == 3 and page["total"] == 31
    mine = agent.call("recall", {"query": "who owns payments-api"})
    assert mine.content[0].text.startswith("payments-api · owner · Maria Okafor")   # the caller's private fact


def test_the_reply_fits_the_budget_and_bad_input_is_one_line(agent) -> None:
    reply = agent.call("recall", {"query": "database", "top_k": 50, "token_budget": 100})
    assert estimate_tokens([c.model_dump(mode="json") for c in reply.content]) + estimate_tokens(
        reply.structured_content) <= 120          # each channel within the budget (content wrapping aside)
    bad = agent.call("recall", {"query": "database", "fusion": "rrf"})
    assert bad.is_error and bad.content[0].text == "fusion 'rrf' needs an embedder (CRUXSQL_EMBEDDER=hash or minilm)"
    empty = agent.call("store_facts", {"facts": []})
    assert empty.is_error and empty.content[0].text == "store_facts needs at least one fact"
    nothing = agent.call("recall", {"query": "kubernetes ingress"})
    assert nothing.content[0].text == "no relevant facts" and nothing.structured_content["total"] == 0
