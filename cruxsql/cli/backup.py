"""`cruxsql backup` and `cruxsql restore`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import click

from click.core import ParameterSource

from ..governance import backup as backups
from ..governance import restore as restoring
from .common import DATA_DIR_ENV, DEFAULT_DATA_DIR, data_dir_of, echo_json, fails_cleanly, open_store, progress_callback
from .options import data_dir_option, json_flag


@click.command("backup")
@click.argument("dest", type=click.Path(path_type=Path))
@json_flag("Print the backup's summary as JSON.")
@data_dir_option
@fails_cleanly
def backup(dest: Path, as_json: bool, data_dir: Path) -> None:
    """Write a consistent snapshot of the store to DEST while writers keep running.

    DEST is a new (or empty) directory, or a single archive when it ends in .tar, .tar.gz or .tgz. It
    holds the journal up to the view's checkpoint, every segment file, the view (SQLite's online backup)
    and cruxsql-backup.json with the BLAKE3 of every file. The backup is recorded in the data
    directory, so erasure reports can name the backups that still hold what they erased.
    """
    with open_store(data_dir, "read") as store:
        report = backups.backup(store, dest, progress=progress_callback("copying"))
    if as_json:
        echo_json(report.to_dict())
    else:
        click.echo(f"backup written to {report.path}: {report.files} files, {report.bytes:,} bytes, journal up to "
                   f"byte {report.journal_offset:,} (line {report.journal_lines:,})")


@click.command("restore")
@click.argument("src", type=click.Path(path_type=Path))
@click.argument("target", type=click.Path(path_type=Path), required=False)
@click.option("--data-dir", "data_dir_flag", type=click.Path(path_type=Path), default=None,
              help="The data directory to restore into, instead of TARGET (also accepted before the subcommand; "
                   f"env {DATA_DIR_ENV}, default {DEFAULT_DATA_DIR}).")
@click.option("--force", is_flag=True, help="Replace a data directory that is not empty.")
@click.option("--verify-only", is_flag=True, help="Check every checksum of SRC and write nothing.")
@click.option("--erasure-ledger", "ledger", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="An erasure ledger (a copy of erasure-ledger.jsonl) whose erasures and hold releases are "
                   "applied too: for when neither TARGET nor the store SRC was taken of holds it any more.")
@click.option("--no-erasure-ledger", is_flag=True,
              help="Restore even when no erasure ledger can say what was erased since SRC was taken (the "
                   "restore is otherwise refused: it could bring erased values back).")
@json_flag("Print the result as JSON.")
@fails_cleanly
def restore(src: Path, target: Optional[Path], data_dir_flag: Optional[Path], force: bool, verify_only: bool,
            ledger: Optional[Path], no_erasure_ledger: bool, as_json: bool) -> None:
    """Restore the backup SRC into the data directory TARGET (or --data-dir).

    Every checksum is verified before anything is written; a TARGET that holds anything is refused
    unless --force. The new directory is built beside TARGET and renamed into place; a TARGET that is
    a symbolic link is followed (the directory it points at is restored, the link stays).

    Erasure outlives a restore: every erasure made after SRC was taken - known to TARGET's erasure
    ledger, to the store SRC was taken of (while it exists) and to --erasure-ledger - is applied again,
    and the legal holds released since stay released, before the restored directory goes live. With no
    ledger to ask, the restore is refused unless --no-erasure-ledger. A restore that was killed is
    completed or rolled back by the next command on TARGET (or this one run again).
    """
    if ledger is not None and no_erasure_ledger:
        raise click.UsageError("--erasure-ledger and --no-erasure-ledger exclude each other")
    if verify_only:
        manifest = backups.verify_backup(src)
        result = {"verified": str(src), "created_at": manifest["created_at"], "files": len(manifest["files"])}
    else:
        result = restoring.restore(src, _target(target, data_dir_flag), force=force, erasure_ledger_file=ledger,
                                   no_erasure_ledger=no_erasure_ledger)
    if as_json:
        echo_json(result)
    elif verify_only:
        click.echo(f"backup {src} verified: {result['files']} files match their checksums "
                   f"(taken {result['created_at']})")
    else:
        _echo_restored(src, result)
    if not verify_only and not result["ok"]:
        sys.exit(1)


def _target(target: Optional[Path], data_dir_flag: Optional[Path]) -> Path:
    """TARGET, or the data directory given by --data-dir (after or before the subcommand), the environment or
    the default, as every other command takes it; two different ones are refused."""
    ctx = click.get_current_context()
    root = ctx.find_root()
    given_before = root is not ctx and root.get_parameter_source("data_dir") == ParameterSource.COMMANDLINE
    flag = data_dir_flag if data_dir_flag is not None else root.params.get("data_dir") if given_before else None
    if target is not None and flag is not None and target.resolve() != flag.resolve():
        raise click.UsageError(f"TARGET {target} and --data-dir {flag} name different directories: give one")
    return target if target is not None else flag if flag is not None else data_dir_of(ctx)


def _echo_restored(src: Path, result: dict) -> None:
    for line in result["interrupted_restore_repaired"]:
        click.echo(f"repair: {line}", err=True)
    click.echo(f"restored {result['files']} files from {src} into {result['restored']} "
               f"(backup taken {result['created_at']})")
    if result["erasure_ledger"] is None:
        click.echo("note: --no-erasure-ledger: no erasure ledger was found, so erasures made after this backup "
                   "were not applied again", err=True)
    for hold_id in result["holds_released"]:
        click.echo(f"kept released: legal hold {hold_id} (active in the backup, released since)")
    for report in result["erasures_reapplied"]:
        click.echo(f"re-applied {report['selection']['reapplies']} as {report['request_id']}: erased "
                   f"{report['counts']['facts_erased']} fact(s) the backup brought back"
                   + ("" if report["ok"] else " - ERASURE NOT VERIFIED"))


COMMANDS = (backup, restore)
