"""MCP protocol overhead: `query_facts` through `cruxsql mcp` over stdio (the SDK's own client) against
the same call in-process, on a 100k-fact store; and what `tools/list` costs an agent per turn.

    python tools/bench/bench_mcp.py [--facts 100000] [--calls 300]

Both paths run the same tool call (validation, recall, accounting); the stdio path adds JSON-RPC
framing, the SDK's dispatch on both sides and a pipe round trip. Calls are interleaved so machine
noise hits both alike. Goal: protocol overhead under 2 ms p50.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from anyio.from_thread import start_blocking_portal
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

sys.path.insert(0, str(Path(__file__).resolve().parent))
from journal_gen import generate  # noqa: E402

import cruxsql  # noqa: E402
from cruxsql.mcp.identity import Identity  # noqa: E402
from cruxsql.mcp.server import CruxServer  # noqa: E402
from cruxsql.recall.tokens import estimate_tokens  # noqa: E402

QUERIES = [f"#{n}" for n in (1234, 45678, 7777, 31415, 9021, 60606, 24680, 13579)]  # selective: a few facts each


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--facts", type=int, default=100_000)
    ap.add_argument("--calls", type=int, default=300)
    args = ap.parse_args()
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
        params = StdioServerParameters(command=sys.executable, env=env, args=[
            "-m", "cruxsql", "mcp", "--data-dir", str(data), "--agent", "bench", "--tenant", "tenant0"])
        with start_blocking_portal() as portal, \
                portal.wrap_async_context_manager(stdio_client(params)) as streams, \
                portal.wrap_async_context_manager(ClientSession(*streams[:2])) as session:
            portal.call(session.initialize)
            listed = portal.call(session.list_tools)
            wire_tokens = estimate_tokens(listed.model_dump(mode="json", by_alias=True, exclude_none=True))
            in_process: list[float] = []
            over_stdio: list[float] = []
            for i in range(args.calls + 20):
                arguments = {"query": QUERIES[i % len(QUERIES)], "top_k": 10}
                a = time.perf_counter()
                direct = local.call("query_facts", arguments)
                b = time.perf_counter()
                remote = portal.call(session.call_tool, "query_facts", arguments)
                c = time.perf_counter()
                assert direct.structured_content["rows"] == remote.structured_content["rows"]
                if i >= 20:     # warm-up
                    in_process.append((b - a) * 1000)
                    over_stdio.append((c - b) * 1000)
        store.close()

    core = CruxServer(cruxsql.open(tempfile.mkdtemp(prefix="bench-mcp-list-")), tools="core")
    full = CruxServer(core.store, tools="all")
    print(f"\nquery_facts on {live:,} live facts, {args.calls} calls each, interleaved (ms); "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print("| path | p50 | p95 |")
    print("|---|---|---|")
    for name, xs in (("in-process (CruxServer.call)", in_process), ("stdio, SDK client -> cruxsql mcp", over_stdio)):
        print(f"| {name} | {statistics.median(xs):.2f} | {pct(xs, 0.95):.2f} |")
    overhead50 = statistics.median(over_stdio) - statistics.median(in_process)
    overhead95 = pct(over_stdio, 0.95) - pct(in_process, 0.95)
    print(f"| protocol overhead (stdio - in-process) | {overhead50:.2f} | {overhead95:.2f} |")
    print(f"ratio stdio / in-process at p50: {statistics.median(over_stdio) / statistics.median(in_process):.2f}x"
          f"  (goal: overhead < 2 ms p50: {'met' if overhead50 < 2 else 'NOT met'})")
    print("\ntools/list size (chars/4 of its compact JSON: what an agent pays per turn)")
    print(f"| --tools core ({len(core.listed)} tools) | {core.tools_list_tokens()} tokens |")
    print(f"| --tools all ({len(full.listed)} tools) | {full.tools_list_tokens()} tokens "
          f"(as received by the client: {wire_tokens}) |")
    core.store.close()


if __name__ == "__main__":
    main()
