"""Recall answers of this code against another commit's, on the same facts stored by single writes: same
hits, same order, same scores, for `recall` (Recall.search) and `query_facts`.

    python tools/bench/bench_recall_identity.py --compare a27032b [--facts 10000] [--locomo DIR]

Two workloads: the service workload of bench_fact_recall.py (--facts facts; its dev queries) and the
LoCoMo dev split when present (/work/shared/data/locomo-dev: every dialog turn stored as a fact, entity the
speaker, key the turn's dia_id, tenant the conversation; every question asked in its conversation's
tenant). Each code runs in its own process (`commits.code_of_commit`, PYTHONPATH), stores every fact with
its own store() (one write each, as an agent does), then asks every question twice: with nothing else
running, and while another connection holds SQLite's write lock (a writer mid-transaction: the read must
answer without writing). Either way a read answers from the index plus the unindexed tail it scans.
Facts are named by (tenant, entity, key, value), so answers compare across stores whose fact ids differ.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

LOCOMO = Path(__file__).resolve().parents[4] / "shared" / "data" / "locomo-dev"
if not LOCOMO.is_dir():
    LOCOMO = Path(__file__).resolve().parents[3] / "shared" / "data" / "locomo-dev"

CHILD = r"""
import json, sys, apsw, cruxsql
workload, data = json.load(open(sys.argv[1])), sys.argv[2]

def named(store, fact_ids):
    rows = dict((r[0], r[1:]) for r in store.db.execute(
        "SELECT fact_id, tenant_hash, entity, key, value FROM facts WHERE fact_id IN (%s)"
        % ",".join("?" * len(fact_ids)), fact_ids)) if fact_ids else {}
    return [list(rows[f]) for f in fact_ids]

def ask(store):
    recall = cruxsql.Recall(store)
    out = []
    for tenant, text in workload["questions"]:
        found = recall.search(text, tenant=tenant, top_k=10, token_budget=1000000)
        rows = recall.query_facts(text, tenant=tenant, top_k=10, contract="legacy", record_access=False).rows
        out.append({"recall": [n + [h.score, h.all_terms] for n, h in zip(named(store, [h.fact_id for h in found.hits]),
                                                                          found.hits)],
                    "query_facts": named(store, [r["fact_id"] for r in rows])})
    return out

with cruxsql.open(data) as store:
    for tenant, entity, key, value in workload["facts"]:
        store.store(entity, key, value, tenant=tenant)
    other = apsw.Connection(data + "/cruxsql.db")
    other.execute("BEGIN IMMEDIATE")
    beside_writer = ask(store)
    other.execute("ROLLBACK")
    other.close()
    alone = ask(store)
print(json.dumps({"alone": alone, "beside_writer": beside_writer, "code": cruxsql.__file__}))
"""


def service_workload(n: int) -> dict:
    """bench_fact_recall's facts (single writes, in journal order) and its dev queries."""
    from bench_fact_recall import draw_queries, generate

    with tempfile.TemporaryDirectory() as tmp:
        journal = Path(tmp) / "facts.jsonl"
        newest = generate(journal, n)
        facts = [("default", e["fact"]["entity"], e["fact"]["key"], e["fact"]["value"])
                 for e in map(json.loads, journal.open(encoding="utf-8")) if e.get("op") == "store"]
    return {"facts": facts, "questions": [("default", q.text) for q in draw_queries(newest, 1, 0, 100)]}


def locomo_workload(folder: Path) -> dict:
    facts, questions = [], []
    for path in sorted(folder.glob("*.json")):
        conversation = json.loads(path.read_text(encoding="utf-8"))
        tenant = f"locomo-{path.stem}"
        sessions = sorted((int(k.split("_")[1]), v) for k, v in conversation.items()
                          if k.startswith("session_") and k.count("_") == 1 and isinstance(v, list))
        for _, turns in sessions:
            facts += [(tenant, turn["speaker"], turn["dia_id"], turn["text"]) for turn in turns]
        questions += [(tenant, qa["question"]) for qa in conversation["qa"]]
    return {"facts": facts, "questions": questions}


def run_code(code: Path, workload_file: Path, work: Path) -> dict:
    data = Path(tempfile.mkdtemp(prefix="identity-", dir=work))
    # run from `work`: `python -c` puts its working directory first on sys.path, before PYTHONPATH
    done = subprocess.run([sys.executable, "-c", CHILD, str(workload_file), str(data)], cwd=work,
                          env={**os.environ, "PYTHONPATH": str(code), "CRUXSQL_EMBEDDER": "none"},
                          capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"{code}: the child failed:\n{done.stderr}")
    answers = json.loads(done.stdout)
    assert Path(answers["code"]).resolve().is_relative_to(code.resolve()), (answers["code"], code)
    return answers


def differences(a: list, b: list) -> tuple[int, int, int]:
    """(questions whose recall hits differ, whose recall scores differ though the hits do not, whose
    query_facts rows differ)."""
    hits = scores = rows = 0
    for x, y in zip(a, b):
        if [h[:4] for h in x["recall"]] != [h[:4] for h in y["recall"]]:
            hits += 1
        elif x["recall"] != y["recall"]:
            scores += 1
        rows += x["query_facts"] != y["query_facts"]
    return hits, scores, rows


def main() -> None:
    from commits import code_of_commit

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--compare", required=True, metavar="COMMIT", help="the code to compare with")
    parser.add_argument("--facts", type=int, default=10_000, help="facts of the service workload")
    parser.add_argument("--locomo", type=Path, default=LOCOMO, help="the LoCoMo dev split's folder")
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "cruxsql-bench-identity")
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    workloads = {"service": service_workload(args.facts)}
    if args.locomo.is_dir():
        workloads["locomo-dev"] = locomo_workload(args.locomo)
    codes = {"this checkout": Path(__file__).resolve().parents[2], args.compare: code_of_commit(args.compare, args.workdir)}
    print(f"{'workload':<12}{'facts':>8}{'questions':>11}  {'this checkout, read':<36}"
          f"{'recall hits differ':>20}{'scores only':>13}{'query_facts differ':>20}")
    for name, workload in workloads.items():
        path = args.workdir / f"{name}.json"
        path.write_text(json.dumps(workload), encoding="utf-8")
        answers = {code: run_code(tree, path, args.workdir) for code, tree in codes.items()}
        before = answers[args.compare]["alone"]
        for mode in ("alone", "beside_writer"):
            label = f"{mode.replace('_', ' a ')} vs {args.compare} alone"
            print(f"{name:<12}{len(workload['facts']):>8}{len(workload['questions']):>11}  {label:<36}"
                  + "".join(f"{d:>{w}}" for d, w in zip(differences(answers['this checkout'][mode], before),
                                                         (20, 13, 20))))
        print(f"{name:<12}{'':>19}  {args.compare + ' beside a writer vs alone':<36}"
              + "".join(f"{d:>{w}}" for d, w in zip(differences(answers[args.compare]["beside_writer"], before),
                                                     (20, 13, 20))))


if __name__ == "__main__":
    main()
