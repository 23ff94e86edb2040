"""A protocol that always answers: fuzzed tool arguments in process, and raw JSON-RPC lines against the
real `cruxsql mcp` stdio process.

In process, hypothesis draws arguments from every tool's input schema, mixed with values of the wrong
type, out-of-range integers, lone surrogates and unknown names: each call must come back as one
CallToolResult, an error as one line, structured content only with a declared output schema it
conforms to, and nothing may be logged as an internal failure. Over stdio,
hand-written malformed lines (and well-formed ones between them) must each get exactly one JSON-RPC
answer with the expected code, and stderr must stay free of tracebacks.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cruxsql.facts.store import Store
from cruxsql.mcp.identity import Identity
from cruxsql.mcp.registry import discover
from cruxsql.mcp.server import CruxServer

from support.mcp_clients import server_env
from support.journal_files import journal_bytes

pytestmark = pytest.mark.slow

SPECS = discover()
ODD_TEXT = st.sampled_from(["", " ", "\ud800", "x\udfffy", "\x00", "é" * 3, "a" * 5000, "f_" + "0" * 32, "../../etc",
                            "__agent::someone::x", "@h:deadbeef", "-1", "null"])
ODD_INT = st.sampled_from([0, -1, 1, 2**31, 2**53 - 1, 2**53, 2**63, -(2**63) - 1, 10**30])
ANY_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
                        max_leaves=8)


def value_for(prop: dict[str, Any]) -> st.SearchStrategy:
    """Values of the property's type (enums included), or now and then anything at all."""
    kind = prop.get("type")
    if "enum" in prop:
        typed = st.sampled_from(prop["enum"]) | st.text(max_size=6)
    elif kind == "string":
        typed = st.text(max_size=20) | ODD_TEXT
    elif kind == "integer":
        typed = st.integers(-5, 5000) | ODD_INT
    elif kind == "number":
        typed = st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from([-0.5, 0.0, 1.0, 1.5, 1e308])
    elif kind == "boolean":
        typed = st.booleans()
    elif kind == "array":
        typed = st.lists(st.text(max_size=12) | ODD_TEXT, max_size=3)
    elif kind == "object":
        typed = st.fixed_dictionaries({"type": st.sampled_from(["entity", "key", "prefix", "bogus"]),
                                       "value": st.text(max_size=8)}) | ANY_JSON
    else:
        typed = ANY_JSON
    return st.one_of(typed, typed, typed, ANY_JSON)


@st.composite
def tool_call(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    name = draw(st.sampled_from(sorted(SPECS)))
    props = SPECS[name].input_schema["properties"]
    required = set(SPECS[name].input_schema.get("required", []))
    args = {}
    for arg, prop in props.items():
        if arg in required or draw(st.booleans()):
            args[arg] = draw(value_for(prop))
    if draw(st.integers(0, 9)) == 0:
        args[draw(st.text(min_size=1, max_size=6))] = draw(ANY_JSON)
    return name, args


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz")
    store = Store(root)
    store.store("svc", "owner", "team blue", actor="alice")
    store.store("notes", "plan", "alice private", private=True, agent="alice")
    yield CruxServer(store, identity=Identity("bob"))
    store.close()


class _Failures(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(call=tool_call())
def test_every_fuzzed_call_answers_in_one_line(server: CruxServer, call: tuple[str, dict[str, Any]]) -> None:
    name, args = call
    failures = _Failures()
    logging.getLogger("cruxsql").addHandler(failures)
    try:
        result = server.call(name, args)
    finally:
        logging.getLogger("cruxsql").removeHandler(failures)
    text = result.content[0].text
    assert not failures.records, (name, args, failures.records[0].getMessage())
    assert not text.startswith("internal error"), (name, args, text)
    if result.is_error:
        assert text and "\n" not in text, (name, args, text)
    elif result.structured_content is not None:          # structured content comes with a declared shape
        schema = SPECS[name].output_schema
        assert schema is not None, f"{name} returns structured content but declares no output schema"
        jsonschema.validate(result.structured_content, schema)
    json.dumps(result.model_dump(mode="json", by_alias=True, exclude_none=True))   # the answer serialises


INIT = {"jsonrpc": "2.0", "id": "init", "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "fuzz", "version": "1"}}}
# (line, the id it must be answered under, the error code it must get; None = a result)
LINES: list[tuple[bytes, Any, Any]] = [
    (b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"query_facts","arguments":{"query":"\\ud800"}}}',
     1, -32602),
    (b'{"jsonrpc":"2.0","id":2}', 2, -32600),
    (b'{"jsonrpc":"1.0","id":3,"method":"tools/list"}', 3, -32600),
    (b'{"jsonrpc":"2.0","id":4,"method":"tools/list","params":[]}', 4, -32602),
    (b'{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"query_facts","arguments":'
     b'{"top_k":9223372036854775808}}}', 5, -32602),
    (b'{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"store_fact","arguments":'
     b'{"entity":"e","key":"k","value":"\xff\xfe"}}}', 6, -32700),
    (b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"query_facts","arguments":' + b"[" * 100000
     + b"]" * 100000 + b"}}", 7, -32602),
    (b'{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"query_facts","arguments":'
     b'{"token_budget":99999999999999999999999}}}', 8, -32602),
    (b'{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"store_fact","arguments":'
     b'{"entity":"e\\udc00","key":"k","value":"v"}}}', 9, -32602),
    (b'{"jsonrpc":"2.0","id":10,"method":7}', 10, -32600),
    (b'{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"query_facts","arguments":{"top_k":NaN}}}',
     11, -32700),
    (b'{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"query_facts","arguments":{"query":"x",',
     12, -32700),
    (b'{"jsonrpc":"2.0","id":13,"method":"nope"}', 13, -32601),
    (b'{"jsonrpc":"2.0","id":14,"method":"tools/call","params":{"name":"query_facts","arguments":'
     b'{"query":"team","contract":"v9"}}}', 14, None),
    (b'{"jsonrpc":"2.0","id":15,"method":"tools/call","params":{"name":"query_facts","arguments":{"query":"team"}}}',
     15, None),
    (b'{"jsonrpc":"2.0","id":16,"method":"ping"}', 16, None),
    (b'{"jsonrpc":"2.0","id":"s\\u00e9","method":"ping"}', "s\u00e9", None),
    (b'{"jsonrpc":"2.0","id":17,"method":"tools/call","params":{"name":"store_fact","arguments":'
     b'{"entity":"e","key":"k","value":"v","confidence":"high"}}}', 17, None),
    (b'{"jsonrpc":"2.0","id":18,"method":"tools/call","params":{"name":"query_facts","arguments":"x"}}', 18, -32602),
    (b'{"jsonrpc":"2.0","id":19,"method":"tools/call","params":{"arguments":{}}}', 19, -32602),
    (b'{"jsonrpc":"2.0","id":20,"method":"tools/call","params":{"name":"query_facts","arguments":'
     b'{"query":"' + "é".encode() * 3 + b'","\\ud83d\\ude00":1}}}', 20, None),
    (b'{"jsonrpc":"2.0","id":[1],"method":"ping"}', None, -32600),
    (b'{"jsonrpc":"2.0","id":true,"method":"ping"}', None, -32600),
    (b"[]", None, -32600),
    (b"[{}, {}]", None, -32600),
    (b"not json at all", None, -32700),
    (b"\xc3\x28", None, -32700),
    (b"42", None, -32600),
    (b"   ", "skip", None),
]


def test_raw_lines_each_get_one_answer_and_no_traceback(tmp_path: Path) -> None:
    data_dir = tmp_path / "store"
    subprocess.run([sys.executable, "-m", "cruxsql", "init", "--data-dir", str(data_dir)], check=True,
                   capture_output=True, env=server_env())
    wire = [json.dumps(INIT).encode(), b'{"jsonrpc":"2.0","method":"notifications/initialized"}']
    wire += [line for line, _, _ in LINES]
    proc = subprocess.run([sys.executable, "-m", "cruxsql", "mcp", "--data-dir", str(data_dir), "--agent", "a"],
                          input=b"\n".join(wire) + b"\n", capture_output=True, timeout=120, env=server_env())
    assert proc.returncode == 0
    assert proc.stderr.decode() == ""
    answers = [json.loads(line) for line in proc.stdout.decode("utf-8").splitlines()]
    by_id: dict[str, list[dict[str, Any]]] = {}
    for answer in answers:
        by_id.setdefault(json.dumps(answer["id"]), []).append(answer)
    assert by_id.pop(json.dumps("init"))[0]["result"]["serverInfo"]["name"] == "cruxsql"
    expected_null = [code for _, request_id, code in LINES if request_id is None]
    assert sorted(a["error"]["code"] for a in by_id.pop("null", [])) == sorted(expected_null)
    for line, request_id, code in LINES:
        if request_id in (None, "skip"):
            continue
        got = by_id.pop(json.dumps(request_id))
        assert len(got) == 1, (line[:80], got)
        if code is None:
            assert "result" in got[0], (line[:80], got[0])
        else:
            assert got[0]["error"]["code"] == code, (line[:80], got[0])
            assert "\n" not in got[0]["error"]["message"]
    assert by_id == {}
    results = {a["id"]: a["result"] for a in answers if "result" in a}
    assert results[14]["isError"] and "'v9' is not one of" in results[14]["content"][0]["text"]
    assert results[17]["isError"] and "`confidence`" in results[17]["content"][0]["text"]
    journal = journal_bytes(data_dir, missing_ok=True)
    assert b"\xef\xbf\xbd" not in journal and b"\\ufffd" not in journal     # nothing stored as U+FFFD
