"""Operators never guess: empty answers explain themselves, the CLI honours token budgets as
the MCP tools do, one output convention (`-` is stdout, CSV booleans 0/1), input errors name the key
meant, superseded versions are marked. Each test runs the command an operator would type."""

from __future__ import annotations

import ast
import csv
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from cruxsql.cli import main
from cruxsql.documents import ChunkInput, DocumentInput, DocumentLane
from cruxsql.facts.store import Store


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    """Facts and documents in tenant acme; a little in default."""
    path = tmp_path_factory.mktemp("store")
    with Store(path) as store:
        store.store("svc", "owner", "alice", tenant="acme")
        store.store("svc", "owner", "bob", tenant="acme")
        store.store("svc", "team", "core", tenant="acme")
        store.store("misc", "note", "unrelated", tenant="default")
        lane = DocumentLane(store)
        lane.ingest([DocumentInput("runbook.md", [ChunkInput("0", "terraform drift happens when state diverges")])],
                    tenant="acme")
        lane.ingest([DocumentInput("pets.md", [ChunkInput("0", "cats and dogs")])], tenant="default")
    return path


@pytest.fixture(scope="module")
def budget_dir(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("budget")
    with Store(path) as store:
        for i in range(8):
            store.store("load", f"k{i}", f"value number {i} with some words")
        for i in range(3):
            store.store("doc", f"k{i}", f"long value {i} " + "word " * 80)
    return path


def cruxsql(data_dir: Path, *args: str, input: str | None = None):
    """`cruxsql ARGS --data-dir DATA_DIR`, stdout and stderr apart."""
    return CliRunner().invoke(main, [*args, "--data-dir", str(data_dir)], input=input, catch_exceptions=False)


# --- 1. empty answers explain themselves -----------------------------------------------------------

def test_history_without_the_tenant_names_where_the_versions_are(data_dir):
    result = cruxsql(data_dir, "history", "svc", "owner")
    assert result.exit_code == 0
    assert result.stdout.splitlines()[2:] == []                   # the honest empty table
    assert result.stderr == "note: no version of (svc, owner) in tenant 'default'; 2 in tenant 'acme' " \
                            "(pass --tenant acme)\n"
    found = cruxsql(data_dir, "history", "svc", "owner", "--tenant", "acme")
    assert found.stderr == "" and len(found.stdout.splitlines()) == 4


def test_notes_give_counts_never_other_tenants_data(data_dir):
    for args in (["history", "svc", "owner"], ["query", "bob"], ["view", "--entity", "svc"],
                 ["export", "facts", "--tenant", "nobody"], ["search", "terraform drift"]):
        result = cruxsql(data_dir, *args)
        assert result.exit_code == 0, args
        assert result.stderr.startswith("note: "), args
        for secret in ("alice", "bob", "core", "terraform drift happens", "f_"):
            assert secret not in result.stderr, (args, secret)


def test_a_mistyped_tenant_or_prefix_says_it_matches_nothing(data_dir):
    typo = cruxsql(data_dir, "export", "audit", "--tenant", "acmee", "--format", "csv", "--output", "-")
    assert typo.exit_code == 0 and typo.stdout.count("\n") == 1    # the header row only
    assert typo.stderr.splitlines() == [
        "note: no fact of the selection in tenant 'acmee' (which holds nothing in this store); 3 in tenant "
        "'acme', 1 in tenant 'default' (pass --tenant acme)",
        "wrote 0 event(s) to stdout"]
    prefix = cruxsql(data_dir, "export", "audit", "--entity-prefix", "svx", "--format", "jsonl", "--output", "-")
    assert prefix.stdout == "" and prefix.stderr.splitlines()[0] == "note: no entity of any tenant starts with 'svx'"
    entity = cruxsql(data_dir, "history", "scv", "owner", "--tenant", "acme")
    assert entity.stderr == "note: no fact of any tenant has entity 'scv'\n"
    nowhere = cruxsql(data_dir, "query", "zebra", "--tenant", "acmee")
    assert nowhere.stderr == "note: tenant 'acmee' holds nothing in this store (did you mean --tenant acme?)\n"


def test_an_honest_empty_answer_says_nothing_more(data_dir):
    result = cruxsql(data_dir, "query", "zebra", "--tenant", "acme")
    assert result.exit_code == 0 and result.stderr == "" and result.stdout.startswith("no facts found")


def test_search_without_the_tenant_no_longer_claims_no_document_holds_the_words(data_dir):
    result = cruxsql(data_dir, "search", "terraform drift")
    assert result.exit_code == 0
    assert result.stdout == "coverage 0.00 · no document of tenant 'default' contains: terraform, drift · " \
                            "0 candidate(s)\n"
    assert result.stderr == "note: no matching document in tenant 'default'; 1 in tenant 'acme' (pass --tenant acme)\n"
    scan = cruxsql(data_dir, "scan", "terraform", "--json")
    assert json.loads(scan.stdout)["pointers"] == [] and "1 in tenant 'acme'" in scan.stderr
    fused = cruxsql(data_dir, "search", "terraform", "--fused")
    assert fused.exit_code == 0 and "1 in tenant 'acme'" in fused.stderr


def test_agent_surfaces_never_carry_the_note(data_dir):
    """The MCP server answers through the same recall; the note is the CLI's alone."""
    from cruxsql.mcp.call import Call  # noqa: F401  (the MCP surface must not import the CLI's notes)
    import cruxsql.mcp.tools.facts as mcp_facts
    import cruxsql.mcp.tools.documents as mcp_documents
    for module in (mcp_facts, mcp_documents):
        assert "empty_answers" not in Path(module.__file__).read_text(encoding="utf-8")


# --- 2. the CLI honours token budgets as the MCP tools do -------------------------------------------

def test_query_prints_only_what_the_budget_paid_for(budget_dir):
    # 5 tokens are below even one fact's CRC-v1 envelope: the compact answer, its one value cut to fit
    result = cruxsql(budget_dir, "query", "value", "--entity", "load", "--token-budget", "5")
    lines = result.stdout.splitlines()
    assert len(lines) == 3 and re.fullmatch(r"load · k7: … · f_[0-9a-f]{32}", lines[0]), lines
    least = int(lines[1].removeprefix("+7 more · compact: the CRC-v1 envelope needs token_budget ≥ "))
    assert lines[2] == ("-- 1 of 8 matching fact(s) shown, 0 below the confidence floor, 0 left out, 0 tokens; "
                        "compact: 0 in full, 1 cut, 7 dropped by --token-budget 5")
    records = cruxsql(budget_dir, "query", "value", "--entity", "load", "--token-budget", "5",
                      "--nl").stdout.splitlines()
    assert [(json.loads(r)["key"], json.loads(r)["value"], json.loads(r)["shown"]) for r in records] == [
        ("k7", "…", "cut")]
    # at the budget the footer names, Crux's envelope: its first fact in full as Crux's line
    lines = cruxsql(budget_dir, "query", "value", "--entity", "load", "--token-budget", str(least)).stdout.splitlines()
    assert lines[0].startswith("[load] k7 = value number 7 with some words (confidence=1.00")
    assert lines[-1].endswith(f"crc-v1 envelope: 1 in full, 0 as epitomes, 7 dropped by --token-budget {least}")


def test_a_budget_prints_what_the_envelope_carries_and_no_more(budget_dir):
    # 150 tokens hold one 80-word fact as a compact line, not its envelope (~300 tokens): the CLI prints
    # that line, the footer naming the envelope's budget, and a summary saying so
    result = cruxsql(budget_dir, "query", "long", "--token-budget", "150")
    lines = result.stdout.splitlines()
    assert len(lines) == 3 and lines[0].startswith("doc · k2: long value 2 word word") and "…" not in lines[0]
    least = int(lines[1].removeprefix("+2 more · compact: the CRC-v1 envelope needs token_budget ≥ "))
    assert least > 150 and lines[2] == ("-- 1 of 3 matching fact(s) shown, 0 below the confidence floor, 0 left "
                                        "out, 104 tokens; compact: 1 in full, 0 cut, 2 dropped by --token-budget 150")
    out = json.loads(cruxsql(budget_dir, "query", "long", "--token-budget", "150", "--json").stdout)
    assert "crc_v1" not in out and out["compact"]["envelope_tokens"] == least
    envelope = json.loads(cruxsql(budget_dir, "query", "long", "--token-budget", str(least),
                                  "--json").stdout)["crc_v1"]
    assert len(envelope["content"]) == 1 and envelope["meta"]["capped"] == 2


def test_without_a_budget_every_fact_prints_as_before(budget_dir):
    lines = cruxsql(budget_dir, "query", "value", "--entity", "load").stdout.splitlines()
    assert len(lines) == 9 and lines[-1].endswith("64 tokens; crc-v1 envelope: 8 in full, 0 as epitomes, 0 dropped")


# --- 3. output conventions -------------------------------------------------------------------------

@pytest.mark.slow
def test_export_audit_to_stdout_with_a_dash(data_dir, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = subprocess.run([sys.executable, "-m", "cruxsql", "export", "audit", "--tenant", "acme", "--format", "csv",
                             "--output", "-", "--data-dir", str(data_dir)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert not (tmp_path / "-").exists()
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert [(r["op"], r["value"]) for r in rows] == [("store", "alice"), ("store", "bob"), ("supersede", "alice"),
                                                     ("supersede", "bob"), ("store", "core")]
    assert {r["deleted"] for r in rows} == {"0"} and {r["applied"] for r in rows} == {"1"}   # never True/False
    assert rows[0]["superseded_by"] == "" and rows[2]["superseded_by"].startswith("f_")       # NULL is empty
    assert result.stderr == "wrote 4 event(s) to stdout\n"
    refused = cruxsql(data_dir, "export", "audit", "--format", "sqlite", "--output", "-")
    assert refused.exit_code == 1 and "cannot be written to stdout" in refused.stderr


def test_an_unknown_input_key_names_the_key_meant(tmp_path):
    line = json.dumps({"entity": "svc", "key": "owner", "value": "alice", "tenant": "acme"})
    result = cruxsql(tmp_path / "d", "store-batch", "-", input=line + "\n")
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: stdin line 1: unknown key(s) tenant (did you mean tenant_hash?)")
    assert not (tmp_path / "d" / "facts.jsonl").exists()


def test_view_marks_superseded_versions(data_dir):
    lines = cruxsql(data_dir, "view", "--tenant", "acme", "--key", "owner").stdout.splitlines()
    assert lines[0].startswith("[svc] owner = bob (id=") and "superseded" not in lines[0]
    bob_id = lines[0].split("id=")[1].split(",")[0]
    assert lines[1].startswith("[svc] owner = alice (id=") and lines[1].endswith(f", v1) [superseded by {bob_id}]")
    rows = list(csv.DictReader(io.StringIO(cruxsql(data_dir, "view", "--tenant", "acme", "--key", "owner",
                                                   "--csv").stdout)))
    assert [(r["value"], r["superseded_by"]) for r in rows] == [("bob", ""), ("alice", bob_id)]


def test_history_marks_superseded_versions(data_dir):
    rows = json.loads(cruxsql(data_dir, "history", "svc", "owner", "--tenant", "acme", "--json").stdout)
    assert [r["status"].split(" f_")[0] for r in rows] == ["superseded by", "current"]


# --- one home for options, one output convention ---------------------------------------------------

RECORD_COMMANDS = ("history", "sql", "segments list", "hold list", "curate contradictions", "curate disagreements",
                   "curate duplicates", "workspace ledger", "cluster status", "query", "bootstrap", "view", "search",
                   "scan")


def _command(path: str):
    command = main
    for name in path.split():
        command = command.commands[name]
    return command


def _flags(command) -> set[str]:
    return {flag for param in command.params for flag in param.opts}


def test_every_command_that_prints_records_takes_the_four_formats():
    for path in RECORD_COMMANDS:
        assert {"--table", "--json", "--nl", "--csv"} <= _flags(_command(path)), path


CLI_DIR = Path(main.callback.__code__.co_filename).parent
# An option name that means something else in these modules than in options.py or in each other, so each
# declares its own: the group's --data-dir (before the subcommand) and restore's (instead of TARGET);
# doctor's --json (one of its formats); curation's --reason (which detectors); cluster's --cluster (NATS
# servers) and verify's (the fleet's proofs); the relation hops and the dependents' --depth; the fused
# documents' and the recall's --fusion modes; consolidate's --horizon (which also takes `none`).
DIFFERENT_MEANINGS = {
    "--data-dir": {"__init__.py", "backup.py"}, "--json": {"doctor.py"}, "--reason": {"curation.py"},
    "--cluster": {"cluster.py", "facts.py"}, "--depth": {"relations.py", "workspace.py"},
    "--fusion": {"documents.py", "recall.py"}, "--horizon": {"curation.py", "facts.py"},
}


def _declared_options(module: Path) -> set[str]:
    """Every option name a `click.option(...)` call in the module declares."""
    names = set()
    for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "option" \
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "click":
            names |= {arg.value.split("/")[0] for arg in node.args
                      if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value.startswith("--")}
    return names


def shared_option_violations(cli_dir: Path = CLI_DIR) -> list[str]:
    """An option of options.py declared inline, or one option declared inline in two command modules."""
    shared = _declared_options(cli_dir / "options.py")
    inline: dict[str, set[str]] = {}
    for module in sorted(cli_dir.glob("*.py")):
        if module.name != "options.py":
            for name in _declared_options(module):
                inline.setdefault(name, set()).add(module.name)
    found = []
    for name, modules in sorted(inline.items()):
        alone = modules - DIFFERENT_MEANINGS.get(name, set())
        if name in shared and alone:
            found.append(f"{name} is declared in options.py; use its decorator in {', '.join(sorted(alone))}")
        elif len(modules) > 1 and alone:
            found.append(f"{name} is declared in {', '.join(sorted(modules))}: declare it once in options.py")
    return found


def test_shared_options_are_declared_once():
    assert shared_option_violations() == []
    for module in sorted(CLI_DIR.glob("*.py")):
        assert "def register(" not in module.read_text(encoding="utf-8"), module.name


def test_an_inline_copy_of_a_shared_option_is_caught(tmp_path):
    """Plant an inline --token-budget and a second module's --per-file in a copy of cli/: both are named."""
    import shutil

    copy = tmp_path / "cli"
    shutil.copytree(CLI_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    relations = copy / "relations.py"
    relations.write_text(relations.read_text(encoding="utf-8") + '\n_budget = click.option("--token-budget")\n'
                         '_per_file = click.option("--per-file", type=int)\n', encoding="utf-8")
    assert shared_option_violations(copy) == [
        "--per-file is declared in relations.py, workspace.py: declare it once in options.py",
        "--token-budget is declared in options.py; use its decorator in relations.py"]


@pytest.mark.parametrize("args", [["history", "svc", "owner", "--tenant", "acme"],
                                  ["sql", "SELECT entity, key, value, private FROM facts ORDER BY seq"],
                                  ["view", "--tenant", "acme"], ["search", "terraform", "--tenant", "acme"],
                                  ["segments", "list"], ["curate", "contradictions", "--tenant", "acme"]])
def test_records_print_the_same_in_every_format(data_dir, args):
    nl = [json.loads(line) for line in cruxsql(data_dir, *args, "--nl").stdout.splitlines()]
    rows = list(csv.DictReader(io.StringIO(cruxsql(data_dir, *args, "--csv").stdout)))
    table = cruxsql(data_dir, *args, "--table").stdout.splitlines()
    if args[0] == "curate":          # no candidates: the table says so
        assert nl == [] and rows == [] and table == ["no contradiction candidates"]
        return
    assert nl and len(rows) == len(nl) and len(table) == len(nl) + 2
    assert list(rows[0]) == list(nl[0]) == table[0].split()
    for record, row in zip(nl, rows):
        assert {k: "" if v is None else str(int(v)) if isinstance(v, bool) else str(v) for k, v in record.items()} \
            == row
    json_out = json.loads(cruxsql(data_dir, *args, "--json").stdout)
    assert (json_out if isinstance(json_out, list) else None) == nl or args[0] in ("view", "search")


def test_existing_json_flags_keep_their_meaning(data_dir):
    stored = json.loads(cruxsql(data_dir, "hold", "list", "--json").stdout)
    assert stored == []
    assert json.loads(cruxsql(data_dir, "view", "--tenant", "acme", "--json").stdout)["returned"] == 3
    assert json.loads(cruxsql(data_dir, "search", "terraform", "--tenant", "acme", "--json").stdout)["contract"] \
        == "crc-v1"
    assert json.loads(cruxsql(data_dir, "verify", "--json").stdout)["ok"] is True


# --- every write is scoped, every required option enforced, retention agrees with itself ---------------------

# Commands that change what the store holds; each takes --tenant. The rest of the tree reads, or works on
# the whole store (init, compact, rebuild, backup, restore, node) or outside the fact store (workspace index).
WRITE_COMMANDS = ("store", "store-batch", "delete", "supersede", "clear-supersede", "set-validity", "set-horizon",
                  "reverify", "erase", "retention apply", "documents erase", "hold place", "hold release",
                  "import mcp-memory", "import mem0", "ingest", "consolidate apply", "consolidate undo",
                  "bootstrap-seed")
WHOLE_STORE_COMMANDS = ("init", "compact", "rebuild", "backup", "restore", "node", "workspace index")


def _leaves(group=main, path=()):
    for name, command in sorted(group.commands.items()):
        if hasattr(command, "commands"):
            yield from _leaves(command, (*path, name))
        else:
            yield " ".join((*path, name)), command


def test_every_write_command_takes_tenant():
    assert [path for path in WRITE_COMMANDS if "--tenant" not in _flags(_command(path))] == []
    assert {"retention report", "retention apply"} <= {path for path, command in _leaves()
                                                       if "--tenant" in _flags(command)}


# Commands without --tenant: they read the whole store for an operator, or read outside the fact store.
UNSCOPED_READS = ("get", "sql", "verify", "doctor", "segments list", "hold list", "hold override-receipt", "embed",
                  "cluster status", "console", "workspace status", "workspace ledger", "ctx search", "ctx read",
                  "ctx doc", "ctx impact", "ctx context", "ctx expand")


def test_a_command_without_tenant_is_a_whole_store_command_or_an_unscoped_read():
    unscoped = [path for path, command in _leaves() if "--tenant" not in _flags(command)]
    assert sorted(unscoped) == sorted(WHOLE_STORE_COMMANDS + UNSCOPED_READS)


def test_every_required_option_fails_without_it_whatever_the_default():
    """click 8.2+ takes a declared `default=None` as a value: a required option must refuse None itself."""
    required = [(path, param) for path, command in _leaves() for param in command.params
                if isinstance(param, click.Option) and param.required]
    assert len(required) >= 12
    for path, param in required:
        ctx = click.Context(_command(path))
        with pytest.raises(click.MissingParameter):
            param.process_value(ctx, None)
        with pytest.raises(click.MissingParameter):
            param.process_value(ctx, () if param.multiple else None)


@pytest.mark.parametrize("args, option", [
    (["documents", "erase"], "--tenant"), (["hold", "place", "--reason", "r"], "--tenant"),
    (["hold", "place", "--tenant", "acme"], "--reason"), (["hold", "override-receipt"], "--reason"),
    (["erase", "--tenant", "acme", "--fact-id", "f_x"], "--reason"), (["retention", "apply", "--all-tenants"],
                                                                     "--older-than")])
def test_a_missing_required_option_is_a_usage_error_before_anything_runs(tmp_path, args, option):
    result = cruxsql(tmp_path / "nothing-here", *args)
    assert result.exit_code == 1 and result.stderr.startswith(f"Error: Missing option '{option}'. (see `")
    assert not (tmp_path / "nothing-here").exists()


def test_store_batch_takes_the_tenant_of_its_lines_from_the_operator(tmp_path):
    lines = '{"entity": "svc", "key": "owner", "value": "alice"}\n{"entity": "svc", "key": "team", "value": "core", ' \
            '"tenant_hash": "acme"}\n'
    stored = json.loads(cruxsql(tmp_path / "d", "store-batch", "-", "--tenant", "acme", "--json", input=lines).stdout)
    assert [f["tenant_hash"] for f in stored] == ["acme", "acme"]
    refused = cruxsql(tmp_path / "d", "store-batch", "-", "--tenant", "globex", input=lines)
    assert (refused.exit_code, refused.stderr) == (1, "Error: stdin line 2: tenant_hash 'acme' is not --tenant 'globex'\n")
    plain = json.loads(cruxsql(tmp_path / "d", "store-batch", "-", "--json", input=lines).stdout)
    assert [f["tenant_hash"] for f in plain] == ["default", "acme"]


def test_retention_report_counts_no_governance_state_and_takes_a_tenant(tmp_path):
    data_dir = tmp_path / "d"
    with Store(data_dir) as store:
        store.store("svc", "owner", "alice", tenant="acme")
        store.store("svc", "owner", "bob", tenant="acme")        # the first version stays a retention candidate
        store.store("notes", "x", "y", tenant="globex")
    assert cruxsql(data_dir, "hold", "place", "--tenant", "acme", "--reason", "case 7",
                   "--entity-prefix", "svc").exit_code == 0
    report = json.loads(cruxsql(data_dir, "retention", "report", "--older-than", "0s", "--json").stdout)
    assert report["counts"]["protected_by_reason"] == {"legal hold": 2}      # not "private": 1 for the hold itself
    assert report["counts"]["eligible"] == 1 and report["tenant"] is None
    acme = json.loads(cruxsql(data_dir, "retention", "report", "--older-than", "0s", "--tenant", "acme", "--json").stdout)
    assert (acme["tenant"], acme["counts"]["eligible"], acme["counts"]["protected"]) == ("acme", 0, 2)
    assert [h["tenant_id"] for h in acme["holds"]] == ["acme"]
    globex = json.loads(cruxsql(data_dir, "retention", "report", "--older-than", "0s", "--tenant", "globex",
                                "--json").stdout)
    assert (globex["counts"]["eligible"], globex["counts"]["protected"], globex["holds"]) == (1, 0, [])
    text = cruxsql(data_dir, "retention", "report", "--older-than", "0s", "--tenant", "globex").stdout
    assert text.splitlines()[0] == "tenant                 globex"


def test_the_consoles_retention_query_says_what_it_lists():
    from cruxsql.console import canned
    query = {q.name: q for q in canned.view_queries()}["retention_candidates"]
    assert not query.description.startswith("Live facts") and "superseded ones too" in query.description
    assert "__legal_hold__::*" in query.sql and "__erasure_report__::*" in query.sql
