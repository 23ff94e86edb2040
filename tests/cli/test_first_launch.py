"""A first launch with the README's agent configuration, copied verbatim, starts and creates its store
(said on stderr); afterwards a path that holds no store is refused, for the server and for CLI writes
alike (cli/known_stores.py). HOME and the XDG config dir point into tmp_path: a fresh machine."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from mcp import StdioServerParameters
from mcp.client.stdio import stdio_client

from support.mcp_clients import CLI, McpClient, server_env
from support.journal_files import journal_text

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
REFUSED = "Error: no cruxsql store at {} (run `cruxsql init` or pass --data-dir)"


def readme_agent_args() -> list[str]:
    """The `args` of the README's mcpServers block, exactly as written there."""
    block = re.search(r'"command": "cruxsql",\s*"args": (\[[^\]]*\])', (ROOT / "README.md").read_text(encoding="utf-8"))
    assert block is not None, "the README's agent configuration moved"
    return json.loads(block.group(1))


@pytest.fixture
def machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """A fresh machine: an empty home (`/home/me` of the README), no config dir yet."""
    home = tmp_path / "home" / "me"
    home.mkdir(parents=True)
    monkeypatch.delenv("XDG_CONFIG_HOME")
    return server_env({"HOME": str(home)})


def on_this_machine(args: list[str], env: dict[str, str]) -> list[str]:
    return [a.replace("/home/me", env["HOME"]) for a in args]


def launch(portal, args: list[str], env: dict[str, str], errlog: Path) -> McpClient:
    params = StdioServerParameters(command=CLI[0], args=CLI[1:] + args, env=env)
    return McpClient(portal, stdio_client(params, errlog=errlog.open("w")))


def test_the_readme_configuration_starts_on_a_fresh_machine_and_creates_its_store(portal, machine, tmp_path):
    args = on_this_machine(readme_agent_args(), machine)
    assert args[:2] == ["mcp", "--data-dir"] and "--create" not in args
    store = Path(args[2])
    client = launch(portal, args, machine, tmp_path / "first.log")
    try:
        stored = client.call("store_fact", {"entity": "deploy", "key": "strategy", "value": "blue-green"})
        assert not stored.is_error, stored.content[0].text
    finally:
        client.close()
    assert journal_text(store).count('"blue-green"') == 1
    assert f"cruxsql: created the store {store}" in (tmp_path / "first.log").read_text()
    listed = Path(machine["HOME"]) / ".config" / "cruxsql" / "stores.json"
    assert json.loads(listed.read_text()) == [str(store)]

    again = launch(portal, args, machine, tmp_path / "second.log")    # a later launch: the same memory
    try:
        assert "blue-green" in again.text("query_facts", {"query": "deploy strategy"})
    finally:
        again.close()
    assert "created" not in (tmp_path / "second.log").read_text()


def test_after_the_first_store_a_typo_never_forks_memory(machine, tmp_path):
    args = on_this_machine(readme_agent_args(), machine)
    first = subprocess.run(CLI + ["store", "deploy", "strategy", "blue-green", "--data-dir", args[2]], env=machine,
                           capture_output=True, text=True, timeout=60)
    assert first.returncode == 0, first.stderr
    typo = args[2].replace("cruxsql-data", "cruxsq-data")
    served = subprocess.run(CLI + ["mcp", "--data-dir", typo, *args[3:]], env=machine, input="",
                            capture_output=True, text=True, timeout=60)
    assert (served.returncode, served.stderr.strip()) == (1, REFUSED.format(typo))
    written = subprocess.run(CLI + ["store", "deploy", "strategy", "canary", "--data-dir", typo], env=machine,
                             capture_output=True, text=True, timeout=60)
    assert (written.returncode, written.stderr.strip()) == (1, REFUSED.format(typo))
    assert not Path(typo).exists()
    told = subprocess.run(CLI + ["init", "--data-dir", typo], env=machine, capture_output=True, text=True, timeout=60)
    assert told.returncode == 0 and Path(typo, "cruxsql.db").is_file()      # asked for: created


def test_the_quick_start_default_directory_is_created_even_for_a_user_with_stores(machine, tmp_path):
    established = subprocess.run(CLI + ["init", "--data-dir", str(tmp_path / "elsewhere")], env=machine,
                                 capture_output=True, text=True, timeout=60)
    assert established.returncode == 0, established.stderr
    clone = tmp_path / "clone"
    clone.mkdir()
    quick = subprocess.run(CLI + ["store", "deployment", "strategy", "blue-green"], env=machine, cwd=clone,
                           capture_output=True, text=True, timeout=60)
    assert quick.returncode == 0, quick.stderr
    assert (clone / "cruxsql-data" / "facts.jsonl").is_file()
