"""What serving a ctx_* verb as an MCP tool costs over calling the workspace directly, on this repository.

    python tools/bench/bench_mcp_workspace.py [--calls 60] [--root .]

Baseline: `Workspace.call` on a workspace kept open. Measured: `CruxServer.call` of the same tool in the
same process (argument validation, the workspace opened per call, accounting). Calls are interleaved so
machine noise hits both alike; stdio framing is measured by bench_mcp.py and is not repeated here.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from cruxsql.facts.store import Store
from cruxsql.mcp.identity import Identity
from cruxsql.mcp.server import CruxServer
from cruxsql.workspace import Workspace

CALLS = [
    ("ctx_read", {"path": "cruxsql/facts/store.py", "mode": "signatures"}),
    ("ctx_search", {"query": "refresh"}),
    ("ctx_impact", {"target": "cruxsql/facts/codec.py"}),
]


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    value = fn()
    return (time.perf_counter() - start) * 1000, value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=60)
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[2])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(tmp)
        store = Store(data_dir)
        with Workspace(data_dir) as ws:
            report = ws.index(args.root)
            server = CruxServer(store, identity=Identity("bench", "default"))
            print(f"{args.root}: {report.files} files indexed; {args.calls} calls per path, interleaved")
            print(f"{'verb':12} {'direct p50 ms (baseline)':>26} {'MCP tool p50 ms':>17} {'ratio':>7}")
            for verb, arguments in CALLS:
                direct, tool = [], []
                for n in range(args.calls):
                    session = f"direct-{n % 4}"          # repeats rotate so nudges hit both paths alike
                    direct.append(timed(lambda: ws.call(session, verb, **arguments))[0])
                    ms, result = timed(lambda: server.call(verb, arguments))
                    assert not result.is_error, result.content[0].text
                    tool.append(ms)
                d, t = statistics.median(direct), statistics.median(tool)
                print(f"{verb:12} {d:26.2f} {t:17.2f} {t / d:6.2f}x")
        store.close()


if __name__ == "__main__":
    sys.exit(main())
