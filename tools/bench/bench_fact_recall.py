"""Fact recall quality benchmark: `recall` (BM25, and fused with MiniLM) beside `query_facts` and SQLite
FTS5 `bm25()` over the same facts, in the same process, on labelled questions with known answers.

    python tools/bench/bench_fact_recall.py                       # 1k, 10k, 100k facts; MiniLM at 1k
    python tools/bench/bench_fact_recall.py --sizes 1000 --dense-sizes ""   # quick, BM25 only
    python tools/bench/bench_fact_recall.py --dense-sizes 1000,10000     # MiniLM at 10k too (embeds 10k facts first)

The store is generated deterministically: services (`payments-api`, `ledger-edge-worker`), people
(`Maria Okafor`), projects (`Project Falcon`) with typed attributes (database, owner, role, deadline, ...),
some of them updated (the answer is the newest value), and free-text notes that mention the same words
(`migrated the database`, `owner changed`) until the size is reached. Queries come in three kinds per
attribute, each with several templates: keywords (`payments-api database`), literal questions (`which
database does payments-api use?`) and paraphrases sharing no content word with the answer's key or value
(`where does payments-api persist its records?`). Two query sets are drawn: `dev` (seed 1, the first
template of each pair: the one the analyzer was looked at on) and `held-out` (seed 2, other targets and
the second templates, never looked at while building). Figures: recall@5/@10 and MRR@10 of the answer's
fact id, the tokens an MCP client receives per call (text and structured content, chars/4 as the server
accounts them), p50/p95 latency of the API call (wall clock, and this process's CPU time: the machine may
be shared), and the share of a rebuild spent indexing words.
"""

from __future__ import annotations

import argparse
import heapq
import os
import random
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import apsw  # noqa: E402

import cruxsql  # noqa: E402
from cruxsql.facts import codec, timestamps  # noqa: E402
from cruxsql.facts.codec import Fact  # noqa: E402
from cruxsql.mcp.identity import Identity  # noqa: E402
from cruxsql.mcp.server import CruxServer  # noqa: E402
from cruxsql.recall.text_index import TextIndex  # noqa: E402
from cruxsql.recall.fact_terms import FactTerms  # noqa: E402
from cruxsql.recall.tokens import estimate_tokens  # noqa: E402

T0 = timestamps.parse_ns("2026-01-01T00:00:00Z")
PREFIXES = ("payments billing search auth ledger inventory shipping notify profile catalog checkout fraud ranking "
            "ingest export report gateway session media pricing").split()
SUFFIXES = "api worker service gateway proxy scheduler indexer frontend".split()
MIDDLES = "core edge batch stream legacy internal public mobile".split()
FIRST = ("Maria James Aisha Kenji Sofia Omar Lena Diego Priya Tomasz Chen Fatima Lucas Amara Ivan Noor Hugo Zara "
         "Mateo Yuki Olga Samuel Leila Arjun Ingrid Kofi Elena Ravi Hana Felix").split()
LAST = ("Okafor Smith Haddad Tanaka Rossi Farouk Novak Alvarez Sharma Kowalski Wei Bello Martin Mensah Petrov Khan "
        "Dubois Ahmed Garcia Sato Ivanova Osei Nasser Patel Berg Boateng Moreau Iyer Kim Wagner").split()
CODENAMES = ("Falcon Aurora Bedrock Cobalt Drift Ember Fjord Granite Harbor Iris Juniper Kestrel Lumen Meridian "
             "Nimbus Onyx Prism Quartz Raven Sierra Tundra Umbra Vertex Willow Zephyr Atlas Beacon Cinder Delta "
             "Echo").split()
VALUES = {
    "database": ["PostgreSQL 15", "MySQL 8", "MongoDB 7", "Cassandra 4", "DynamoDB", "CockroachDB", "ClickHouse",
                 "Spanner", "MariaDB 11", "Oracle 19c"],
    "language": ["Go", "Rust", "Python 3.12", "Java 21", "Kotlin", "TypeScript", "Elixir", "C++", "Scala", "Ruby"],
    "region": ["eu-west-1", "us-east-1", "ap-south-1", "eu-central-1", "us-west-2", "sa-east-1", "ap-northeast-1"],
    "queue": ["Kafka", "RabbitMQ", "SQS", "NATS JetStream", "Pulsar", "Google Pub/Sub"],
    "role": ["staff engineer", "engineering manager", "site reliability engineer", "product manager",
             "data scientist", "security engineer", "designer", "principal architect"],
    "location": ["Lagos", "Berlin", "Toronto", "Singapore", "Lisbon", "Austin", "Nairobi", "Warsaw", "Osaka"],
    "team": ["payments team", "platform team", "growth team", "infra team", "search team", "identity team"],
    "deadline": ["2027-01-31", "2027-03-31", "2027-06-30", "2027-09-30", "2027-12-15"],
    "status": ["on track", "at risk", "blocked", "done", "paused"],
}
SERVICE_KEYS = ("database", "language", "owner", "region", "queue")
PERSON_KEYS = ("role", "location", "team")
PROJECT_KEYS = ("lead", "deadline", "status")
# kind -> key -> templates; dev uses [0], held-out [1]
TEMPLATES = {
    "keyword": {
        "database": ["{e} database", "database {e}"], "language": ["{e} language", "language of {e}"],
        "owner": ["{e} owner", "owner {e}"], "region": ["{e} region", "region of {e}"],
        "queue": ["{e} queue", "queue {e}"], "role": ["{e} role", "role {e}"],
        "location": ["{e} location", "location {e}"], "team": ["{e} team", "team of {e}"],
        "lead": ["{e} lead", "lead {e}"], "deadline": ["{e} deadline", "deadline of {e}"],
        "status": ["{e} status", "status {e}"]},
    "question": {
        "database": ["which database does {e} use?", "what database is {e} on?"],
        "language": ["what language is {e} written in?", "which programming language does {e} use?"],
        "owner": ["who is the owner of {e}?", "who owns {e}?"],
        "region": ["which region is {e} deployed in?", "what region does {e} run in?"],
        "queue": ["what queue does {e} use?", "which message queue does {e} publish to?"],
        "role": ["what is {e}'s role?", "what role does {e} have?"],
        "location": ["where is {e} located?", "what is the location of {e}?"],
        "team": ["which team is {e} on?", "what team does {e} belong to?"],
        "lead": ["who is the lead of {e}?", "who leads {e}?"],
        "deadline": ["what is the deadline of {e}?", "when is {e}'s deadline?"],
        "status": ["what is the status of {e}?", "what status is {e} in?"]},
    "paraphrase": {
        "database": ["where does {e} persist its records?", "what storage engine keeps {e}'s data?"],
        "language": ["what is {e} coded in?", "which syntax are {e}'s sources authored in?"],
        "owner": ["who is responsible for {e}?", "whom should I ask about {e}?"],
        "region": ["where in the world is {e} hosted?", "in which geography do {e}'s servers sit?"],
        "queue": ["how does {e} send asynchronous messages?", "which broker carries {e}'s events?"],
        "role": ["what does {e} do for a living?", "what is {e}'s job title?"],
        "location": ["which city does {e} live in?", "where is {e} based?"],
        "team": ["which group does {e} work with?", "who are {e}'s colleagues?"],
        "lead": ["who is in charge of {e}?", "who runs {e}?"],
        "deadline": ["when must {e} be finished?", "by what date should {e} ship?"],
        "status": ["how is {e} going?", "is {e} on schedule?"]},
}
NOTE_WORDS = ("deploy canary rollout incident pager runbook schema migration replica shard cache eviction worker cron "
              "invoice customer latency budget release freeze review backlog retro alert dashboard capacity quota "
              "database owner language region queue role team deadline status migrated changed upgraded moved "
              "rotated paged").split()


@dataclass
class Query:
    kind: str
    text: str
    answer: str          # the fact id of the newest value


def entity_names(n: int) -> tuple[list[str], list[str], list[str]]:
    """Service, person and project names: ~40 facts an entity (20 at 1k facts)."""
    want = max(50, n // 40)
    services = [f"{a}-{b}" for a in PREFIXES for b in SUFFIXES]
    services += [f"{a}-{c}-{b}" for c in MIDDLES for a in PREFIXES for b in SUFFIXES]
    people = [f"{f} {last}" for last in LAST for f in FIRST]
    projects = [f"Project {c}" for c in CODENAMES] + [f"Project {c} {r}" for r in ("II", "III", "Next") for c in CODENAMES]
    k = max(1, want // 10)
    return services[:k * 6], people[:k * 3], projects[:k]


def generate(path: Path, n: int, seed: int = 42) -> dict[tuple[str, str], str]:
    """Write a journal of about n facts; return the newest fact id of every typed (entity, key)."""
    rng = random.Random(seed)
    services, people, projects = entity_names(n)
    typed = ([(e, k) for e in services for k in SERVICE_KEYS] + [(e, k) for e in people for k in PERSON_KEYS]
             + [(e, k) for e in projects for k in PROJECT_KEYS])
    everyone = services + people + projects
    newest: dict[tuple[str, str], str] = {}
    counter = 0
    with open(path, "w", encoding="utf-8") as fh:
        def write(entity: str, key: str, value: str, prev: Optional[tuple[str, int]] = None) -> str:
            nonlocal counter
            counter += 1
            at = T0 + counter * 60_000_000_007
            fact = Fact(fact_id=f"f_{counter:032x}", entity=entity, key=key, value=value, confidence=1.0,
                        stored_at=at, tokens=codec.token_cost(value), version=prev[1] + 1 if prev else 1,
                        supersedes=prev[0] if prev else None, actor="bench")
            fh.write(codec.encode_event(codec.StoreEvent(fact)) + "\n")
            if prev:
                fh.write(codec.encode_event(codec.SupersedeEvent(prev[0], fact.fact_id,
                                                                 timestamps.format_event_time(at))) + "\n")
            return fact.fact_id

        def value_of(entity: str, key: str) -> str:
            if key == "owner":
                return rng.choice(people)
            if key == "lead":
                return rng.choice(people)
            return rng.choice(VALUES[key])

        # typed facts and notes interleaved at random (write order decides query_facts' ranking); a tenth
        # of the typed facts get a new value later on (the answer is then the newest)
        n_notes = max(0, n - len(typed) - len(typed) // 10)
        order = [("typed", item) for item in typed] + [("note", None)] * n_notes
        rng.shuffle(order)
        updates: list[tuple[float, tuple[str, str]]] = []
        for i, (what, item) in enumerate(order):
            while updates and updates[0][0] <= i:
                _, (entity, key) = heapq.heappop(updates)
                newest[(entity, key)] = write(entity, key, value_of(entity, key), (newest[(entity, key)], 1))
            if what == "typed":
                entity, key = item
                newest[(entity, key)] = write(entity, key, value_of(entity, key))
                if rng.random() < 0.1:
                    heapq.heappush(updates, (rng.uniform(i, len(order)), (entity, key)))
                continue
            entity = rng.choice(everyone)
            words = [rng.choice(NOTE_WORDS) for _ in range(rng.randint(5, 12))]
            if rng.random() < 0.5:
                words.insert(rng.randrange(len(words)), rng.choice(everyone))
            if rng.random() < 0.3:
                words.insert(rng.randrange(len(words)), rng.choice(VALUES[rng.choice(list(VALUES))]))
            write(entity, f"note-{counter}", " ".join(words))
        for _, (entity, key) in sorted(updates):
            newest[(entity, key)] = write(entity, key, value_of(entity, key), (newest[(entity, key)], 1))
    return newest


def draw_queries(newest: dict[tuple[str, str], str], seed: int, variant: int, per_kind: int) -> list[Query]:
    rng = random.Random(seed)
    targets = rng.sample(sorted(newest), min(per_kind * 3, len(newest)))
    per_kind = len(targets) // 3
    out = []
    for i, kind in enumerate(("keyword", "question", "paraphrase")):
        for entity, key in targets[i * per_kind:(i + 1) * per_kind]:
            out.append(Query(kind, TEMPLATES[kind][key][variant].format(e=entity), newest[(entity, key)]))
    return out


class Fts5:
    """SQLite FTS5 (porter, unicode61) over the same live facts; words of the query OR-ed, ranked by bm25()."""

    def __init__(self, db: apsw.Connection) -> None:
        self.db = apsw.Connection(":memory:")
        self.db.execute("CREATE VIRTUAL TABLE fts USING fts5(fact_id UNINDEXED, entity, key, value, "
                        "tokenize='porter unicode61')")
        with self.db:
            self.db.executemany("INSERT INTO fts VALUES (?, ?, ?, ?)", db.execute(
                "SELECT fact_id, entity, key, value FROM facts WHERE deleted = 0 AND superseded_by IS NULL"))

    def search(self, text: str, k: int = 10) -> list[str]:
        words = "".join(c if c.isalnum() else " " for c in text).split()
        if not words:
            return []
        match = " OR ".join(f'"{w}"' for w in words)
        return [r[0] for r in self.db.execute("SELECT fact_id FROM fts WHERE fts MATCH ? ORDER BY bm25(fts) LIMIT ?",
                                              (match, k))]


def rank_of(ids: list[str], answer: str) -> Optional[int]:
    return ids.index(answer) + 1 if answer in ids else None


def evaluate(name: str, queries: list[Query], run: Callable[[str], list[str]],
             tokens: Optional[Callable[[str], int]] = None,
             per_query: Optional[list[tuple[float, float, str]]] = None) -> dict[str, dict[str, float]]:
    """recall@5/@10, MRR@10 per kind, tokens per call (p50) and latency p50/p95 (ms) over every query;
    `per_query` receives (wall ms, CPU ms, query) of each."""
    out: dict[str, dict[str, float]] = {}
    latencies, cpu, costs = [], [], []
    by_kind: dict[str, list[Optional[int]]] = {}
    for q in queries:
        t, c = time.perf_counter(), time.process_time()
        ids = run(q.text)
        latencies.append((time.perf_counter() - t) * 1000)
        cpu.append((time.process_time() - c) * 1000)
        if per_query is not None:
            per_query.append((latencies[-1], cpu[-1], q.text))
        by_kind.setdefault(q.kind, []).append(rank_of(ids[:10], q.answer))
        if tokens is not None:
            costs.append(tokens(q.text))
    for kind, ranks in by_kind.items():
        out[kind] = {"r5": sum(1 for r in ranks if r and r <= 5) / len(ranks),
                     "r10": sum(1 for r in ranks if r) / len(ranks),
                     "mrr": sum(1 / r for r in ranks if r) / len(ranks)}
    lat, cpu = sorted(latencies), sorted(cpu)
    p95 = min(len(lat) - 1, int(0.95 * len(lat)))
    out["all"] = {"p50": statistics.median(lat), "p95": lat[p95], "cpu50": statistics.median(cpu), "cpu95": cpu[p95],
                  "tokens": statistics.median(costs) if costs else float("nan")}
    return out


def wire_tokens(server: CruxServer, tool: str, arguments: dict) -> int:
    wire = server.call(tool, arguments)
    assert not wire.is_error, wire.content[0].text
    return estimate_tokens(wire.model_dump(mode="json", by_alias=True, exclude_none=True))


def run_size(n: int, workdir: Path, dense: bool, per_kind: int, slowest: int = 0) -> None:
    data_dir = workdir / f"facts-{n}"
    data_dir.mkdir(parents=True, exist_ok=True)
    newest = generate(data_dir / "facts.jsonl", n)
    (data_dir / "cruxsql.db").unlink(missing_ok=True)
    spent = [0.0, 0.0]
    original = FactTerms.index_range

    def timed(self: FactTerms, last: int, max_seq: int) -> None:
        t, c = time.perf_counter(), time.process_time()
        original(self, last, max_seq)
        spent[0] += time.perf_counter() - t
        spent[1] += time.process_time() - c

    FactTerms.index_range = timed  # type: ignore[method-assign]
    try:
        t, c = time.perf_counter(), time.process_time()
        store = cruxsql.open(data_dir)       # a fresh view: the whole journal is replayed (the rebuild)
        TextIndex(store.db).sync()           # a journal short of bulk replay is indexed at the first read
        rebuild, rebuild_cpu = time.perf_counter() - t, time.process_time() - c
    finally:
        FactTerms.index_range = original  # type: ignore[method-assign]
    facts = store.db.execute("SELECT count(*) FROM facts").fetchone()[0]
    print(f"\n## {facts:,} facts ({len(newest):,} typed attributes)\n")
    print(f"rebuild {rebuild:.2f} s wall / {rebuild_cpu:.2f} s CPU, of which word postings {spent[0]:.2f} s wall "
          f"({100 * spent[0] / rebuild:.0f}%) / {spent[1]:.2f} s CPU ({100 * spent[1] / max(rebuild_cpu, 1e-9):.0f}%)")
    os.environ["CRUXSQL_EMBEDDER"] = "none"
    server = CruxServer(store, identity=Identity(agent="bench"))
    recall = server.recall
    fts = Fts5(store.db)
    minilm = None
    if dense:
        from cruxsql.embeddings import embedder_named

        minilm = embedder_named("minilm")
        t = time.perf_counter()
        recall.search("warm up", fusion="rrf", embedder=minilm)
        print(f"MiniLM vectors of every fact (first dense recall): {time.perf_counter() - t:.1f} s")
    for label, seed, variant in (("dev", 1, 0), ("held-out", 2, 1)):
        queries = draw_queries(newest, seed, variant, per_kind)
        systems: list[tuple[str, Callable[[str], list[str]], Optional[Callable[[str], int]]]] = [
            ("recall (bm25)", lambda q: [h.fact_id for h in recall.search(q, fusion="bm25", token_budget=10_000).hits],
             lambda q: wire_tokens(server, "recall", {"query": q, "fusion": "bm25"})),
            ("query_facts", lambda q: [r["fact_id"] for r in recall.query_facts(q, record_access=False).rows],
             lambda q: wire_tokens(server, "query_facts", {"query": q})),
            ("FTS5 bm25()", fts.search, None),
        ]
        if minilm is not None:
            for mode in ("rrf", "weighted"):
                systems.insert(1, (f"recall ({mode}, MiniLM)", lambda q, m=mode: [
                    h.fact_id for h in recall.search(q, fusion=m, embedder=minilm, token_budget=10_000).hits], None))
        print(f"\n### {label} queries (seed {seed}, templates #{variant + 1}; {per_kind} per kind)\n")
        print("| system | keyword r@5 | r@10 | MRR | question r@5 | r@10 | MRR | paraphrase r@5 | r@10 | MRR "
              "| tokens/call p50 | p50 ms | p95 ms | CPU p50 ms | CPU p95 ms |")
        print("|---|" + "---|" * 14)
        results = {}
        timed_queries: list[tuple[float, float, str]] = []
        for name, run, tokens in systems:
            res = evaluate(name, queries, run, tokens, timed_queries if name == "recall (bm25)" else None)
            results[name] = res
            cells = [f"{res[k][m]:.2f}" for k in ("keyword", "question", "paraphrase") for m in ("r5", "r10", "mrr")]
            print(f"| {name} | " + " | ".join(cells) + f" | {res['all']['tokens']:.0f} | {res['all']['p50']:.1f} "
                  f"| {res['all']['p95']:.1f} | {res['all']['cpu50']:.1f} | {res['all']['cpu95']:.1f} |")
        if slowest:
            print("\nslowest `recall` (bm25) queries, ms wall / CPU:")
            for wall, cpu_ms, text in sorted(timed_queries, reverse=True)[:slowest]:
                print(f"- {wall:.1f} / {cpu_ms:.1f}  {text}")
        mine, crux, fts5 = results["recall (bm25)"], results["query_facts"], results["FTS5 bm25()"]
        print(f"\nratios: tokens recall/query_facts {mine['all']['tokens'] / crux['all']['tokens']:.2f}; "
              f"p95 recall/query_facts {mine['all']['p95'] / crux['all']['p95']:.2f} (CPU "
              f"{mine['all']['cpu95'] / crux['all']['cpu95']:.2f}), "
              f"recall/FTS5 {mine['all']['p95'] / fts5['all']['p95']:.2f}; "
              f"question r@5 recall/FTS5 {mine['question']['r5'] / max(fts5['question']['r5'], 1e-9):.2f}")
    store.close()


def counts(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated fact counts, not {text!r}") from None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=counts, default=[1000, 10_000, 100_000], help="fact counts (default 1k,10k,100k)")
    ap.add_argument("--dense-sizes", type=counts, default=[1000],
                    help="sizes also measured fused with MiniLM (needs the [semantic] extra; default 1k: every "
                         "fact is embedded first, ~50 ms a fact on this shared machine)")
    ap.add_argument("--per-kind", type=int, default=40, help="queries per kind per set (default 40)")
    ap.add_argument("--workdir", type=Path, help="keep the stores here (default: a temp dir)")
    ap.add_argument("--slowest", type=int, default=0, metavar="N",
                    help="also print the N slowest `recall` (bm25) queries of each set, with their times")
    args = ap.parse_args()
    if args.slowest < 0:
        ap.error(f"--slowest must be 0 or more, not {args.slowest}")
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench-fact-recall-"))
    print(f"# fact recall: {', '.join(f'{n:,}' for n in args.sizes)} facts; stores under {workdir}")
    for n in args.sizes:
        run_size(n, workdir, n in args.dense_sizes, args.per_kind, args.slowest)


if __name__ == "__main__":
    main()
