"""The MCP server over streamable HTTP on 127.0.0.1: bearer tokens map to agents and tenants."""

from __future__ import annotations

import json
from pathlib import Path

import httpx2
import pytest

from support.mcp_clients import HttpServer
from support.journal_files import journal_bytes

pytestmark = pytest.mark.slow

ALICE = "a" * 40
BOB = "b-token." + "x" * 32
GLOBEX = "g" * 33


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mcp-http")


@pytest.fixture(scope="module")
def server(data_dir):
    tokens = f"alice:{ALICE}:acme, bob:{BOB}:acme ,carol:{GLOBEX}:globex"
    srv = HttpServer(data_dir, {"CRUX_AGENT_TOKENS": tokens})
    yield srv
    srv.stop()


def _post_initialize(url: str, token: str | None) -> httpx2.Response:
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
    return httpx2.post(url, headers=headers, json=body, timeout=30)


@pytest.mark.parametrize("token", [None, "w" * 40, "Basic " + ALICE])
def test_a_wrong_or_missing_token_gets_401_and_touches_nothing(server, data_dir, token):
    before = journal_bytes(data_dir, missing_ok=True)
    response = _post_initialize(server.url, token)
    assert response.status_code == 401
    assert response.json() == {"error": "unauthorized", "hint": "set Authorization: Bearer <CRUX_AGENT_TOKEN>"}
    after = journal_bytes(data_dir, missing_ok=True)
    assert after == before


def test_tokens_carry_agent_and_tenant(server, portal):
    alice, bob, carol = (server.client(portal, t) for t in (ALICE, BOB, GLOBEX))
    try:
        assert len(alice.tools()) == 37
        stored = alice.call("store_fact", {"entity": "plan", "key": "q3", "value": "ship the pear api",
                                           "private": True})
        assert not stored.is_error
        alice.call("store_fact", {"entity": "plan", "key": "q4", "value": "pear v2 for everyone"})
        mine = alice.call("query_facts", {"query": "pear", "contract": "legacy"}).structured_content["rows"]
        assert [r["value"] for r in mine] == ["pear v2 for everyone", "ship the pear api"]   # newest first
        bobs = bob.call("query_facts", {"query": "pear", "contract": "legacy"}).structured_content["rows"]
        assert [r["value"] for r in bobs] == ["pear v2 for everyone"]
        assert carol.text("query_facts", {"query": "pear", "contract": "legacy"}) == "no facts found"
        usage = bob.call("session_token_usage").structured_content
        assert (usage["passport"], usage["calls"]) == ("bob", 1)
    finally:
        for client in (alice, bob, carol):
            client.close()


def test_malformed_json_rpc_is_answered_and_the_server_keeps_serving(server, portal):
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
               "Authorization": f"Bearer {ALICE}"}
    response = httpx2.post(server.url, headers=headers, content=b'{"jsonrpc": "2.0", "id": 1, "method": ', timeout=30)
    assert response.status_code == 400
    assert json.loads(response.text)["error"]["code"] == -32700
    client = server.client(portal, ALICE)
    try:
        assert client.text("list_entities") == "plan"
    finally:
        client.close()
