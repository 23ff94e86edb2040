"""Upgrades never lose data: every released version's data directory opens, migrates and answers the same.

`tests/fixtures/upgrade/vX.Y.Z/` was written by release X.Y.Z (`tools/release/make_upgrade_fixture.py`);
add one per release. A view migrated by a newer cruxsql is refused, never guessed at.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import apsw
import pytest

import cruxsql
from cruxsql.facts import view_file
from support.journal_files import journal_bytes

FIXTURES = sorted((Path(__file__).resolve().parents[1] / "fixtures" / "upgrade").iterdir())
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools" / "release"))
from make_upgrade_fixture import answers  # noqa: E402


def _migration_versions() -> set[int]:
    return {int(p.name[:4]) for p in view_file.migrations_dir().glob("[0-9][0-9][0-9][0-9]_*.sql")}


@pytest.mark.slow
@pytest.mark.parametrize("fixture", FIXTURES, ids=[f.name for f in FIXTURES])
def test_released_data_directory_opens_migrates_and_answers_the_same(tmp_path, fixture):
    expected = json.loads((fixture / "expected.json").read_text(encoding="utf-8"))
    data_dir = tmp_path / "data"
    shutil.copytree(fixture / "data", data_dir)
    journal_before = journal_bytes(data_dir)
    assert len(journal_before) == expected["journal_bytes"]

    with cruxsql.open(data_dir) as store:
        applied = {r[0] for r in store.db.execute("SELECT version FROM schema_migrations")}
        assert applied == _migration_versions()
        assert store.verify().ok
    assert answers(data_dir) == expected["answers"]
    assert journal_bytes(data_dir) == journal_before, "a migration rewrote the journal"


def test_a_view_from_a_newer_cruxsql_is_refused(tmp_path):
    with cruxsql.open(tmp_path) as store:
        store.store("svc", "owner", "alice")
        store.db.execute("INSERT INTO schema_migrations (version, name, applied_at) VALUES (9999, 'future', 'x')")
    journal = journal_bytes(tmp_path)
    with pytest.raises(cruxsql.ViewTooNew, match="schema version 9999, newer than this cruxsql knows"):
        cruxsql.open(tmp_path)
    result = subprocess.run([sys.executable, "-m", "cruxsql", "query", "alice", "--data-dir", str(tmp_path)],
                            capture_output=True, text=True)
    assert result.returncode == 1
    assert result.stderr.startswith("Error: cruxsql.db has schema version 9999") and "Traceback" not in result.stderr
    assert journal_bytes(tmp_path) == journal
    db = apsw.Connection(str(tmp_path / "cruxsql.db"), flags=apsw.SQLITE_OPEN_READONLY)
    assert db.execute("SELECT max(version) FROM schema_migrations").fetchone()[0] == 9999


def test_a_facts_events_are_found_by_index_without_journal_events_fact(tmp_path):
    # migration 0018 dropped journal_events' fact index; docs/sql.md's fact-history query reads the
    # one on journal_event_facts instead of scanning
    with cruxsql.open(tmp_path) as store:
        fact = store.store("svc", "owner", "alice")
        store.delete(fact.fact_id)
        indexes = {r[0] for r in store.db.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
        assert "journal_events_fact" not in indexes and "journal_event_facts_fact" in indexes
        query = ("SELECT e.line_no, e.op, e.event_at, r.role FROM journal_event_facts r JOIN journal_events e "
                 "USING (line_no) WHERE r.fact_id = ?")
        plan = " ".join(r[3] for r in store.db.execute("EXPLAIN QUERY PLAN " + query, (fact.fact_id,)))
        assert "journal_event_facts_fact" in plan and "SCAN" not in plan
        assert [(op, role) for _, op, _, role in store.db.execute(query, (fact.fact_id,))] == [
            ("store", "stored"), ("delete", "deleted")]


def test_a_migration_meets_the_event_indexes_under_their_own_names_after_a_compaction(tmp_path: Path) -> None:
    """A compaction leaves the event tables' indexes under their alternate names (`<name>__alt`); before a
    pending migration runs, they are built again under the names the migrations gave them, so one that
    drops or remakes such an index finds it."""
    from cruxsql.facts import event_indexes
    from cruxsql.facts.store import Store, StoreRequest
    from cruxsql.governance import compaction

    data = tmp_path / "data"
    with Store(data) as store:
        facts = store.store_batch([StoreRequest("svc", f"k{i}", f"value {i}") for i in range(20)])
        store.delete(facts[0].fact_id)
        compaction.compact(store)
        assert {name for name, _ in event_indexes.live(store.db)} == {
            "journal_event_facts_fact__alt", "journal_events_op_time__alt"}
    migrations = tmp_path / "migrations"
    shutil.copytree(view_file.migrations_dir(), migrations)
    (migrations / "9999_event_index_change.sql").write_text(
        "DROP INDEX journal_events_op_time;\nCREATE INDEX journal_events_op_time ON journal_events (op, event_at);\n")
    db = view_file.open_connection(data / view_file.DB_NAME, migrate_schema=False)
    assert view_file.migrate(db, migrations) == ["9999_event_index_change.sql"]
    assert dict(event_indexes.live(db)) == {
        "journal_event_facts_fact": 'CREATE INDEX "journal_event_facts_fact" ON "journal_event_facts" (fact_id)',
        "journal_events_op_time": "CREATE INDEX journal_events_op_time ON journal_events (op, event_at)"}
    assert db.execute("PRAGMA integrity_check").get == "ok"
    db.close()


def test_an_event_index_name_a_running_compactions_shadow_holds_is_left_alternate(tmp_path: Path) -> None:
    from cruxsql.facts import event_indexes

    db = view_file.open_connection(tmp_path / view_file.DB_NAME)
    with db:
        db.execute("DROP INDEX journal_events_op_time")
        db.execute('CREATE INDEX "journal_events_op_time__alt" ON "journal_events" (op, event_at, byte_length)')
        db.execute('CREATE TABLE "compaction_next_1_abc_events" (line_no INTEGER PRIMARY KEY, op TEXT)')
        db.execute('CREATE INDEX "journal_events_op_time" ON "compaction_next_1_abc_events" (op)')
        db.execute("DROP INDEX journal_event_facts_fact")
        db.execute('CREATE INDEX "journal_event_facts_fact__alt" ON "journal_event_facts" (fact_id)')
        assert event_indexes.restore_names(db) == ["journal_event_facts_fact"]
    assert {name for name, _ in event_indexes.live(db)} == {"journal_event_facts_fact", "journal_events_op_time__alt"}
    db.close()
