"""The MCP server as a raw JSON-RPC stdio process: malformed input, and SIGKILL while storing facts."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Optional

import pytest

import cruxsql
from cruxsql.facts.faults import CRASH_ENV
from support.mcp_clients import CLI, server_env

pytestmark = pytest.mark.slow


class RawServer:
    """`cruxsql mcp` on pipes, spoken to line by line."""

    def __init__(self, data_dir: Path, env: Optional[dict[str, str]] = None) -> None:
        self.proc = subprocess.Popen(CLI + ["mcp", "--data-dir", str(data_dir), "--create", "--agent", "kim"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     env=server_env(env))
        self.send({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                   "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                              "clientInfo": {"name": "raw", "version": "0"}}})
        assert self.read()["id"] == 0
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message: Any) -> None:
        self.write((message if isinstance(message, bytes) else json.dumps(message).encode()) + b"\n")

    def write(self, data: bytes) -> None:
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def read(self) -> dict:
        line = self.proc.stdout.readline()
        assert line, "server closed stdout"
        return json.loads(line)

    def store(self, call_id: int, value: str) -> None:
        self.send({"jsonrpc": "2.0", "id": call_id, "method": "tools/call",
                   "params": {"name": "store_fact", "arguments": {"entity": "log", "key": f"k{call_id % 5}",
                                                                  "value": value}}})


def _assert_consistent(data_dir: Path, acknowledged: list[str]) -> None:
    with cruxsql.open(data_dir) as store:
        present = {r[0] for r in store.db.execute("SELECT fact_id FROM facts")}
        assert [f for f in acknowledged if f not in present] == []
        report = store.verify()
        assert report.view_matches_replay, report.differences
        assert not report.corrupt_lines


def test_malformed_json_rpc_gets_an_error_and_the_server_keeps_serving(tmp_path: Path) -> None:
    server = RawServer(tmp_path)
    try:
        server.write(b"this is not json\n")        # a parse error, answered with id null
        assert server.read() == {"jsonrpc": "2.0", "id": None, "error": {
            "code": -32700, "message": "not JSON: Expecting value: line 1 column 1 (char 0)"}}
        server.write(b'{"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"name": 5}}\n')
        assert server.read()["error"]["code"] == -32602
        server.send({"jsonrpc": "2.0", "id": 7, "method": "no/such/method"})
        assert server.read()["error"]["code"] == -32601
        server.send({"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"arguments": {}}})
        assert server.read()["error"]["code"] == -32602
        server.store(9, "still here")
        reply = server.read()
        assert reply["id"] == 9 and reply["result"]["structuredContent"]["version"] == 1
    finally:
        server.proc.kill()
        server.proc.wait()


def test_sigkill_during_store_fact_loses_no_acknowledged_write(tmp_path: Path) -> None:
    rng = random.Random(12)
    acknowledged: list[str] = []
    for round_no in range(3):
        server = RawServer(tmp_path)
        replies: list[dict] = []

        def reader() -> None:
            for line in server.proc.stdout:
                replies.append(json.loads(line))

        thread = threading.Thread(target=reader, daemon=True)
        thread.start()
        for i in range(2000):   # pipelined: most are in flight when the kill lands
            server.store(round_no * 10000 + i, f"entry {round_no}/{i} ünï")
        deadline = time.monotonic() + 30
        while len(replies) < rng.randrange(5, 200) and time.monotonic() < deadline:
            time.sleep(0.005)
        server.proc.send_signal(signal.SIGKILL)
        server.proc.wait()
        thread.join(5)
        done = [r["result"]["structuredContent"]["fact_id"] for r in replies if "result" in r]
        assert 0 < len(done) < 2000, len(done)
        acknowledged += done
    _assert_consistent(tmp_path, acknowledged)


def test_a_crash_between_the_journal_append_and_the_view_is_repaired_on_open(tmp_path: Path) -> None:
    server = RawServer(tmp_path, {CRASH_ENV: "store-after-append"})
    server.store(1, "durable before the view saw it")
    assert server.proc.wait(30) == -signal.SIGKILL
    assert server.proc.stdout.read() == b""            # never acknowledged
    with cruxsql.open(tmp_path) as store:
        (fact,) = store.history("log", "k1")
        assert fact.value == "durable before the view saw it"
    _assert_consistent(tmp_path, [])
    assert os.path.exists(tmp_path / "facts.jsonl")


def test_stdout_to_a_regular_file_is_served(tmp_path: Path) -> None:
    """Not a pipe: a regular file never blocks, and the event-loop transport writes to it all the same."""
    out_path = tmp_path / "replies.jsonl"
    with open(out_path, "wb") as out:
        proc = subprocess.Popen(CLI + ["mcp", "--data-dir", str(tmp_path / "data"), "--create"], stdin=subprocess.PIPE,
                                stdout=out, stderr=subprocess.DEVNULL, env=server_env())
    for message in [
        {"jsonrpc": "2.0", "id": 0, "method": "initialize",
         "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "f", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
         "params": {"name": "store_fact", "arguments": {"entity": "a", "key": "b", "value": "to a file"}}},
    ]:
        proc.stdin.write(json.dumps(message).encode() + b"\n")
        proc.stdin.flush()
    deadline = time.monotonic() + 30
    while out_path.read_bytes().count(b"\n") < 2 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.02)
    proc.stdin.close()
    proc.wait(30)
    replies = [json.loads(line) for line in out_path.read_bytes().splitlines()]
    assert [r["id"] for r in replies] == [0, 1]
    assert replies[1]["result"]["structuredContent"]["version"] == 1
