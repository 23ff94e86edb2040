"""No accidental stores: the commands that write but are not meant to start a store (`mcp`, `import`,
`bootstrap-seed`, `workspace index`) refuse a path without one, with the `cruxsql init` hint, unless
told to create it (--create). Every registered command is walked against a missing store in
cli/test_edges.py::test_missing_store; this module covers --create and the MCP server's process.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from cruxsql.cli import main
from support.mcp_clients import server_env

HINT = "run `cruxsql init`"
# one line both importers read: an mcp-memory entity, and a mem0 export with no results
INPUT = '{"type": "entity", "name": "n", "entityType": "t", "observations": [], "results": []}\n'


@pytest.mark.parametrize("name,args", [
    ("import mem0", ["{input}"]), ("bootstrap-seed", ["docs", "a", "k", "v"]), ("workspace index", ["{scratch}"])])
def test_create_makes_the_store_the_command_would_otherwise_refuse(tmp_path: Path, name: str, args: list[str]) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    (scratch / "input.jsonl").write_text(INPUT)
    args = [a.format(input=scratch / "input.jsonl", scratch=scratch) for a in args]
    missing = tmp_path / "new"
    refused = CliRunner().invoke(main, ["--data-dir", str(missing), *name.split(), *args])
    assert refused.exit_code == 1 and HINT in refused.output and not missing.exists()
    created = CliRunner().invoke(main, ["--data-dir", str(missing), *name.split(), *args, "--create"])
    assert created.exit_code == 0, created.output
    assert missing.is_dir()


@pytest.mark.slow
def test_the_mcp_server_refuses_a_typo_and_serves_a_new_store_with_create(tmp_path: Path) -> None:
    # this user has a store already (a first launch creates its store: cli/test_first_launch.py)
    subprocess.run([sys.executable, "-m", "cruxsql", "init", "--data-dir", str(tmp_path / "known")],
                   capture_output=True, timeout=60, env=server_env(), check=True)
    cli = [sys.executable, "-m", "cruxsql", "mcp", "--data-dir", str(tmp_path / "typo")]
    refused = subprocess.run(cli, input=b"", capture_output=True, timeout=60, env=server_env())
    assert refused.returncode == 1
    assert refused.stderr.decode() == f"Error: no cruxsql store at {tmp_path / 'typo'} " \
                                      "(run `cruxsql init` or pass --data-dir)\n"
    assert not (tmp_path / "typo").exists()
    served = subprocess.run(cli + ["--create"], input=b"", capture_output=True, timeout=60, env=server_env())
    assert served.returncode == 0 and (tmp_path / "typo" / "cruxsql.db").is_file()
