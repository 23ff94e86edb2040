"""A restore never brings an erased value back, wherever it restores to, even killed at any step; and the
copies cruxsql recorded that still hold erased values are a warning, not a failure.

Each case greps every file in and beside the restored directory for the erased value (the backup itself
holds it, by design, and is left out).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import cruxsql
from cruxsql.governance import backup as backups
from cruxsql.governance import erasure, legal_holds
from support.journal_files import journal_bytes

pytestmark = pytest.mark.slow

MARKER = "restore-marker-Kx7q-erased@example.com"
CRASH_ENV = "CRUXSQL_TEST_CRASH_AT"


def _cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in (CRASH_ENV, "CRUXSQL_DATA_DIR")}
    return subprocess.run([sys.executable, "-m", "cruxsql", *args], capture_output=True, text=True,
                          env={**clean, **(env or {})}, timeout=120)


def _holding(root: Path, skip: tuple[Path, ...] = ()) -> list[str]:
    """Every file under `root` (outside `skip`) that holds the erased value."""
    return [str(p) for p in sorted(root.rglob("*")) if p.is_file() and not any(s in p.parents for s in skip)
            and MARKER.encode() in p.read_bytes()]


def _beside(target: Path) -> list[str]:
    return sorted(p.name for p in target.parent.iterdir() if p.name.startswith(target.name + "."))


def _seed(src: Path, bk: Path, hold: bool = False) -> None:
    """A store holding MARKER, its backup, then (a hold it had released and) MARKER erased."""
    with cruxsql.open(src) as store:
        store.store("user:42", "email", MARKER, tenant="acme")
        store.store("svc", "owner", "alice-keeps-this", tenant="acme")
        held = legal_holds.place_hold(store, "acme", "litigation", ["user:"])[0] if hold else None
        backups.backup(store, bk)
        time.sleep(0.01)
        if held is not None:
            legal_holds.release(store, held.hold_id)
        report = erasure.erase(store, erasure.Selection(tenant="acme", entity_prefixes=("user:",)), reason="dsr")
        assert report["counts"]["facts_erased"] == 1 and report["ok"]
    assert _holding(src) == [] and _holding(bk) != []


def _restored_cleanly(target: Path, bk: Path) -> None:
    assert _holding(target.parent, skip=(bk,)) == []
    assert _beside(target) == []
    verify = _cli("verify", "--erasure", "--data-dir", str(target))
    assert verify.returncode == 0, verify.stdout + verify.stderr
    with cruxsql.open(target) as store:
        assert [f.value for f in store.history("svc", "owner", tenant="acme")] == ["alice-keeps-this"]
        assert store.history("user:42", "email", tenant="acme") == []


def test_restore_into_a_new_directory_applies_the_source_stores_erasures(tmp_path: Path) -> None:
    src, bk, new = tmp_path / "src", tmp_path / "bk", tmp_path / "new"
    _seed(src, bk)
    result = _cli("restore", str(bk), str(new))
    assert result.returncode == 0, result.stderr
    assert "re-applied er_" in result.stdout
    _restored_cleanly(new, bk)
    # verify --erasure in the restored store checks the values its ledger names: planted back, it is found
    (new / "planted.txt").write_text(f"copied by hand: {MARKER}\n")
    verify = _cli("verify", "--erasure", "--data-dir", str(new))
    assert verify.returncode == 1 and "planted.txt" in verify.stdout and "ERASURE NOT VERIFIED" in verify.stdout


def test_with_the_source_gone_restore_needs_a_ledger_or_says_it_goes_without(tmp_path: Path) -> None:
    src, bk, new = tmp_path / "src", tmp_path / "bk", tmp_path / "new"
    _seed(src, bk)
    kept = tmp_path / "ledger-copy.jsonl"
    shutil.copy(src / "erasure-ledger.jsonl", kept)
    shutil.rmtree(src)
    refused = _cli("restore", str(bk), str(new))
    assert refused.returncode == 1 and refused.stdout == ""
    [line] = refused.stderr.splitlines()
    assert line.startswith("Error: cannot tell which erasures were made after this backup")
    assert "is gone" in line and "--erasure-ledger FILE" in line and "--no-erasure-ledger" in line
    assert not new.exists() and _beside(new) == []
    with_ledger = _cli("restore", str(bk), str(new), "--erasure-ledger", str(kept))
    assert with_ledger.returncode == 0 and "re-applied er_" in with_ledger.stdout, with_ledger.stderr
    _restored_cleanly(new, bk)
    without = _cli("restore", str(bk), str(tmp_path / "other"), "--no-erasure-ledger")
    assert without.returncode == 0 and "--no-erasure-ledger" in without.stderr
    assert MARKER.encode() in journal_bytes(tmp_path / "other")  # the operator's explicit choice


def test_a_source_path_that_holds_another_store_is_not_asked(tmp_path: Path) -> None:
    src, bk, new = tmp_path / "src", tmp_path / "bk", tmp_path / "new"
    _seed(src, bk)
    shutil.rmtree(src)
    with cruxsql.open(src) as store:  # a new store where the old one was
        store.store("x", "y", "z")
    refused = _cli("restore", str(bk), str(new))
    assert refused.returncode == 1 and "no longer holds the store it was taken of" in refused.stderr


@pytest.mark.parametrize("knowledge", ["source store", "ledger copy"])
def test_a_hold_released_after_the_backup_stays_released_and_the_erasure_is_applied(tmp_path: Path,
                                                                                   knowledge: str) -> None:
    src, bk, new = tmp_path / "src", tmp_path / "bk", tmp_path / "new"
    _seed(src, bk, hold=True)
    args = ["restore", str(bk), str(new)]
    if knowledge == "ledger copy":
        shutil.copy(src / "erasure-ledger.jsonl", tmp_path / "ledger-copy.jsonl")
        shutil.rmtree(src)
        args += ["--erasure-ledger", str(tmp_path / "ledger-copy.jsonl")]
    result = _cli(*args)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "kept released: legal hold lh_" in result.stdout and "re-applied er_" in result.stdout
    _restored_cleanly(new, bk)
    with cruxsql.open(new) as store:
        assert [h.active for h in legal_holds.list_holds(store)] == [False]
        states = store.db.execute("SELECT count(*) FROM facts WHERE key = ?", (legal_holds.STATE_KEY,)).fetchone()[0]
        assert states == 2  # placed (in the backup), released once again (not once per source that knows it)


RESTORE_STEPS = ["restore-staging-partial", "restore-holds-released", "erase-after-compact", "restore-staged",
                 "restore-after-set-aside", "restore-after-rename"]


@pytest.mark.parametrize("mode", ["new directory", "over the source"])
@pytest.mark.parametrize("step", RESTORE_STEPS)
def test_a_restore_killed_at_any_step_leaves_no_erased_value_live(tmp_path: Path, step: str, mode: str) -> None:
    src, bk = tmp_path / "src", tmp_path / "bk"
    _seed(src, bk, hold=True)
    target = tmp_path / "new" if mode == "new directory" else src
    args = ["restore", str(bk), str(target)] + (["--force"] if target == src else [])
    killed = _cli(*args, env={CRASH_ENV: step})
    if step == "restore-after-set-aside" and target != src:
        assert killed.returncode == 0, killed.stderr  # nothing to set aside in a new directory
    else:
        assert killed.returncode == -9, (killed.stdout, killed.stderr)
    # the next command on the target completes or rolls back the restore: nothing erased is live, in or beside it
    nxt = _cli("history", "svc", "owner", "--tenant", "acme", "--data-dir", str(target))
    assert _beside(target) == [], nxt.stderr
    assert _holding(tmp_path, skip=(bk,)) == [], step
    if target.exists():
        assert nxt.returncode == 0 and "alice-keeps-this" in nxt.stdout, nxt.stderr
        _restored_cleanly(target, bk)
    else:
        assert nxt.returncode == 1 and "no cruxsql store" in nxt.stderr
        again = _cli(*args)  # a re-run restores, its erasures applied
        assert again.returncode == 0, again.stderr
        _restored_cleanly(target, bk)
    assert _holding(tmp_path, skip=(bk,)) == []


def test_the_source_stores_next_command_removes_a_killed_restores_staging(tmp_path: Path) -> None:
    src, bk, new = tmp_path / "src", tmp_path / "bk", tmp_path / "new"
    _seed(src, bk)
    killed = _cli("restore", str(bk), str(new), env={CRASH_ENV: "restore-staging-partial"})
    assert killed.returncode == -9
    [staging] = [p for p in tmp_path.iterdir() if p.name.startswith("new.restore-")]
    assert _holding(staging) != []  # a partial copy of the backup, erased value included
    assert json.loads((src / "backups.json").read_text())[-1]["staging"] == str(staging.resolve())
    nxt = _cli("verify", "--data-dir", str(src))
    assert f"repair: removed {staging.resolve()}, left by a killed restore" in nxt.stderr
    assert not staging.exists() and _holding(tmp_path, skip=(bk,)) == []


def test_a_restore_staging_that_cannot_be_removed_is_named_by_verify_erasure(tmp_path: Path) -> None:
    src, bk = tmp_path / "src", tmp_path / "bk"
    _seed(src, bk)
    # a restore into src still running (its pid is alive: ours), its staging a copy of the backup
    staging = tmp_path / "src.restore-0123456789ab"
    shutil.copytree(bk, staging)
    (staging / ".cruxsql-restore.json").write_text(json.dumps({"pid": os.getpid(), "state": "staging"}))
    verify = _cli("verify", "--erasure", "--data-dir", str(src))
    assert verify.returncode == 1 and "ERASURE NOT VERIFIED" in verify.stdout
    assert f"NOT VERIFIED     restore leftover {staging}" in verify.stdout
    assert staging.exists()  # a live restore's: not touched


def test_doctor_warns_about_recorded_copies_and_stays_critical_for_an_unaccounted_one(tmp_path: Path) -> None:
    src, bk = tmp_path / "src", tmp_path / "bk"
    _seed(src, bk)
    created = backups.recorded_backups(src)[0]["created_at"]
    doctor = _cli("doctor", "--data-dir", str(src))
    assert doctor.returncode == 1, doctor.stdout
    [line] = [x for x in doctor.stdout.splitlines() if "erasure_copies" in x]
    assert line.split()[0] == "warning" and f"backup {bk.resolve()} (taken {created})" in line
    assert "a restore of it applies the erasure again" in line
    assert "ok       erasure_verifications" in doctor.stdout
    prometheus = _cli("doctor", "--prometheus", "--data-dir", str(src))
    assert f'cruxsql_doctor_status{{data_dir="{src}"}} 1' in prometheus.stdout
    shutil.rmtree(bk)
    assert _cli("doctor", "--data-dir", str(src)).returncode == 0
    # a copy nobody recorded or accounts for, holding an erased value: the erasure is not verified
    with cruxsql.open(src) as store:
        store.store("user:43", "email", MARKER.replace("Kx7q", "Zz99"), tenant="acme")
    staging = tmp_path / "src.restore-0123456789ab"
    staging.mkdir()
    (staging / "copy.txt").write_text(MARKER.replace("Kx7q", "Zz99"))
    (staging / ".cruxsql-restore.json").write_text(json.dumps({"pid": os.getpid(), "state": "staging"}))
    erase = _cli("erase", "--tenant", "acme", "--entity-prefix", "user:43", "--reason", "dsr 2", "--data-dir", str(src))
    assert erase.returncode == 1 and erase.stdout.splitlines()[-1] == "ERASURE NOT VERIFIED"
    prometheus = _cli("doctor", "--prometheus", "--data-dir", str(src))
    assert f'cruxsql_doctor_status{{data_dir="{src}"}} 2' in prometheus.stdout
    # that copy gone (its restore finished), nothing holds the value: no alarm is left crying wolf
    shutil.rmtree(staging)
    assert _cli("verify", "--erasure", "--data-dir", str(src)).returncode == 0
    doctor = _cli("doctor", "--data-dir", str(src))
    assert doctor.returncode == 0 and "ok       erasure_verifications" in doctor.stdout, doctor.stdout


def test_restore_takes_the_data_directory_like_every_command(tmp_path: Path) -> None:
    src, bk = tmp_path / "src", tmp_path / "bk"
    _seed(src, bk)
    after = _cli("restore", str(bk), "--data-dir", str(tmp_path / "after"))
    assert after.returncode == 0, after.stderr
    before = _cli("--data-dir", str(tmp_path / "before"), "restore", str(bk))
    assert before.returncode == 0, before.stderr
    for target in (tmp_path / "after", tmp_path / "before"):
        assert (target / "facts.jsonl").exists() and _holding(target) == []
    both = _cli("restore", str(bk), str(tmp_path / "a"), "--data-dir", str(tmp_path / "b"))
    assert both.returncode == 1 and "name different directories" in both.stderr
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_a_backup_restored_over_its_own_store_that_never_erased_anything_is_not_refused(tmp_path: Path) -> None:
    src, bk = tmp_path / "src", tmp_path / "bk"
    with cruxsql.open(src) as store:
        store.store("svc", "owner", "alice-keeps-this", tenant="acme")
        backups.backup(store, bk)
        store.store("svc", "owner", "bob-came-later", tenant="acme")
    assert not (src / "erasure-ledger.jsonl").exists()  # that store's ledger: no erasure, ever
    result = _cli("restore", str(bk), str(src), "--force")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    with cruxsql.open(src) as store:
        assert [f.value for f in store.history("svc", "owner", tenant="acme")] == ["alice-keeps-this"]


def test_the_operators_own_directories_named_like_a_restores_are_never_removed(tmp_path: Path) -> None:
    src, bk = tmp_path / "src", tmp_path / "bk"
    _seed(src, bk)
    own = [tmp_path / "src.restore-mine", tmp_path / "src.replaced-2024", tmp_path / "src.replaced-0123456789ab",
           tmp_path / "src.restore-0123456789ab"]
    for directory in own:
        directory.mkdir()
        (directory / "notes.txt").write_text("the operator's own")
    empty = tmp_path / "src.restore-ba9876543210"  # a restore killed between its mkdir and its marker
    empty.mkdir()
    for read_only in (["history", "svc", "owner", "--tenant", "acme"], ["sql", "SELECT 1"]):
        result = _cli(*read_only, "--data-dir", str(src))
        assert result.returncode == 0, result.stderr
    assert [(d / "notes.txt").read_text() for d in own] == ["the operator's own"] * 4
    assert not empty.exists()


def _while_staging(monkeypatch: pytest.MonkeyPatch, action) -> None:
    """Run `action` once while a restore has copied the backup into its staging directory."""
    from cruxsql.governance import restore as restoring
    rebind = restoring._rebind_view

    def rebind_then_act(directory: Path) -> None:
        rebind(directory)
        monkeypatch.setattr(restoring, "_rebind_view", rebind)
        action()
    monkeypatch.setattr(restoring, "_rebind_view", rebind_then_act)


def test_a_restore_does_not_replace_what_another_restore_put_in_its_new_directory(tmp_path: Path,
                                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from cruxsql.governance import restore as restoring
    src, bk, other_bk, new = tmp_path / "src", tmp_path / "bk", tmp_path / "other-bk", tmp_path / "new"
    with cruxsql.open(src) as store:
        store.store("svc", "owner", "from-bk", tenant="acme")
        backups.backup(store, bk)
        store.store("svc", "owner", "from-other-bk", tenant="acme")
        backups.backup(store, other_bk)
    _while_staging(monkeypatch, lambda: restoring.restore(other_bk, new))
    with pytest.raises(backups.BackupError, match="filled by another process"):
        restoring.restore(bk, new)
    with cruxsql.open(new) as store:
        assert [f.value for f in store.history("svc", "owner", tenant="acme")][-1] == "from-other-bk"
    assert _beside(new) == []


def test_an_erasure_in_the_target_while_the_restore_stages_is_applied_too(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from cruxsql.governance import restore as restoring
    src, bk, target = tmp_path / "src", tmp_path / "bk", tmp_path / "target"
    with cruxsql.open(src) as store:
        store.store("user:42", "email", MARKER, tenant="acme")
        store.store("svc", "owner", "alice-keeps-this", tenant="acme")
        backups.backup(store, bk)
    restoring.restore(bk, target)  # another store, holding the value too

    def erase_in_target() -> None:
        with cruxsql.open(target) as store:
            erasure.erase(store, erasure.Selection(tenant="acme", entity_prefixes=("user:",)), reason="dsr")
    _while_staging(monkeypatch, erase_in_target)
    restoring.restore(bk, target, force=True)
    assert _holding(target) == []
    with cruxsql.open(target) as store:
        assert store.history("user:42", "email", tenant="acme") == []


def test_a_backup_from_before_store_identities_restores_over_its_store_with_a_hold_released_since(
        tmp_path: Path) -> None:
    src, bk = tmp_path / "src", tmp_path / "bk"
    _seed(src, bk, hold=True)
    # as an older cruxsql wrote them: no source in the manifest, no hold release in the ledger
    manifest = json.loads((bk / "cruxsql-backup.json").read_text())
    del manifest["source"]
    (bk / "cruxsql-backup.json").write_text(json.dumps(manifest))
    ledger = src / "erasure-ledger.jsonl"
    ledger.write_text("".join(line for line in ledger.read_text().splitlines(keepends=True)
                              if '"hold_released"' not in line))
    result = _cli("restore", str(bk), str(src), "--force")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("kept released: legal hold lh_") == 1 and "re-applied er_" in result.stdout
    _restored_cleanly(src, bk)
    with cruxsql.open(src) as store:
        assert [h.active for h in legal_holds.list_holds(store)] == [False]
        states = store.db.execute("SELECT count(*) FROM facts WHERE key = ?", (legal_holds.STATE_KEY,)).fetchone()[0]
        assert states == 2  # placed (in the backup), released once again (not once per source that knows it)


def test_backups_and_restores_recording_their_copies_side_by_side_lose_no_record(tmp_path: Path) -> None:
    """A restore of this store's backup records its staging in this store's backups.json while a backup
    of it may be recording its own: a record lost is a copy an erasure no longer lists."""
    data_dir = tmp_path / "src"
    data_dir.mkdir()
    script = ("import sys; from pathlib import Path; from cruxsql.governance import backup as b\n"
              "d, who = Path(sys.argv[1]), sys.argv[2]\n"
              "for i in range(40):\n"
              "    b.record_staging(d, d.parent / f'{who}-{i}', d.parent / f'{who}-{i}.partial', who)\n")
    writers = [subprocess.Popen([sys.executable, "-c", script, str(data_dir), who]) for who in ("backup", "restore",
                                                                                               "restore2")]
    assert [w.wait(timeout=120) for w in writers] == [0, 0, 0]
    assert len(backups.recorded_backups(data_dir)) == 120
