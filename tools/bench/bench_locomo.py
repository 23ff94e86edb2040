"""LoCoMo evidence retrieval: `recall` through the MCP tool an agent calls, beside SQLite FTS5 bm25 and the
previous commit's `recall`, on the same turns, in the same run.

    python tools/bench/bench_locomo.py                                   # the five dev conversations, both modes
    python tools/bench/bench_locomo.py --modes turns --previous ""      # quicker: no previous-commit column
    python tools/bench/bench_locomo.py --transport inprocess             # tuning: CruxServer.call in this process
    python tools/bench/bench_locomo.py --scale 10000                     # latency: 10k turns + 10k facts in one store

Data: /work/shared/data/locomo-dev/ (its README: five conversations, 3,760 turns, 999 questions, each with
the dia_ids of its evidence turns and a category: 1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop,
5 adversarial). Two modes:

- `turns`: every turn stored verbatim by `store_conversation` (a fact each: entity `conversation:<name>`,
  key `turn:<position>`, value `<speaker>: <text>`, receipt `turn:{"session": .., "time": .., "id": <dia_id>}`;
  a commit without the tool gets the same facts by `store_facts`), one store per conversation; a retrieved
  turn is its dia_id (a turn's image caption, when it has one, is part of its text).
- `observations`: LoCoMo's extracted observations (`session_N_observation`, each from one dia_id) stored as
  facts (entity the speaker, key `observation:<n>`, the text); a retrieved observation counts as its dia_id.

Metrics, per question with evidence, averaged per category and overall: the share of its evidence dia_ids
among the top 5 and top 10 retrieved; the share of its evidence sessions among the top 10's sessions. Also
the tokens of the answer the agent receives (chars/4), the p50/p95 latency of a recall call as the client
sees it, and the time to store and index (store_facts calls until the first recall has answered).

Systems, each over the same facts: `recall` of this tree through `cruxsql mcp` over stdio (the MCP SDK's
client; `--transport inprocess` runs `CruxServer.call`, the function the stdio server dispatches every
call to, in this process); `recall` of `--previous` (a commit, checked out into a temporary `git worktree`
and served by its own `cruxsql mcp` subprocess); SQLite FTS5 bm25 (unicode61, the question's words OR-ed).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import AsyncExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator, Optional

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from cruxsql.recall.tokens import estimate_tokens_str  # noqa: E402

DATA = Path("/work/shared/data/locomo-dev")
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
BATCH = 1000
_DIA = re.compile(r"D(\d+):(\d+)")
# a line's fact position: its key (`conversation:26 · turn:000012: ...`), or a turn line's `[26 #12, ...]`
_KEY = re.compile(r"\b(?:turn|observation):(\d+)|^\[[^\]]* #(\d+)[,\]]")


# --- the data ---------------------------------------------------------------------------------------

@dataclass
class Question:
    text: str
    evidence: list[str]          # dia_ids present in the conversation
    category: int


@dataclass
class Conversation:
    name: str
    facts: dict[str, list[dict[str, Any]]]     # mode -> facts as store_facts takes them
    dia_ids: dict[str, list[list[str]]]        # mode -> per fact, the dia_ids it stands for
    questions: list[Question]
    turns: list[dict[str, str]]                # as store_conversation takes them (speaker, text, time, session, id)


def session_time(text: str) -> str:
    """`1:56 pm on 8 May, 2023` as RFC 3339 (UTC)."""
    return datetime.strptime(text, "%I:%M %p on %d %B, %Y").replace(tzinfo=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def session_of(dia_id: str) -> int:
    match = _DIA.fullmatch(dia_id)
    return int(match.group(1)) if match else -1


def turn_fact(name: str, position: int, speaker: str, text: str, session: int, time_: str, dia_id: str) -> dict[str, Any]:
    """A turn as the conversations contract encodes it (until `store_conversation` takes turns)."""
    receipt = json.dumps({"session": str(session), "time": time_, "id": dia_id}, separators=(",", ":"))
    return {"entity": f"conversation:{name}", "key": f"turn:{position:06d}", "value": f"{speaker}: {text}",
            "source_receipt": f"turn:{receipt}"}


def load(path: Path) -> Conversation:
    raw = json.loads(path.read_text())
    conv = raw.get("conversation", raw)
    sessions = sorted(int(k.split("_")[1]) for k in conv if re.fullmatch(r"session_\d+", k) and conv[k])
    turns: list[dict[str, Any]] = []
    turn_ids: list[list[str]] = []
    turn_inputs: list[dict[str, str]] = []
    observations: list[dict[str, Any]] = []
    observation_ids: list[list[str]] = []
    for s in sessions:
        when = session_time(conv[f"session_{s}_date_time"])
        for turn in conv[f"session_{s}"]:
            text = turn["text"] + (f" [shares {turn['blip_caption']}]" if turn.get("blip_caption") else "")
            turns.append(turn_fact(path.stem, len(turns), turn["speaker"], text, s, when, turn["dia_id"]))
            turn_inputs.append({"speaker": turn["speaker"], "text": text, "time": when, "session": str(s),
                                "id": turn["dia_id"]})
            turn_ids.append([turn["dia_id"]])
        for speaker, items in sorted((raw.get("observation", {}).get(f"session_{s}_observation")
                                      or conv.get(f"session_{s}_observation") or {}).items()):
            for text, source in items:
                observations.append({"entity": speaker, "key": f"observation:{len(observations):05d}", "value": text})
                observation_ids.append(_DIA.findall(str(source)) and
                                       [f"D{a}:{b}" for a, b in _DIA.findall(str(source))])
    known = {d for ids in turn_ids for d in ids}
    questions = []
    for qa in raw["qa"]:
        evidence = [d for d in dict.fromkeys(f"D{a}:{b}" for a, b in _DIA.findall(" ".join(map(str, qa.get("evidence", [])))))
                    if d in known]
        if evidence:
            questions.append(Question(qa["question"], evidence, int(qa["category"])))
    return Conversation(path.stem, {"turns": turns, "observations": observations},
                        {"turns": turn_ids, "observations": observation_ids}, questions, turn_inputs)


# --- metrics ----------------------------------------------------------------------------------------

@dataclass
class Tally:
    """Per-question figures of one system, by category."""

    at5: dict[int, list[float]] = field(default_factory=dict)
    at10: dict[int, list[float]] = field(default_factory=dict)
    sessions: dict[int, list[float]] = field(default_factory=dict)
    tokens: list[int] = field(default_factory=list)
    latency_ms: list[float] = field(default_factory=list)
    index_s: float = 0.0

    def add(self, question: Question, retrieved: list[list[str]]) -> None:
        """`retrieved`: per returned fact, best first, the dia_ids it stands for."""
        for k, into in ((5, self.at5), (10, self.at10)):
            got = {d for ids in retrieved[:k] for d in ids}
            into.setdefault(question.category, []).append(evidence_share(question.evidence, got))
        wanted = {session_of(d) for d in question.evidence}
        covered = {session_of(d) for ids in retrieved[:10] for d in ids}
        self.sessions.setdefault(question.category, []).append(len(wanted & covered) / len(wanted))

    @staticmethod
    def mean(by_category: dict[int, list[float]], category: Optional[int] = None) -> float:
        values = by_category.get(category, []) if category is not None else [v for vs in by_category.values() for v in vs]
        return sum(values) / len(values) if values else 0.0


def evidence_share(evidence: list[str], retrieved: set[str]) -> float:
    """The share of a question's evidence dia_ids among the retrieved ones."""
    return sum(1 for d in evidence if d in retrieved) / len(evidence)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def retrieved_positions(answer: str) -> list[int]:
    """The fact positions (the number in `turn:NNNNNN` / `observation:NNNNN`) of a recall answer's lines,
    best first (the `+N more` line and anything else without a key are skipped)."""
    out = []
    for line in answer.splitlines():
        match = _KEY.search(line)
        if match:
            out.append(int(match.group(1) or match.group(2)))
    return out


# --- the systems ------------------------------------------------------------------------------------

class Fts5:
    """SQLite FTS5 bm25 over the facts' values: the question's words OR-ed, best 10."""

    def __init__(self, facts: list[dict[str, Any]]) -> None:
        self.db = sqlite3.connect(":memory:")
        self.db.execute("CREATE VIRTUAL TABLE t USING fts5(body)")
        self.db.executemany("INSERT INTO t (rowid, body) VALUES (?, ?)", [(i, f["value"]) for i, f in enumerate(facts)])

    def search(self, question: str) -> list[int]:
        words = re.findall(r"\w+", question.lower())
        if not words:
            return []
        match = " OR ".join(f'"{w}"' for w in dict.fromkeys(words))
        return [r[0] for r in self.db.execute("SELECT rowid FROM t WHERE t MATCH ? ORDER BY bm25(t) LIMIT 10", (match,))]


def server_params(pythonpath: Path, data_dir: Path) -> StdioServerParameters:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CRUX", "CORECRUXD"))}
    env["PYTHONPATH"] = str(pythonpath)
    # run from the tree: `python -m` puts the working directory before PYTHONPATH
    return StdioServerParameters(command=sys.executable, args=["-m", "cruxsql", "mcp", "--data-dir", str(data_dir),
                                                               "--create", "--tools", "all"], env=env, cwd=pythonpath)


class McpRecall:
    """One `cruxsql mcp` (over stdio, or `CruxServer` in this process) with one conversation stored."""

    def __init__(self, name: str, call: Any) -> None:
        self.name = name
        self._call = call

    async def store_turns(self, conversation: str, turns: list[dict[str, str]], facts: list[dict[str, Any]]) -> None:
        """The turns through `store_conversation`, or as the facts it stores where the tool does not exist
        (an older commit)."""
        result = await self._call("store_conversation", {"conversation": conversation, "turns": turns})
        if result.is_error and "unknown tool" in result.content[0].text:
            return await self.store(facts)
        assert not result.is_error, result.content[0].text

    async def store(self, facts: list[dict[str, Any]]) -> None:
        for i in range(0, len(facts), BATCH):
            result = await self._call("store_facts", {"facts": facts[i:i + BATCH]})
            assert not result.is_error, result.content[0].text

    async def wait_for_vectors(self, question: str, fusion: str) -> None:
        """Until every fact has a vector: recall's explain says how many lack one (a query embeds at most a
        few itself; the server's indexer, or in process those calls, fill the rest); nothing said: BM25
        alone, or a commit before the bound."""
        while True:
            result = await self._call("recall", {"query": question, "top_k": 1, "fusion": fusion, "explain": True})
            lacking = re.search(r'"unembedded":(\d+)', str(result.content[0].text))
            if lacking is None or lacking.group(1) == "0":
                return
            await anyio.sleep(1.0)   # longer than the server's quiet time: its indexer runs in the gaps

    async def recall(self, question: str, fusion: str, explain: bool = False) -> str:
        arguments: dict[str, Any] = {"query": question, "top_k": 10, "fusion": fusion, **({"explain": True} if explain else {})}
        result = await self._call("recall", arguments)
        assert not result.is_error, f"{self.name}: {result.content[0].text}"
        return str(result.content[0].text)


def column(system: str, fusion: str) -> str:
    return f"{system} ({fusion})"


@contextmanager
def previous_tree(commit: str) -> Iterator[Path]:
    """`commit` checked out into a temporary git worktree (removed afterwards)."""
    where = Path(tempfile.mkdtemp(prefix="bench-locomo-prev-")) / "tree"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "--quiet", str(where), commit], check=True)
    try:
        yield where
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(where)], check=False)


async def open_system(stack: AsyncExitStack, name: str, tree: Optional[Path], data_dir: Path) -> McpRecall:
    """`tree`'s cruxsql served over stdio, or this tree's `CruxServer` in process when `tree` is None."""
    if tree is None:
        import cruxsql
        from cruxsql.mcp.server import CruxServer
        server = CruxServer(cruxsql.open(data_dir), tools="all")
        stack.callback(server.store.close)
        stack.enter_context(server.fact_indexing())     # its background indexer, as `cruxsql mcp` runs one

        async def local(tool: str, arguments: dict[str, Any]) -> Any:
            return server.call(tool, arguments)
        return McpRecall(name, local)
    streams = await stack.enter_async_context(stdio_client(server_params(tree, data_dir), errlog=sys.stderr))
    session = await stack.enter_async_context(ClientSession(*streams[:2]))
    await session.initialize()
    return McpRecall(name, session.call_tool)


async def run_conversation(conv: Conversation, mode: str, trees: dict[str, Optional[Path]], fusions: list[str],
                           tallies: dict[str, Tally], scratch: Path) -> None:
    facts, ids = conv.facts[mode], conv.dia_ids[mode]
    t0 = time.perf_counter()
    fts = Fts5(facts)
    fts_index = time.perf_counter() - t0
    async with AsyncExitStack() as stack:
        systems = {}
        for name, tree in trees.items():
            system = await open_system(stack, name, tree, Path(tempfile.mkdtemp(prefix=f"{conv.name}-{mode}-", dir=scratch)))
            t0 = time.perf_counter()
            if mode == "turns":
                await system.store_turns(conv.name, conv.turns, facts)
            else:
                await system.store(facts)
            await system.recall(conv.questions[0].text, fusions[0])
            for fusion in fusions:
                await system.wait_for_vectors(conv.questions[0].text, fusion)
            tallies[column(name, fusions[0])].index_s += time.perf_counter() - t0
            systems.update({column(name, f): (system, f) for f in fusions})
        tallies["fts5"].index_s += fts_index
        for question in conv.questions:
            for name, (system, fusion) in systems.items():
                t0 = time.perf_counter()
                answer = await system.recall(question.text, fusion)
                tallies[name].latency_ms.append((time.perf_counter() - t0) * 1000)
                tallies[name].tokens.append(estimate_tokens_str(answer))
                tallies[name].add(question, [ids[p] for p in retrieved_positions(answer)])
            t0 = time.perf_counter()
            found = fts.search(question.text)
            tallies["fts5"].latency_ms.append((time.perf_counter() - t0) * 1000)
            tallies["fts5"].tokens.append(estimate_tokens_str("\n".join(facts[p]["value"] for p in found)))
            tallies["fts5"].add(question, [ids[p] for p in found])


# --- the report -------------------------------------------------------------------------------------

def table(mode: str, tallies: dict[str, Tally], questions: int) -> str:
    names = list(tallies)
    out = [f"\n### {mode}: {questions} questions\n", "| metric | " + " | ".join(names) + " |",
           "|---|" + "---|" * len(names)]

    def row(label: str, values: list[str]) -> None:
        out.append(f"| {label} | " + " | ".join(values) + " |")

    row("evidence turns, top 5 / top 10", [f"{Tally.mean(t.at5):.3f} / {Tally.mean(t.at10):.3f}" for t in tallies.values()])
    for c, label in CATEGORIES.items():
        row(f"  {c} {label}, top 5 / top 10",
            [f"{Tally.mean(t.at5, c):.3f} / {Tally.mean(t.at10, c):.3f}" if t.at5.get(c) else "-"
             for t in tallies.values()])
    row("evidence sessions covered by the top 10", [f"{Tally.mean(t.sessions):.3f}" for t in tallies.values()])
    row("tokens per answer (mean)", [f"{statistics.mean(t.tokens):.0f}" for t in tallies.values()])
    row("latency p50 / p95 (ms)", [f"{percentile(t.latency_ms, 0.5):.1f} / {percentile(t.latency_ms, 0.95):.1f}"
                                   for t in tallies.values()])
    row("store and index (s)", [f"{t.index_s:.1f}" for t in tallies.values()])
    base = tallies["fts5"]
    for name, t in tallies.items():
        if name != "fts5":
            out.append(f"\n{name} vs fts5: top 5 {Tally.mean(t.at5) / max(Tally.mean(base.at5), 1e-9):.3f}x, "
                       f"top 10 {Tally.mean(t.at10) / max(Tally.mean(base.at10), 1e-9):.3f}x, sessions "
                       f"{Tally.mean(t.sessions) - Tally.mean(base.sessions):+.3f}")
    return "\n".join(out)


async def scale(args: argparse.Namespace, conversations: list[Conversation]) -> None:
    """recall's latency over one store holding `args.scale` turns (the conversations' turns again and again,
    each copy its own conversation) and as many plain facts (the observations, each copy its own entity):
    every question asked once per fusion, through this tree's `cruxsql mcp` over stdio (or in process with
    `--transport inprocess`, which also measures each call's CPU time on its own thread, the indexer's
    excluded: the machine may be shared). A fusion
    with a model is measured twice: right after the store was written, while the server's background
    indexer is still embedding it ("filling"), then once every fact has its vector ("steady")."""
    copies = -(-args.scale // sum(len(c.turns) for c in conversations))
    facts = [dict(f, entity=f"{f['entity']}-{k}") for k in range(-(-args.scale // sum(len(c.facts["observations"])
             for c in conversations))) for c in conversations for f in c.facts["observations"]][:args.scale]
    with tempfile.TemporaryDirectory(prefix="bench-locomo-scale-") as scratch:
        async with AsyncExitStack() as stack:
            system = await open_system(stack, "recall", None if args.transport == "inprocess" else ROOT,
                                       Path(scratch) / "data")
            turns = [(f"{c.name}-{k}", c) for k in range(copies) for c in conversations]
            t0 = time.perf_counter()
            for name, conv in turns:
                await system.store_turns(name, conv.turns, [])
            await system.store(facts)
            questions = [q.text for c in conversations for q in c.questions]
            await system.recall(questions[0], "bm25")
            stored = time.perf_counter() - t0
            print(f"\none store: {copies * sum(len(c.turns) for c in conversations):,} turns + {len(facts):,} facts, "
                  f"stored and indexed in {stored:.0f} s; {len(questions)} questions per fusion "
                  f"(load average {os.getloadavg()[0]:.1f})\n\n| fusion | vectors | p50 ms | p95 ms | "
                  f"CPU p50 / p95 ms (in process) | tokens per answer |\n|---|---|---|---|---|---|")
            for fusion in args.fusions.split(","):
                phases = ["-"] if fusion == "bm25" else ["filling", "steady"]
                for phase in phases:
                    if phase == "steady":
                        t0 = time.perf_counter()
                        await system.wait_for_vectors(questions[0], fusion)
                        print(f"(every fact embedded {time.perf_counter() - t0:.0f} s later)", flush=True)
                    else:
                        await system.recall(questions[0], fusion)
                    await timed(system, questions, fusion, phase, args.transport == "inprocess")


async def timed(system: McpRecall, questions: list[str], fusion: str, phase: str, cpu_too: bool) -> None:
    """Every question asked once; its latency row printed."""
    latency, cpu, tokens, lacking = [], [], [], 0
    for question in questions:
        t0, c0 = time.perf_counter(), time.thread_time()
        answer = await system.recall(question, fusion)
        latency.append((time.perf_counter() - t0) * 1000)
        cpu.append((time.thread_time() - c0) * 1000)   # the calling thread's: not the indexer's
        tokens.append(estimate_tokens_str(answer))
    if phase == "filling":
        result = await system.recall(questions[0], fusion, explain=True)
        found = re.search(r'"unembedded":(\d+)', result)
        lacking = int(found.group(1)) if found else 0
        phase = f"filling ({lacking:,} still lacking one at the end)"
    cpu_text = f"{percentile(cpu, 0.5):.1f} / {percentile(cpu, 0.95):.1f}" if cpu_too else "-"
    print(f"| {fusion} | {phase} | {percentile(latency, 0.5):.1f} | {percentile(latency, 0.95):.1f} | {cpu_text} | "
          f"{statistics.mean(tokens):.0f} (max {max(tokens)}) |", flush=True)


async def run(args: argparse.Namespace, conversations: list[Conversation], previous: Optional[Path]) -> None:
    current: Optional[Path] = None if args.transport == "inprocess" else ROOT
    trees: dict[str, Optional[Path]] = {"recall": current}
    if previous is not None:
        trees[f"recall @ {args.previous}"] = previous
    fusions = args.fusions.split(",")
    with tempfile.TemporaryDirectory(prefix="bench-locomo-") as scratch:
        for mode in args.modes.split(","):
            tallies = {column(name, f): Tally() for name in trees for f in fusions}
            tallies["fts5"] = Tally()
            for conv in conversations:
                await run_conversation(conv, mode, trees, fusions, tallies, Path(scratch))
            print(table(mode, tallies, sum(len(c.questions) for c in conversations)), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--conversations", default="26,30,41,42,43")
    ap.add_argument("--modes", default="turns,observations")
    ap.add_argument("--previous", default="a27032b", help="a commit to compare with ('' for none)")
    ap.add_argument("--transport", choices=("stdio", "inprocess"), default="stdio")
    ap.add_argument("--fusions", default="auto,bm25",
                    help="recall's fusion arguments, a column each (auto: MiniLM fused when the [semantic] extra is "
                         "installed; bm25: as with no model installed); the first one's store is timed")
    ap.add_argument("--scale", type=int, default=0,
                    help="instead: recall's latency with this many turns and as many plain facts in one store")
    args = ap.parse_args()
    conversations = [load(args.data / f"{name}.json") for name in args.conversations.split(",")]
    print(f"LoCoMo {', '.join(c.name for c in conversations)}: {sum(len(c.facts['turns']) for c in conversations)} turns, "
          f"{sum(len(c.facts['observations']) for c in conversations)} observations, "
          f"{sum(len(c.questions) for c in conversations)} questions with evidence; transport {args.transport}; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    if args.scale:
        anyio.run(scale, args, conversations)
    elif args.previous:
        with previous_tree(args.previous) as tree:
            anyio.run(run, args, conversations, tree)
    else:
        anyio.run(run, args, conversations, None)


if __name__ == "__main__":
    main()
