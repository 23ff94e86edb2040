"""One JSON reader for every input command (`cruxsql/facts/json_input.py`): whatever a line holds, the
command ends with one `Error: SOURCE line N: what is wrong` line, exit 1, nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from cruxsql.cli import main
from cruxsql.errors import InvalidInput
from cruxsql.facts import json_input

from support.cli_process import run_cruxsql
from support.journal_files import journal_bytes

GOOD = b'{"entity": "e", "key": "k", "value": "v"}\n'
BAD_LINES = {
    "5,000-digit number": (b'{"entity": "e", "key": "k", "value": "v", "confidence": ' + b"9" * 5000 + b"}",
                           "not JSON (a number of more than 4300 digits)"),
    "100,000-deep array": (b"[" * 100_000 + b"]" * 100_000,
                           "not JSON cruxsql can read (arrays or objects nested too deeply)"),
    "a byte that is not UTF-8": (b'{"entity": "e", "key": "k", "value": "\xff"}',
                                 "not UTF-8 text (invalid byte at offset 38)"),
    "NaN": (b'{"entity": "e", "key": "k", "value": "v", "confidence": NaN}', "not JSON (NaN is not JSON)"),
    "a cut line": (b'{"entity": "e", "key": ', "not JSON (Expecting value at column 24)"),
}
# every command that reads JSON Lines, and how it names its input
COMMANDS = {  # (arguments, the input's name in errors, a good first line)
    "store-batch FILE": (lambda path: ("store-batch", str(path)), lambda path: str(path), GOOD),
    "store-batch -": (lambda path: ("store-batch", "-"), lambda path: "stdin", GOOD),
    "import mcp-memory": (lambda path: ("import", "mcp-memory", str(path)), lambda path: path.name,
                          b'{"type": "entity", "name": "e", "entityType": "t"}\n'),
    "ingest -": (lambda path: ("ingest", "-"), lambda path: "stdin", b'{"doc_id": "d", "text": "x"}\n'),
}


@pytest.mark.parametrize("bad", sorted(BAD_LINES))
def test_the_reader_names_the_line_and_what_is_wrong(bad: str) -> None:
    line, problem = BAD_LINES[bad]
    with pytest.raises(InvalidInput) as caught:
        list(json_input.read_lines([GOOD, b"\n", line], "in.jsonl"))
    assert str(caught.value) == f"in.jsonl line 3: {problem}"


def test_the_reader_decodes_text_and_bytes_alike_and_skips_blank_lines() -> None:
    lines = ['{"a": 1}\n', "  \n", '["x\u2028y"]\n']
    assert list(json_input.read_lines(lines, "s")) == [(1, "s line 1", {"a": 1}), (3, "s line 3", ["x\u2028y"])]
    assert list(json_input.read_lines([x.encode() for x in lines], "s")) == list(json_input.read_lines(lines, "s"))
    assert json_input.split_lines('["x\u2028y"]\n{}'.encode()) == ['["x\u2028y"]'.encode(), b"{}"]
    with pytest.raises(InvalidInput, match=r"^doc.json: not JSON \(Expecting value at line 2 column 1\)$"):
        json_input.read_document("[1,\n", "doc.json")


def _run_on(data_dir: Path, args: tuple[str, ...], path: Path) -> Result:
    """`cruxsql ARGS` in this process, with `path` as its stdin too (bytes as they are: a `-` command reads them)."""
    return CliRunner().invoke(main, [*args, "--data-dir", str(data_dir)], input=path.read_bytes(),
                              catch_exceptions=False)


@pytest.mark.slow
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_input_command_names_the_line_and_what_is_wrong(tmp_path: Path, command: str) -> None:
    args, source, good = COMMANDS[command]
    data_dir = tmp_path / "data"
    path = tmp_path / "input.jsonl"
    assert run_cruxsql(data_dir, "store", "seed", "k", "v").returncode == 0
    journal = journal_bytes(data_dir)
    for bad, (line, problem) in BAD_LINES.items():
        path.write_bytes(good + line + b"\n")
        result = _run_on(data_dir, args(path), path)
        assert (result.exit_code, result.stderr) == (1, f"Error: {source(path)} line 2: {problem}\n"), bad
        assert journal_bytes(data_dir) == journal
    if command.startswith("store-batch"):  # the caller's own checks name the reader's line
        path.write_bytes(GOOD + b"\n" + json.dumps({"entity": "", "key": "k", "value": "v"}).encode() + b"\n")
        result = _run_on(data_dir, args(path), path)
        assert result.stderr == f"Error: {source(path)} line 3: entity must not be empty\n"


@pytest.mark.slow
def test_the_real_command_prints_no_traceback(tmp_path: Path) -> None:
    """The repro: `cruxsql store-batch` of a 5,000-digit number and of a 100,000-deep array, a real process."""
    path = tmp_path / "input.jsonl"
    for bad in ("5,000-digit number", "100,000-deep array"):
        line, problem = BAD_LINES[bad]
        path.write_bytes(GOOD + line + b"\n")
        result = run_cruxsql(tmp_path / "data", "store-batch", str(path))
        assert (result.returncode, result.stderr) == (1, f"Error: {path} line 2: {problem}\n")
    assert not (tmp_path / "data" / "facts.jsonl").exists()
