"""An erasure beside other processes: writers wait only for its short locked phases, a running erasure is
not mistaken for a killed one, no legal hold lands half-way through one, and a hold that another writer
makes blocking half-way leaves the erasure pending, not the store broken."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import cruxsql
from cruxsql.accounting.tool_errors import record_error
from cruxsql.governance import (compaction, compaction_snapshot, erasure, erasure_ledger, erasure_lock, erasure_recovery,
                                legal_holds, retention)
from cruxsql.facts.journal import Journal
from support.cli_process import run_cruxsql
from support.mounts import read_only_mount
from support.journal_files import journal_text

pytestmark = pytest.mark.slow

MARKER = "marker-Vq27-erase-me@example.com"


def _files_holding(root: Path, text: str) -> list[str]:
    return [p.name for p in sorted(root.rglob("*")) if p.is_file() and text.encode() in p.read_bytes()]


def _seed(d: Path) -> str:
    with cruxsql.open(d) as store:
        fid = store.store("user:42", "email", MARKER, tenant="acme").fact_id
        for i in range(30):
            store.store(f"svc:{i}", "owner", f"team-{i}", tenant="acme")
    return fid


def _store_now(d: Path, entity: str) -> None:
    """A write from another process that must not wait: with --lock-timeout 0 it fails if the writer lock
    is held."""
    out = run_cruxsql(d, "store", entity, "note", f"written mid-erasure {entity}", "--tenant", "acme",
                      "--lock-timeout", "0")
    assert out.returncode == 0, out.stderr


def test_writers_store_while_the_erasure_takes_its_snapshot_and_scans(tmp_path: Path, monkeypatch) -> None:
    d = tmp_path / "data"
    _seed(d)
    seen: list[str] = []
    prebuild, scan = compaction_snapshot.prebuild, erasure.scan_directory

    def prebuild_beside_a_writer(store, batch):
        _store_now(d, "during:snapshot")
        seen.append("snapshot")
        return prebuild(store, batch)

    def scan_beside_a_writer(data_dir, needles):
        _store_now(d, "during:scan")
        seen.append("scan")
        return scan(data_dir, needles)

    monkeypatch.setattr(compaction_snapshot, "prebuild", prebuild_beside_a_writer)
    monkeypatch.setattr(erasure, "scan_directory", scan_beside_a_writer)
    with cruxsql.open(d) as store:
        report = erasure.erase(store, erasure.Selection(tenant="acme", entity_prefixes=("user:",)), reason="dsr 9")
    assert seen == ["snapshot", "scan"]
    assert report["ok"], report["verification"]
    assert report["counts"]["facts_erased"] == 1
    assert _files_holding(d, MARKER) == []
    # what the other process wrote during the snapshot is in the compacted journal and the view; what it
    # wrote during the scan came after the compaction, and is there too
    with cruxsql.open(d) as store:
        got = {r[0] for r in store.db.execute("SELECT entity FROM live_facts WHERE entity LIKE 'during:%'")}
    assert got == {"during:snapshot", "during:scan"}
    verify = run_cruxsql(d, "verify", "--strict")
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert run_cruxsql(d, "verify", "--erasure").returncode == 0


def test_an_erasure_running_elsewhere_is_not_completed_by_the_next_command(tmp_path: Path) -> None:
    d = tmp_path / "data"
    fid = _seed(d)
    with erasure_lock.held_if_free(d) as free:  # "another process" mid-way: begun in the ledger, lock held
        assert free
        erasure_ledger.begin(d, request_id="er_running", kind="erasure", selection={}, fact_ids=[fid],
                             documents_tenant=None, actor="op", reason="dsr", requested_at="2026-12-07T00:00:00Z")
        assert erasure_recovery.interrupted(d) == []
        with cruxsql.open(d) as store:  # the completion itself refuses while the lock is held
            assert erasure_recovery.complete_interrupted(store) == []
        # a read between the erasure's locked phases: its repair on open does not even wait for the writer
        # lock (held here as the erasure's delete or swap would hold it)
        with Journal(d).lock():
            read = run_cruxsql(d, "query", "team", "--tenant", "acme", "--lock-timeout", "0")
        assert read.returncode == 0, read.stderr
        _store_now(d, "other:1")
        assert [e["request_id"] for e in erasure_ledger.interrupted(d)] == ["er_running"]
        assert _files_holding(d, MARKER) != []  # not erased yet
        verify = json.loads(run_cruxsql(d, "verify", "--erasure", "--json").stdout)
        assert verify["erasure_running"] is True and verify["interrupted_erasures"] == []
    # the holder is gone (as when killed): the next command completes it
    out = run_cruxsql(d, "store", "other:2", "note", "x", "--tenant", "acme")
    assert out.returncode == 0, out.stderr
    assert "completed the interrupted erasure er_running" in out.stderr + out.stdout
    assert erasure_ledger.interrupted(d) == []
    assert _files_holding(d, MARKER) == []


def test_no_hold_is_placed_while_an_erasure_runs(tmp_path: Path) -> None:
    d = tmp_path / "data"
    _seed(d)
    with erasure_lock.held_if_free(d) as free:
        assert free
        refused = run_cruxsql(d, "hold", "place", "--tenant", "acme", "--reason", "litigation", "--lock-timeout", "1")
        assert refused.returncode == 1
        assert refused.stderr.startswith("Error: gave up waiting 1s for a running erasure to finish"), refused.stderr
        with cruxsql.open(d) as store:
            assert legal_holds.list_holds(store) == []
        with cruxsql.Store(d, lock_timeout=1) as store:  # bad input is said at once, not after the wait
            with pytest.raises(cruxsql.InvalidInput, match="reason is required for an erasure"):
                erasure.erase(store, erasure.Selection(tenant="acme", entity_prefixes=("user:",)), reason=" ")
            with pytest.raises(cruxsql.InvalidInput, match="reason is required for an erasure"):
                retention.apply(store, "0s", reason=" ", tenant="acme")
    placed = run_cruxsql(d, "hold", "place", "--tenant", "acme", "--reason", "litigation")
    assert placed.returncode == 0, placed.stderr
    with cruxsql.open(d) as store:
        assert [h.reason for h in legal_holds.list_holds(store)] == ["litigation"]


def test_a_held_fact_deleted_mid_erasure_leaves_the_erasure_pending_and_the_store_usable(
        tmp_path: Path, monkeypatch) -> None:
    d = tmp_path / "data"
    _seed(d)
    with cruxsql.open(d) as store:
        kept = store.store("keep:1", "doc", "evidence-kept-by-hold", tenant="acme").fact_id
        hold, _ = legal_holds.place_hold(store, "acme", "litigation", ["keep:"])
    prebuild = compaction_snapshot.prebuild

    def prebuild_after_a_held_delete(store, batch):
        out = run_cruxsql(d, "delete", kept, "--lock-timeout", "0")
        assert out.returncode == 0, out.stderr
        return prebuild(store, batch)

    monkeypatch.setattr(compaction_snapshot, "prebuild", prebuild_after_a_held_delete)
    with cruxsql.open(d) as store, pytest.raises(compaction.LegalHoldBlocked) as raised:
        erasure.erase(store, erasure.Selection(tenant="acme", entity_prefixes=("user:",)), reason="dsr 10")
    assert "deleted by another writer while this erasure ran" in str(raised.value)
    assert raised.value.hold_ids == [hold.hold_id]
    monkeypatch.undo()
    # every command still works; the erasure waits, pending, while the hold blocks its compaction
    out = run_cruxsql(d, "store", "other:1", "note", "x", "--tenant", "acme")
    assert out.returncode == 0, out.stderr
    assert len(erasure_ledger.interrupted(d)) == 1
    released = run_cruxsql(d, "hold", "release", hold.hold_id)
    assert released.returncode == 0, released.stderr
    out = run_cruxsql(d, "store", "other:2", "note", "y", "--tenant", "acme")
    assert out.returncode == 0 and "completed the interrupted erasure" in out.stderr + out.stdout
    assert erasure_ledger.interrupted(d) == []
    assert _files_holding(d, MARKER) == []


@pytest.mark.parametrize("when", ["snapshot", "scan"])
def test_a_value_another_writer_stores_again_mid_erasure_is_reported_where_it_is(
        tmp_path: Path, monkeypatch, when: str) -> None:
    """Stored again by another writer while the erasure runs (before its compaction's swap or during its
    scan), the value is in the store when the scan looks: the report says where, and is not ok."""
    d = tmp_path / "data"
    _seed(d)
    prebuild, scan = compaction_snapshot.prebuild, erasure.scan_directory

    def store_the_value_again() -> None:
        out = run_cruxsql(d, "store", "copy:1", "email", MARKER, "--tenant", "acme", "--lock-timeout", "0")
        assert out.returncode == 0, out.stderr

    def prebuild_after_a_write(store, batch):
        store_the_value_again()
        return prebuild(store, batch)

    calls: list[int] = []

    def scan_after_a_write(data_dir, needles):
        if not calls:
            store_the_value_again()
        calls.append(1)
        return scan(data_dir, needles)

    if when == "snapshot":
        monkeypatch.setattr(compaction_snapshot, "prebuild", prebuild_after_a_write)
    else:
        monkeypatch.setattr(erasure, "scan_directory", scan_after_a_write)
    with cruxsql.open(d) as store:
        report = erasure.erase(store, erasure.Selection(tenant="acme", entity_prefixes=("user:",)), reason="dsr")
    files = {hit["file"] for hit in report["verification"]["hits"]}
    assert not report["ok"]
    assert "facts.jsonl" in files and any(f.startswith("cruxsql.db") for f in files)


def test_a_compaction_right_after_the_delete_does_not_empty_the_report(tmp_path: Path, monkeypatch) -> None:
    """The erased values are read from the view as the erasure's delete left it, fixed before the writer
    lock is released: a compaction that takes the lock next and does not wait for the erasure (a Crux
    daemon's; cruxsql's own wait) does not leave the erasure without needles, so every copy is still
    scrubbed and scanned."""
    d = tmp_path / "data"
    _seed(d)
    with cruxsql.open(d) as store:
        record_error(store.db, "get_facts", None, f"no fact with value {MARKER}", internal=False)
    entries = erasure._erased_entries

    def compacted_first(store, plan):
        with cruxsql.open(d) as other:
            assert compaction.compact(other, for_erasure=True).facts_dropped == 1
        return entries(store, plan)

    monkeypatch.setattr(erasure, "_erased_entries", compacted_first)
    with cruxsql.open(d) as store:
        report = erasure.erase(store, erasure.Selection(tenant="acme", entity_prefixes=("user:",)), reason="dsr")
    assert report["ok"], report["verification"]
    assert report["counts"]["facts_erased"] == 1 and report["needles"]
    assert report["stores"]["tool_errors"]["messages_scrubbed"] == 1
    assert _files_holding(d, MARKER) == []


def test_after_its_delete_the_erasure_waits_for_the_writer_lock_past_the_timeout(tmp_path: Path, monkeypatch) -> None:
    """A writer holding the lock longer than the store's timeout does not leave the erasure half done."""
    d = tmp_path / "data"
    _seed(d)
    prebuild = compaction_snapshot.prebuild
    holder: list[subprocess.Popen] = []

    def prebuild_while_another_holds_the_lock(store, batch):
        holder.append(subprocess.Popen([sys.executable, "-c", HOLD_THE_WRITER_LOCK, str(d), "1.5"],
                                       stdout=subprocess.PIPE))
        assert holder[0].stdout is not None and holder[0].stdout.readline() == b"held\n"
        return prebuild(store, batch)

    monkeypatch.setattr(compaction_snapshot, "prebuild", prebuild_while_another_holds_the_lock)
    with cruxsql.Store(d, lock_timeout=0.3) as store:
        report = erasure.erase(store, erasure.Selection(tenant="acme", entity_prefixes=("user:",)), reason="dsr")
        assert store.journal.lock_timeout == 0.3
    assert holder[0].wait(timeout=30) == 0
    assert report["ok"] and _files_holding(d, MARKER) == []
    assert erasure_ledger.interrupted(d) == []


HOLD_THE_WRITER_LOCK = """
import sys, time
from cruxsql.facts.journal import Journal
with Journal(sys.argv[1]).lock():
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def test_verify_erasure_reads_a_read_only_directory_an_erasure_ran_in(tmp_path: Path) -> None:
    source = tmp_path / "data"
    _seed(source)
    erased = run_cruxsql(source, "erase", "--tenant", "acme", "--entity-prefix", "user:", "--reason", "dsr")
    assert erased.returncode == 0, erased.stdout + erased.stderr
    assert (source / erasure_lock.ERASURE_LOCK_NAME).exists()
    with read_only_mount(source, tmp_path / "ro") as mount_point:
        verify = run_cruxsql(mount_point, "verify", "--erasure", "--json")
        assert verify.returncode == 0, verify.stderr
        assert json.loads(verify.stdout)["erasure_running"] is False
        with erasure_lock.held_if_free(source) as free:  # a running erasure is seen through the mount too
            assert free
            assert json.loads(run_cruxsql(mount_point, "verify", "--erasure", "--json").stdout)["erasure_running"]


def test_a_compaction_waits_for_a_running_erasure(tmp_path: Path) -> None:
    """Between an erasure's delete and its ledger's record of the values, no other compaction may take its
    deleted facts away: `cruxsql compact` waits for the erasure lock."""
    d = tmp_path / "data"
    _seed(d)
    with erasure_lock.held_if_free(d) as free:
        assert free
        refused = run_cruxsql(d, "compact", "--lock-timeout", "1")
        assert refused.returncode == 1
        assert refused.stderr.startswith("Error: gave up waiting 1s for a running erasure to finish"), refused.stderr
    assert run_cruxsql(d, "compact").returncode == 0


def test_an_erasure_killed_after_its_delete_whose_facts_were_compacted_away_is_reported_not_abandoned(
        tmp_path: Path, monkeypatch) -> None:
    """Killed before its ledger recorded the values, after a compaction that takes no erasure lock (a Crux
    daemon's, say) dropped its deleted facts: the next command stores its report, the facts listed as not
    verified, and the report is not ok (their other copies could not be looked for)."""
    d = tmp_path / "data"
    fid = _seed(d)
    with cruxsql.open(d) as store:
        record_error(store.db, "get_facts", None, f"no fact with value {MARKER}", internal=False)

    def compacted_by_another_then_killed(store, plan):
        with cruxsql.open(d) as other:
            compaction.compact(other, for_erasure=True)  # (a compaction that does not wait for the erasure)
        raise KeyboardInterrupt

    monkeypatch.setattr(erasure, "_erased_entries", compacted_by_another_then_killed)
    with cruxsql.open(d) as store, pytest.raises(KeyboardInterrupt):
        erasure.erase(store, erasure.Selection(tenant="acme", entity_prefixes=("user:",)), reason="dsr 11")
    monkeypatch.undo()
    out = run_cruxsql(d, "store", "other:1", "note", "x", "--tenant", "acme")
    assert out.returncode == 0, out.stderr
    assert "ERASURE NOT VERIFIED" in out.stderr, out.stderr
    states = [e["state"] for e in erasure_ledger.read_ledger(d)]
    assert "abandoned" not in states and states[-1] == "done"
    with cruxsql.open(d) as store:
        (report,) = [r for r in erasure.stored_reports(store.db)]
    assert not report["ok"] and [e["fact_id"] for e in report["erased_facts"]] == [fid]
    assert report["erased_facts"][0]["scan"] == erasure.COMPACTED_AWAY
    assert report["errors"] and "neither scrubbed nor scanned" in report["errors"][0]
    assert MARKER not in journal_text(d)
