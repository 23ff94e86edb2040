"""Console benchmark on a large view: time to first page, canned queries and dashboard queries, and
what a console querying in a loop does to `store()`.

    python tools/bench/bench_console.py                    # ~1,000,000 facts (first run builds the view: minutes)
    python tools/bench/bench_console.py --events 200000    # quicker

Baselines, measured in the same run: plain `datasette serve` of the same file (no cruxsql metadata or
plugin) for the first page; the same SQL through Python's sqlite3 in this process, without HTTP or
Datasette, for each query; `store()` with no console running for the store latency. The built view is
kept under tools/bench/out/console-<events>/ and reused by the next run.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from journal_gen import generate  # noqa: E402

import cruxsql  # noqa: E402
from cruxsql.console.canned import view_queries  # noqa: E402
from cruxsql.console.dashboards import DASHBOARD, dashboards  # noqa: E402
from cruxsql.console.plugin import ConsolePlugin, columns_of  # noqa: E402
from cruxsql.facts import view_file  # noqa: E402
from cruxsql.facts.store import StoreRequest  # noqa: E402

OUT = Path(__file__).resolve().parent / "out"
PARAMS = {"live_facts_of_tenant": {"tenant": "tenant1"}, "actor_writes": {"actor": "ops", "since": "", "until": ""},
          "retention_candidates": {"days": "30", "tenant": ""}, "stale_facts": {"horizon_class": ""}}


ACTOR_FACTS = 2000
DUPLICATE_ENTITIES = 1000  # each with three facts equal once lowercased and trimmed: 3 duplicate pairs


def build(events: int) -> Path:
    """The generated journal replayed, plus ACTOR_FACTS stores by actor `ops` (the generator writes no actors)
    and DUPLICATE_ENTITIES planted duplicate groups (its values are all distinct)."""
    data_dir = OUT / f"console-{events}"
    if (data_dir / "cruxsql.db").exists():
        with cruxsql.open(data_dir) as store:
            if store.db.execute("SELECT count(*) FROM facts WHERE actor = 'ops'").fetchone()[0] < ACTOR_FACTS:
                for i in range(ACTOR_FACTS):
                    store.store(f"svc{i}", "owner", f"ops wrote {i}", tenant="tenant1", actor="ops")
            if store.db.execute("SELECT count(*) FROM facts WHERE entity = 'dup0'").fetchone()[0] == 0:
                store.store_batch([StoreRequest(f"dup{i}", key, text.format(i), tenant_hash="tenant1")
                                   for i in range(DUPLICATE_ENTITIES)
                                   for key, text in (("a", "Dup {}"), ("b", "dup {} "), ("c", " DUP {}"))])
        return data_dir
    data_dir.mkdir(parents=True, exist_ok=True)
    print(f"building a view of {events:,} journal events in {data_dir} ...", flush=True)
    generate(data_dir / "facts.jsonl", events)
    started = time.perf_counter()
    with cruxsql.open(data_dir) as store:
        store.refresh()
    print(f"  replayed in {time.perf_counter() - started:.0f} s", flush=True)
    return build(events)


def start(argv: list[str], env: dict[str, str]) -> tuple[subprocess.Popen, str, float]:
    """Start a server printing its URL; return it with the seconds until its first page answered."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    url = None
    while url is None:
        line = proc.stdout.readline()
        if not line:
            raise SystemExit(f"server exited: {argv}")
        for word in line.split():
            if word.startswith("http://"):
                url = word if word.endswith("/") else word + "/"
    get(url)
    return proc, url, time.perf_counter() - started


def stop(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)


def get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=120) as resp:
        return resp.read()


def timed_get(url: str) -> float:
    started = time.perf_counter()
    get(url)
    return (time.perf_counter() - started) * 1000


def timed_sql(conn: sqlite3.Connection, sql: str, params: dict[str, str]) -> float:
    started = time.perf_counter()
    conn.execute(sql, params).fetchmany(1001)  # what Datasette fetches: max_returned_rows + 1
    return (time.perf_counter() - started) * 1000


def best(fn, reps: int = 5) -> float:
    return min(fn() for _ in range(reps))


def store_latencies(store, n: int, tag: str) -> list[float]:
    out = []
    for i in range(n):
        started = time.perf_counter()
        store.store(f"bench:{tag}", f"k{i}", f"value {i}", tenant="tenant0", actor="ops")
        out.append((time.perf_counter() - started) * 1000)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_350_000, help="journal events (1.35M give ~1M facts)")
    parser.add_argument("--stores", type=int, default=300, help="store() calls per arm")
    args = parser.parse_args()
    data_dir = build(args.events)
    view = data_dir / "cruxsql.db"
    conn = sqlite3.connect(f"file:{view}?mode=ro", uri=True)
    ConsolePlugin({"cruxsql": "view"}, None).prepare_connection(conn, "cruxsql")
    facts = conn.execute("SELECT count(*) FROM facts").fetchone()[0]
    live = conn.execute("SELECT count(*) FROM live_facts").fetchone()[0]
    print(f"\nview: {facts:,} facts ({live:,} live), {view.stat().st_size / 2**20:,.0f} MiB\n")
    env = {**os.environ, "CRUXSQL_DATA_DIR": str(data_dir)}

    console, url, first = start([sys.executable, "-m", "cruxsql", "console", "--port", "0"], env)
    bare, bare_url, bare_first = start([sys.executable, "-m", "datasette", "serve", str(view), "-p", "0",
                                        "--setting", "sql_time_limit_ms", "1000"], env)
    print("| measure | console | baseline | ratio |\n|---|---|---|---|")
    print(f"| start to first page, s (baseline: plain `datasette serve`) | {first:.2f} | {bare_first:.2f} | "
          f"{first / bare_first:.2f} |")
    for path, bare_path in (("", ""), ("cruxsql", "cruxsql"), ("cruxsql/facts", "cruxsql/facts")):
        ms, bare_ms = best(lambda: timed_get(url + path)), best(lambda: timed_get(bare_url + bare_path))
        print(f"| page `/{path}`, ms (baseline: plain Datasette, which also suggests facets) | {ms:.0f} | "
              f"{bare_ms:.0f} | {ms / bare_ms:.2f} |")
    stop(bare)

    offered = columns_of(conn)  # what the console offers: every query whose tables exist
    for q in view_queries():
        if not q.available(offered):
            continue
        params = PARAMS.get(q.name, {})
        if q.name == "fact_history":
            params = {"fact_id": conn.execute("SELECT fact_id FROM facts WHERE version > 2 LIMIT 1").fetchone()[0]}
        page = f"{url}cruxsql/{q.name}.json?" + urllib.parse.urlencode({**params, "_shape": "objects"})
        try:
            body = json.loads(get(page))
        except urllib.error.HTTPError as exc:
            print(f"| canned `{q.name}` | HTTP {exc.code}: over Datasette's time limit? | | |")
            continue
        ms = best(lambda: timed_get(page))
        direct = best(lambda: timed_sql(conn, q.sql, params))
        print(f"| canned `{q.name}` ({len(body['rows'])} rows), ms (baseline: same SQL in-process) | "
              f"{ms:.1f} | {direct:.1f} | {ms / direct:.1f} |")
    replaced = (view_file.migrations_dir() / "0009_curation.sql").read_text(encoding="utf-8")
    replaced = replaced.split("CREATE VIEW duplicate_candidates AS")[1].split(";")[0]
    members, self_join = best(lambda: timed_sql(conn, "SELECT * FROM duplicate_candidates", {})), \
        timed_sql(conn, replaced, {})
    print(f"| `duplicate_candidates` in-process, ms (baseline: migration 0009's self-join it replaces, one run) | "
          f"{members:.1f} | {self_join:.0f} | {members / self_join:.4f} |")
    board = dashboards("cruxsql")[DASHBOARD]["charts"]
    for name, chart in board.items():
        sql = chart["query"]
        params = {"days": "400"} if ":days" in sql else {}
        direct = best(lambda: timed_sql(conn, sql, params))
        page = f"{url}cruxsql.json?" + urllib.parse.urlencode({"sql": sql, **params, "_shape": "objects"})
        try:
            ms = best(lambda: timed_get(page))
        except urllib.error.HTTPError as exc:
            print(f"| dashboard `{name}` | HTTP {exc.code}: over Datasette's time limit? | {direct:.1f} | |")
            continue
        print(f"| dashboard `{name}`, ms (baseline: same SQL in-process) | {ms:.1f} | {direct:.1f} | "
              f"{ms / direct:.1f} |")

    # store() p50 into the big store: without and with a console running canned queries in a loop
    loop_urls = [f"{url}cruxsql/live_facts_of_tenant.json?tenant=tenant2",
                 f"{url}cruxsql/stale_facts.json?horizon_class=",
                 f"{url}cruxsql/duplicate_candidates.json",
                 f"{url}cruxsql.json?" + urllib.parse.urlencode({"sql": board["fact-states"]["query"]})]
    halt = threading.Event()
    served = [0]

    def hammer() -> None:
        while not halt.is_set():
            get(loop_urls[served[0] % len(loop_urls)])
            served[0] += 1

    with cruxsql.open(data_dir) as store:
        store_latencies(store, 20, "warm")
        quiet = store_latencies(store, args.stores, f"quiet{time.time_ns()}")
        threads = [threading.Thread(target=hammer) for _ in range(2)]
        for t in threads:
            t.start()
        busy = store_latencies(store, args.stores, f"busy{time.time_ns()}")
        halt.set()
        for t in threads:
            t.join()
    stop(console)
    q50, b50 = statistics.median(quiet), statistics.median(busy)
    q95, b95 = sorted(quiet)[int(0.95 * len(quiet))], sorted(busy)[int(0.95 * len(busy))]
    print(f"| `store()` p50 ms, console querying in a loop ({served[0]} queries; baseline: no console queries) | "
          f"{b50:.2f} | {q50:.2f} | {b50 / q50:.2f} |")
    print(f"| `store()` p95 ms, same | {b95:.2f} | {q95:.2f} | {b95 / q95:.2f} |")
    print(f"| `store()` max ms, same | {max(busy):.1f} | {max(quiet):.1f} | {max(busy) / max(quiet):.2f} |")


if __name__ == "__main__":
    main()
