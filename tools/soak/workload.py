"""The mixed workload of many agents on one store: one role per real process, every outcome recorded.

    python tools/soak/workload.py ROLE DATA_DIR OUT_JSON SECONDS NAME

Roles (tests/project/test_mixed_workload.py runs them together; tools/soak/soak.py runs them longer, with
SIGKILLs):
  mcp-writer   an MCP SDK stdio client of its own `cruxsql mcp`: store_fact, store_facts (a pair of facts
               that must be seen together), delete_fact, each with an idempotency key, and every few
               calls the same call again, which must return the same answer and append nothing
  mcp-reader   an MCP SDK stdio client: query_facts and memory_view over the pairs; a pair seen with one
               fact only is a half state
  cli-reader   `cruxsql query` and `cruxsql sql` in a loop
  api-writer   the Python API: keyed stores (retried), keyed deletes, and `subject-` facts for erasure
  maintainer   `cruxsql compact` and `cruxsql erase --entity-prefix subject-` every few seconds

Each role writes OUT_JSON when its time is up: the errors it met (any is a failure), what was
acknowledged (`stored`: fact_id -> value, `deleted`, `erasable`), the latencies of its reads and the
count of retries that were answered without a second append. Everything acknowledged is flushed to
OUT_JSON.acks as it is acknowledged (one line each), for a run that is killed.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

CLI = [sys.executable, "-m", "cruxsql"]
PAIR_WORD = "pairtok"
PACE_S = float(os.environ.get("WORKLOAD_PACE_S", "0.02"))


class Outcome:
    def __init__(self, out: Path) -> None:
        self.out = out
        self.errors: list[str] = []
        self.stored: dict[str, str] = {}
        self.deleted: list[str] = []
        self.erasable: list[str] = []
        self.retries = 0
        self.half_states = 0
        self.read_ms: list[float] = []
        self.calls = 0
        self._acks = open(f"{out}.acks", "a", encoding="utf-8")

    def ack(self, kind: str, fact_id: str, value: str = "") -> None:
        if kind == "S":
            self.stored[fact_id] = value
        elif kind == "D":
            self.deleted.append(fact_id)
        else:
            self.erasable.append(fact_id)
        self._acks.write(json.dumps([kind, fact_id, value]) + "\n")
        self._acks.flush()

    def error(self, where: str, text: str) -> None:
        self.errors.append(f"{where}: {text}"[:2000])
        self._acks.write(json.dumps(["X", "", self.errors[-1]]) + "\n")
        self._acks.flush()

    def write(self) -> None:
        self.out.write_text(json.dumps({
            "errors": self.errors, "stored": self.stored, "deleted": self.deleted, "erasable": self.erasable,
            "retries": self.retries, "half_states": self.half_states, "read_ms": self.read_ms,
            "calls": self.calls}))


def _server_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("CRUX", "CORECRUXD"))}


async def _mcp(role: str, data_dir: str, outcome: Outcome, seconds: float, name: str) -> None:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=CLI[0], args=CLI[1:] + ["mcp", "--data-dir", data_dir, "--agent", name],
                                   env=_server_env())
    async with stdio_client(params, errlog=open(os.devnull, "w")) as streams:
        async with ClientSession(*streams[:2], read_timeout_seconds=120) as session:
            await session.initialize()

            async def call(tool: str, args: dict[str, Any]) -> Any:
                outcome.calls += 1
                started = time.perf_counter()
                result = await session.call_tool(tool, args)
                if role == "mcp-reader":
                    outcome.read_ms.append((time.perf_counter() - started) * 1000)
                if result.is_error:
                    outcome.error(tool, result.content[0].text if result.content else "(no text)")
                    return None
                return result

            deadline = time.monotonic() + seconds
            i = 0
            while time.monotonic() < deadline:
                i += 1
                tag = f"{name}-{i:06d}"
                if role == "mcp-reader":
                    await _read_pairs(call, outcome)
                    await asyncio.sleep(PACE_S)  # leave the CPU to the other roles now and then
                    continue
                if i % 4 == 0:
                    args = {"facts": [{"entity": f"pair-{tag}", "key": k, "value": f"{PAIR_WORD} {tag} {k}"}
                                      for k in ("a", "b")], "idempotency_key": f"k-{tag}"}
                    result = await call("store_facts", args)
                    if result is None:
                        continue
                    rows = result.structured_content["fact_ids"]
                    for fact_id, fact in zip(rows, args["facts"]):
                        outcome.ack("S", fact_id, fact["value"])
                    again = await call("store_facts", args)
                    if again is not None:
                        outcome.retries += 1
                        if again.structured_content["fact_ids"] != rows:
                            outcome.error("store_facts retry", f"answered {again.structured_content} then {rows}")
                    continue
                args = {"entity": f"svc-{name}", "key": f"k{i % 5}", "value": f"value {tag}",
                        "idempotency_key": f"k-{tag}"}
                result = await call("store_fact", args)
                if result is None:
                    continue
                fact_id = result.structured_content["fact_id"]
                outcome.ack("S", fact_id, args["value"])
                if i % 3 == 0:
                    again = await call("store_fact", args)
                    outcome.retries += 1
                    if again is not None and again.structured_content["fact_id"] != fact_id:
                        outcome.error("store_fact retry", f"{fact_id} then {again.structured_content['fact_id']}")
                if i % 5 == 0:
                    args = {"fact_id": fact_id, "idempotency_key": f"d-{tag}"}
                    for _attempt in range(2):
                        result = await call("delete_fact", args)
                        if result is not None and result.content[0].text != f"deleted fact {fact_id}":
                            outcome.error("delete_fact", result.content[0].text)
                    outcome.retries += 1
                    outcome.stored.pop(fact_id, None)
                    outcome.ack("D", fact_id)


async def _read_pairs(call: Any, outcome: Outcome) -> None:
    """query_facts and memory_view over the pairs: each pair's two facts appear together or not at all."""
    result = await call("query_facts", {"query": PAIR_WORD, "top_k": 2000, "contract": "legacy"})
    if result is not None:
        seen: dict[str, int] = {}
        for fact in result.structured_content.get("facts", []):
            seen[fact["entity"]] = seen.get(fact["entity"], 0) + 1
        halves = [e for e, n in seen.items() if n != 2]
        if halves:
            outcome.half_states += len(halves)
            outcome.error("query_facts", f"pairs seen with one fact: {halves[:3]}")
    await call("memory_view", {"top_k": 50, "token_budget": 4000})


def _cli(data_dir: str, outcome: Outcome, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    i = 0
    while time.monotonic() < deadline:
        i += 1
        args = ["query", "--data-dir", data_dir, PAIR_WORD, "--json"] if i % 2 else \
            ["sql", "--data-dir", data_dir, "SELECT count(*) FROM facts WHERE entity LIKE 'pair-%'"]
        started = time.perf_counter()
        proc = subprocess.run(CLI + args, capture_output=True, text=True, timeout=300)
        outcome.read_ms.append((time.perf_counter() - started) * 1000)
        outcome.calls += 1
        if proc.returncode != 0:
            outcome.error(" ".join(args[:1]), proc.stderr.strip() or f"exit {proc.returncode}")


def _api(data_dir: str, outcome: Outcome, seconds: float, name: str) -> None:
    import cruxsql

    deadline = time.monotonic() + seconds
    with cruxsql.open(data_dir) as store:
        i = 0
        while time.monotonic() < deadline:
            i += 1
            tag = f"{name}-{i:06d}"
            try:
                outcome.calls += 1
                if i % 6 == 0:
                    fact = store.store(f"subject-{i % 3}", "k", f"erase me {tag}")
                    outcome.ack("E", fact.fact_id)
                    continue
                value = f"api value {tag}"
                fact = store.store(f"api-{name}", f"k{i % 4}", value, idempotency_key=f"k-{tag}")
                outcome.ack("S", fact.fact_id, value)
                if i % 2 == 0:
                    again = store.store(f"api-{name}", f"k{i % 4}", value, idempotency_key=f"k-{tag}")
                    outcome.retries += 1
                    if again.fact_id != fact.fact_id:
                        outcome.error("store retry", f"{fact.fact_id} then {again.fact_id}")
                if i % 5 == 0:
                    store.delete(fact.fact_id, idempotency_key=f"d-{tag}")
                    store.delete(fact.fact_id, idempotency_key=f"d-{tag}")
                    outcome.retries += 1
                    outcome.stored.pop(fact.fact_id, None)
                    outcome.ack("D", fact.fact_id)
            except Exception as exc:  # any error is a failure of the run: record it and go on
                outcome.error(type(exc).__name__, str(exc))


def _maintain(data_dir: str, outcome: Outcome, seconds: float, every: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(min(every, max(0.0, deadline - time.monotonic())))
        for args in (["compact", "--data-dir", data_dir],
                     ["erase", "--data-dir", data_dir, "--tenant", "default", "--entity-prefix", "subject-",
                      "--reason", "workload"]):
            outcome.calls += 1
            proc = subprocess.run(CLI + args, capture_output=True, text=True, timeout=300)
            if proc.returncode == 1 and args[0] == "erase" and "nothing matched the selection" in proc.stdout:
                continue    # no subject- fact since the last erasure: exit 1 by design, not a failure
            if proc.returncode != 0:
                outcome.error(args[0], (proc.stdout.strip() + " | " + proc.stderr.strip())[-1500:] + f" (exit {proc.returncode})")


def main(role: str, data_dir: str, out: str, seconds: float, name: str) -> None:
    outcome = Outcome(Path(out))
    try:
        if role in ("mcp-writer", "mcp-reader"):
            asyncio.run(_mcp(role, data_dir, outcome, seconds, name))
        elif role == "cli-reader":
            _cli(data_dir, outcome, seconds)
        elif role == "api-writer":
            _api(data_dir, outcome, seconds, name)
        elif role == "maintainer":
            _maintain(data_dir, outcome, seconds, float(os.environ.get("WORKLOAD_MAINTAIN_EVERY", "3")))
        else:
            raise SystemExit(f"unknown role {role!r}")
    except Exception as exc:
        outcome.error(role, f"{type(exc).__name__}: {exc}")
    outcome.write()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), sys.argv[5])
