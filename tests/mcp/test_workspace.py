"""The ctx_* workspace tools through the SDK's client over stdio: real `cruxsql mcp` processes serving a
workspace the test builds and indexes with the real CLI."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import apsw
import pytest

from cruxsql.workspace import Workspace
from support.mcp_clients import CLI, server_env, stdio
from support.workspace_builders import build_workspace

pytestmark = pytest.mark.slow

CTX = ["ctx_search", "ctx_read", "ctx_doc", "ctx_impact", "ctx_context", "ctx_expand"]


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("mcp-workspace")
    root = build_workspace(base / "ws", base / "outside")
    data_dir = base / "data"
    done = subprocess.run(CLI + ["workspace", "index", str(root), "--data-dir", str(data_dir), "--create"],
                          env=server_env(), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return root, data_dir


@pytest.fixture(scope="module")
def alice(mcp_client, indexed):
    return mcp_client(indexed[1], "--agent", "alice", "--tenant", "acme")


@pytest.fixture(scope="module")
def bob(mcp_client, indexed):
    return mcp_client(indexed[1], "--agent", "bob", "--tenant", "acme")


def error_of(client, name: str, arguments: dict) -> str:
    result = client.call(name, arguments)
    assert result.is_error, result.content[0].text
    assert len(result.content) == 1 and "\n" not in result.content[0].text
    return result.content[0].text


def test_the_six_verbs_are_listed_with_their_arguments(alice):
    tools = {t.name: t for t in alice.tools()}
    assert [name for name in tools if name.startswith("ctx_")] == CTX
    required = {name: tools[name].input_schema.get("required") for name in CTX}
    assert required == {"ctx_search": ["query"], "ctx_read": ["path"], "ctx_doc": ["path"],
                        "ctx_impact": ["target"], "ctx_context": ["task"], "ctx_expand": ["handle"]}
    assert tools["ctx_search"].input_schema["properties"]["mode"] == \
        {"default": "content", "enum": ["content", "paths", "count"], "type": "string"}
    assert tools["ctx_doc"].input_schema["properties"]["view"]["enum"] == \
        ["outline", "section", "code", "links", "skeleton"]
    assert tools["ctx_context"].input_schema["properties"]["token_budget"] == {"default": 1500, "type": "integer"}
    for name in CTX:
        assert "session" not in tools[name].input_schema["properties"]
        description = tools[name].description
        assert description.endswith(".") and description.count(". ") == 0, description


VERB_CALLS = [
    ("ctx_search", {"query": "parse_header"}, 'ctx_search "parse_header" · 6 files / ~38 occurrences · ranked · files 1-5'),
    ("ctx_search", {"query": "parse_header", "mode": "paths", "offset": 1, "limit": 2},
     'ctx_search "parse_header" · 6 files / ~38 occurrences · ranked · files 2-3'),
    ("ctx_search", {"query": "parse_header", "mode": "count"}, None),
    ("ctx_read", {"path": "pkg/core.py", "mode": "lines:9-12"}, "pkg/core.py · 24L · sha 9958eb85 · mode=lines:9-12 of 24"),
    ("ctx_read", {"path": "pkg/core.py", "mode": "signatures"}, None),
    ("ctx_doc", {"path": "docs/guide.md"}, "docs/guide.md · 237L · sha 5faea3e0 · mode=outline (full ≈ 2,652 tok)"),
    ("ctx_doc", {"path": "docs/guide.md", "view": "section", "pattern": "Install"},
     "docs/guide.md · 237L · sha 5faea3e0 · section 'Install' L46-94 (~529 tok)"),
    ("ctx_doc", {"path": "docs/guide.md", "view": "code", "pattern": "python"}, None),
    ("ctx_doc", {"path": "docs/guide.md", "view": "links"}, None),
    ("ctx_impact", {"target": "pkg/core.py"}, "ctx_impact pkg/core.py · approximate: static imports + name matches · depth≤3"),
    ("ctx_impact", {"target": "parse_header", "depth": 1}, None),
    ("ctx_context", {"task": "how does parse_header split", "token_budget": 300},
     'ctx_context "how does parse_header split" · budget 300 tok · used ~175 tok'),
    ("ctx_expand", {"handle": "pkg/core.py#parse_header@L9"}, "pkg/core.py#parse_header · L9-12 · sha 9958eb85"),
]


@pytest.mark.parametrize("verb, arguments, header", VERB_CALLS, ids=[f"{v}-{i}" for i, (v, _, _) in enumerate(VERB_CALLS)])
def test_every_verb_answers_as_the_workspace_does(alice, indexed, verb, arguments, header):
    """The tool's text and structured content are the verb's own reply for the same arguments."""
    result = alice.call(verb, arguments)
    assert not result.is_error, result.content[0].text
    with Workspace(indexed[1]) as ws:
        expected = ws.call("expected", verb, **arguments)
    assert result.content[0].text == expected.text
    assert result.structured_content == expected.data
    if header is not None:
        assert result.content[0].text.splitlines()[0] == header


def test_exact_answers_and_a_handle_round_trip(alice):
    assert alice.text("ctx_impact", {"target": "pkg/core.py", "depth": 2}) == (
        "ctx_impact pkg/core.py · approximate: static imports + name matches · depth≤2\n"
        "deps (0): -  (+2 outside the workspace: os, typing)\n"
        "dependents (2): pkg/util.py, tests/test_core.py\n"
        "transitive dependents (0): -\n"
        "tests: covered by 1 tests — tests/test_core.py · 1 non-test files affected\n"
        "→ ctx_read pkg/util.py")
    read = alice.call("ctx_read", {"path": "pkg/core.py", "mode": "full"})
    sha = read.structured_content["sha"]
    assert read.content[0].text.splitlines()[1:3] == ['"""Core HTTP helpers."""', ""]
    assert alice.text("ctx_read", {"path": "pkg/core.py", "if_hash": sha[:8]}) == "pkg/core.py · unchanged:9958eb85"
    context = alice.text("ctx_context", {"task": "where is parse_header defined", "token_budget": 400})
    handle = re.search(r"pkg/core\.py#parse_header@L\d+", context).group(0)
    assert alice.text("ctx_expand", {"handle": handle}).splitlines() == [
        "pkg/core.py#parse_header · L9-12 · sha 9958eb85",
        "def parse_header(line: str) -> Tuple[str, str]:",
        '    """Split one header line."""',
        '    name, _, value = line.partition(":")',
        "    return name.strip(), value.strip()"]


def test_a_path_outside_the_workspace_is_refused(alice, indexed):
    root = indexed[0].resolve()
    outside = indexed[0].parent / "outside" / "secret.py"
    assert error_of(alice, "ctx_read", {"path": "../outside/secret.py"}) == \
        f"path '../outside/secret.py' is outside the workspace {root}"
    assert error_of(alice, "ctx_read", {"path": str(outside)}) == f"path '{outside}' is outside the workspace {root}"
    assert error_of(alice, "ctx_read", {"path": "leak.py"}) == f"path 'leak.py' is outside the workspace {root}"
    assert error_of(alice, "ctx_doc", {"path": "docs/../../outside/secret.py"}) == \
        f"path 'docs/../../outside/secret.py' is outside the workspace {root}"
    assert error_of(alice, "ctx_impact", {"target": "../outside/secret.py"}) == \
        f"path '../outside/secret.py' is outside the workspace {root}"


@pytest.mark.parametrize("verb, arguments, message", [
    ("ctx_doc", {"path": "docs/guide.md", "view": "section"},
     "ctx_doc view=section needs a pattern (a heading title, slug or part of one)"),
    ("ctx_doc", {"path": "docs/guide.md", "view": "links", "pattern": "x"},
     "ctx_doc pattern applies to view=section or view=code, not view=links"),
    ("ctx_doc", {"path": "pkg/core.py"}, "ctx_doc reads markdown; pkg/core.py is python (use ctx_read)"),
    ("ctx_read", {"path": "pkg/core.py", "mode": "lines:10:20"}, None),
    ("ctx_impact", {"target": "pkg/core.py", "depth": 9}, "depth 9 is out of range 1..6"),
    ("ctx_context", {"task": "parse_header", "token_budget": 50}, "token budget 50 is below the minimum 100"),
    ("ctx_search", {"query": "x", "session": "forged"}, "ctx_search: unknown argument `session`"),
    ("ctx_search", {"query": "x", "mode": "lines"}, None),
    ("ctx_expand", {"handle": "@h:00000000"}, None),
])
def test_bad_arguments_are_one_line_tool_errors(alice, verb, arguments, message):
    text = error_of(alice, verb, arguments)
    if message is not None:
        assert text == message
    assert alice.text("ctx_search", {"query": "HTTPClient", "mode": "count"})     # the server keeps serving


def test_same_call_same_text_and_the_governor_nudges_the_third(alice, bob, indexed):
    """The session is the connection's: bob's repeats nudge bob, alice's identical call is not nudged."""
    call = ("ctx_impact", {"target": "pkg/util.py"})
    first, second, third = (bob.text(*call) for _ in range(3))
    assert first == second
    assert third == first + ("\nnudge: same ctx_impact call 3x in the last 3 calls — "
                             "try ctx_read the dependents it listed")
    assert bob.call(*call).structured_content["nudge"] == \
        "nudge: same ctx_impact call 4x in the last 4 calls — try ctx_read the dependents it listed"
    assert alice.text(*call) == first
    db = apsw.Connection(str(indexed[1] / "workspace.db"), flags=apsw.SQLITE_OPEN_READONLY)
    sessions = dict(db.execute("SELECT session, sum(nudged) FROM ledger WHERE verb='ctx_impact' "
                               "AND args LIKE '%pkg/util.py%' GROUP BY session"))
    db.close()
    assert sorted(sessions.values()) == [0, 2]
    names = sorted(sessions)
    assert re.fullmatch(r"mcp:acme/alice/\d+\.\d+", names[0]) and re.fullmatch(r"mcp:acme/bob/\d+\.\d+", names[1])
    assert names[0].rsplit("/", 1)[1] != names[1].rsplit("/", 1)[1]   # two server processes, two sessions


def test_without_an_index_every_verb_is_one_clear_error(portal, tmp_path):
    data_dir = tmp_path / "data"
    client = stdio(portal, data_dir, "--agent", "alice")
    try:
        message = f"no workspace is indexed in {data_dir}: run `cruxsql workspace index PATH` first"
        for verb, arguments in [("ctx_search", {"query": "x"}), ("ctx_read", {"path": "a.py"}),
                                ("ctx_doc", {"path": "a.md"}), ("ctx_impact", {"target": "a"}),
                                ("ctx_context", {"task": "x"}), ("ctx_expand", {"handle": "@h:00000000"})]:
            assert error_of(client, verb, arguments) == message
        assert not (data_dir / "workspace.db").exists()
    finally:
        client.close()


def test_near_the_session_budget_ctx_context_is_shaped_but_never_below_its_floor(portal, indexed):
    """Near --session-budget the block shrinks to half of what is left, but not under 100 tokens; when even
    that does not fit, the call is refused and costs nothing: the session never passes its limit."""
    client = stdio(portal, indexed[1], "--agent", "carol", "--session-budget", "1400")
    try:
        while client.call("session_token_usage").structured_content["used"] < 1000:    # ~65 tokens a call
            pass
        budgets = []
        while not (result := client.call("ctx_context", {"task": "how does parse_header split"})).is_error:
            budgets.append(int(re.match(r'ctx_context "[^"]+" · budget (\d+) tok · ', result.content[0].text).group(1)))
            assert re.fullmatch(r"session budget: \d+ of 1400 tokens used; answer shaped to token_budget=\d+"
                                r"( \(its minimum\))?", result.content[1].text)
        assert budgets and min(budgets) >= 100 and budgets == sorted(budgets, reverse=True)
        assert re.fullmatch(r"session token budget(: this answer takes \d+ tokens and agent carol has \d+ left of "
                            r"1400; ask for less \(a smaller token_budget, top_k or limit\)| exhausted: agent carol "
                            r"used \d+ of 1400 tokens; writes and session_token_usage still work)", result.content[0].text)
        assert client.call("session_token_usage").structured_content["used"] <= 1400
    finally:
        client.close()
