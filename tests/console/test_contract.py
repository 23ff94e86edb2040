"""The schema contract is the one source of docs/sql.md's schema table and of the console's metadata.

These need no Datasette: they compare the contract with that page, with a real view's schema and
with a real audit export's schema.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import apsw

import cruxsql
from cruxsql.console import contract
from cruxsql.console.metadata import AUDIT_DB, VIEW_DB, build_metadata
from cruxsql.governance.audit_export import AuditQuery, export_audit
from cruxsql.recall.freshness import DecayPolicy

ROOT = Path(__file__).resolve().parents[2]


def schema_of(path: Path) -> dict[str, list[str]]:
    db = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        names = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view') "
                                          "AND name NOT LIKE 'sqlite_%'")]
        return {n: [r[1] for r in db.execute(f'PRAGMA table_info("{n}")')] for n in names}
    finally:
        db.close()


def test_the_schema_table_is_generated_from_the_contract():
    result = subprocess.run([sys.executable, str(ROOT / "tools" / "schema_table.py"), "--check"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    page = (ROOT / "docs" / "sql.md").read_text(encoding="utf-8")
    assert contract.render_schema_table() in page
    assert "| `document_terms` (view) | analyzed term | with its BM25 document frequency |\n" in page


def test_a_drifted_schema_table_is_caught(tmp_path):
    """The check must fail on a table edited by hand (a row's notes changed)."""
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import schema_table as gen
    finally:
        sys.path.pop(0)
    text = (ROOT / "docs" / "sql.md").read_text(encoding="utf-8")
    drifted = text.replace("| canonical → sources, in recorded order |", "| canonical to sources |")
    assert drifted != text
    assert gen.with_table(drifted) != drifted  # what --check reports
    assert gen.with_table(drifted) == text


def test_contract_names_every_column_of_the_real_view(tmp_path):
    with cruxsql.open(tmp_path) as store:
        store.store("svc", "owner", "alice")
    schema = schema_of(tmp_path / "cruxsql.db")
    documented = {r.name: list(r.columns) for r in contract.VIEW_RELATIONS}
    assert set(schema) == set(documented) | set(contract.INTERNAL)
    assert not set(documented) & set(contract.INTERNAL)
    for name, columns in documented.items():
        assert columns == schema[name], name


def test_contract_names_every_column_of_a_real_audit_export(tmp_path):
    with cruxsql.open(tmp_path / "data") as store:
        store.store("svc", "owner", "alice")
        export_audit(store, AuditQuery(), "sqlite", tmp_path / "audit.db")
    schema = schema_of(tmp_path / "audit.db")
    assert {n: c for n, c in schema.items()} == {r.name: list(r.columns) for r in contract.AUDIT_RELATIONS}


def test_metadata_describes_every_documented_table_and_column(tmp_path):
    meta = build_metadata(tmp_path, tmp_path / "audit.db", token_required=False, policy=DecayPolicy())
    for db, relations in ((VIEW_DB, contract.VIEW_RELATIONS), (AUDIT_DB, contract.AUDIT_RELATIONS)):
        tables = meta["databases"][db]["tables"]
        for rel in relations:
            assert tables[rel.name]["title"] == rel.title
            assert tables[rel.name]["description"].startswith(f"One row per {rel.one_row_per}.")
            assert set(tables[rel.name]["columns"]) == set(rel.columns)
            assert all(tables[rel.name]["columns"].values())
    view_tables = meta["databases"][VIEW_DB]["tables"]
    assert view_tables["recall_grams"]["hidden"] is True
    assert view_tables["journal_events"]["units"] == {"byte_offset": "B", "byte_length": "B"}
    assert view_tables["facts"]["columns"]["stored_at_ns"] == \
        "stored_at: the same instant as integer nanoseconds since the Unix epoch (for sorting and ranges); an " \
        "instant outside 1677-09-21..2262-04-11 is held at the nearer end of that range (the text column is exact)"
    assert meta["license"] == "Apache-2.0" and "allow" not in meta
    assert build_metadata(tmp_path, None, token_required=True)["allow"] == {"id": "operator"}
