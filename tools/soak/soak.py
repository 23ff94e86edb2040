"""The fault campaign: real cruxsql processes SIGKILLed at random moments, every phase checked.

    python tools/soak/soak.py [--kills N] [--max-seconds S] [--seed K] [--keep DIR]

Each round starts worker processes (`tools/soak/worker.py`) on a data directory, waits until they are
inside their mutation loop, kills them with SIGKILL after a random delay, then reopens the store in
this process and checks: every acknowledged write is there (a loss otherwise), every acknowledged
delete and erasure holds, the view equals a fresh replay of the journal, there is no corrupt line and
no version chain has two current heads (a verify failure otherwise). Phases: writes, store-batch, delete, compact, erase, retention apply,
four concurrent writers with a compactor, and the mixed workload of many agents (tools/soak/workload.py:
MCP writers and readers, a CLI reader, an API writer, compactions and erasures), where any error a
client meets is a failure too. Bounded by kill count and time; loopback only (no
network at all). Prints one table row per phase; exits 1 on any loss or failure.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from cruxsql.facts.store import Store  # noqa: E402

WORKER = Path(__file__).with_name("worker.py")
WORKLOAD = Path(__file__).with_name("workload.py")
MIXED = "mixed workload"
MIXED_ROLES = [("mcp-writer", "w1"), ("mcp-writer", "w2"), ("mcp-reader", "r1"), ("mcp-reader", "r2"),
               ("cli-reader", "c1"), ("api-writer", "a1"), ("maintainer", "m1")]
# phase: (share of the kills, worker phases started together, seconds of work before the kill)
PHASES = {
    "writes": (0.25, ["writes"], (0.05, 0.8)),
    "store-batch": (0.12, ["store-batch"], (0.05, 0.8)),
    "delete": (0.12, ["delete"], (0.05, 0.8)),
    "compact": (0.15, ["compact"], (0.05, 1.5)),
    "erase": (0.08, ["erase"], (0.1, 2.5)),
    "retention apply": (0.08, ["retention"], (0.1, 2.5)),
    "concurrent writers + compactor": (0.20, ["concurrent"] * 4 + ["compactor"], (0.2, 1.5)),
    # tools/soak/workload.py's roles, all at once: 2 MCP writers, 2 MCP readers, a CLI reader, an API writer
    # and a compaction + erasure every few seconds (tests/project/test_mixed_workload.py runs it once, unkilled)
    MIXED: (0.10, [role for role, _ in MIXED_ROLES], (2.0, 8.0)),
}
ROUNDS_PER_DIRECTORY = 12  # a fresh data directory every so often keeps verify's full replay cheap


@dataclass
class PhaseResult:
    kills: int = 0
    acknowledged: int = 0
    losses: int = 0
    verify_failures: int = 0
    quarantined: int = 0
    problems: list[str] = field(default_factory=list)


def _start(phase: str, data_dir: Path, worker: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(WORKER), phase, str(data_dir), str(worker)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "PYTHONUNBUFFERED": "1"})


def _wait_ready(proc: subprocess.Popen, deadline: float) -> bool:
    line = b""
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line.strip() == b"READY" or not line:
            break
    return line.strip() == b"READY"


def _round(phase: str, workers: list[str], delay: tuple[float, float], data_dir: Path, rng: random.Random,
           res: PhaseResult, ledger: dict[str, set[str]]) -> None:
    procs = [_start(w, data_dir, n) for n, w in enumerate(workers)]
    deadline = time.monotonic() + 60
    ready = [_wait_ready(p, deadline) for p in procs]
    time.sleep(rng.uniform(*delay))
    for p in rng.sample(procs, len(procs)):
        p.send_signal(signal.SIGKILL)
    for p, ok in zip(procs, ready):
        out, err = p.communicate(timeout=60)
        if p.returncode == -signal.SIGKILL:
            res.kills += 1
        else:
            res.verify_failures += 1
            res.problems.append(f"worker exited {p.returncode} before the kill: {err.decode()[-300:]}")
        if not ok:
            continue
        lines = out.decode().split("\n")[:-1]  # a last line without its newline was never acknowledged
        for line in lines:
            kind, _, fact_id = line.partition(" ")
            if kind in ("E", "R"):
                ledger["erased"] |= ledger["gone"]
                ledger["gone"] = set()
            elif kind in ("S", "D", "G"):
                res.acknowledged += 1
                ledger[{"S": "kept", "D": "deleted", "G": "gone"}[kind]].add(fact_id)
    _check(data_dir, res, ledger)


def _mixed_round(delay: tuple[float, float], data_dir: Path, rng: random.Random, res: PhaseResult,
                 ledger: dict[str, set[str]]) -> None:
    """Every workload role for a random while, then SIGKILL to every process of every role (their MCP
    servers and CLI commands too); what each acknowledged is read back from its `.acks` file, and an
    error any client met ("X" lines) is a failure."""
    if not (data_dir / "facts.jsonl").exists():
        with Store(data_dir) as store:
            store.store("seed", "k", "before the workload")
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "WORKLOAD_MAINTAIN_EVERY": "2"}
    tag = f"{rng.getrandbits(32):08x}"
    procs = [subprocess.Popen([sys.executable, str(WORKLOAD), role, str(data_dir),
                               str(data_dir.parent / f"{data_dir.name}-{name}-{tag}.json"), "3600", f"{name}{tag}"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, start_new_session=True)
             for role, name in MIXED_ROLES]
    time.sleep(rng.uniform(*delay))
    for p in rng.sample(procs, len(procs)):
        os.killpg(p.pid, signal.SIGKILL)
    for p in procs:
        p.wait(timeout=60)
        res.kills += 1
    for acks in data_dir.parent.glob(f"{data_dir.name}-*-{tag}.json.acks"):
        for line in acks.read_text().split("\n")[:-1]:  # a last line without its newline: not acknowledged
            kind, fact_id, text = json.loads(line)
            if kind == "X":
                res.verify_failures += 1
                res.problems.append(f"client error: {text[:300]}")
            elif kind in ("S", "D"):
                res.acknowledged += 1
                ledger["kept" if kind == "S" else "deleted"].add(fact_id)
    ledger["kept"] -= ledger["deleted"]
    _check(data_dir, res, ledger)


def _check(data_dir: Path, res: PhaseResult, ledger: dict[str, set[str]]) -> None:
    before = {p.name for p in data_dir.glob("facts.jsonl.torn.*")}
    with Store(data_dir) as store:
        res.quarantined += len({p.name for p in data_dir.glob("facts.jsonl.torn.*")} - before)
        rows = dict(store.db.execute("SELECT fact_id, deleted FROM facts"))
        lost = [f for f in ledger["kept"] if rows.get(f) != 0]
        undeleted = [f for f in ledger["deleted"] if rows.get(f) == 0]
        unerased = [f for f in ledger["erased"] if rows.get(f) == 0]
        res.losses += len(lost) + len(undeleted) + len(unerased)
        for label, ids in (("acknowledged write lost", lost), ("acknowledged delete undone", undeleted),
                           ("acknowledged erasure undone", unerased)):
            if ids:
                res.problems.append(f"{label}: {sorted(ids)[:3]}")
        # the workloads only store, delete and erase: no chain may ever have two current heads
        forked = store.db.execute("SELECT count(*) FROM (SELECT 1 FROM live_facts GROUP BY tenant_hash, entity, key "
                                  "HAVING count(*) > 1)").fetchone()[0]
        report = store.verify()
        if not report.view_matches_replay or report.corrupt_lines or forked:
            res.verify_failures += 1
            res.problems.append(f"verify: {report.differences} {report.corrupt_lines[:2]} "
                                f"{forked} chain(s) with two current heads")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=220, help="total SIGKILLs to deliver (default 220)")
    parser.add_argument("--max-seconds", type=float, default=1200, help="stop starting rounds after this")
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--keep", type=Path, default=None, help="keep the data directories under DIR")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    started = time.monotonic()
    results = {phase: PhaseResult() for phase in PHASES}
    root = Path(args.keep or tempfile.mkdtemp(prefix="cruxsql-soak-"))
    root.mkdir(parents=True, exist_ok=True)
    for phase, (share, workers, delay) in PHASES.items():
        res = results[phase]
        target = max(len(workers), round(args.kills * share))
        rounds = 0
        ledger: dict[str, set[str]] = {}
        while res.kills < target and time.monotonic() - started < args.max_seconds:
            if rounds % ROUNDS_PER_DIRECTORY == 0:
                data_dir = root / f"{phase.replace(' ', '-')}-{rounds}"
                ledger = {"kept": set(), "deleted": set(), "gone": set(), "erased": set()}
            if phase == MIXED:
                _mixed_round(delay, data_dir, rng, res, ledger)
            else:
                _round(phase, workers, delay, data_dir, rng, res, ledger)
            rounds += 1
        print(f"  {phase}: {res.kills} kills, {res.acknowledged} acknowledged, {res.losses} losses, "
              f"{res.verify_failures} verify failures ({time.monotonic() - started:.0f} s)", file=sys.stderr)
    total = PhaseResult()
    print("| phase | kills | acknowledged writes | losses | verify failures | torn tails quarantined |")
    print("|---|---|---|---|---|---|")
    for phase, r in results.items():
        print(f"| {phase} | {r.kills} | {r.acknowledged} | {r.losses} | {r.verify_failures} | {r.quarantined} |")
        for name in ("kills", "acknowledged", "losses", "verify_failures", "quarantined"):
            setattr(total, name, getattr(total, name) + getattr(r, name))
    print(f"| **total** | **{total.kills}** | **{total.acknowledged}** | **{total.losses}** | "
          f"**{total.verify_failures}** | **{total.quarantined}** |")
    print(f"\n{time.monotonic() - started:.0f} s, seed {args.seed}, data under {root}")
    for phase, r in results.items():
        for problem in r.problems[:5]:
            print(f"{phase}: {problem}")
    return 1 if total.losses or total.verify_failures else 0


if __name__ == "__main__":
    sys.exit(main())
