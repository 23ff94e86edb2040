"""`recall` and `store_facts` through the MCP SDK's own client against a real `cruxsql mcp` process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cruxsql.recall.tokens import estimate_tokens, estimate_tokens_str
from support.mcp_clients import stdio
from support.journal_files import journal_bytes

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mcp-recall")


@pytest.fixture(scope="module")
def agent(mcp_client, data_dir):
    return mcp_client(data_dir, "--agent", "alice", "--tools", "core", env={"CRUXSQL_EMBEDDER": "none"})


def test_both_tools_are_core_and_recall_answers_in_text_alone(agent) -> None:
    tools = {t.name: t for t in agent.tools()}
    assert tools["recall"].output_schema is None          # its lines are the answer: nothing repeats them
    assert tools["store_facts"].output_schema["required"] == ["stored", "fact_ids"]
    assert "prefer it to query_facts for questions" in tools["recall"].description


def test_store_facts_is_one_batch_line_and_recall_finds_the_answer(agent, data_dir: Path) -> None:
    before = journal_bytes(data_dir, missing_ok=True)
    facts = [{"entity": f"svc-{i}", "key": "database", "value": f"PostgreSQL {i}"} for i in range(30)]
    facts += [{"entity": "payments-api", "key": "database", "value": "CockroachDB"},
              {"entity": "payments-api", "key": "owner", "value": "Maria Okafor", "private": True}]
    stored = agent.call("store_facts", {"facts": facts})
    assert not stored.is_error and stored.structured_content["stored"] == 32
    lines = journal_bytes(data_dir)[len(before):].splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["op"] == "store_batch"   # one append for the batch

    answer = agent.call("recall", {"query": "which database does payments-api use?", "top_k": 3})
    assert not answer.is_error and answer.structured_content is None
    assert answer.content[0].text.splitlines()[0] == "payments-api · database: CockroachDB"
    with_ids = agent.call("recall", {"query": "which database does payments-api use?", "top_k": 3, "ids": True})
    cockroach = stored.structured_content["fact_ids"][30]
    assert with_ids.content[0].text.splitlines()[0] == f"payments-api · database: CockroachDB · now · {cockroach}"
    page = agent.call("recall", {"query": "database", "top_k": 3}).content[0].text.splitlines()
    assert len(page) == 4 and page[-1] == "+28 more (offset=3)"          # 31 facts hold `database`
    mine = agent.call("recall", {"query": "who owns payments-api"})
    assert mine.content[0].text.startswith("payments-api · owner: Maria Okafor")   # the caller's private fact


def test_the_reply_fits_the_budget_and_bad_input_is_one_line(agent) -> None:
    reply = agent.call("recall", {"query": "database", "top_k": 50, "token_budget": 100})
    assert received(reply) <= 100                  # everything the agent receives, the MCP result included
    bad = agent.call("recall", {"query": "database", "fusion": "rrf"})
    assert bad.is_error and bad.content[0].text == "fusion 'rrf' needs an embedder (CRUXSQL_EMBEDDER=hash or minilm)"
    empty = agent.call("store_facts", {"facts": []})
    assert empty.is_error and empty.content[0].text == "store_facts needs at least one fact"
    nothing = agent.call("recall", {"query": "kubernetes ingress"})
    assert nothing.content[0].text == "no relevant facts" and not nothing.is_error


# --- what an agent pays for what it gets (tools/bench/bench_agent_tokens.py measures the same, at 1,000 facts)

KEYS = ("owner", "oncall", "region", "runbook", "latency_slo", "deploy_window", "database", "queue", "version",
        "escalation")


def fleet_value(service: int, key: str) -> str:
    words = {"owner": "team orchid owns svc{s} and approves its schema changes",
             "oncall": "svc{s} pages the basalt rotation; secondary is the platform desk",
             "region": "svc{s} runs in eu-west-2 with a warm standby",
             "runbook": "restart svc{s} with the heron playbook, step 4 drains the queue first",
             "latency_slo": "svc{s} p99 latency target 120 ms at the edge",
             "deploy_window": "deploy svc{s} tuesdays 10:00-12:00 UTC, never on freeze days",
             "database": "svc{s} keeps its state in postgres cluster pg-3",
             "queue": "svc{s} consumes topic orders-4 with 6 partitions",
             "version": "svc{s} is on release 4.7.2 since the last rollout",
             "escalation": "escalate svc{s} incidents to the maple lead after 30 minutes"}
    return words[key].format(s=f"{service:03d}")


def received(result) -> int:
    """Everything the agent receives, as the bench counts it: chars/4 of the whole MCP result."""
    return estimate_tokens(result.model_dump(mode="json", by_alias=True, exclude_none=True))


@pytest.fixture(scope="module")
def fleet(portal, tmp_path_factory: pytest.TempPathFactory):
    """30 services x 10 keys through store_facts, and the facts by id."""
    client = stdio(portal, tmp_path_factory.mktemp("mcp-fleet"), "--agent", "bench",
                   env={"CRUXSQL_EMBEDDER": "none"})
    facts = [(f"svc{s:03d}", k, fleet_value(s, k)) for s in range(30) for k in KEYS]
    stored = client.call("store_facts", {"facts": [{"entity": e, "key": k, "value": v} for e, k, v in facts]})
    yield client, dict(zip(stored.structured_content["fact_ids"], facts))
    client.close()


@pytest.mark.parametrize("budget", [200, 1000])
def test_fact_recall_is_mostly_content(fleet, budget: int) -> None:
    """The facts' own entity, key and value are at least 75% of everything recall returns."""
    client, by_id = fleet
    whole = {f"{e} · {k}: {v}": (e, k, v) for e, k, v in by_id.values()}
    content = total = 0
    for s in range(0, 30, 3):
        for key in ("owner", "latency_slo", "deploy_window"):
            reply = client.call("recall", {"query": f"svc{s:03d} {key.replace('_', ' ')}", "token_budget": budget})
            lines = reply.content[0].text.splitlines()
            assert lines[0] == f"svc{s:03d} · {key}: {fleet_value(s, key)}"     # the asked-for fact first
            total += received(reply)
            content += sum(estimate_tokens_str(" ".join(whole[line])) for line in lines if line in whole)
    assert content / total >= 0.75, (content, total)


@pytest.mark.parametrize("budget", [50, 200, 1000])
def test_no_answer_overshoots_its_budget_in_any_channel(fleet, budget: int) -> None:
    client, _ = fleet
    for query in ("svc004 owner", "svc017 deploy window", "postgres cluster", "svc"):
        for tool in ("query_facts", "recall"):
            reply = client.call(tool, {"query": query, "token_budget": budget, "top_k": 50})
            assert not reply.is_error
            assert estimate_tokens_str(reply.content[0].text) <= budget, (tool, query, reply.content[0].text)
            if tool == "recall":        # text alone, and all of it within the budget
                assert reply.structured_content is None and received(reply) <= budget, (query, received(reply))
            else:
                assert estimate_tokens(reply.structured_content) <= budget, (query, reply.structured_content)
        crux = client.call("query_facts", {"query": query, "token_budget": budget}).content[0].text
        if budget == 1000:              # the envelope fits: Crux's CRC-v1
            assert json.loads(crux)["contract"] == "crc-v1"
        else:                           # below the least envelope: compact lines that say so and name it
            least = crux.splitlines()[-1].split("compact: the CRC-v1 envelope needs token_budget ≥ ")[1]
            assert int(least) > budget
            assert json.loads(client.call("query_facts", {"query": query, "token_budget": int(least)})
                              .content[0].text)["contract"] == "crc-v1"
