"""MCP protocol overhead: `query_facts` through `cruxsql mcp` over stdio (the SDK's own client) against
the same call in-process, on a 100k-fact store; and what `tools/list` costs an agent per turn.

    python tools/bench/bench_mcp.py [--facts 100000] [--calls 300]
    python tools/bench/bench_mcp.py --store-vs-memory-server FOLDER --facts 20000 --calls 200 \
        [--compare a4f6f8d --compare a27032b]   # one write through MCP, beside the official memory server

Both paths run the same tool call (validation, recall, accounting); the stdio path adds JSON-RPC
framing, the SDK's dispatch on both sides and a pipe round trip. Calls are interleaved so machine
noise hits both alike. Goal: protocol overhead under 2 ms p50.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import anyio.abc
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.memory import create_client_server_memory_streams

sys.path.insert(0, str(Path(__file__).resolve().parent))
from commits import code_of_commit  # noqa: E402
from journal_gen import generate  # noqa: E402

import cruxsql  # noqa: E402
from cruxsql.mcp.identity import Identity  # noqa: E402
from cruxsql.mcp.server import CruxServer  # noqa: E402
from cruxsql.recall.tokens import estimate_tokens  # noqa: E402

QUERIES = [f"#{n}" for n in (1234, 45678, 7777, 31415, 9021, 60606, 24680, 13579)]  # selective: a few facts each


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def raw_call(proc: subprocess.Popen, message: dict) -> dict:
    """One JSON-RPC round trip on the server's pipes, with no client library at all."""
    proc.stdin.write(json.dumps(message).encode() + b"\n")
    proc.stdin.flush()
    return json.loads(proc.stdout.readline())


async def measure(local: CruxServer, params: StdioServerParameters, raw: subprocess.Popen,
                  calls: int) -> tuple[list[float], list[float], list[float], list[float], int]:
    """Interleave the same call in-process, through the SDK client, and as raw JSON-RPC lines (ms)."""
    in_process: list[float] = []
    over_sdk: list[float] = []
    over_raw: list[float] = []
    in_memory: list[float] = []
    server = local.server
    async with stdio_client(params) as streams, ClientSession(*streams[:2]) as session, \
            create_client_server_memory_streams() as (client_side, server_side), anyio.create_task_group() as tg:
        tg.start_soon(server.run, server_side[0], server_side[1], server.create_initialization_options())
        memory = await tg.start(_memory_session, client_side)
        await session.initialize()
        listed = await session.list_tools()
        wire_tokens = estimate_tokens(listed.model_dump(mode="json", by_alias=True, exclude_none=True))
        for i in range(calls + 20):
            arguments = {"query": QUERIES[i % len(QUERIES)], "top_k": 10}
            a = time.perf_counter()
            direct = local.call("query_facts", arguments)
            b = time.perf_counter()
            remote = await session.call_tool("query_facts", arguments)
            c = time.perf_counter()
            piped = raw_call(raw, {"jsonrpc": "2.0", "id": i + 1, "method": "tools/call",
                                   "params": {"name": "query_facts", "arguments": arguments}})
            d = time.perf_counter()
            await memory.call_tool("query_facts", arguments)
            e = time.perf_counter()
            assert direct.structured_content["rows"] == remote.structured_content["rows"] \
                == piped["result"]["structuredContent"]["rows"]
            if i >= 20:     # warm-up
                in_process.append((b - a) * 1000)
                over_sdk.append((c - b) * 1000)
                over_raw.append((d - c) * 1000)
                in_memory.append((e - d) * 1000)
        tg.cancel_scope.cancel()
    return in_process, over_sdk, over_raw, in_memory, wire_tokens


async def _memory_session(client_side: tuple, *, task_status: anyio.abc.TaskStatus) -> None:
    """An SDK ClientSession wired to the server's SDK dispatch in this process: the protocol's own work
    (JSON-RPC objects, both sessions, validation) without a pipe or a process switch."""
    async with ClientSession(*client_side) as session:
        await session.initialize()
        task_status.started(session)
        await anyio.sleep_forever()


def _memory_graph(journal: Path, path: Path) -> int:
    """The live facts of `journal` as the official memory server's file: an entity per fact entity, an
    observation `key: value` per fact (what it rewrites whole on every write). Returns observations."""
    entities: dict[str, list[str]] = {}
    for line in journal.open(encoding="utf-8"):
        event = json.loads(line)
        if event.get("op") == "store":
            fact = event["fact"]
            entities.setdefault(fact["entity"], []).append(f"{fact['key']}: {fact['value']}")
    for i in range(50):  # the entities the timed calls add to
        entities.setdefault(f"svc{i}", [])
    path.write_text("\n".join(json.dumps({"type": "entity", "name": name, "entityType": "service",
                                          "observations": observations})
                              for name, observations in entities.items()), encoding="utf-8")
    return sum(map(len, entities.values()))


async def _store_calls(servers: dict[str, StdioServerParameters], calls: int) -> dict[str, list[float]]:
    """`calls` single writes into each server over stdio through the SDK client, interleaved call by call
    (ms): `store_fact` into cruxsql, `add_observations` of the same text into the memory server."""
    from contextlib import AsyncExitStack

    took: dict[str, list[float]] = {name: [] for name in servers}
    async with AsyncExitStack() as stack:
        sessions = {}
        for name, params in servers.items():
            streams = await stack.enter_async_context(stdio_client(params, errlog=open(os.devnull, "w")))
            sessions[name] = await stack.enter_async_context(ClientSession(*streams[:2]))
            await sessions[name].initialize()
        for i in range(calls + 10):
            entity, key, value = f"svc{i % 50}", f"note{i}", f"deploy canary {i} rolled out to europe"
            for name, session in sessions.items():
                if name == "server-memory":
                    tool, arguments = "add_observations", {"observations": [
                        {"entityName": entity, "contents": [f"{key}: {value}"]}]}
                else:
                    tool, arguments = "store_fact", {"entity": entity, "key": key, "value": value}
                started = time.perf_counter()
                result = await session.call_tool(tool, arguments)
                if i >= 10:  # warm-up
                    took[name].append((time.perf_counter() - started) * 1000)
                assert not result.is_error, (name, result.content)
    return took


def report_store_vs_memory_server(folder: Path, facts: int, calls: int, commits: list[str]) -> None:
    """`--store-vs-memory-server`: one MCP write into cruxsql (this code and `commits`', each its own
    `cruxsql mcp` process on its own copy of a store of `facts` journal events) and into the official
    memory server holding the same facts, interleaved call by call."""
    entry = folder / "node_modules" / "@modelcontextprotocol" / "server-memory" / "dist" / "index.js"
    if not entry.is_file():
        raise SystemExit(f"{entry} not found: npm install @modelcontextprotocol/server-memory in {folder}")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CRUX", "CORECRUXD"))}
    with tempfile.TemporaryDirectory(prefix="bench-mcp-store-") as tmp:
        work = Path(tmp)
        generate(work / "facts.jsonl", facts, tenants=1)
        observations = _memory_graph(work / "facts.jsonl", work / "memory.jsonl")
        servers = {"server-memory": StdioServerParameters(
            command="node", args=[str(entry)], env={**env, "MEMORY_FILE_PATH": str(work / "memory.jsonl")})}
        here = Path(__file__).resolve().parents[2]
        for name, code in [("this checkout", here)] + [(c, code_of_commit(c, work)) for c in commits]:
            data = work / f"data-{len(servers)}"
            data.mkdir()
            shutil.copy(work / "facts.jsonl", data / "facts.jsonl")
            code_env = {**env, "PYTHONPATH": str(code)}
            # from `work`: `-c` and `-m` put the working directory first on sys.path, before PYTHONPATH
            used = subprocess.run([sys.executable, "-c", "import sys, cruxsql; s = cruxsql.open(sys.argv[1]); "
                                   "cruxsql.Recall(s).query_facts('warm'); s.close(); print(cruxsql.__file__)",
                                   str(data)], env=code_env, cwd=work, check=True, capture_output=True, text=True)
            assert Path(used.stdout.strip()).resolve().is_relative_to(code.resolve()), (used.stdout, code)
            servers[f"cruxsql {name}"] = StdioServerParameters(
                command=sys.executable, args=["-m", "cruxsql", "mcp", "--data-dir", str(data), "--agent", "bench"],
                env=code_env, cwd=work)
        took = anyio.run(_store_calls, servers, calls)
    print(f"one write through MCP over stdio (SDK client), {calls} calls each, interleaved (ms); cruxsql's store "
          f"of {facts:,} journal events, the memory server's file of the same {observations:,} facts; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print("| server | tool | p50 | p95 | p50 vs server-memory |")
    print("|---|---|---|---|---|")
    base = statistics.median(took["server-memory"])
    for name, xs in took.items():
        tool = "add_observations" if name == "server-memory" else "store_fact"
        print(f"| {name} | {tool} | {statistics.median(xs):.2f} | {pct(xs, 0.95):.2f} | "
              f"{statistics.median(xs) / base:.2f}x |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--facts", type=int, default=100_000)
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--store-vs-memory-server", type=Path, metavar="FOLDER",
                    help="only one write (store_fact) against the official memory server installed in FOLDER "
                         "(npm install @modelcontextprotocol/server-memory)")
    ap.add_argument("--compare", action="append", default=[], metavar="COMMIT",
                    help="with --store-vs-memory-server: COMMIT's cruxsql mcp too (repeatable)")
    args = ap.parse_args()
    if args.store_vs_memory_server:
        report_store_vs_memory_server(args.store_vs_memory_server, args.facts, args.calls, args.compare)
        return
    with tempfile.TemporaryDirectory(prefix="bench-mcp-") as tmp:
        data = Path(tmp)
        t0 = time.perf_counter()
        generate(data / "facts.jsonl", args.facts, tenants=1)
        with cruxsql.open(data) as store:
            cruxsql.Recall(store).query_facts("warm")      # builds the trigram index once
            live = store.counts()["live_facts"]
        print(f"store: {args.facts:,} journal events, {live:,} live facts (built in {time.perf_counter() - t0:.0f} s)")

        store = cruxsql.open(data)
        local = CruxServer(store, identity=Identity("bench", "tenant0"))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CRUX", "CORECRUXD"))}
        command = [sys.executable, "-m", "cruxsql", "mcp", "--data-dir", str(data), "--create", "--agent", "bench",
                   "--tenant", "tenant0"]
        raw = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        raw_call(raw, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}})
        raw.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        params = StdioServerParameters(command=command[0], args=command[1:], env=env)
        in_process, over_sdk, over_raw, in_memory, wire_tokens = anyio.run(measure, local, params, raw, args.calls)
        raw.kill()
        raw.wait()
        store.close()

    core = CruxServer(cruxsql.open(tempfile.mkdtemp(prefix="bench-mcp-list-")), tools="core")
    full = CruxServer(core.store, tools="all")
    print(f"\nquery_facts on {live:,} live facts, {args.calls} calls each, interleaved (ms); "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print("| path | p50 | p95 |")
    print("|---|---|---|")
    for name, xs in (("in-process (CruxServer.call)", in_process),
                     ("stdio, the SDK's ClientSession -> cruxsql mcp", over_sdk),
                     ("stdio, raw JSON-RPC lines -> cruxsql mcp", over_raw),
                     ("SDK client and server in one process (memory streams)", in_memory)):
        print(f"| {name} | {statistics.median(xs):.2f} | {pct(xs, 0.95):.2f} |")
    base50, base95 = statistics.median(in_process), pct(in_process, 0.95)
    for name, xs in (("SDK client over stdio", over_sdk), ("raw lines over stdio", over_raw),
                     ("SDK in memory, no pipe", in_memory)):
        overhead50 = statistics.median(xs) - base50
        print(f"protocol overhead, {name}: p50 {overhead50:.2f} ms, p95 {pct(xs, 0.95) - base95:.2f} ms; "
              f"ratio to in-process at p50 {statistics.median(xs) / base50:.2f}x "
              f"(goal < 2 ms p50: {'met' if overhead50 < 2 else 'NOT met'})")
    print("\ntools/list size (chars/4 of its compact JSON: what an agent pays per turn)")
    print(f"| --tools core ({len(core.listed)} tools) | {core.tools_list_tokens()} tokens |")
    print(f"| --tools all ({len(full.listed)} tools) | {full.tools_list_tokens()} tokens "
          f"(as received by the client: {wire_tokens}) |")
    core.store.close()


if __name__ == "__main__":
    main()
