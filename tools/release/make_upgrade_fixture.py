"""Write the upgrade fixture of the cruxsql version installed here: a data directory plus expected answers.

Run once per release, with that release's code, and commit the result:

    python tools/release/make_upgrade_fixture.py tests/fixtures/upgrade/v$(python -c 'import importlib.metadata as m; print(m.version("cruxsql"))')

`tests/facts/test_upgrade.py` opens every fixture with the current code and checks that the view migrates,
answers the same questions, and that the journal is never rewritten by a migration.
"""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import apsw

from cruxsql.facts.journal import JOURNAL_NAME
from cruxsql.facts.view_file import DB_NAME

QUESTIONS = {
    "facts": "SELECT fact_id, tenant_hash, entity, key, value, deleted, superseded_by, version, private, "
             "horizon_class FROM facts ORDER BY fact_id",
    "events_by_op": "SELECT op, count(*) FROM journal_events GROUP BY op ORDER BY op",
    "live": "SELECT fact_id FROM live_facts ORDER BY fact_id",
}


def cli(data_dir: Path, *args: str, stdin: str | None = None) -> str:
    out = subprocess.run([sys.executable, "-m", "cruxsql", *args, "--data-dir", str(data_dir)], input=stdin,
                         capture_output=True, text=True, check=True)
    return out.stdout


def answers(data_dir: Path) -> dict:
    db = apsw.Connection(str(data_dir / DB_NAME), flags=apsw.SQLITE_OPEN_READONLY)
    out = {name: [list(r) for r in db.execute(sql)] for name, sql in QUESTIONS.items()}
    db.close()
    recall = json.loads(cli(data_dir, "query", "deploy owner", "--tenant", "acme", "--json"))
    out["recall_acme_deploy_owner"] = [r["fact_id"] for r in recall["rows"]]
    search = json.loads(cli(data_dir, "search", "terraform drift", "--tenant", "acme", "--contract", "legacy",
                            "--json"))
    out["search_acme_terraform_drift"] = [h["result_id"] for h in search["results"]]
    return out


def build(data_dir: Path) -> None:
    def store(*args: str) -> str:
        return cli(data_dir, "store", *args).split()[0]

    store("svc:api", "owner", "alice", "--tenant", "acme", "--actor", "ops")
    store("svc:api", "owner", "bob", "--tenant", "acme", "--actor", "ops")
    strategy = store("deployment", "strategy", "blue-green, canary first", "--tenant", "acme", "--confidence", "0.95")
    store("deployment", "window", "Tuesdays 10:00 UTC", "--tenant", "acme")
    gone = store("deployment", "pager", "+1 555 0100 on-call rota", "--tenant", "acme")
    store("deployment", "strategy", "rolling", "--tenant", "globex")
    store("__agent::claude::notes", "todo", "check the canary dashboards", "--tenant", "acme")
    store("user:42", "email", "someone@example.com", "--tenant", "acme", "--private")
    store("incident:7", "status", "mitigated, watching error rates", "--tenant", "acme")
    cli(data_dir, "erase", "--entity-prefix", "incident:", "--tenant", "acme", "--reason", "fixture erasure")
    volatile = store("incident:8", "status", "degraded writes in eu-west", "--tenant", "acme")
    cli(data_dir, "set-horizon", volatile, "volatile")
    cli(data_dir, "reverify", strategy)
    cli(data_dir, "set-validity", strategy, "--from", "2026-01-01T00:00:00Z", "--to", "2030-01-01T00:00:00Z")
    cli(data_dir, "store-batch", "-", stdin="\n".join(json.dumps(r) for r in [
        {"entity": "runbook:deploy", "key": "step1", "value": "freeze merges", "tenant_hash": "acme"},
        {"entity": "runbook:deploy", "key": "step2", "value": "deploy the canary", "tenant_hash": "acme"},
    ]) + "\n")
    cli(data_dir, "delete", gone)
    cli(data_dir, "ingest", "-", "--tenant", "acme", stdin="\n".join(json.dumps(r) for r in [
        {"doc_id": "infra.md", "text": "# Terraform\nTerraform drift is detected nightly and reported to #infra."},
        {"doc_id": "deploy.md", "text": "# Deploys\nCanary first, then the rest of the fleet after 30 minutes."},
    ]) + "\n")
    cli(data_dir, "hold", "place", "--tenant", "acme", "--entity-prefix", "user:", "--reason", "litigation 2026-17",
        "--actor", "legal")


def main() -> None:
    target = Path(sys.argv[1])
    if target.exists():
        sys.exit(f"Error: {target} exists")
    data_dir = target / "data"
    build(data_dir)
    (target / "expected.json").write_text(json.dumps({
        "version": metadata.version("cruxsql"),
        "journal_bytes": (data_dir / JOURNAL_NAME).stat().st_size,
        "answers": answers(data_dir),
    }, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    db = apsw.Connection(str(data_dir / DB_NAME))
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()  # the last connection to close removes the -wal and -shm files


if __name__ == "__main__":
    main()
