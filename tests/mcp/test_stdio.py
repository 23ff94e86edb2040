"""The MCP server through the SDK's own client over stdio: real `cruxsql mcp` processes on one store."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import apsw
import pytest

import cruxsql
from cruxsql.facts import codec, timestamps
from cruxsql.facts.codec import Fact
from cruxsql.recall.tokens import estimate_tokens
from support.mcp_clients import server_env, stdio
from support.journal_files import journal_bytes

pytestmark = pytest.mark.slow

CORE = ["store_fact", "query_facts", "get_bootstrap", "query", "query_expand", "recall", "store_facts"]
ALL = ["session_token_usage", "token_savings", "ingest_document", "query", "query_scan", "query_expand",
       "store_fact", "query_facts", "get_bootstrap", "delete_fact", "list_entities", "memory_view",
       "recall", "store_facts", "store_conversation",
       "memory_freshness", "memory_set_horizon", "memory_reverify",
       "ctx_search", "ctx_read", "ctx_doc", "ctx_impact", "ctx_context", "ctx_expand"]
ALL += ["memory_contradictions", "memory_disagreements", "memory_consolidate", "memory_consolidate_undo", "memory_edit", "memory_pin",
        "memory_history", "memory_acknowledge_use", "memory_forget_dry_run", "memory_forget", "fact_history"]
ALL += ["relate", "related"]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mcp-stdio")


@pytest.fixture(scope="module")
def alice(mcp_client, data_dir):
    return mcp_client(data_dir, "--agent", "alice", "--tenant", "acme")


@pytest.fixture(scope="module")
def bob(mcp_client, data_dir):
    return mcp_client(data_dir, "--agent", "bob", "--tenant", "acme", "--tools", "core")


@pytest.fixture(scope="module")
def anon_other_tenant(mcp_client, data_dir):
    return mcp_client(data_dir, "--tenant", "globex")


def test_tool_lists_name_every_tool_and_its_required_arguments(alice, bob):
    tools = {t.name: t for t in alice.tools()}
    assert sorted(tools) == sorted(ALL)
    assert tools["store_fact"].input_schema["required"] == ["entity", "key", "value"]
    assert tools["query_expand"].input_schema["required"] == ["result_ids"]
    assert tools["memory_set_horizon"].input_schema["required"] == ["fact_id", "horizon_class"]
    assert tools["memory_set_horizon"].input_schema["properties"]["horizon_class"]["enum"] == \
        ["volatile", "medium", "stable", "none"]
    assert "required" not in tools["query_facts"].input_schema
    assert tools["query_facts"].input_schema["properties"]["top_k"] == {"default": 10, "type": "integer"}
    assert sorted(t.name for t in bob.tools()) == sorted(CORE)
    # every tool that answers with structured content declares its shape (Crux declares none)
    assert tools["store_fact"].output_schema["properties"]["fact_id"] == {"type": "string"}
    assert tools["fact_history"].output_schema is None                 # text only, as in Crux


def test_store_then_recall_every_fact_tool(alice, data_dir):
    stored = alice.call("store_fact", {"entity": "svc", "key": "owner", "value": "platform team",
                                       "confidence": 0.9, "freshness_horizon": "changes every few hours"})
    fid = stored.structured_content["fact_id"]
    assert stored.content[0].text == f"stored fact {fid} (entity=svc, key=owner, version=1)"
    assert stored.structured_content == {"fact_id": fid, "entity": "svc", "key": "owner", "version": 1,
                                         "superseded_fact_ids": []}
    with cruxsql.open(data_dir) as store:
        fact = store.get(fid)
        assert (fact.tenant_hash, fact.actor, fact.horizon_class, fact.confidence) == ("acme", "alice", "volatile", 0.8999999761581421)  # f32

    second = alice.call("store_fact", {"entity": "svc", "key": "owner", "value": "sre team"})
    sid = second.structured_content["fact_id"]
    assert second.content[0].text == f"stored fact {sid} (entity=svc, key=owner, supersedes={fid}, version=2)"

    found = alice.call("query_facts", {"query": "team", "contract": "legacy"})
    assert [r["fact_id"] for r in found.structured_content["rows"]] == [sid]
    assert found.content[0].text.startswith("[svc] owner = sre team (confidence=1.00, effective_confidence=1.00")
    crc = alice.call("query_facts", {"query": "team"})
    assert json.loads(crc.content[0].text)["contract"] == "crc-v1"
    assert ",\"" in crc.content[0].text and "\n" not in crc.content[0].text   # compact outside the control arm

    assert alice.text("list_entities") == "svc"
    assert alice.text("get_bootstrap", {"topic": "errors"}) == "no bootstrap knowledge for topic 'errors'"
    assert alice.text("delete_fact", {"fact_id": sid}) == f"deleted fact {sid}"
    again = alice.call("delete_fact", {"fact_id": sid})
    assert (again.is_error, again.content[0].text) == (True, f"fact not found: {sid}")    # Crux: isError false
    assert alice.text("query_facts", {"query": "team", "contract": "legacy"}) == "no facts found"


def test_memory_tools_journal_horizon_and_reverify_with_a_receipt(alice, data_dir):
    fid = alice.call("store_fact", {"entity": "db", "key": "engine", "value": "postgres 16"}).structured_content["fact_id"]
    view = alice.call("memory_view", {"entity": "db"})
    assert [f["id"] for f in view.structured_content["facts"]] == [fid]
    assert view.content[0].text == f"[db] engine = postgres 16 (id={fid}, v1)"
    fresh = alice.call("memory_freshness", {"entity": "db"})
    assert [(r["fact_id"], r["freshness"], r["horizon_class"]) for r in fresh.structured_content["rows"]] == \
        [(fid, "fresh", "none")]
    assert fresh.content[0].text == f"    0h [fresh   ] none     db::engine (id={fid})"
    assert alice.text("memory_set_horizon", {"fact_id": fid, "horizon_class": "stable"}) == \
        f"set horizon_class=stable on fact {fid}"
    done = alice.call("memory_reverify", {"fact_id": fid})
    receipt = done.structured_content["receipt_id"]
    assert done.content[0].text == (f"re-verified fact {fid} at {done.structured_content['reverified_at']} "
                                    f"(receipt {receipt}, class=Reverify)")
    with cruxsql.open(data_dir) as store:    # journaled: a fresh rebuild still has both
        store.rebuild()
        fact = store.get(fid)
        assert fact.horizon_class == "stable" and fact.reverified_at is not None
        (rec,) = store.history(f"__reverify_receipts__::{fid}", receipt, tenant="acme")
        assert json.loads(rec.value) == {"class": "Reverify", "fact_id": fid, "reverified_by": "alice",
                                         "reverified_at": done.structured_content["reverified_at"]}
        assert rec.private and rec.source_receipt == receipt
    missing = alice.call("memory_reverify", {"fact_id": "f_missing"})
    assert (missing.is_error, missing.content[0].text) == (True, "fact not found: f_missing")


def test_document_tools_ingest_search_and_expand(alice):
    assert alice.text("query", {"query": "anything"}) == "index is empty \u2014 ingest data first"
    report = alice.call("ingest_document", {"doc_id": "runbook.md", "text": "# Failover\nPromote the replica, then "
                                            "repoint pgbouncer at the new primary."})
    assert report.structured_content["ingested"] == 1
    found = json.loads(alice.text("query", {"query": "pgbouncer failover", "contract": "legacy"}))
    (hit,) = found["results"]
    fused = json.loads(alice.text("query", {"query": "pgbouncer failover", "fused": True, "fusion": "rrf"}))
    assert [h["result_id"] for h in fused["results"]] == [hit["result_id"]]
    assert fused["fusion"]["weights"] is None and set(fused["results"][0]["score_breakdown"]) >= {"bm25", "graph"}
    scan = json.loads(alice.text("query_scan", {"query": "pgbouncer", "contract": "legacy"}))
    assert [h["result_id"] for h in scan["scan"]] == [hit["result_id"]]
    expanded = json.loads(alice.text("query_expand", {"result_ids": [hit["result_id"]], "contract": "legacy"}))
    assert expanded["chunks"][0]["text"].endswith("repoint pgbouncer at the new primary.")
    wrong = alice.call("query", {"query": "pgbouncer", "tenant_id": "globex"})
    assert wrong.is_error and wrong.content[0].text == "tenant_id 'globex' is not this connection's tenant"


def test_identities_are_isolated_by_agent_and_tenant(alice, bob, anon_other_tenant):
    alice.call("store_fact", {"entity": "notes", "key": "secret", "value": "alice only kiwi", "private": True})
    alice.call("store_fact", {"entity": "notes", "key": "shared", "value": "everyone kiwi"})
    mine = alice.call("query_facts", {"query": "kiwi", "contract": "legacy"}).structured_content["rows"]
    assert sorted(r["value"] for r in mine) == ["alice only kiwi", "everyone kiwi"]
    assert {r["entity"] for r in mine} == {"notes"}
    theirs = bob.call("query_facts", {"query": "kiwi", "contract": "legacy"}).structured_content["rows"]
    assert [r["value"] for r in theirs] == ["everyone kiwi"]
    assert anon_other_tenant.text("query_facts", {"query": "kiwi", "contract": "legacy"}) == "no facts found"
    refused = anon_other_tenant.call("store_fact", {"entity": "x", "key": "y", "value": "z", "private": True})
    assert refused.is_error and refused.content[0].text == "private facts require an authenticated agent identity"
    horizon = anon_other_tenant.call("memory_set_horizon", {"fact_id": "f_x", "horizon_class": "stable"})
    assert horizon.content[0].text == "memory_set_horizon requires an authenticated passport (anonymous calls rejected)"


def test_query_facts_explain_says_why_and_never_counts_what_the_caller_cannot_see(alice, bob):
    alice.call("store_fact", {"entity": "notes", "key": "plan", "value": "alice private quince", "private": True})
    alice.call("store_fact", {"entity": "notes", "key": "menu", "value": "shared quince"})
    result = bob.call("query_facts", {"query": "quince", "contract": "legacy", "explain": True})
    why = result.structured_content["explain"]
    assert why["rows"] == [{"matched_terms": {"quince": ["value"]}, "confidence": 1.0, "decay": 1.0,
                            "effective_confidence": 1.0, "freshness": "fresh", "horizon_class": "none"}]
    assert why["left_out"] == {}
    assert result.content[0].text.splitlines()[-1] == "-- left out: nothing"


def test_a_cli_write_is_seen_by_the_running_server(bob, data_dir):
    out = subprocess.run([sys.executable, "-m", "cruxsql", "store", "deploy", "window", "tuesday mango",
                          "--tenant", "acme", "--data-dir", str(data_dir)], capture_output=True, text=True,
                         env=server_env(), timeout=60)
    assert out.returncode == 0, out.stderr
    fid = out.stdout.split()[0]
    rows = bob.call("query_facts", {"query": "mango", "contract": "legacy"}).structured_content["rows"]
    assert [r["fact_id"] for r in rows] == [fid]


def test_a_line_a_crux_daemon_appended_is_caught_up_before_the_next_read(bob, data_dir):
    """A daemon appends to facts.jsonl without touching cruxsql.db: the server replays it first."""
    fact = Fact(fact_id="f_" + "d" * 32, tenant_hash="acme", entity="deploy", key="freeze", value="friday papaya",
                confidence=1.0, stored_at=timestamps.now_ns(), tokens=codec.token_cost("friday papaya"))
    with open(data_dir / "facts.jsonl", "a", encoding="utf-8") as journal_file:
        journal_file.write(codec.encode_event(codec.StoreEvent(fact)) + "\n")
    rows = bob.call("query_facts", {"query": "papaya", "contract": "legacy"}).structured_content["rows"]
    assert [r["fact_id"] for r in rows] == [fact.fact_id]


def test_writes_find_a_fact_a_crux_daemon_just_appended(bob, data_dir):
    ids = []
    for n in range(2):
        fact = Fact(fact_id=f"f_{n}" + "e" * 31, tenant_hash="acme", entity="deploy", key=f"daemon{n}",
                    value="from the daemon", confidence=1.0, stored_at=timestamps.now_ns(),
                    tokens=codec.token_cost("from the daemon"))
        with open(data_dir / "facts.jsonl", "a", encoding="utf-8") as journal_file:
            journal_file.write(codec.encode_event(codec.StoreEvent(fact)) + "\n")
        ids.append(fact.fact_id)
    assert bob.text("memory_set_horizon", {"fact_id": ids[0], "horizon_class": "stable"}) == \
        f"set horizon_class=stable on fact {ids[0]}"
    assert bob.text("delete_fact", {"fact_id": ids[1]}) == f"deleted fact {ids[1]}"


BAD = [
    ({"entity": "a", "key": "b"}, "missing required param: value"),
    ({"entity": "a", "key": "b", "value": "c", "colour": "red"}, "store_fact: unknown argument `colour`"),
    ({"entity": "a", "key": "b", "value": 7}, "store_fact: `value`: Input should be a valid string"),
    ({"entity": "a", "key": "b", "value": "c", "confidence": 1.5},
     "confidence must be a finite number within 0.0..=1.0, got 1.5"),
    ({"entity": "a", "key": "b", "value": "c", "horizon_class": "weekly"},
     "store_fact: `horizon_class`: Input should be 'volatile', 'medium', 'stable' or 'none'"),
    ({"entity": "__ops::x", "key": "b", "value": "c"}, "entity '__ops::x' uses create-reserved prefix `__ops::`"),
    ({"entity": "__agent::bob::x", "key": "b", "value": "c"},
     "entity '__agent::bob::x' uses create-reserved prefix `__agent::`"),
    ({"entity": "a", "key": "b", "value": "c", "supersedes": ["f_nope"]},
     "one or more supersedes fact_ids do not exist or are not visible to you: f_nope"),
    ({"entity": "a", "key": "b", "value": "x" * (10 * 1024 * 1024)}, "`value` is 10485760 bytes; the limit is 1048576"),
]


@pytest.mark.parametrize("arguments,message", BAD, ids=[m[:30] for _, m in BAD])
def test_bad_store_fact_input_is_one_line_and_changes_nothing(alice, data_dir, arguments, message):
    before = journal_bytes(data_dir, missing_ok=True)
    result = alice.call("store_fact", arguments)
    assert result.is_error and [c.text for c in result.content] == [message]
    assert journal_bytes(data_dir, missing_ok=True) == before
    assert alice.text("list_entities")      # still serving


def test_reserved_namespaces_are_refused_with_crux_error_data(alice, data_dir):
    before = journal_bytes(data_dir, missing_ok=True)
    refused = alice.call("store_fact", {"entity": "__passport__::alice", "key": "state", "value": "trusted",
                                        "private": True})
    assert refused.is_error
    assert refused.structured_content == {"error_code": "RESERVED_ENTITY_PREFIX", "param": "entity",
                                          "entity": "__passport__::alice", "reserved_prefix": "__passport__::"}
    assert journal_bytes(data_dir, missing_ok=True) == before


def test_bad_read_input_and_unknown_tools(alice):
    cases = [
        ("query_facts", {"top_k": "ten"}, "query_facts: `top_k`: Input should be a valid integer"),
        ("query_facts", {"top_k": -1}, "top_k must be a non-negative integer, got -1"),
        ("query_facts", {"as_of": "yesterday"},
         "as_of must be an RFC 3339 timestamp (e.g. 2026-01-15T00:00:00Z), got 'yesterday'"),
        ("query_facts", {"min_effective_confidence": 2.0},
         "min_effective_confidence must be a number in 0.0..=1.0, got 2.0"),
        ("query_expand", {"result_ids": "0:1"}, "query_expand: `result_ids`: Input should be a valid list"),
        ("memory_set_horizon", {"fact_id": "f_x", "horizon_class": "stable", "extra": 1},
         "memory_set_horizon: unknown argument `extra`"),
        ("drop_tables", {}, "unknown tool: drop_tables"),
    ]
    for name, arguments, message in cases:
        result = alice.call(name, arguments)
        assert (result.is_error, result.content[0].text) == (True, message), name


def test_tool_errors_are_kept_for_the_health_check(alice, data_dir):
    alice.call("query_facts", {"top_k": -1})
    alice.call("drop_tables", {})
    db = apsw.Connection(str(data_dir / "cruxsql.db"), flags=apsw.SQLITE_OPEN_READONLY)
    rows = dict(((tool, internal), (agent, message)) for tool, internal, agent, message in db.execute(
        "SELECT tool, internal, agent, message FROM tool_errors"))
    db.close()
    assert rows[("query_facts", 0)] == ("alice", "top_k must be a non-negative integer, got -1")
    assert rows[("(unknown tool)", 0)] == ("alice", "unknown tool: drop_tables")


def test_every_call_is_accounted_in_the_token_usage_table(portal, data_dir):
    client = stdio(portal, data_dir, "--agent", "carol", "--tenant", "acme")
    try:
        client.call("store_fact", {"entity": "a", "key": "b", "value": "c"})
        client.call("query_facts", {"query": "c", "token_budget": 100})
        client.call("store_fact", {"entity": "a"})     # errors count too, as in Crux
        usage = client.call("session_token_usage")
    finally:
        client.close()
    fields = usage.structured_content
    assert (fields["passport"], fields["calls"], fields["declared_budget_in"]) == ("carol", 3, 100)
    assert usage.content[0].text == (f"session_token_usage: passport=carol used\u2248{fields['used']} tokens "
                                     "(no limit set) across 3 calls")
    out = subprocess.run([sys.executable, "-m", "cruxsql", "sql", "--data-dir", str(data_dir), "--json",
                          "SELECT calls, tokens_in, tokens_out, declared_budget_in FROM token_usage WHERE agent = 'carol'"],
                         capture_output=True, text=True, env=server_env(), timeout=60)
    (row,) = json.loads(out.stdout)
    assert row == {"calls": 4, "tokens_in": fields["tokens_in"] + 1, "declared_budget_in": 100,
                   "tokens_out": row["tokens_out"]} and row["tokens_out"] > fields["tokens_out"]


def test_the_session_budget_shapes_then_refuses_reads_but_not_writes(portal, tmp_path):
    client = stdio(portal, tmp_path, "--agent", "dave", "--session-budget", "3200")
    try:
        for i in range(12):
            client.call("store_fact", {"entity": "log", "key": f"k{i}", "value": f"entry {i} " + "lorem " * 20})
        used = client.call("session_token_usage").structured_content["used"]
        assert 0 < used < 2560          # writes count, but stay below the 80 % mark
        notes = []
        for _ in range(10):
            result = client.call("query_facts", {"query": "entry", "top_k": 3})
            if result.is_error:
                break
            notes.append([c.text for c in result.content[1:]])
        assert len(notes) >= 2 and notes[0] == []          # ok, then near the limit: shaped, then refused
        for (shaped,) in notes[1:]:
            assert shaped.startswith("session budget: ") and " of 3200 tokens used; answer shaped to token_budget=" in shaped
        usage = client.call("session_token_usage").structured_content
        assert usage["used"] <= 3200 and usage["limit"] == 3200         # never past the limit
        assert re.fullmatch(r"session token budget(: this answer takes \d+ tokens and agent dave has \d+ left of 3200; "
                            r"ask for less \(a smaller token_budget, top_k or limit\)| exhausted: agent dave used \d+ "
                            r"of 3200 tokens; writes and session_token_usage still work)", result.content[0].text)
        assert not client.call("store_fact", {"entity": "log", "key": "late", "value": "still writable"}).is_error
        assert client.call("list_entities").is_error
    finally:
        client.close()


def test_holdout_control_arm_is_unshaped_and_pretty_and_savings_are_reported(portal, tmp_path):
    client = stdio(portal, tmp_path, "--agent", "erin", env={"CRUX_OUTPUT_HOLDOUT": "1"})
    off = stdio(portal, tmp_path, "--agent", "erin")
    try:
        for i in range(5):
            client.call("store_fact", {"entity": "svc", "key": f"k{i}", "value": "word " * 40})
        control = client.call("query_facts", {"query": "word", "token_budget": 60})
        assert control.content[0].text.startswith('{\n  "contract": "crc-v1"')
        assert len(control.structured_content["rows"]) == 1            # legacy drop: 51 tokens, then over
        shaped = off.call("query_facts", {"query": "word", "token_budget": 60})
        # shaped: 60 is below the least CRC-v1 envelope, so the text is a compact fact line that says so,
        # and the structured content obeys the budget too (Crux sends all 5 rows in full there)
        first, footer = shaped.content[0].text.splitlines()
        assert first.startswith("svc · k") and "…" in first and footer.startswith(
            "+4 more · compact: the CRC-v1 envelope needs token_budget ≥ ")
        assert shaped.structured_content["rows"] == [] and shaped.structured_content["left_out"] == 4
        assert [p["fact_id"] for p in shaped.structured_content["pointers"]] == [first.rsplit(" · ", 1)[1]]
        assert estimate_tokens(shaped.structured_content) <= 60 and estimate_tokens(shaped.content[0].text) <= 60
        savings = client.call("token_savings")
        assert savings.structured_content["net"]["n_control"] == 1
        assert savings.content[0].text.splitlines()[0] == "token_savings (holdout=1.000):"
        assert savings.content[0].text.splitlines()[2] == \
            "  net (all-shaped vs unshaped): not enough samples (control=1, treatment=0)"
        assert off.call("token_savings").content[0].text == (
            "token_savings: holdout disabled (set CRUX_OUTPUT_HOLDOUT=0.05 to sample a live control arm)")
    finally:
        client.close()
        off.close()
