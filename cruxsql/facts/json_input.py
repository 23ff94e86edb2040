"""JSON an operator feeds cruxsql: one reader, one error message, for every input command.

`store-batch`, `import mcp-memory` and `documents ingest -` read JSON Lines through `read_lines`;
`import mem0` and a `.json` document read one JSON text through `read_document`. Either takes bytes
(decoded here, so a byte that is not UTF-8 is named by its line) or text. Whatever the input, a problem
is one InvalidInput naming where it is (`SOURCE line N`) and what is wrong, never another exception:

* not UTF-8 (the offset of the first bad byte in the line);
* not JSON (the decoder's reason and column); `NaN`, `Infinity` and `-Infinity` are not JSON (serde_json
  refuses them too);
* a number of more digits than Python converts (`sys.get_int_max_str_digits()`, 4300 by default);
* arrays or objects nested deeper than Python's decoder goes (near its recursion limit, 1000 by default).

Blank lines are skipped and counted; lines split at `\\n` only (a JSON string may hold U+2028).
"""

from __future__ import annotations

import json
import sys
from typing import Any, Iterable, Iterator, NamedTuple, Union

from ..errors import InvalidInput

Text = Union[str, bytes]


class InputLine(NamedTuple):
    """One decoded line: its number, where it is (`SOURCE line N`, for the caller's own errors), its value."""

    number: int
    where: str
    value: Any


class NotJson(ValueError):
    """What is wrong with a JSON text (`not JSON (...)` or `not UTF-8 text (...)`), without where it is."""


def _not_a_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _text(data: Text) -> str:
    if isinstance(data, str):
        return data
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NotJson(f"not UTF-8 text (invalid byte at offset {exc.start})") from None


def _problem(exc: ValueError) -> str:
    if isinstance(exc, json.JSONDecodeError):
        place = f"line {exc.lineno} column {exc.colno}" if exc.lineno > 1 else f"column {exc.colno}"
        return f"{exc.msg} at {place}"
    if "integer string conversion" in str(exc):
        return f"a number of more than {sys.get_int_max_str_digits()} digits"
    return str(exc)


def decode(data: Text) -> Any:
    """The one JSON value of `data`; NotJson for anything else."""
    text = _text(data)
    try:
        return json.loads(text, parse_constant=_not_a_constant)
    except ValueError as exc:
        raise NotJson(f"not JSON ({_problem(exc)})") from None
    except RecursionError:
        raise NotJson("not JSON cruxsql can read (arrays or objects nested too deeply)") from None


def read_document(data: Text, where: str) -> Any:
    """The one JSON value of `data`; InvalidInput `WHERE: what is wrong` for anything else."""
    try:
        return decode(data)
    except NotJson as exc:
        raise InvalidInput(f"{where}: {exc}") from None


def _without_line_end(line: Text) -> Text:
    return line.rstrip(b"\r\n") if isinstance(line, bytes) else line.rstrip("\r\n")


def read_lines(lines: Iterable[Text], source: str) -> Iterator[InputLine]:
    """Every non-blank line of `lines` (JSON Lines from `source`) decoded, in order."""
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{source} line {number}"
        yield InputLine(number, where, read_document(_without_line_end(line), where))


def split_lines(data: bytes) -> list[bytes]:
    """`data` split at `\\n` only, as JSON Lines are (`str.splitlines` would also split a JSON string at U+2028)."""
    return data.split(b"\n")
