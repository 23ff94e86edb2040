"""The real `cruxsql workspace` / `cruxsql ctx` commands in subprocesses."""

import json
import os
import subprocess
import sys

import pytest

from support.workspace_builders import CORE, build_workspace


def run(data_dir, *args, session="cli"):
    env = dict(os.environ, CRUXSQL_DATA_DIR=str(data_dir), CRUXSQL_SESSION=session)
    return subprocess.run([sys.executable, "-m", "cruxsql", *args], capture_output=True, text=True, env=env)


@pytest.fixture(scope="module")
def indexed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cli")
    root = build_workspace(tmp / "ws", tmp / "outside")
    data = tmp / "data"
    out = run(data, "workspace", "index", str(root), "--create")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"indexed {root}: 12 files (12 added, 0 changed, 0 touched but unchanged, "
                                 "0 unchanged, 0 removed) in ")
    assert out.stdout.rstrip().endswith("skipped: 1 binary file, 1 huge file, 1 lockfile, 1 symlink pointing outside the workspace")
    return root, data


@pytest.mark.slow
def test_status_json(indexed):
    root, data = indexed
    status = json.loads(run(data, "workspace", "status", "--json").stdout)
    assert (status["root"], status["files"], status["classes"]) == (
        str(root), 12, {"code": 7, "config": 1, "docs": 2, "test": 1, "vendored": 1})


@pytest.mark.slow
def test_search_read_doc_impact_context_expand(indexed):
    _, data = indexed
    search = run(data, "ctx", "search", "parse_header", "--mode", "paths", "--limit", "2")
    assert search.stdout.splitlines()[1:] == [
        "pkg/core.py (6) defines parse_header", "pkg/util.py (5)",
        'more: 4 files (~27 occurrences) — ctx_search "parse_header" offset=2 · exhaustive=true lists all',
        "→ ctx_read pkg/core.py"]
    full = run(data, "ctx", "read", "pkg/core.py", "--mode", "full")
    assert full.stdout.split("\n", 1)[1] == CORE + "\n"          # click.echo adds the final newline
    code = run(data, "ctx", "doc", "docs/guide.md", "--code", "python")
    assert code.stdout.splitlines()[2:4] == ["from pkg.core import parse_header", "parse_header('A: b')"]
    impact = json.loads(run(data, "ctx", "impact", "pkg/core.py", "--json").stdout)
    assert impact["dependents"] == ["pkg/util.py", "tests/test_core.py"]
    context = run(data, "ctx", "context", "where is parse_header used", "--token-budget", "300")
    assert context.returncode == 0 and context.stdout.splitlines()[1] == "terms: parse_header"
    expand = run(data, "ctx", "expand", "pkg/core.py#parse_header@L9")
    assert expand.stdout.splitlines()[1] == "def parse_header(line: str) -> Tuple[str, str]:"


@pytest.mark.slow
@pytest.mark.parametrize("args, message", [
    (("ctx", "read", "../outside/secret.py"), "Error: path '../outside/secret.py' is outside the workspace"),
    (("ctx", "read", "pkg/core.py", "--mode", "lines:3"), "Error: mode 'lines:3' is malformed"),
    (("ctx", "doc", "docs/guide.md", "--section", "zzz"), "Error: no section of docs/guide.md matches 'zzz'"),
    (("ctx", "read", "logo.png"), "Error: path 'logo.png' is skipped: binary file (NUL byte)"),
    (("ctx", "context", "x", "--token-budget", "5"), "Error: token budget 5 is below the minimum 100"),
    (("workspace", "index", "/nonexistent/dir"), "Error: workspace path '/nonexistent/dir' is not a directory"),
])
def test_bad_input_is_one_error_line_and_exit_1(indexed, args, message):
    _, data = indexed
    out = run(data, *args)
    assert out.returncode == 1
    assert out.stderr.startswith(message) and len(out.stderr.splitlines()) == 1
    assert out.stdout == ""


def test_verbs_without_an_index_say_how_to_build_one(tmp_path):
    out = run(tmp_path / "empty", "ctx", "search", "x")
    assert out.returncode == 1
    assert out.stderr == f"Error: no workspace is indexed in {tmp_path / 'empty'}: run `cruxsql workspace index PATH` first\n"


@pytest.mark.slow
def test_ledger_csv_per_session(indexed):
    _, data = indexed
    for _ in range(3):
        out = run(data, "ctx", "read", "pkg/core.py", "--mode", "signatures", session="ledger-s")
    assert out.stdout.splitlines()[-1].startswith("nudge: same ctx_read call 3x in the last 3 calls")
    rows = run(data, "workspace", "ledger", "--csv").stdout.splitlines()
    assert rows[0] == "session,calls,returned_tokens,full_read_tokens,saved_tokens,saved_share,nudges"
    mine = [r for r in rows if r.startswith("ledger-s,")]
    assert len(mine) == 1 and mine[0].startswith("ledger-s,3,") and mine[0].endswith(",1")
