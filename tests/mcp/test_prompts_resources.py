"""The usage-guide prompt and the stats / entity resources, read through the MCP SDK client from real
`cruxsql mcp` processes; resources are scoped by the connection's identity like the tools."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp.shared.exceptions import MCPError

from support.mcp_clients import stdio

pytestmark = pytest.mark.slow


@pytest.fixture
def clients(portal, tmp_path: Path):
    alice = stdio(portal, tmp_path / "store", "--agent", "alice", "--tenant", "acme")
    bob = stdio(portal, tmp_path / "store", "--agent", "bob", "--tenant", "acme", "--tools", "core")
    yield alice, bob
    alice.close()
    bob.close()


def test_the_guide_prompt_names_only_listed_tools(clients) -> None:
    alice, bob = clients
    listed = alice.portal.call(alice.session.list_prompts).prompts
    assert [p.name for p in listed] == ["memory_guide"]
    full = alice.portal.call(alice.session.get_prompt, "memory_guide").messages[0].content.text
    core = bob.portal.call(bob.session.get_prompt, "memory_guide").messages[0].content.text
    assert "answer a question from memory (ranked, best first): recall" in full
    assert "memory_forget_dry_run / memory_forget" in full
    assert "memory_forget" not in core and "recall" in core      # bob's server lists the core set only
    with pytest.raises(MCPError, match="unknown prompt 'nope'"):
        alice.portal.call(alice.session.get_prompt, "nope")


def test_stats_and_entity_resources_follow_the_connection(clients) -> None:
    alice, bob = clients
    alice.text("store_fact", {"entity": "payments-api", "key": "database", "value": "postgres 16"})
    alice.text("store_fact", {"entity": "alice-notes", "key": "todo", "value": "rotate keys", "private": True})
    resources = alice.portal.call(alice.session.list_resources).resources
    assert [str(r.uri) for r in resources] == ["cruxsql://stats"]
    templates = alice.portal.call(alice.session.list_resource_templates).resource_templates
    assert [t.uri_template for t in templates] == ["cruxsql://entity/{name}"]

    def read(client, uri: str) -> str:
        return client.portal.call(client.session.read_resource, uri).contents[0].text

    alice_stats, bob_stats = json.loads(read(alice, "cruxsql://stats")), json.loads(read(bob, "cruxsql://stats"))
    assert (alice_stats["agent"], alice_stats["tenant"], alice_stats["entities"]) == ("alice", "acme", 2)
    assert (bob_stats["agent"], bob_stats["entities"]) == ("bob", 1)      # alice's private entity is hidden
    assert "postgres 16" in read(bob, "cruxsql://entity/payments-api")
    assert "rotate keys" in read(alice, "cruxsql://entity/alice-notes")
    assert "rotate keys" not in read(bob, "cruxsql://entity/alice-notes")
    with pytest.raises(MCPError, match="unknown resource"):
        read(alice, "cruxsql://nothing")
