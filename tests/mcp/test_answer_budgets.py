"""A `token_budget` holds for everything an agent receives: `query_facts`, `memory_view`, `memory_freshness`,
`query_scan`, `query`, `get_bootstrap`, `memory_forget_dry_run`, `memory_contradictions` and
`memory_disagreements` answers, through a real `cruxsql mcp` process, measured as the server's own accounting measures them (chars/4 of the whole MCP result,
`cruxsql/recall/tokens.py`). The floor is one item (Crux's rule: the first row always comes), and where
Crux's own answer fits, it is Crux's."""

from __future__ import annotations

import json
from typing import Any

import pytest

from cruxsql.documents import ChunkInput, DocumentInput, DocumentLane
from cruxsql.facts.store import Store, StoreRequest
from cruxsql.recall import bootstrap_seed
from cruxsql.recall.tokens import estimate_tokens

pytestmark = pytest.mark.slow


BUDGETS = [30, 120, 300, 1000]
CALLS = {"memory_view": ({}, "facts"), "memory_freshness": ({}, "rows"),
         "query_scan": ({"query": "terraform drift"}, None), "query": ({"query": "terraform drift"}, None),
         "memory_forget_dry_run": ({"scope": {"type": "entity_prefix", "value": "svc"}}, "facts_that_would_be_affected"),
         "memory_contradictions": ({}, "candidates"), "get_bootstrap": ({"topic": "deploy"}, "")}


def received(result: Any) -> int:
    return estimate_tokens(result.model_dump(mode="json", by_alias=True, exclude_none=True))


def items(tool: str, result: Any) -> int:
    field = CALLS[tool][1]
    if field == "":                     # text lines alone
        return len(result.content[0].text.splitlines())
    if field is not None:
        return len(result.structured_content[field])
    payload = json.loads(result.content[0].text)
    return len(payload["pointers"])


@pytest.fixture(scope="module")
def client(mcp_client, tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("budgets")
    with Store(data_dir) as store:
        for s in range(30):
            for key in ("owner", "region", "database", "queue"):
                store.store(f"svc{s:03d}", key, f"service {s} {key}: a value of a few words, as agents store them",
                            agent="bob", actor="bob")
        for n in range(12):  # numeric disagreements between two actors
            store.store(f"cfg{n}", "replicas", "3", actor="alice")
            store.store(f"cfg{n}", "replicas", "7", actor="bob")
        for n in range(25):
            bootstrap_seed.seed(store, "deploy", f"step{n}", "how",
                                f"step {n}: run the deploy script with care and check the dashboards afterwards")
        for n in range(12):  # contradiction candidates: live facts of one (entity, key), opposite polarity
            store.store_batch([StoreRequest(f"flag{n}", "enabled", v) for v in ("true", "false")], chain=False)
        DocumentLane(store).ingest([DocumentInput(f"runbook{i}.md", [ChunkInput(
            f"{i}", f"runbook {i}: terraform drift happens when state diverges " * 20)]) for i in range(12)])
    return mcp_client(data_dir, "--agent", "bob", env={"CRUXSQL_EMBEDDER": "none"})


@pytest.mark.parametrize("tool", sorted(CALLS))
def test_the_whole_answer_fits_the_budget_or_is_one_item(client, tool: str) -> None:
    args = CALLS[tool][0]
    floor = received(client.call(tool, {**args, "token_budget": 1}))
    assert items(tool, client.call(tool, {**args, "token_budget": 1})) == 1
    for budget in BUDGETS:
        reply = client.call(tool, {**args, "token_budget": budget})
        assert not reply.is_error
        n = items(tool, reply)
        assert received(reply) <= max(budget, floor), (tool, budget, received(reply))
        assert n >= 1 and (n == 1 or received(reply) <= budget)
    assert items(tool, client.call(tool, {**args, "token_budget": 1000})) > 1


def test_memory_view_is_crux_where_crux_fits_and_a_prefix_of_it_where_it_does_not(client) -> None:
    crux = client.call("memory_view", {"top_k": 3, "token_budget": 100_000})
    assert received(crux) < 2000 and crux.structured_content["returned"] == 3
    assert client.call("memory_view", {"top_k": 3, "token_budget": 2000}).model_dump() == crux.model_dump()
    whole = client.call("memory_view", {"top_k": 20, "token_budget": 100_000}).structured_content["facts"]
    cut = client.call("memory_view", {"top_k": 20, "token_budget": 300})
    facts = cut.structured_content["facts"]
    assert 1 <= len(facts) < 20 and facts == whole[:len(facts)]
    assert cut.content[0].text.splitlines() == [
        f"[{f['entity']}] {f['key']} = {f['value']} (id={f['id']}, v{f['version']})"
        + (" [superseded]" if f["superseded_by"] else "") for f in facts]
    assert cut.structured_content["returned"] == len(facts)


def test_query_scan_is_crux_where_crux_fits(client) -> None:
    crux = client.call("query_scan", {"query": "terraform drift", "limit": 1, "token_budget": 100_000})
    assert received(crux) < 1000
    assert client.call("query_scan", {"query": "terraform drift", "limit": 1, "token_budget": 1000}).model_dump() \
        == crux.model_dump()
    lean = client.call("query_scan", {"query": "terraform drift", "token_budget": 120})
    assert '"meta":{' in lean.content[0].text and "embedding_fingerprint" not in lean.content[0].text


def test_the_forget_dry_run_counts_what_memory_forget_would_delete(client) -> None:
    scope = {"type": "entity_prefix", "value": "svc"}
    whole = client.call("memory_forget_dry_run", {"scope": scope, "token_budget": 100_000}).structured_content
    cut = client.call("memory_forget_dry_run", {"scope": scope, "token_budget": 300}).structured_content
    assert whole["count"] == 120 == len(whole["facts_that_would_be_affected"])
    listed = cut["facts_that_would_be_affected"]
    assert cut["count"] == 19 > len(listed) >= 1  # Crux's greedy rule: a forget with this budget deletes 19
    assert listed == whole["facts_that_would_be_affected"][:len(listed)]


def test_disagreements_fit_the_whole_budget(client) -> None:
    for budget in (60, 300, 1000):
        reply = client.call("memory_disagreements", {"token_budget": budget})
        assert received(reply) <= budget, (budget, received(reply))


NEEDS = "compact: the CRC-v1 envelope needs token_budget ≥ "


def test_query_facts_holds_its_budget_as_a_whole_and_names_a_true_threshold(client) -> None:
    """Text, structured content and frame together fit the budget, or are the floor (one fact line, its
    value cut, and the footer); the figure the footer names gives the envelope, and its whole answer fits it."""
    args = {"query": "service value", "top_k": 120}
    floor = client.call("query_facts", {**args, "token_budget": 1})
    assert len(floor.content[0].text.splitlines()) == 2 and NEEDS in floor.content[0].text
    shapes = {}
    for budget in (40, 100, 300, 1000):
        reply = client.call("query_facts", {**args, "token_budget": budget})
        assert not reply.is_error
        assert received(reply) <= max(budget, received(floor)), (budget, received(reply))
        shapes[budget] = reply.content[0].text
    assert json.loads(shapes[1000])["contract"] == "crc-v1"
    needs = int(shapes[100].splitlines()[-1].split(NEEDS)[1])
    assert needs > 100 and NEEDS + str(needs) in shapes[40]
    envelope = client.call("query_facts", {**args, "token_budget": needs})
    assert json.loads(envelope.content[0].text)["contract"] == "crc-v1" and received(envelope) <= needs
    below = client.call("query_facts", {**args, "token_budget": needs - 1}).content[0].text
    assert below.endswith(NEEDS + str(needs))


def test_query_facts_explains_only_what_its_budget_carries(client) -> None:
    args = {"query": "service value", "top_k": 120, "explain": True}
    floor = client.call("query_facts", {**args, "token_budget": 1})
    assert len(floor.structured_content["explain"]["rows"]) == 1
    assert floor.structured_content["explain"]["left_out"]["over_budget_or_top_k"] == 119
    for budget in (40, 300, 1000):
        reply = client.call("query_facts", {**args, "token_budget": budget})
        assert received(reply) <= max(budget, received(floor)), (budget, received(reply))
        why = reply.structured_content["explain"]
        text = reply.content[0].text.split("\n  why: ")[0]
        emitted = len(json.loads(text)["pointers"]) if text.startswith("{") else len(text.splitlines()) - 1
        assert len(why["rows"]) == emitted == 120 - why["left_out"]["over_budget_or_top_k"], (budget, emitted)
