"""What an agent pays, in tokens, for what it gets: one scripted session against cruxsql's MCP tools, beside
the same session against the official MCP memory server (`@modelcontextprotocol/server-memory`).

    python tools/bench/bench_agent_tokens.py [--facts 1000] [--queries 50] [--memory-server DIR]

The session: store --facts facts (100 services x 10 keys), --queries recall queries each asked at token
budgets 50, 200 and 1,000, 10 document queries over 10 ingested notes, 5 workspace reads (one an outline of
a changelog with 120 version headings), all under an enforced session budget. Reported per budget:
tokens returned per call (everything the agent receives: text, notes and structured content, chars/4) and
per relevant fact delivered in full, the envelope's share of the text (the text minus the facts' own
entity, key and value), the facts' content as a share of everything received, recall@5 (the asked-for
fact among the first five facts the answer names), and budget overshoot (text tokens past the call's
token_budget; the calls whose everything-received passed it, MCP result wrapper included; and the
session's use past its limit).

The official server runs with node from --memory-server (a folder where `npm install
@modelcontextprotocol/server-memory` was run, outside the repository); without node or that folder its
column is skipped with a note. It has no budgets: its search returns whole entities, so its "overshoot"
is what it returns past the budget the agent would have asked for. Its search matches the whole query
as one substring, so it is asked the service name alone (the same question's first word).

The recall questions are asked of both of cruxsql's recall tools in one run, rows side by side: Crux's
`query_facts` (a crc-v1 JSON envelope; below the least envelope's size, compact lines) and cruxsql's
relevance-ranked `recall` (one line per fact, `entity · key: value`, ` · age` only when a day old or more
or stale, a value cut to fit ending in `…`, and `+N more (offset=K)` when cut; no structured content).
`recall` uses its default fusion (`auto`: BM25 fused with MiniLM when that model is installed; set
CRUXSQL_EMBEDDER=none for BM25 alone). RECALL_TOOLS / recall_arguments are the place to add another.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from cruxsql.embeddings import EMBEDDER_ENV  # noqa: E402
from cruxsql.facts.store import Store, StoreRequest  # noqa: E402
from cruxsql.mcp.identity import Identity  # noqa: E402
from cruxsql.mcp.server import CruxServer  # noqa: E402
from cruxsql.recall.fact_lines import SEPARATOR as LINE_SEPARATOR  # noqa: E402
from cruxsql.recall.tokens import estimate_tokens, estimate_tokens_str  # noqa: E402

RECALL_TOOLS = ("query_facts", "recall")
BUDGETS = (50, 200, 1000)
KEYS = ("owner", "oncall", "region", "runbook", "latency_slo", "deploy_window", "database", "queue", "version",
        "escalation")
TEAMS = ("orchid", "basalt", "heron", "quartz", "juniper", "falcon", "cobalt", "maple", "onyx", "willow")


def recall_arguments(query: str, budget: int) -> dict[str, Any]:
    """The recall call of the session (both recall tools take the question and the token budget)."""
    return {"query": query, "token_budget": budget}


def fact_value(service: int, key: str) -> str:
    team = TEAMS[(service * 7 + len(key)) % len(TEAMS)]
    words = {"owner": f"team {team} owns svc{service:03d} and approves its schema changes",
             "oncall": f"svc{service:03d} pages the {team} rotation; secondary is the platform desk",
             "region": f"svc{service:03d} runs in eu-west-{service % 3 + 1} with a warm standby",
             "runbook": f"restart svc{service:03d} with the {team} playbook, step 4 drains the queue first",
             "latency_slo": f"svc{service:03d} p99 latency target {100 + service % 50} ms at the edge",
             "deploy_window": f"deploy svc{service:03d} tuesdays 10:00-12:00 UTC, never on freeze days",
             "database": f"svc{service:03d} keeps its state in postgres cluster pg-{service % 12}",
             "queue": f"svc{service:03d} consumes topic orders-{service % 9} with 6 partitions",
             "version": f"svc{service:03d} is on release 4.{service % 17}.2 since the last rollout",
             "escalation": f"escalate svc{service:03d} incidents to the {team} lead after 30 minutes"}
    return words[key]


def corpus(n_facts: int) -> list[tuple[str, str, str]]:
    services = max(1, n_facts // len(KEYS))
    return [(f"svc{s:03d}", k, fact_value(s, k)) for s in range(services) for k in KEYS][:n_facts]


def questions(facts: list[tuple[str, str, str]], n: int) -> list[tuple[str, tuple[str, str, str]]]:
    """An agent's recall question for a fact: the service and the key's words (what it would type)."""
    step = max(1, len(facts) // n)
    return [(f"svc{f[0][3:]} {f[1].replace('_', ' ')}", f) for f in facts[::step][:n]]


@dataclass
class Tally:
    calls: int = 0
    tokens: int = 0                  # everything received
    text_tokens: int = 0
    content_tokens: int = 0          # the facts' own entity, key and value in the text
    relevant_full: int = 0
    hits_at_5: int = 0
    asked: int = 0
    over_calls: int = 0
    over_max: int = 0
    received_over_calls: int = 0     # calls whose everything-received (wire result) passed the budget

    def answer(self, received: int, text: str, budget: int) -> None:
        """One call: everything received, its text, and how far the text went past the budget."""
        self.calls += 1
        self.tokens += received
        self.text_tokens += estimate_tokens_str(text)
        over = estimate_tokens_str(text) - budget
        self.over_calls += over > 0
        self.over_max = max(self.over_max, over)
        self.received_over_calls += received > budget

    def row(self) -> dict[str, Any]:
        return {"calls": self.calls, "tokens_per_call": round(self.tokens / max(1, self.calls), 1),
                "tokens_per_relevant_fact": round(self.tokens / self.relevant_full, 1) if self.relevant_full else None,
                "envelope_share": round(1 - self.content_tokens / max(1, self.text_tokens), 3),
                "content_share_of_received": round(self.content_tokens / max(1, self.tokens), 3),
                "recall_at_5": round(self.hits_at_5 / max(1, self.asked), 3),
                "overshooting_calls": self.over_calls, "max_overshoot": self.over_max,
                "calls_received_over_budget": self.received_over_calls}


def _wire_tokens(result: Any) -> int:
    return estimate_tokens(result.model_dump(mode="json", by_alias=True, exclude_none=True))


_AGE = re.compile(r"(now|\d+(m|h|d|mo|y))?( ?stale)?")
_FACT_ID = re.compile(r"f_[0-9a-f]{32}")


def _fact_lines(text: str, by_id: dict[str, tuple[str, str, str]]) -> tuple[list[str], list[tuple[str, str, str]]]:
    """Compact fact lines (cruxsql/recall/fact_lines.py): `entity · key: value`, then ` · age` (a day old or
    more, or stale) and ` · fact_id` when present; best first, then `+N more (offset=K)` when cut. A value
    cut to fit ends in `…` and so differs from the stored one. The ids in order (a line without its id
    is the fact of that entity and key: only current values are recalled), and the facts whose entity, key
    and value are whole."""
    by_name = {(f[0], f[1]): fid for fid, f in by_id.items()}
    order: list[str] = []
    full: list[tuple[str, str, str]] = []
    for line in text.splitlines():
        entity, _, rest = line.partition(LINE_SEPARATOR)
        key, colon, value = rest.partition(": ")
        if not colon:                          # "+N more (offset=K)", "no relevant facts"
            continue
        fid = None
        fields = value.split(LINE_SEPARATOR)
        if len(fields) > 1 and _FACT_ID.fullmatch(fields[-1]):
            fid = fields.pop()
        if len(fields) > 1 and _AGE.fullmatch(fields[-1]):
            fields.pop()
        fact = (entity, key, LINE_SEPARATOR.join(fields))
        fid = fid or by_name.get((entity, key))
        if fid is None:
            continue
        order.append(fid)
        if by_id.get(fid) == fact:
            full.append(fact)
    return order, full


def _named_facts(text: str, by_id: dict[str, tuple[str, str, str]]
                 ) -> tuple[list[str], list[tuple[str, str, str]]]:
    """The fact ids an answer names in order, and the facts whose value it carries in full."""
    try:
        envelope = json.loads(text)
    except ValueError:
        return _fact_lines(text, by_id)       # recall, and query_facts' compact answer
    if isinstance(envelope, dict) and envelope.get("contract") == "crc-v1":
        order = [p["id"] for p in envelope["pointers"]]
        full = [by_id[c["id"]] for c in envelope["content"] if c["id"] in by_id]
        return order, full
    delivered = [f for f in by_id.values() if f[2] in text]
    return [fid for fid, f in by_id.items() if f in delivered], delivered


def cruxsql_session(root: Path, facts: list[tuple[str, str, str]], n_queries: int, session_budget: int
                    ) -> dict[str, Any]:
    data = root / "cruxsql"
    with Store(data) as store:
        stored = store.store_batch([StoreRequest(e, k, v, actor="bench") for e, k, v in facts])
    by_id = {f.fact_id: (f.entity, f.key, f.value) for f in stored}
    out: dict[str, Any] = {}
    with Store(data) as store:
        from cruxsql.accounting.usage import BudgetPolicy
        server = CruxServer(store, identity=Identity("bench"), budgets=BudgetPolicy(session_budget))
        for tool in RECALL_TOOLS:
            for budget in BUDGETS:
                tally = Tally()
                for query, wanted in questions(facts, n_queries):
                    result = server.call(tool, recall_arguments(query, budget))
                    text = result.content[0].text
                    tally.answer(_wire_tokens(result), text, budget)
                    order, full = _named_facts(text, by_id)
                    tally.content_tokens += sum(estimate_tokens_str(f"{e} {k} {v}") for e, k, v in full)
                    tally.relevant_full += wanted in full
                    tally.asked += 1
                    tally.hits_at_5 += any(by_id.get(fid) == wanted for fid in order[:5])
                out[f"{tool}@{budget}"] = tally.row()
        docs = Tally()
        for i in range(10):
            server.call("ingest_document", {"doc_id": f"note-{i}.md", "text": note(i)})
        for i in range(10):
            result = server.call("query", {"query": f"{TEAMS[i]} failover drill", "token_budget": 200})
            text = result.content[0].text
            docs.answer(_wire_tokens(result), text, 200)
            docs.asked += 1
            envelope = json.loads(text) if text.startswith("{") else {}
            hits = envelope.get("pointers", [])
            # each note was ingested as its own segment, in order: note-i is result id "i:0"
            docs.hits_at_5 += any(p.get("id") == f"{i}:0" for p in hits[:5])
            docs.content_tokens += sum(estimate_tokens_str(c["text"]) for c in envelope.get("content", []))
            docs.relevant_full += any(c["id"] == f"{i}:0" for c in envelope.get("content", []))
        out["document query@200"] = docs.row()
        out["workspace"] = workspace_reads(server, root)
        usage = server.call("session_token_usage", {}).structured_content
        out["session"] = {"limit": session_budget, "used": usage["used"],
                          "overshoot": max(0, usage["used"] - session_budget)}
    return out


def note(i: int) -> str:
    return (f"# Failover drill {i}\n\nThe {TEAMS[i]} team runs the failover drill for region eu-west-{i % 3 + 1} "
            f"every quarter. Step one freezes deploys, step two promotes the standby, step three replays the "
            f"queue from offset zero and checks the ledger totals.\n")


def workspace_reads(server: CruxServer, root: Path) -> dict[str, Any]:
    """Index a small workspace beside the store and read it 5 ways; the outline against a full read."""
    import subprocess
    ws = root / "ws"
    (ws / "pkg").mkdir(parents=True)
    (ws / "pkg" / "drill.py").write_text("def failover(region):\n    \"\"\"Promote the standby.\"\"\"\n"
                                         "    return region\n\n\ndef replay(queue, offset=0):\n    return queue[offset:]\n")
    changelog = "# Changelog\n\n" + "".join(f"## 4.{v}.0\n\n- fixed drill step {v}\n- faster replay\n\n"
                                           for v in range(120, 0, -1))
    (ws / "CHANGELOG.md").write_text(changelog)
    subprocess.run([sys.executable, "-m", "cruxsql", "workspace", "index", str(ws), "--data-dir",
                    str(server.store.data_dir)], check=True, capture_output=True)
    calls = [("ctx_search", {"query": "failover"}), ("ctx_read", {"path": "pkg/drill.py", "mode": "signatures"}),
             ("ctx_doc", {"path": "CHANGELOG.md", "view": "outline"}), ("ctx_impact", {"target": "pkg/drill.py"}),
             ("ctx_context", {"task": "how does replay work", "token_budget": 300})]
    tokens = {}
    for name, args in calls:
        result = server.call(name, args)
        tokens[name] = _wire_tokens(result)
    full = _wire_tokens(server.call("ctx_read", {"path": "CHANGELOG.md", "mode": "full"}))
    return {"tokens_per_call": round(sum(tokens.values()) / len(tokens), 1), "calls": tokens,
            "outline_share_of_full_read": round(tokens["ctx_doc"] / full, 3)}


def memory_server_session(root: Path, facts: list[tuple[str, str, str]], n_queries: int,
                          package: Optional[Path]) -> dict[str, Any]:
    """The same facts and questions against @modelcontextprotocol/server-memory over stdio (SDK client)."""
    node = shutil.which("node")
    entry = package / "node_modules" / "@modelcontextprotocol" / "server-memory" / "dist" / "index.js" \
        if package else None
    if node is None or entry is None or not entry.is_file():
        return {"skipped": "node or @modelcontextprotocol/server-memory not found (npm install it into a temp "
                           "folder outside the repository and pass --memory-server FOLDER)"}
    import anyio
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=node, args=[str(entry)],
                                   env={**os.environ, "MEMORY_FILE_PATH": str(root / "memory.jsonl")})
    out: dict[str, Any] = {}

    async def run() -> None:
        async with stdio_client(params, errlog=open(os.devnull, "w")) as streams, \
                ClientSession(*streams[:2]) as session:
            await session.initialize()
            entities: dict[str, list[str]] = {}
            for e, k, v in facts:
                entities.setdefault(e, []).append(f"{k}: {v}")
            await session.call_tool("create_entities", {"entities": [
                {"name": e, "entityType": "service", "observations": obs} for e, obs in entities.items()]})
            for budget in BUDGETS:
                tally = Tally()
                for query, wanted in questions(facts, n_queries):
                    # its search matches the whole query as one substring: an agent passes the name alone
                    result = await session.call_tool("search_nodes", {"query": query.split()[0]})
                    text = result.content[0].text if result.content else ""
                    tally.answer(_wire_tokens(result), text, budget)
                    try:
                        nodes = json.loads(text).get("entities", [])
                    except ValueError:
                        nodes = []
                    observed = [(n["name"], o) for n in nodes for o in n.get("observations", [])]
                    tally.content_tokens += sum(estimate_tokens_str(f"{n} {o}") for n, o in observed)
                    line = f"{wanted[1]}: {wanted[2]}"
                    tally.relevant_full += (wanted[0], line) in observed
                    tally.asked += 1
                    tally.hits_at_5 += (wanted[0], line) in observed[:5]
                out[f"search_nodes@{budget}"] = tally.row()
                out[f"search_nodes@{budget}"]["note"] = "no token_budget: the same answer at every budget"

    anyio.run(run)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--facts", type=int, default=1000)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--session-budget", type=int, default=200_000)
    parser.add_argument("--memory-server", type=Path, default=None,
                        help="folder holding node_modules/@modelcontextprotocol/server-memory")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    facts = corpus(args.facts)
    with tempfile.TemporaryDirectory(prefix="bench-agent-tokens-") as tmp:
        root = Path(tmp)
        results = {"cruxsql": cruxsql_session(root, facts, args.queries, args.session_budget),
                   "server-memory": memory_server_session(root, facts, args.queries, args.memory_server)}
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"session: {len(facts)} facts, {args.queries} recall questions x budgets {BUDGETS}, recall via "
          f"{' and '.join(RECALL_TOOLS)}; recall's embedder: {os.environ.get(EMBEDDER_ENV) or 'default (minilm if installed)'}")
    columns = ("tokens_per_call", "tokens_per_relevant_fact", "envelope_share", "content_share_of_received",
               "recall_at_5",
               "overshooting_calls", "max_overshoot", "calls_received_over_budget")
    print(f"{'server':14} {'call':20} " + " ".join(f"{c:>{max(10, len(c))}}" for c in columns))
    for server_name, figures in results.items():
        if "skipped" in figures:
            print(f"{server_name:14} skipped: {figures['skipped']}")
            continue
        for call, row in figures.items():
            if call in ("workspace", "session"):
                continue
            print(f"{server_name:14} {call:20} " + " ".join(f"{str(row[c]):>{max(10, len(c))}}" for c in columns))
    crux = results["cruxsql"]
    print(f"workspace reads: {crux['workspace']['tokens_per_call']} tokens per call {crux['workspace']['calls']}; "
          f"changelog outline = {crux['workspace']['outline_share_of_full_read']:.1%} of a full read")
    print(f"session: used {crux['session']['used']} of {crux['session']['limit']}, overshoot "
          f"{crux['session']['overshoot']}")


if __name__ == "__main__":
    main()
