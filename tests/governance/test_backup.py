"""Backup while writers run, restore verified before anything is written, and erasure's view of backups."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import apsw
import pytest

from cruxsql.facts import replay_position, timestamps
from cruxsql.facts.store import Store
from cruxsql.governance import backup as backups
from cruxsql.governance import erasure
from cruxsql.governance import restore as restoring
from support.cli_process import run_cruxsql
from support.journal_files import journal_bytes

WRITER = r"""
import sys, random
from cruxsql.facts.store import Store
rng = random.Random(int(sys.argv[2]))
s = Store(sys.argv[1])
ids = []
for i in range(100000):
    op = rng.random()
    if ids and op < 0.1:
        s.delete(ids.pop(rng.randrange(len(ids))))
    else:
        ids.append(s.store(f"svc:{rng.randrange(20)}", f"k{rng.randrange(5)}", f"value {i} " + "x" * rng.randrange(50),
                           tenant=rng.choice(["acme", "globex"])).fact_id)
    print(i, flush=True)
"""


def _tables(path: Path) -> dict[str, list]:
    """Every row of every table that replay derives, for equality checks."""
    db = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    out = {}
    for table in ("facts", "journal_events", "journal_event_facts", "journal_corrupt_lines", "consolidation_sources"):
        out[table] = sorted(map(repr, db.execute(f"SELECT * FROM {table}")))
    db.close()
    return out


@pytest.mark.slow
def test_backup_during_a_write_loop_restores_exactly_the_snapshot(tmp_path):
    src = tmp_path / "src"
    Store(src).close()
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(src), "7"], stdout=subprocess.PIPE, text=True)
    try:
        for _ in range(60):  # let the writer get going
            writer.stdout.readline()
        result = run_cruxsql(None, "backup", str(tmp_path / "bk"), "--json", "--data-dir", str(src))
        assert result.returncode == 0, result.stderr
        written_during = 0
        for _ in range(30):  # and keep writing after the snapshot
            writer.stdout.readline()
            written_during += 1
    finally:
        writer.kill()
        writer.wait()
    summary = json.loads(result.stdout)
    offset = summary["journal_offset"]
    journal = journal_bytes(src)
    assert 0 < offset < len(journal), "the writer kept appending after the snapshot"

    restored = tmp_path / "restored"
    assert run_cruxsql(None, "restore", str(tmp_path / "bk"), str(restored)).returncode == 0
    assert journal_bytes(restored) == journal[:offset]
    # The restored view is the view of exactly that prefix: equal to a rebuild from the prefix alone.
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    (fresh / "facts.jsonl").write_bytes(journal[:offset])
    Store(fresh).close()
    with Store(restored) as store:
        assert store.verify().view_matches_replay
    assert _tables(restored / "cruxsql.db") == _tables(fresh / "cruxsql.db")


def test_restore_rebinds_the_checkpoint_instead_of_rebuilding(tmp_path):
    src = tmp_path / "src"
    with Store(src) as store:
        store.store("svc", "owner", "alice")
        backups.backup(store, tmp_path / "bk")
        generation = replay_position.read_checkpoint(store.db).generation
    restoring.restore(tmp_path / "bk", tmp_path / "restored")
    with Store(tmp_path / "restored") as store:
        cp = replay_position.read_checkpoint(store.db)
        assert cp.generation == generation  # a rebuild would have started a new generation
        assert cp.inode == (tmp_path / "restored" / "facts.jsonl").stat().st_ino


@pytest.mark.slow
@pytest.mark.parametrize("dest", ["bk", "bk.tar", "bk.tar.gz"])
def test_a_flipped_byte_is_refused_and_nothing_is_written(tmp_path, dest):
    src = tmp_path / "src"
    with Store(src) as store:
        store.store("svc", "owner", "alice in wonderland")
        backups.backup(store, tmp_path / dest)
    path = tmp_path / dest
    if path.is_dir():
        journal = path / "facts.jsonl"
        data = bytearray(journal.read_bytes())
        data[5] ^= 0x01
        journal.write_bytes(bytes(data))
    else:  # rewrite the archive with one member's byte flipped
        members = []
        with tarfile.open(path, "r:*") as tar:
            for info in tar:
                blob = tar.extractfile(info).read()
                if info.name == "facts.jsonl":
                    blob = blob[:5] + bytes([blob[5] ^ 0x01]) + blob[6:]
                members.append((info, blob))
        path.unlink()
        import io
        with tarfile.open(path, "w:gz" if dest.endswith(".gz") else "w") as tar:
            for info, blob in members:
                tar.addfile(info, io.BytesIO(blob))
    result = run_cruxsql(None, "restore", str(path), str(tmp_path / "target"))
    assert result.returncode == 1
    assert result.stderr.strip() == f"Error: backup {path}: facts.jsonl does not match its checksum (damaged or altered)"
    assert not (tmp_path / "target").exists()
    assert [p.name for p in tmp_path.iterdir() if "restore-" in p.name] == []


@pytest.mark.slow
def test_restore_refuses_a_non_empty_store_without_force(tmp_path):
    with Store(tmp_path / "a") as store:
        store.store("svc", "owner", "from-a")
        backups.backup(store, tmp_path / "bk.tar")
    with Store(tmp_path / "b") as store:
        store.store("svc", "owner", "from-b")
    before = journal_bytes(tmp_path / "b")
    result = run_cruxsql(None, "restore", str(tmp_path / "bk.tar"), str(tmp_path / "b"))
    assert result.returncode == 1 and "is not empty; pass --force" in result.stderr
    assert journal_bytes(tmp_path / "b") == before
    assert run_cruxsql(None, "restore", str(tmp_path / "bk.tar"), str(tmp_path / "b"), "--force").returncode == 0
    with Store(tmp_path / "b") as store:
        assert [f.value for f in store.history("svc", "owner")] == ["from-a"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b", "bk.tar"]


@pytest.mark.slow
def test_backup_refuses_bad_destinations(tmp_path):
    src = tmp_path / "src"
    with Store(src) as store:
        store.store("svc", "owner", "alice")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    cases = {
        str(tmp_path / "full"): "exists and is not an empty directory",
        str(src / "inside"): "is inside the data directory",
        str(tmp_path / "missing" / "bk.tar"): "does not exist",
    }
    for dest, message in cases.items():
        result = run_cruxsql(None, "backup", dest, "--data-dir", str(src))
        assert result.returncode == 1 and message in result.stderr and "Traceback" not in result.stderr, dest
    assert run_cruxsql(None, "backup", str(tmp_path / "bk"), "--data-dir", str(tmp_path / "nostore")).stderr.startswith(
        "Error: no cruxsql store at")


@pytest.mark.slow
def test_erasure_names_the_backups_that_still_hold_the_data(tmp_path):
    src = tmp_path / "src"
    with Store(src) as store:
        store.store("user:42", "email", "someone-unique@example.com")
        backups.backup(store, tmp_path / "bk")
        time.sleep(0.01)
        report = erasure.erase(store, erasure.Selection(entity_prefixes=("user:42",)), reason="dsr 1")
    assert report["backups_still_holding"] == [str((tmp_path / "bk").resolve())]
    [copy] = report["outside_reach"]
    assert (copy["kind"], copy["path"], copy["state"], copy["accounted"]) == (
        "backup", str((tmp_path / "bk").resolve()), "holds erased content", True)
    assert copy["created_at"] == backups.recorded_backups(src)[0]["created_at"] and "restore" in copy["rule"]
    assert report["ok"]  # the data directory is verified; the recorded backup is an accounted-for warning
    result = run_cruxsql(None, "verify", "--erasure", "--data-dir", str(src))
    assert result.returncode == 0 and result.stdout.splitlines()[-1].startswith("erasure verified in the data directory")
    assert f"WARNING          backup {(tmp_path / 'bk').resolve()} (taken {copy['created_at']}) is outside " \
        "erasure's reach and holds erased content: a restore of it applies the erasure again" in result.stdout
    assert b"someone-unique@example.com" in journal_bytes(tmp_path / "bk")


def test_an_erasure_that_finishes_during_the_copy_is_applied_again_on_restore(tmp_path, monkeypatch):
    # The backup holds the journal as it was when the copy began (an open descriptor): an erasure that
    # completes while the bytes are copied leaves its values in the backup, so the backup's time must be
    # its snapshot's, earlier than that erasure, for restore to apply the erasure again.
    src = tmp_path / "src"
    with Store(src) as store:
        store.store("user:42", "email", "during-copy-unique@example.com", tenant="acme")
        store.store("svc", "owner", "alice", tenant="acme")
        add = backups._Sink.add
        erased: list[dict] = []

        def add_after_an_erasure(self, *args, **kwargs):
            if not erased:
                with Store(src) as other:  # another operator's erasure, once the snapshot is taken
                    erased.append(erasure.erase(other, erasure.Selection(tenant="acme", entity_prefixes=("user:42",)),
                                                reason="dsr during backup"))
            return add(self, *args, **kwargs)

        monkeypatch.setattr(backups._Sink, "add", add_after_an_erasure)
        report = backups.backup(store, tmp_path / "bk")
    assert erased and erased[0]["counts"]["facts_erased"] == 1
    assert timestamps.parse_ns(report.created_at) < timestamps.parse_ns(erased[0]["executed_at"])
    assert b"during-copy-unique@example.com" in journal_bytes(tmp_path / "bk")
    result = restoring.restore(tmp_path / "bk", src, force=True)  # over the store, whose ledger has the erasure
    assert result["erasures_after_backup"] == [erased[0]["request_id"]]
    # (the backup itself holds the values: the re-applied erasure's report lists it, an accounted-for copy)
    assert [[(c["kind"], c["path"], c["state"], c["accounted"]) for c in r["outside_reach"]]
            for r in result["erasures_reapplied"]] == [
        [("backup", str((tmp_path / "bk").resolve()), "holds erased content", True)]]
    assert result["ok"]
    for path in src.rglob("*"):
        if path.is_file():
            assert b"during-copy-unique@example.com" not in path.read_bytes(), path
    with Store(src) as restored:
        assert [f.value for f in restored.history("svc", "owner", tenant="acme")] == ["alice"]
        assert restored.history("user:42", "email", tenant="acme") == []
