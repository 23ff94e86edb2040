"""The documentation matches the code: the generated CLI reference is current, every command and option
is documented, the examples marked runnable run, and every relative link resolves.

An example is runnable when the line before its fence is `<!-- runnable -->`:
- a ```console block: each `$ ` line runs in a shell (`cruxsql` is this Python's `-m cruxsql`); the
  lines after it, if any, are its expected output (stdout and stderr, with fact and request ids
  normalised). It must exit 0, or 1 when its expected output is an `Error:` line. The blocks of one page
  run in order in one fresh directory, so a page's later example can use its earlier ones' store.
- a ```python block: the page's python blocks run in order, in one namespace, in a fresh directory.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import click
import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]
PROSE = [page for page in PAGES if page.name != "cli.md"]

_spec = importlib.util.spec_from_file_location("cli_reference", ROOT / "tools" / "cli_reference.py")
cli_reference = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cli_reference)

RUNNABLE = re.compile(r"^<!-- runnable -->\n```(console|python)\n(.*?)^```$", re.M | re.S)
FENCE = re.compile(r"^```.*?^```$", re.M | re.S)
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")
IDS = re.compile(r"\b(?:f|er|lh|r_[a-z_]+)_[0-9a-f]{32}\b")


def all_commands() -> list[tuple[click.Context, click.Command]]:
    from cruxsql.cli import main

    return list(cli_reference.commands(main))


def test_cli_reference_is_up_to_date():
    current = (DOCS / "cli.md").read_text(encoding="utf-8")
    assert current == cli_reference.render(), f"docs/cli.md is out of date: run {cli_reference.COMMAND}"


@pytest.mark.slow
def test_cli_reference_check_fails_on_a_stale_file(tmp_path, monkeypatch):
    """The `--check` the lead runs after merging says what to run when the file is stale."""
    stale = tmp_path / "cli.md"
    stale.write_text(cli_reference.render().replace("### cruxsql hold place", "### cruxsql hold put"))
    monkeypatch.setattr(cli_reference, "REFERENCE", stale)
    monkeypatch.setattr(sys, "argv", ["cli_reference.py", "--check"])
    assert cli_reference.main() == 1
    monkeypatch.setattr(sys, "argv", ["cli_reference.py"])
    assert cli_reference.main() == 0 and stale.read_text() == cli_reference.render()


@pytest.mark.parametrize("ctx, command", all_commands()[1:], ids=lambda v: getattr(v, "command_path", ""))
def test_every_command_has_help_and_is_described_in_a_page(ctx, command):
    assert (command.help or "").strip(), f"{ctx.command_path} has no help text"
    words = ctx.command_path.split()[1:]
    # `cruxsql [--global-option [VALUE]]... WORDS`, in a console line or in prose
    pattern = re.compile(r"cruxsql(?:\s+--[\w-]+(?:[ =](?!-)\S+)?)*\s+" + r"\s+".join(map(re.escape, words))
                         + r"(?![\w-])")
    assert any(pattern.search(page.read_text(encoding="utf-8")) for page in PROSE), (
        f"`{ctx.command_path}` is not described in README.md or any docs/ page besides cli.md")


@pytest.mark.parametrize("ctx, command", all_commands(), ids=lambda v: getattr(v, "command_path", ""))
def test_every_option_is_in_the_reference(ctx, command):
    reference = (DOCS / "cli.md").read_text(encoding="utf-8")
    heading = re.escape(ctx.command_path)
    section = re.search(rf"^#+ {heading}\n\n```text\n(.*?)^```$", reference, re.M | re.S)
    assert section, f"docs/cli.md has no section for {ctx.command_path}: run {cli_reference.COMMAND}"
    for param in command.get_params(ctx):
        if isinstance(param, click.Option) and not param.hidden:
            for opt in param.opts + param.secondary_opts:
                assert re.search(rf"(?<![\w-]){re.escape(opt)}(?![\w-])", section.group(1)), (
                    f"{opt} of {ctx.command_path} is not in docs/cli.md: run {cli_reference.COMMAND}")


def runnable_blocks(kind: str) -> list[tuple[Path, list[str]]]:
    found = []
    for page in PAGES:
        blocks = [body for k, body in RUNNABLE.findall(page.read_text(encoding="utf-8")) if k == kind]
        if blocks:
            found.append((page, blocks))
    return found


def test_the_pages_mark_runnable_examples():
    """The examples below are a chosen subset; losing the markers must not make the tests vacuous."""
    pages = {page.name for page, _ in runnable_blocks("console") + runnable_blocks("python")}
    assert {"operators.md", "sql.md", "recall.md", "semantic.md", "agents.md", "python-api.md"} <= pages


def shell_steps(block: str) -> list[tuple[str, list[str]]]:
    """(command, expected output lines) per `$ ` line; a trailing backslash continues a command."""
    steps: list[tuple[str, list[str]]] = []
    lines = iter(block.splitlines())
    for line in lines:
        if line.startswith("$ "):
            command = line[2:]
            while command.endswith("\\"):
                command = command[:-1] + next(lines)
            steps.append((command, []))
        elif steps:
            steps[-1][1].append(line)
    return steps


def as_python_module(command: str) -> str:
    cruxsql = f"{shlex.quote(sys.executable)} -m cruxsql"
    return re.sub(r"(^|&&|\|\||;|\|)(\s*)cruxsql\b", lambda m: m.group(1) + m.group(2) + cruxsql, command)


def example_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CRUXSQL_", "CORECRUXD_", "CRUX_"))}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return env


@pytest.mark.slow
@pytest.mark.parametrize("page, blocks", runnable_blocks("console"), ids=lambda v: getattr(v, "name", ""))
def test_console_examples_run(page, blocks, tmp_path):
    for block in blocks:
        for command, expected in shell_steps(block):
            result = subprocess.run(as_python_module(command), shell=True, cwd=tmp_path, env=example_env(),
                                    capture_output=True, text=True, timeout=120)
            where = f"{page.name}: $ {command}\n{result.stdout}{result.stderr}"
            wanted_status = 1 if expected and expected[0].startswith("Error:") else 0
            assert result.returncode == wanted_status, where
            if expected:
                got = IDS.sub("<id>", result.stdout + result.stderr).rstrip("\n").splitlines()
                assert got == [IDS.sub("<id>", line) for line in expected], where


@pytest.mark.parametrize("page, blocks", runnable_blocks("python"), ids=lambda v: getattr(v, "name", ""))
def test_python_examples_run(page, blocks, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in [k for k in os.environ if k.startswith(("CRUXSQL_", "CORECRUXD_", "CRUX_"))]:
        monkeypatch.delenv(name)
    namespace: dict = {"__name__": "__docs__"}
    for index, block in enumerate(blocks):
        exec(compile(block, f"{page.name} (python example {index + 1})", "exec"), namespace)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lowercase, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip()).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    return {slug(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", text, re.M)}


def relative_links(page: Path) -> list[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    text = re.sub(r"`[^`\n]*`", "", text)
    links = [a or b for a, b in LINK.findall(text)]
    return [link for link in links if not re.match(r"^[a-z][a-z0-9+.-]*:", link)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_relative_links_resolve(page):
    for link in relative_links(page):
        target, _, anchor = link.partition("#")
        path = (page.parent / target).resolve() if target else page
        assert path.exists(), f"{page.name}: {link} points at a missing file"
        if anchor and path.suffix == ".md":
            assert anchor in anchors(path), f"{page.name}: {link} names no heading of {path.name}"


def test_the_link_check_sees_broken_links(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Title\n\nSee [a](missing.md), [b](#title), [c](https://example.org) and `[d](x.md)`.\n"
                    "```\n[e](fenced.md)\n```\n")
    assert relative_links(page) == ["missing.md", "#title"]
    assert anchors(page) == {"title"}
    assert slug("Semantic retrieval: embeddings, dense re-rank") == "semantic-retrieval-embeddings-dense-re-rank"
    assert slug("`store()` latency") == "store-latency"
