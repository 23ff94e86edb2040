"""Start-up cost, side by side in one run: `cruxsql --help` against `sqlite-utils --help`, `cruxsql sql
"select 1"` against `sqlite-utils memory "select 1"`, and MCP spawn -> initialize -> `tools/list` of
`cruxsql mcp` against a bare server on the same MCP SDK (one tool) answering the same requests.

    python tools/bench/bench_startup.py [--rounds 7]

CPU time is each child's user+system time (resource.getrusage(RUSAGE_CHILDREN) around its wait), wall
time is spawn to exit. The pairs alternate within every round so machine noise hits both alike; the
table gives medians. Goals: the CLI rows at most 1.3x sqlite-utils' CPU, the MCP row at most 150 ms
more than the bare server.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

BARE_SERVER = '''
from mcp.server.mcpserver import MCPServer

server = MCPServer("bare")


@server.tool()
def echo(text: str) -> str:
    """Echo the text."""
    return text


server.run("stdio")
'''

REQUESTS = [
    {"jsonrpc": "2.0", "id": 1, "method": "initialize",
     "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
]


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_cli(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(cpu, wall) seconds of one command run to its end."""
    cpu, wall = children_cpu(), time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return children_cpu() - cpu, time.perf_counter() - wall


def run_mcp(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(cpu, wall) seconds from spawn to the `tools/list` answer, then the server is closed (its
    shutdown CPU counts too: it is small and the same for both)."""
    cpu, wall = children_cpu(), time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdin is not None and proc.stdout is not None
    for request in REQUESTS:
        proc.stdin.write((json.dumps(request) + "\n").encode())
        proc.stdin.flush()
        if "id" in request:
            answer = json.loads(proc.stdout.readline())
            assert answer.get("id") == request["id"] and "result" in answer, answer
    listed = time.perf_counter() - wall
    proc.stdin.close()
    proc.wait(30)
    return children_cpu() - cpu, listed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    sqlite_utils = shutil.which("sqlite-utils")
    if sqlite_utils is None:
        print("sqlite-utils is not installed", file=sys.stderr)
        return 1
    root = Path(tempfile.mkdtemp(prefix="bench-startup-"))
    store, bare = root / "store", root / "bare_server.py"
    bare.write_text(BARE_SERVER)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CRUX", "CORECRUXD"))}
    env["XDG_CONFIG_HOME"] = str(root / "config")
    crux = [sys.executable, "-m", "cruxsql"]
    subprocess.run(crux + ["--data-dir", str(store), "init"], env=env, check=True, stdout=subprocess.DEVNULL)
    pairs: list[tuple[str, Callable[[], tuple[float, float]], Callable[[], tuple[float, float]]]] = [
        ("`--help`", lambda: run_cli(crux + ["--help"], env), lambda: run_cli([sqlite_utils, "--help"], env)),
        ('`sql "select 1"` / `memory "select 1"`', lambda: run_cli(crux + ["--data-dir", str(store), "sql", "select 1"], env),
         lambda: run_cli([sqlite_utils, "memory", "select 1"], env)),
        ("MCP spawn -> tools/list", lambda: run_mcp(crux + ["mcp", "--data-dir", str(store)], env),
         lambda: run_mcp([sys.executable, str(bare)], env)),
    ]
    results: dict[str, tuple[list[tuple[float, float]], list[tuple[float, float]]]] = {p[0]: ([], []) for p in pairs}
    for round_no in range(args.rounds):
        for name, ours, theirs in pairs:
            first, second = (ours, theirs) if round_no % 2 == 0 else (theirs, ours)
            a, b = first(), second()
            results[name][0].append(a if first is ours else b)
            results[name][1].append(b if first is ours else a)
    print(f"{args.rounds} alternating rounds, medians; baseline = sqlite-utils (CLI rows) or a bare MCP SDK server\n")
    print("| start-up | cruxsql CPU | baseline CPU | ratio | difference | cruxsql wall | baseline wall |")
    print("|---|---|---|---|---|---|---|")
    for name, (ours_runs, theirs_runs) in results.items():
        ours_cpu, theirs_cpu = (statistics.median(r[0] for r in runs) for runs in (ours_runs, theirs_runs))
        ours_wall, theirs_wall = (statistics.median(r[1] for r in runs) for runs in (ours_runs, theirs_runs))
        print(f"| {name} | {ours_cpu * 1000:.0f} ms | {theirs_cpu * 1000:.0f} ms | {ours_cpu / theirs_cpu:.2f}x | "
              f"{(ours_cpu - theirs_cpu) * 1000:+.0f} ms | {ours_wall * 1000:.0f} ms | {theirs_wall * 1000:.0f} ms |")
    shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
