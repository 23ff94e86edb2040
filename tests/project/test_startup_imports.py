"""The start-up budget: what `import cruxsql`, `cruxsql --help` and `cruxsql sql` load, read from
`python -X importtime` of real subprocesses. The heavy parts (numpy, recall, documents, curation, the
governance machinery) load only for the commands that use them; figures in docs/performance.md."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

from cruxsql.facts.store import Store

from support.mcp_clients import server_env

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("numpy", "cruxsql.recall", "cruxsql.documents", "cruxsql.curation", "cruxsql.embeddings",
         "cruxsql.workspace", "cruxsql.governance.erasure", "cruxsql.governance.compaction", "cruxsql.mcp")
LIGHT = {"cruxsql.documents", "cruxsql.documents.segments"}   # the lazy package and its file names (data_dir)
IMPORTED = re.compile(r"^import time:\s+\d+ \|\s+\d+ \| ( *)(\S+)$", re.M)


def loaded(args: list[str]) -> set[str]:
    done = subprocess.run([sys.executable, "-X", "importtime", *args], env=server_env(), capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return {m.group(2) for m in IMPORTED.finditer(done.stderr)}


def heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules - LIGHT if any(m == h or m.startswith(h + ".") for h in HEAVY))


def test_import_cruxsql_loads_nothing_of_its_own() -> None:
    modules = loaded(["-c", "import cruxsql"])
    assert sorted(m for m in modules if m.startswith("cruxsql.")) == []
    assert "numpy" not in modules


def test_help_loads_no_command_module_and_nothing_heavy() -> None:
    modules = loaded(["-m", "cruxsql", "--help"])
    assert heavy(modules) == []
    commands = {m for m in modules if m.startswith("cruxsql.cli.")}
    assert commands <= {"cruxsql.cli.common", "cruxsql.cli.command_index", "cruxsql.cli.data_dir",
                        "cruxsql.cli.known_stores", "cruxsql.cli.options"}, commands  # options: --lock-timeout


def test_a_sql_query_loads_only_what_it_runs(tmp_path: Path) -> None:
    store = tmp_path / "store"
    subprocess.run([sys.executable, "-m", "cruxsql", "--data-dir", str(store), "init"], env=server_env(),
                   check=True, capture_output=True)
    modules = loaded(["-m", "cruxsql", "--data-dir", str(store), "sql", "select 1"])
    assert heavy(modules) == []
    assert {m for m in modules if m.startswith("cruxsql.cli.")} <= {
        "cruxsql.cli.common", "cruxsql.cli.command_index", "cruxsql.cli.data_dir", "cruxsql.cli.options",
        "cruxsql.cli.known_stores", "cruxsql.cli.sql"}


def test_the_lazy_attributes_of_the_package_resolve() -> None:
    import cruxsql

    for name in cruxsql.__all__:
        assert getattr(cruxsql, name) is not None, name
    with pytest.raises(AttributeError):
        cruxsql.no_such_name  # noqa: B018


def test_the_command_index_matches_the_commands() -> None:
    """A command added or moved without `python tools/cli_reference.py` still runs (the group falls back
    to importing every module), but `cruxsql --help` would list it wrongly: the index must be current."""
    spec = importlib.util.spec_from_file_location("cli_reference", ROOT / "tools" / "cli_reference.py")
    assert spec is not None and spec.loader is not None
    reference = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(reference)
    assert reference.INDEX.read_text(encoding="utf-8") == reference.render_index(), (
        "cruxsql/cli/command_index.py is out of date: run python tools/cli_reference.py")


def test_the_mcp_tool_index_matches_the_tools() -> None:
    """`cruxsql mcp` answers tools/list from tool_index.json: it must be what the tool modules declare."""
    from cruxsql.mcp.server import TOOL_INDEX, render_tool_index

    assert TOOL_INDEX.read_text(encoding="utf-8") == render_tool_index(), (
        "cruxsql/mcp/tool_index.json is out of date: run python tools/cli_reference.py")


@pytest.mark.slow
def test_the_mcp_server_starts_without_importing_its_tools(tmp_path: Path) -> None:
    store = tmp_path / "store"
    subprocess.run([sys.executable, "-m", "cruxsql", "--data-dir", str(store), "init"], env=server_env(),
                   check=True, capture_output=True)
    requests = "\n".join([
        '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",'
        '"capabilities":{},"clientInfo":{"name":"t","version":"1"}}}',
        '{"jsonrpc":"2.0","method":"notifications/initialized"}',
        '{"jsonrpc":"2.0","id":2,"method":"tools/list"}']) + "\n"
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "cruxsql", "mcp", "--data-dir", str(store)],
                          input=requests, env=server_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert '"name":"recall"' in done.stdout.replace(" ", "")
    modules = {m.group(2) for m in IMPORTED.finditer(done.stderr)}
    assert sorted(m for m in modules if m.startswith("cruxsql.mcp.tools.")) == []
    light = {"cruxsql.recall", "cruxsql.recall.scope", "cruxsql.recall.tokens", "cruxsql.recall.entities"}
    assert heavy(modules - light - {m for m in modules if m.startswith("cruxsql.mcp")}) == []


def test_a_command_missing_from_or_misplaced_in_the_index_still_runs(monkeypatch, tmp_path: Path) -> None:
    """The fallback behind a stale index: a command it does not name, or names in the wrong module, is
    found by importing every module (each run in a fresh group: `main` caches what it loaded)."""
    from click.testing import CliRunner

    from cruxsql.cli import COMMAND_INDEX, LazyGroup, main

    with Store(tmp_path / "store"):
        pass
    stale = dict(COMMAND_INDEX)
    del stale["sql"]                                            # added, index not regenerated
    stale["get"] = ("export",) + stale["get"][1:]               # moved, index not regenerated
    monkeypatch.setattr("cruxsql.cli.COMMAND_INDEX", stale)
    answers = {}
    for args in (["sql", "select 40 + 2"], ["get", "f_missing"]):
        group = LazyGroup(name="cruxsql", params=main.params)
        group.commands = {}
        answers[args[0]] = CliRunner().invoke(group, [*args, "--data-dir", str(tmp_path / "store")]).output
    assert answers == {"sql": "40 + 2\n------\n42\n", "get": "Error: unknown fact id 'f_missing'\n"}
