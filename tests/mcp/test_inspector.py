"""The MCP Inspector's CLI (`@modelcontextprotocol/inspector --cli`, Node), a client independent of the Python
SDK, against the real `cruxsql mcp` launched with the README's agent configuration on a fresh machine:
annotations read back, a fact stored and recalled with a plain-language time, relations round-tripped,
the guide prompt and the resources. Each call is one Inspector run spawning its own server on the same store.

The Inspector is found at $CRUXSQL_INSPECTOR or where `.ci/run` installs it (`.ci/node`); where it is
missing the tests are skipped, saying so, unless CRUXSQL_REQUIRE_INSPECTOR=1 (`.ci/run` sets it)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Optional
from zoneinfo import ZoneInfo

import pytest

from cruxsql.mcp.registry import discover
from support.mcp_clients import server_env

ROOT = Path(__file__).resolve().parents[2]
INSPECTOR = Path(os.environ.get("CRUXSQL_INSPECTOR", ROOT / ".ci" / "node" / "node_modules" / ".bin" / "mcp-inspector"))
REQUIRED = os.environ.get("CRUXSQL_REQUIRE_INSPECTOR") == "1"
ALL_HINTS = {"title", "readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"}


def _missing() -> Optional[str]:
    if shutil.which("node") is None:
        return "no `node` on PATH (the MCP Inspector runs on Node.js)"
    if not os.access(INSPECTOR, os.X_OK):
        install = re.search(r"^npm install .*@modelcontextprotocol/inspector@\S+", (ROOT / ".ci" / "run").read_text(), re.M)
        assert install is not None, ".ci/run no longer installs the MCP Inspector"
        return f"no MCP Inspector at {INSPECTOR} (`{install.group(0)}`, as .ci/run does)"
    return None


MISSING = _missing()
pytestmark = [pytest.mark.slow, pytest.mark.skipif(MISSING is not None and not REQUIRED, reason=str(MISSING))]


class Inspector:
    """`mcp-inspector --cli --config mcp.json --server memory --method ...`, the README's server block as the
    config file; each run answers one JSON document."""

    def __init__(self, config: Path, env: dict[str, str]) -> None:
        self.config, self.env = config, env

    def __call__(self, method: str, *args: str) -> Any:
        done = subprocess.run([str(INSPECTOR), "--cli", "--config", str(self.config), "--server", "memory",
                               "--method", method, *args], env=self.env, capture_output=True, text=True, timeout=180)
        assert done.returncode == 0, f"inspector {method} {args} exited {done.returncode}: {done.stderr}"
        return json.loads(done.stdout)

    def call(self, tool: str, **arguments: str) -> Any:
        pairs = [f"{key}={value}" for key, value in arguments.items()]
        result = self("tools/call", "--tool-name", tool, "--tool-arg", *pairs)
        assert result["isError"] is False, result["content"][0]["text"]
        return result


def readme_servers(home: Path) -> dict[str, Any]:
    """The README's mcpServers block, its `/home/me` moved into `home` and `cruxsql` run by this interpreter."""
    block = re.search(r'```json\n(\{\s*"mcpServers".*?)```', (ROOT / "README.md").read_text(encoding="utf-8"), re.S)
    assert block is not None, "the README's agent configuration moved"
    config = json.loads(block.group(1).replace("/home/me", str(home)))
    server = config["mcpServers"]["memory"]
    assert server["command"] == "cruxsql"
    server.update(command=sys.executable, args=["-m", "cruxsql", *server["args"]])
    return config


@pytest.fixture(scope="module")
def inspector(tmp_path_factory: pytest.TempPathFactory) -> Inspector:
    """A fresh machine (empty home, no config dir) whose first Inspector call stores a fact: that first
    launch creates the store the README names, and lists it as this user's."""
    if MISSING is not None:
        pytest.fail(f"CRUXSQL_REQUIRE_INSPECTOR=1 but {MISSING}")
    home = tmp_path_factory.mktemp("machine") / "home" / "me"
    home.mkdir(parents=True)
    config = home / "mcp.json"
    config.write_text(json.dumps(readme_servers(home)))
    env = server_env({"HOME": str(home)})
    env.pop("XDG_CONFIG_HOME", None)
    inspector = Inspector(config, env)
    store = home / "cruxsql-data"
    assert not store.exists()
    stored = inspector.call("store_fact", entity="payments-api", key="database", value="postgres 16")
    assert stored["structuredContent"]["version"] == 1
    assert (store / "facts.jsonl").read_text().count('"postgres 16"') == 1
    assert json.loads((home / ".config" / "cruxsql" / "stores.json").read_text()) == [str(store)]
    return inspector


def test_every_tool_is_listed_with_the_annotations_the_code_declares(inspector: Inspector) -> None:
    listed = {tool["name"]: tool.get("annotations") for tool in inspector("tools/list")["tools"]}
    declared = discover()
    assert set(listed) == set(declared)
    for name, listed_hints in listed.items():
        assert listed_hints is not None and set(listed_hints) == ALL_HINTS, name
        assert listed_hints == declared[name].annotations.model_dump(by_alias=True, exclude_none=True), name

    def hints(read_only: bool, destructive: bool, idempotent: bool) -> dict[str, bool]:
        return {"readOnlyHint": read_only, "destructiveHint": destructive, "idempotentHint": idempotent,
                "openWorldHint": False}
    assert listed["recall"] == {"title": "Recall facts", **hints(True, False, True)}
    assert listed["store_fact"] == {"title": "Store a fact", **hints(False, False, False)}
    assert listed["delete_fact"] == {"title": "Delete a fact", **hints(False, True, True)}
    assert listed["memory_forget"]["destructiveHint"] is True and listed["memory_forget"]["idempotentHint"] is False
    assert listed["relate"] == {"title": "Relate two entities", **hints(False, False, True)}
    assert listed["related"] == {"title": "Related entities", **hints(True, False, True)}


def test_recall_takes_yesterday_and_says_when_it_began(inspector: Inspector) -> None:
    zone = ZoneInfo("Europe/Paris")
    before = datetime.now(zone).date()
    answer = inspector.call("recall", query="which database does payments-api use", stored_after="yesterday",
                            time_zone="Europe/Paris")["content"][0]["text"]
    after = datetime.now(zone).date()
    lines = answer.splitlines()
    assert "payments-api · database: postgres 16" in lines[:-1]
    midnights = {datetime.combine(day - timedelta(days=1), datetime.min.time(), zone).isoformat()
                 for day in (before, after)}
    assert lines[-1] in {f"times: stored_after 'yesterday' = {m}" for m in midnights}


def test_relate_then_related_walks_both_directions(inspector: Inspector) -> None:
    calls = inspector.call("relate", **{"from": "checkout", "relation": "calls", "to": "payments-api"})
    uses = inspector.call("relate", **{"from": "payments-api", "relation": "uses", "to": "postgres"})
    near = inspector.call("related", entity="postgres", depth="2")
    edges = near["structuredContent"]["edges"]
    assert [(e["from"], e["relation"], e["to"], e["hop"]) for e in edges] == [
        ("payments-api", "uses", "postgres", 1), ("checkout", "calls", "payments-api", 2)]
    assert [e["fact_id"] for e in edges] == [uses["structuredContent"]["fact_id"],
                                             calls["structuredContent"]["fact_id"]]
    assert near["structuredContent"]["depth"] == 2                   # sent as an integer, per the schema


def test_the_guide_prompt_is_listed_and_got(inspector: Inspector) -> None:
    assert [p["name"] for p in inspector("prompts/list")["prompts"]] == ["memory_guide"]
    got = inspector("prompts/get", "--prompt-name", "memory_guide")["messages"]
    assert len(got) == 1 and got[0]["role"] == "user"
    text = got[0]["content"]["text"]
    assert "- answer a question from memory (ranked, best first): recall" in text
    assert "- forget a scope (preview first): memory_forget_dry_run / memory_forget" in text


def test_the_resources_are_listed_and_an_entity_read(inspector: Inspector) -> None:
    listed = inspector("resources/list")["resources"]
    assert [(r["uri"], r["name"], r["mimeType"]) for r in listed] == [("cruxsql://stats", "stats", "application/json")]
    read = inspector("resources/read", "--uri", "cruxsql://entity/payments-api")["contents"]
    assert [(c["uri"], c["mimeType"]) for c in read] == [("cruxsql://entity/payments-api", "text/plain")]
    assert "postgres 16" in read[0]["text"]
