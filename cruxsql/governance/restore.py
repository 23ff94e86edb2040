"""Restore: a verified backup brought back with every erasure made since applied again before it goes live.

What was erased since the backup is known from three places: the erasure ledger of the directory
restored over, the ledger of the store the backup was taken of (its manifest names its path and
identity; used while that path still holds the same store) and `--erasure-ledger` files. With none of
them, restore refuses unless the operator says `--no-erasure-ledger`: it could bring erased values back.

The steps, each safe to be killed at (the crash points):

1. the backup is verified, checksum by checksum, before anything is written;
2. `TARGET.restore-<hex>/` is made beside the target with a marker (`.cruxsql-restore.json`: our pid,
   state "staging"), and recorded in the source store's `backups.json` (where its erasures scan it and
   its next command removes it once we are gone); the backup's files are copied into it;
3. inside it, the records of the directory restored over are carried over, the holds released since
   are released again, and every erasure made since is applied again; the marker says "ready";
4. under the erasure locks of the source store and of a target holding a store (no erasure there in
   between), erasures made there meanwhile are applied too; holding a lock on the target's parent
   directory (two restores into one target commit one after the other; without `force`, one filled
   meanwhile is refused), the old target is set aside as `TARGET.replaced-<hex>/` and the staging directory
   renamed onto TARGET: the commit point. Then the replaced directory and the marker are removed.

A restore killed before the rename leaves no erased value live: the next command on TARGET (or a
`cruxsql restore` re-run) completes a "ready" staging whose target is missing, removes every other
staging of a dead restore and puts a set-aside target back (`finish_interrupted`); the source store's
next command removes a staging it recorded.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import re
import shutil
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ContextManager, Iterator, Optional

import apsw

from ..errors import InvalidInput
from ..facts import replay, timestamps, view_file
from ..facts.faults import crash_point
from ..facts.files import directory_locked, fsync_dir, write_file_durably
from ..facts.journal import JOURNAL_NAME, Journal
from . import compaction, erasure_ledger, erasure_lock, erasure_recovery, export_manifest, legal_holds, store_identity
from .backup import (
    BackupError,
    alive,
    copy_hashed,
    drop_staging,
    members,
    record_staging,
    recorded_backups,
    safe_name,
    verify_backup,
    write_registry,
)
from .restore_traces import MARKER_NAME



@dataclass
class ErasureKnowledge:
    """What a restore knows of the erasures and hold releases made since a backup, and from where."""

    ledger: list[dict[str, Any]] = field(default_factory=list)
    releases: list[dict[str, Any]] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    source_store: Optional[Path] = None


def restore(src: Path | str, data_dir: Path | str, force: bool = False,
            erasure_ledger_file: Optional[Path] = None, no_erasure_ledger: bool = False) -> dict[str, Any]:
    """Restore a verified backup into `data_dir` (which must be empty or absent unless `force`).

    A `data_dir` that is a symbolic link is followed: the directory it points at is restored, the link
    stays. The records the replaced directory keeps of itself (its erasure ledger, recorded backups and
    exports, its identity) are carried into the restored one, and every erasure made after the backup
    was taken is applied again before the restored directory goes live.
    """
    src = Path(src)
    manifest = verify_backup(src)
    target = _checked_target(Path(data_dir))
    recovered = finish_interrupted(target)
    if _holds_store(target) and not force:
        raise BackupError(f"{target} is not empty; pass --force to replace what it holds")
    knowledge = erasure_knowledge(manifest, target, erasure_ledger_file, no_erasure_ledger)
    staging = _Staging(target, knowledge.source_store)
    try:
        staging.fill(src, manifest)
        _carry_records(target, staging.path, knowledge, manifest)
        _rebind_view(staging.path)
        outcome = _reapply(staging.path, _later(knowledge.ledger, manifest, set()), knowledge.releases, src)
        stores = _stores_asked(knowledge.source_store, target)
        with _erasures_paused(stores), _commits_serialised(target.parent):
            meanwhile = erasure_ledger.merged(*(erasure_ledger.read_ledger(d) for d in stores))
            if _later(meanwhile, manifest, outcome.seen):  # erasures those stores finished while we staged
                erasure_ledger.write_all(staging.path, erasure_ledger.merged(
                    erasure_ledger.read_ledger(staging.path), meanwhile))
                outcome.add(_reapply(staging.path, _later(meanwhile, manifest, outcome.seen), [], src))
            staging.commit(force)
    except BaseException:
        staging.abort()
        raise
    staging.clean()
    return {"restored": str(target), "from": str(src), "created_at": manifest["created_at"],
            "journal_offset": manifest["journal_offset"], "files": len(manifest["files"]),
            "erasure_ledger": " and ".join(knowledge.sources) or None, "erasures_after_backup": sorted(outcome.seen),
            "erasures_reapplied": outcome.reports, "holds_released": outcome.holds_released,
            "interrupted_restore_repaired": recovered, "ok": all(r["ok"] for r in outcome.reports)}


def _checked_target(data_dir: Path) -> Path:
    if data_dir.is_symlink():
        if not data_dir.exists():
            raise BackupError(f"{data_dir} is a symbolic link to {os.readlink(data_dir)}, which does not exist")
        data_dir = data_dir.resolve()
    if data_dir.exists() and not data_dir.is_dir():
        raise BackupError(f"{data_dir} is a file, not a data directory")
    if not data_dir.parent.is_dir():
        raise InvalidInput(f"the parent directory of {data_dir} does not exist")
    return data_dir


def _holds_store(data_dir: Path) -> bool:
    return data_dir.exists() and (not data_dir.is_dir() or any(data_dir.iterdir()))


# --- what is known of erasures since the backup ---------------------------------------------------


def source_store(manifest: dict[str, Any]) -> tuple[Optional[Path], str]:
    """The store the backup was taken of, when its path still holds that store; else (None, why not)."""
    source = manifest.get("source") or {}
    if not source.get("path"):
        return None, "the backup does not name the store it was taken of (made by an older cruxsql)"
    path = Path(source["path"])
    if not path.is_dir():
        return None, f"the store it was taken of ({path}) is gone"
    if store_identity.read_id(path) != source.get("store_id"):
        return None, f"{path} no longer holds the store it was taken of"
    return path, ""


def erasure_knowledge(manifest: dict[str, Any], target: Path, ledger_file: Optional[Path],
                      no_erasure_ledger: bool) -> ErasureKnowledge:
    """Gather the ledgers of the target, the source store and `ledger_file` (and the holds released in the
    views of the target and the source store); refuse (BackupError) when there is none, unless
    `no_erasure_ledger`."""
    known = ErasureKnowledge()
    ledgers = []
    if target.is_dir() and erasure_ledger.ledger_path(target).exists():
        ledgers.append(erasure_ledger.read_ledger(target))
        known.sources.append(f"the erasure ledger of {target}")
    known.releases += _releases_in_view(target)  # (a release made before the ledger recorded releases)
    known.source_store, why_not = source_store(manifest)
    if known.source_store is not None:
        ledgers.append(erasure_ledger.read_ledger(known.source_store))
        known.releases += _releases_in_view(known.source_store)
        if known.source_store.resolve() != target.resolve() or not known.sources:  # (itself, never erased in)
            known.sources.append(f"the store it was taken of ({known.source_store})")
    if ledger_file is not None:
        if not Path(ledger_file).is_file():
            raise InvalidInput(f"--erasure-ledger {str(ledger_file)!r} is not a file")
        ledgers.append(erasure_ledger.parse_file(Path(ledger_file)))
        known.sources.append(f"--erasure-ledger {ledger_file}")
    if not known.sources and not no_erasure_ledger:
        raise BackupError(f"cannot tell which erasures were made after this backup (taken {manifest['created_at']}): "
                          f"{why_not}, and {target} holds no erasure ledger; pass --erasure-ledger FILE (a copy of "
                          "erasure-ledger.jsonl) or, to restore without re-applying erasures, --no-erasure-ledger")
    known.ledger = erasure_ledger.merged(*ledgers)
    known.releases += erasure_ledger.releases_in(known.ledger)
    return known


def _releases_in_view(data_dir: Path) -> list[dict[str, Any]]:
    """The released holds the view of `data_dir` knows (read-only; a release a Crux daemon made counts)."""
    path = data_dir / view_file.DB_NAME
    if not path.is_file():
        return []
    try:
        db = apsw.Connection(f"file:{path.resolve()}?mode=ro", flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI)
        try:
            db.setbusytimeout(5_000)
            return legal_holds.releases_of(legal_holds.resolve_holds(db))
        finally:
            db.close()
    except apsw.Error:  # no view yet, or not one this version reads: the ledger still says
        return []


# --- staging ---------------------------------------------------------------------------------------


class _Staging:
    """`TARGET.restore-<hex>/`: where the restore is built, and how it goes live."""

    def __init__(self, target: Path, source: Optional[Path]) -> None:
        hexid = uuid.uuid4().hex[:12]
        self.target = target
        self.path = target.with_name(f"{target.name}.restore-{hexid}")
        self.replaced = target.with_name(f"{target.name}.replaced-{hexid}")
        self.source = source if source is not None and source.resolve() != target.resolve() else None
        if self.source is not None:
            with contextlib.suppress(OSError):  # a read-only source: the target's next command still cleans
                record_staging(self.source, target, self.path, "restore")
        self.path.mkdir(mode=0o700)
        self._mark("staging")

    def _mark(self, state: str) -> None:
        write_file_durably(self.path / MARKER_NAME, json.dumps(
            {"pid": os.getpid(), "state": state, "target": str(self.target), "replaced": self.replaced.name}
        ).encode("utf-8") + b"\n", mode=0o600)

    def fill(self, src: Path, manifest: dict[str, Any]) -> None:
        expected = {e["path"]: e for e in manifest["files"]}
        for name, fh in members(src):
            size, hasher = copy_hashed(fh, self.path / safe_name(name))
            entry = expected.get(name)
            if entry is None or size != entry["bytes"] or hasher.hexdigest() != entry["blake3"]:
                raise BackupError(f"backup {src}: {name} changed while it was being restored")
            crash_point("restore-staging-partial")

    def commit(self, force: bool) -> None:
        if not force and _holds_store(self.target):
            raise BackupError(f"{self.target} was filled by another process while this restore ran; pass --force "
                              "to replace what it holds")
        self._mark("ready")
        for directory in sorted({p.parent for p in self.path.rglob("*")} | {self.path}, reverse=True):
            fsync_dir(directory)
        crash_point("restore-staged")
        if self.target.exists():
            if any(self.target.iterdir()):
                os.replace(self.target, self.replaced)
                crash_point("restore-after-set-aside")
            else:
                self.target.rmdir()
        os.replace(self.path, self.target)
        fsync_dir(self.target.parent)
        crash_point("restore-after-rename")

    def clean(self) -> None:
        if self.replaced.exists():
            _remove_tree(self.replaced)
        (self.target / MARKER_NAME).unlink(missing_ok=True)
        fsync_dir(self.target)
        if self.source is not None:
            with contextlib.suppress(OSError):
                drop_staging(self.source, self.path)

    def abort(self) -> None:
        if self.replaced.exists() and not self.target.exists():
            os.replace(self.replaced, self.target)
        if self.path.exists():
            _remove_tree(self.path)
        if self.source is not None:
            with contextlib.suppress(OSError):
                drop_staging(self.source, self.path)


def _remove_tree(path: Path) -> None:
    """Remove a staging or replaced directory, its marker last (a half-removed one is still known)."""
    for child in path.iterdir():
        if child.name == MARKER_NAME:
            continue
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()
    (path / MARKER_NAME).unlink(missing_ok=True)
    path.rmdir()


def _stores_asked(source: Optional[Path], target: Path) -> list[Path]:
    """The stores whose erasures the restore must not miss: the source store and a target that holds a
    store (sorted: two restores take their locks in the same order)."""
    stores = {d.resolve() for d in (source, target) if d is not None and _holds_store(d)}
    return sorted(stores)


@contextlib.contextmanager
def _erasures_paused(stores: list[Path]) -> Iterator[None]:
    """The erasure locks of `stores` (none erases there while the restore commits); not taken in a store
    this process cannot write to (its lock file may not even be opened)."""
    with contextlib.ExitStack() as locks:
        for data_dir in stores:
            if os.access(data_dir, os.W_OK):
                locks.enter_context(erasure_lock.held_at(data_dir, None))
        yield


def _commits_serialised(parent: Path) -> ContextManager[None]:
    """An exclusive lock on the target's parent directory: two restores into one target commit one after
    the other (the second sees what the first put there)."""
    return directory_locked(parent)


def _read_marker(directory: Path) -> Optional[dict[str, Any]]:
    try:
        marker = json.loads((directory / MARKER_NAME).read_bytes())
    except (OSError, ValueError):
        return None
    return marker if isinstance(marker, dict) else None


def finish_interrupted(target: Path) -> list[str]:
    """Complete or roll back a restore into `target` whose process is gone; one line per repair.

    A committed restore loses what it replaced; a "ready" staging (its erasures re-applied) whose target
    is missing is renamed into place; any other staging is removed, and a target it set aside is put back.
    Only directories a restore made are touched: named `TARGET.restore-<12 hex>` with its marker (or
    nothing else in it), or the `TARGET.replaced-<12 hex>` a marker names; a directory of the operator's
    that merely looks like one is left alone.
    """
    if not target.parent.is_dir():
        return []
    done = _finish_committed(target)
    for staging in _made_by_restore(target, "restore"):
        done += _settle_staging(target, staging)
    for replaced in _made_by_restore(target, "replaced"):
        if not target.exists() and not _staging_of(replaced).exists():
            os.replace(replaced, target)  # its staging removed (by the source store's repair): roll back
            done.append(f"put {target} back as it was before a killed restore")
    if done:
        fsync_dir(target.parent)
    return done


def _made_by_restore(target: Path, kind: str) -> list[Path]:
    """The `TARGET.<kind>-<12 hex>` directories beside `target` ("restore": staging, "replaced": set aside)."""
    pattern = re.compile(re.escape(target.name) + rf"\.{kind}-[0-9a-f]{{12}}")
    return sorted(p for p in target.parent.glob(glob.escape(target.name) + f".{kind}-*")
                  if pattern.fullmatch(p.name) and p.is_dir() and not p.is_symlink())


def _staging_of(replaced: Path) -> Path:
    return replaced.with_name(replaced.name.replace(".replaced-", ".restore-"))


def _replaced_named_by(target: Path, marker: dict[str, Any]) -> Optional[Path]:
    """The set-aside target a marker names, when it is one of this target's."""
    replaced = target.with_name(str(marker.get("replaced")))
    return replaced if replaced in _made_by_restore(target, "replaced") else None


def _finish_committed(target: Path) -> list[str]:
    """A restore killed after its rename: the replaced directory and the marker go."""
    marker = _read_marker(target)
    if marker is None or _is_live_restore(marker):
        return []
    _drop_replaced(target, marker)
    return [f"finished the restore into {target} that was killed after it went live"]


def _drop_replaced(target: Path, marker: dict[str, Any]) -> None:
    replaced = _replaced_named_by(target, marker)
    if replaced is not None:
        _remove_tree(replaced)
    (target / MARKER_NAME).unlink(missing_ok=True)


def _is_live_restore(marker: Optional[dict[str, Any]]) -> bool:
    return marker is not None and alive(marker.get("pid"))


def _settle_staging(target: Path, staging: Path) -> list[str]:
    marker = _read_marker(staging)
    if marker is None:
        if any(not p.name.startswith(MARKER_NAME + ".") for p in staging.iterdir()):
            return []  # no marker, yet something in it: not known to be a restore's staging
    elif _is_live_restore(marker):
        return []
    elif marker.get("state") == "ready" and not target.exists():
        os.replace(staging, target)
        fsync_dir(target.parent)
        _drop_replaced(target, marker)
        return [f"completed the restore into {target} that was killed after re-applying its erasures"]
    _remove_tree(staging)
    return [f"removed {staging}, the staging copy of a killed restore"]


# --- inside the staging directory --------------------------------------------------------------------


def _carry_records(target: Path, staging: Path, knowledge: ErasureKnowledge, manifest: dict[str, Any]) -> None:
    """Carry the replaced directory's own records into the restored one: the erasure ledger (merged with the
    backup's and the others known), recorded backups and audit exports, and its identity."""
    merged = erasure_ledger.merged(erasure_ledger.read_ledger(staging), knowledge.ledger)
    if merged:
        erasure_ledger.write_all(staging, merged)
    old = target if target.is_dir() else None
    if old is not None:
        backups = [e for e in recorded_backups(old) if e.get("kind") != "restore"]
        if backups:
            write_registry(staging, backups)
        exports = old / export_manifest.MANIFEST_NAME
        if exports.exists():
            write_file_durably(staging / export_manifest.MANIFEST_NAME, exports.read_bytes())
    own_id = store_identity.read_id(old) if old is not None else None
    source = manifest.get("source") or {}
    if own_id is None and knowledge.source_store is None and source.get("store_id") \
            and Path(source.get("path", "")) == target.resolve():
        own_id = source["store_id"]  # the store the backup was taken of, brought back where it was
    if own_id is not None:
        store_identity.write_id(staging, own_id)


def _rebind_view(directory: Path) -> None:
    """Point the restored view's checkpoint at the restored journal file, so opening it needs no rebuild."""
    db_path = directory / view_file.DB_NAME
    if not db_path.exists() or not (directory / JOURNAL_NAME).exists():
        return
    db = apsw.Connection(str(db_path))
    try:
        replay.adopt_journal(db, Journal(directory))
    finally:
        db.close()


@dataclass
class _Outcome:
    seen: set[str] = field(default_factory=set)
    reports: list[dict[str, Any]] = field(default_factory=list)
    holds_released: list[str] = field(default_factory=list)

    def add(self, other: "_Outcome") -> None:
        self.seen |= other.seen
        self.reports += other.reports
        self.holds_released += other.holds_released


def _later(ledger: list[dict[str, Any]], manifest: dict[str, Any], seen: set[str]) -> list[dict[str, Any]]:
    """The erasures a ledger says were done after the backup was taken (leaving out those in `seen`)."""
    cutoff = timestamps.parse_ns(manifest["created_at"])
    return [e for e in erasure_ledger.done_in(ledger)
            if e["request_id"] not in seen and timestamps.parse_ns(e["executed_at"]) >= cutoff]


def _reapply(directory: Path, later: list[dict[str, Any]], releases: list[dict[str, Any]], src: Path) -> _Outcome:
    """Inside the staging directory: release the holds released since, complete an erasure the ledger
    says was interrupted, and apply again the erasures made after the backup (`later`)."""
    outcome = _Outcome(seen={e["request_id"] for e in later})
    from ..facts.store import Store
    with Store(directory) as store:
        if releases:
            outcome.holds_released = legal_holds.reinstate_releases(store, releases)
        crash_point("restore-holds-released")
        erasure_recovery.complete_interrupted(store)
        try:
            outcome.reports = erasure_recovery.reapply(store, later, str(src)) if later else []
        except compaction.LegalHoldBlocked as exc:
            raise BackupError(f"an erasure made after this backup cannot be applied again: {exc}") from None
    return outcome
