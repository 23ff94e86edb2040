"""The SQL console refuses ATTACH by what happens, whatever its message says: attaching an existing,
readable database (which a read-only connection could open) never runs, through the API or the CLI."""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest

from cruxsql.errors import InvalidInput
from cruxsql.facts.store import Store
from cruxsql.console.readonly_sql import run_readonly_query


@pytest.fixture
def other_db(tmp_path: Path) -> Path:
    path = tmp_path / "other.db"
    db = apsw.Connection(str(path))
    db.execute("CREATE TABLE t (secret TEXT); INSERT INTO t VALUES ('outside-the-view')")
    db.close()
    return path


def test_attaching_an_existing_database_does_not_run(store: Store, other_db: Path) -> None:
    store.store("svc", "owner", "alice")
    before = other_db.read_bytes()
    with pytest.raises(InvalidInput):
        run_readonly_query(store.data_dir / "cruxsql.db", f"ATTACH DATABASE '{other_db}' AS other")
    assert other_db.read_bytes() == before
    # the console still answers from the view alone
    assert run_readonly_query(store.data_dir / "cruxsql.db", "SELECT count(*) FROM pragma_database_list") == (
        ["count(*)"], [(1,)])


def test_the_cli_exits_non_zero_and_prints_no_rows(store: Store, run_cli, other_db: Path) -> None:
    store.store("svc", "owner", "alice")
    result = run_cli("sql", f"ATTACH DATABASE '{other_db}' AS other", "--json")
    assert result.returncode != 0 and result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1
