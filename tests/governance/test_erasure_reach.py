"""Erasure reaches every copy cruxsql writes, outlives restores, is scoped explicitly and survives a crash."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import cruxsql
from cruxsql.accounting.tool_errors import record_error
from support.journal_files import journal_bytes

pytestmark = pytest.mark.slow

MARKER = "marker-Zq81-erase-me@example.com"


def _cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cruxsql", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=120)


def _bytes_found(root: Path) -> list[str]:
    return [str(p) for p in sorted(root.rglob("*")) if p.is_file() and MARKER.encode() in p.read_bytes()]


def _store(d: Path) -> str:
    with cruxsql.open(d) as store:
        fid = store.store("user:42", "email", MARKER, tenant="acme").fact_id
        store.store("svc", "owner", "alice-keeps-this", tenant="acme")
        record_error(store.db, "get_facts", None, f"no fact with value {MARKER}", internal=False)
    return fid


def test_marker_in_every_place_is_gone_or_named_with_its_rule(tmp_path: Path) -> None:
    d = tmp_path / "data"
    _store(d)
    assert _cli("backup", str(tmp_path / "bk"), "--data-dir", str(d)).returncode == 0
    time.sleep(0.01)
    out = _cli("export", "audit", "--format", "jsonl", "--output", str(tmp_path / "audit.jsonl"),
               "--include-private", "--data-dir", str(d))
    assert out.returncode == 0 and "outside the data directory, out of erasure's reach" in out.stderr
    corrupt = d / "facts.jsonl.corrupt.0123456789abcdef0123456789abcdef"
    corrupt.write_bytes(b'{"broken":"' + MARKER.encode() + b'" kept-bytes}\n')
    result = _cli("erase", "--tenant", "acme", "--entity-prefix", "user:", "--reason", "dsr", "--data-dir", str(d))
    # the data directory is verified (exit 0); the recorded backup and export are accounted-for warnings
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"WARNING          backup {(tmp_path / 'bk').resolve()} (taken " in result.stdout
    assert "is outside erasure's reach and holds erased content: a restore of it applies" in result.stdout
    assert f"WARNING          export {(tmp_path / 'audit.jsonl').resolve()} (taken " in result.stdout
    assert "ERASURE NOT VERIFIED" not in result.stdout
    assert "tool errors      1 message(s)" in result.stdout
    assert corrupt.read_bytes() == b'{"broken":"" kept-bytes}\n'  # the rest byte for byte
    assert _bytes_found(d) == []
    verify = _cli("verify", "--erasure", "--data-dir", str(d))
    assert verify.returncode == 0 and "WARNING          backup" in verify.stdout
    # restore the pre-erasure backup: the erasure is applied again, the value does not come back
    restored = _cli("restore", str(tmp_path / "bk"), str(d), "--force")
    assert "re-applied er_" in restored.stdout, restored.stderr
    assert _bytes_found(d) == []
    assert (d / "backups.json").exists() and (d / "audit-exports.json").exists()
    verify = _cli("verify", "--erasure", "--data-dir", str(d))
    assert "scanned from the ledger" in verify.stdout and "erased content found: 0" in verify.stdout


def test_scope_is_explicit_and_nothing_matched_is_exit_1(tmp_path: Path) -> None:
    d = tmp_path / "data"
    fid = _store(d)
    no_scope = _cli("erase", "--entity-prefix", "user:", "--reason", "r", "--data-dir", str(d))
    assert no_scope.returncode == 1 and "--tenant T, or --all-tenants" in no_scope.stderr
    typo = _cli("erase", "--all-tenants", "--fact-id", "f_typo", "--reason", "r", "--data-dir", str(d))
    assert typo.returncode == 1 and "--fact-id f_typo matches no fact" in typo.stderr
    nothing = _cli("erase", "--tenant", "acme", "--entity-prefix", "nobody:", "--reason", "r", "--data-dir", str(d))
    assert nothing.returncode == 1 and "nothing matched" in nothing.stdout
    dry = _cli("erase", "--tenant", "acme", "--entity-prefix", "user:", "--reason", "r", "--dry-run",
               "--data-dir", str(d))
    assert dry.returncode == 0 and f"fact      {fid}" in dry.stdout
    assert MARKER.encode() in journal_bytes(d)  # the dry run changed nothing
    retention = _cli("retention", "apply", "--older-than", "0s", "--data-dir", str(d))
    assert retention.returncode == 1 and "--all-tenants" in retention.stderr


CRASH_POINTS = ["erase-after-delete", "compact-temp-partial", "compact-temp-complete", "compact-after-rename",
                "compact-before-view-commit", "compact-after-view-commit", "erase-after-compact",
                "erase-after-report", "store-after-append"]


@pytest.mark.parametrize("point", CRASH_POINTS)
def test_after_a_crash_the_values_are_gone_and_the_report_exists_or_nothing_was_erased(tmp_path: Path,
                                                                                     point: str) -> None:
    d = tmp_path / "data"
    _store(d)
    killed = _cli("erase", "--tenant", "acme", "--entity-prefix", "user:", "--reason", "dsr", "--request-id",
                  "er_crash", "--data-dir", str(d), env={"CRUXSQL_TEST_CRASH_AT": point})
    assert killed.returncode == -9, (point, killed.stdout, killed.stderr)
    nxt = _cli("verify", "--erasure", "--data-dir", str(d))
    with cruxsql.open(d) as store:
        reports = store.db.execute("SELECT count(*) FROM facts WHERE entity = '__erasure_report__::er_crash'"
                                   ).fetchone()[0]
    if reports:
        assert [p for p in _bytes_found(d) if "tool" not in p] == [], point
        assert nxt.returncode == 0, nxt.stdout + nxt.stderr
    else:
        assert MARKER.encode() in journal_bytes(d), point


def test_repair_on_open_removes_what_killed_commands_left(tmp_path: Path) -> None:
    d = tmp_path / "data"
    _store(d)
    (d / "facts.jsonl.compact-deadbeef.tmp").write_bytes(b"partial copy")
    (d / "segments").mkdir(exist_ok=True)
    (d / "segments" / ".seg-9.jsonl.ab12.partial").write_bytes(b"x")
    (d / "segments" / "seg-000099.jsonl").write_bytes(b"orphan")
    result = _cli("verify", "--data-dir", str(d))
    assert "repair: removed facts.jsonl.compact-deadbeef.tmp, left by a killed compaction" in result.stderr
    assert "left by a killed ingest" in result.stderr
    assert not (d / "facts.jsonl.compact-deadbeef.tmp").exists()
    assert not (d / "segments" / "seg-000099.jsonl").exists()
    assert not (d / "segments" / ".seg-9.jsonl.ab12.partial").exists()


def test_restore_into_a_symlinked_target_follows_it(tmp_path: Path) -> None:
    d = tmp_path / "data"
    _store(d)
    assert _cli("backup", str(tmp_path / "bk"), "--data-dir", str(d)).returncode == 0
    real = tmp_path / "real"
    real.mkdir()
    (real / "old").write_text("x")
    link = tmp_path / "link"
    link.symlink_to(real)
    result = _cli("restore", str(tmp_path / "bk"), str(link), "--force")
    assert result.returncode == 0, result.stderr
    assert link.is_symlink() and (real / "facts.jsonl").exists() and not (real / "old").exists()
    assert not list(tmp_path.glob("*.replaced-*")) and not list(tmp_path.glob("*.restore-*"))


def test_a_killed_backups_staging_and_view_copy_are_removed_by_the_next_command(tmp_path: Path) -> None:
    d = tmp_path / "data"
    _store(d)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    staging = tmp_path / "bk.partial-0123456789ab"
    staging.mkdir()
    (staging / "facts.jsonl").write_bytes(MARKER.encode())
    view_copy = d / f".backup-view-{dead.pid}-abcd1234.db"
    view_copy.write_bytes(MARKER.encode())
    (d / "backups.json").write_text(json.dumps([{"path": str(tmp_path / "bk"), "created_at": "2026-01-01T00:00:00Z",
                                                 "staging": str(staging), "pid": dead.pid}]))
    result = _cli("verify", "--data-dir", str(d))
    assert f"repair: removed {staging}, left by a killed backup" in result.stderr
    assert f"repair: removed {view_copy}, left by a killed backup" in result.stderr
    assert not staging.exists() and not view_copy.exists()
    assert json.loads((d / "backups.json").read_text()) == []


def test_documents_are_erased_when_the_tenant_has_no_facts(tmp_path: Path) -> None:
    from cruxsql.documents import DocumentLane
    from cruxsql.documents.sources import chunk_document
    d = tmp_path / "data"
    with cruxsql.open(d) as store:
        DocumentLane(store).ingest([chunk_document("note.md", f"# Note\n\n{MARKER} in a document", True)],
                                   tenant="docs-only")
    assert _bytes_found(d)
    result = _cli("erase", "--tenant", "docs-only", "--documents", "--reason", "dsr", "--data-dir", str(d))
    assert result.returncode == 0, result.stdout + result.stderr
    assert _bytes_found(d) == []
