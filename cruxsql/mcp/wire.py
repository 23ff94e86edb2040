"""The stdio wire's gate: every request with an id gets a JSON-RPC answer, whatever the line holds.

The SDK's stdio transport drops a line it cannot parse or validate (a lone surrogate, no `method`,
`"jsonrpc":"1.0"`, array `params`, nesting too deep for the parser): the caller waits forever. Here each
line is checked first, as JSON-RPC 2.0 and MCP define a message; a line that fails is answered here and
never reaches the SDK:

* not UTF-8, not JSON, NaN/Infinity -> -32700 (parse error);
* not an object (batches included: MCP has none), `jsonrpc` not "2.0", an id that is not a string or an
  integer, a request without a string `method` -> -32600 (invalid request);
* `params` not an object, a lone surrogate in any string, an integer beyond +-(2^53 - 1), nesting
  deeper than MAX_DEPTH -> -32602 (the tools check their arguments the same way on every transport).

The id is answered when it can be read, even from a line that cannot be parsed whole; otherwise null.
At the end of input the gate waits for the answers to the requests it let through, so a client that
writes its requests and closes stdin still gets every reply.
"""

from __future__ import annotations

import json
import re
from typing import Any, AsyncIterator, Optional

import anyio

from .pipes import FdLines, FdWriter

PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS = -32700, -32600, -32602
MAX_DEPTH = 64
MAX_INTEGER = 2**53 - 1   # the integers every JSON client reads exactly; beyond, a count or budget is a mistake
DRAIN_SECONDS = 60.0      # at end of input, how long to wait for answers still being computed
_ID = re.compile(rb'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")')
_RESPONSE = re.compile(r'\{"jsonrpc":"2\.0","id":(-?\d+|"(?:[^"\\]|\\.)*"),"(?:result|error)"')


class Refused(Exception):
    """A line the gate answers itself."""

    def __init__(self, code: int, message: str, request_id: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.request_id = request_id


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def value_problem(value: Any, where: str, depth: int = 0) -> Optional[str]:
    """What makes a JSON value unusable as an argument, naming where it is: a lone surrogate in a string
    or key, an integer outside +-MAX_INTEGER, or nesting deeper than MAX_DEPTH; None when it is usable."""
    if depth > MAX_DEPTH:
        return f"{where}: nested deeper than {MAX_DEPTH} levels"
    if isinstance(value, str):
        return _text_problem(value, where)
    if isinstance(value, int) and not isinstance(value, bool):
        if abs(value) > MAX_INTEGER:
            return f"{where}: {value} is out of range (integers must be within \u00b1{MAX_INTEGER})"
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            problem = _text_problem(key, f"{where} (a key)") or value_problem(item, f"{where}.{key}", depth + 1)
            if problem:
                return problem
    elif isinstance(value, list):
        for i, item in enumerate(value):
            problem = value_problem(item, f"{where}[{i}]", depth + 1)
            if problem:
                return problem
    return None


def _text_problem(text: str, where: str) -> Optional[str]:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"{where}: lone surrogate \\u{ord(text[exc.start]):04x} (strings must be valid Unicode)"
    return None


def _readable_id(line: bytes) -> Any:
    """The id of a line that cannot be parsed whole, when the text shows one."""
    found = _ID.search(line)
    if found is None:
        return None
    try:
        value = json.loads(found.group(1).decode("utf-8", "replace"))
    except ValueError:
        return None
    return value if isinstance(value, (int, str)) else None


def check_message(line: bytes) -> Optional[dict[str, Any]]:
    """The message of one line (None for a blank line), or Refused saying what is wrong with it."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Refused(PARSE_ERROR, f"invalid UTF-8 at byte {exc.start} of the line", _readable_id(line)) from None
    if not text.strip():
        return None
    try:
        message = json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise Refused(INVALID_PARAMS, "nested too deeply to parse", _readable_id(line)) from None
    except ValueError as exc:
        raise Refused(PARSE_ERROR, f"not JSON: {exc}", _readable_id(line)) from None
    if isinstance(message, list):
        raise Refused(INVALID_REQUEST, "batch requests are not supported (send one JSON object per line)")
    if not isinstance(message, dict):
        raise Refused(INVALID_REQUEST, "a message must be a JSON object")
    request_id = message.get("id")
    if "id" in message and (isinstance(request_id, bool) or not isinstance(request_id, (int, str))):
        raise Refused(INVALID_REQUEST, "id must be a string or an integer")
    if message.get("jsonrpc") != "2.0":
        raise Refused(INVALID_REQUEST, 'jsonrpc must be "2.0"', request_id)
    _check_text_fields(message, request_id)
    if "method" not in message:
        if "id" in message and ("result" in message or "error" in message):
            return message                   # a response to a request of ours
        raise Refused(INVALID_REQUEST, "missing method", request_id)
    if not isinstance(message["method"], str):
        raise Refused(INVALID_REQUEST, "method must be a string", request_id)
    if "params" in message and not isinstance(message["params"], dict):
        raise Refused(INVALID_PARAMS, "params must be an object", request_id)
    return message


def _check_text_fields(message: dict[str, Any], request_id: Any) -> None:
    for name in ("method", "params"):
        problem = value_problem(message.get(name), name)
        if problem:
            raise Refused(INVALID_PARAMS, problem, request_id)


def error_line(refused: Refused) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": refused.request_id,
                       "error": {"code": refused.code, "message": str(refused)}}, separators=(",", ":"),
                      ensure_ascii=False) + "\n"


def _key(request_id: Any) -> str:
    return json.dumps(request_id)


class RequestGate:
    """`lines` for the SDK (checked lines only) and `writer` (which notes each answer going out)."""

    def __init__(self, lines: FdLines, writer: FdWriter) -> None:
        self._lines = lines
        self._out = writer
        self.pending: set[str] = set()
        self.lines = _GatedLines(self)
        self.writer = _AnsweringWriter(self)

    async def next_line(self) -> str:
        async for raw in self._lines:
            try:
                message = check_message(raw)
            except Refused as refused:
                await self._out.write(error_line(refused))
                await self._out.flush()
                continue
            if message is None:
                continue
            if "method" in message and "id" in message:
                self.pending.add(_key(message["id"]))
            elif message.get("method") == "notifications/cancelled":
                self.pending.discard(_key((message.get("params") or {}).get("requestId")))
            return raw.decode("utf-8")
        with anyio.move_on_after(DRAIN_SECONDS):
            while self.pending:
                await anyio.sleep(0.01)
        raise StopAsyncIteration

    def answered(self, text: str) -> None:
        found = _RESPONSE.match(text)
        if found is not None:
            self.pending.discard(_key(json.loads(found.group(1))))


class _GatedLines:
    def __init__(self, gate: RequestGate) -> None:
        self.gate = gate

    def __aiter__(self) -> AsyncIterator[str]:
        return self

    async def __anext__(self) -> str:
        return await self.gate.next_line()


class _AnsweringWriter:
    """A request counts as answered once its answer has left for the pipe."""

    def __init__(self, gate: RequestGate) -> None:
        self.gate = gate
        self.unflushed: list[str] = []

    async def write(self, text: str) -> None:
        self.unflushed.append(text)
        await self.gate._out.write(text)

    async def flush(self) -> None:
        await self.gate._out.flush()
        done, self.unflushed = self.unflushed, []
        for text in done:
            self.gate.answered(text)
