"""`cruxsql backup` and `cruxsql restore`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import click

from ..governance import backup as backups
from .common import data_dir_option, echo_json, fails_cleanly, open_store, progress_callback
from .options import json_flag


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
@click.argument("target", type=click.Path(path_type=Path))
@click.option("--force", is_flag=True, help="Replace a data directory that is not empty.")
@click.option("--verify-only", is_flag=True, help="Check every checksum of SRC and write nothing.")
@click.option("--erasure-ledger", "ledger", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="An erasure ledger (a copy of erasure-ledger.jsonl) whose erasures are re-applied too: for "
                   "a TARGET that no longer holds its own.")
@json_flag("Print the result as JSON.")
@fails_cleanly
def restore(src: Path, target: Path, force: bool, verify_only: bool, ledger: Optional[Path], as_json: bool) -> None:
    """Restore the backup SRC into the data directory TARGET.

    Every checksum is verified before anything is written; a TARGET that holds anything is refused
    unless --force. The new directory is built beside TARGET and renamed into place; a TARGET that is
    a symbolic link is followed (the directory it points at is restored, the link stays).

    Erasure outlives a restore: TARGET's erasure ledger, recorded backups and exports are carried over,
    and every erasure recorded after SRC was taken is applied again (exit 1 if one is not verified).
    """
    if verify_only:
        manifest = backups.verify_backup(src)
        result = {"verified": str(src), "created_at": manifest["created_at"], "files": len(manifest["files"])}
    else:
        result = backups.restore(src, target, force=force, erasure_ledger_file=ledger)
    if as_json:
        echo_json(result)
    elif verify_only:
        click.echo(f"backup {src} verified: {result['files']} files match their checksums "
                   f"(taken {result['created_at']})")
    else:
        click.echo(f"restored {result['files']} files from {src} into {result['restored']} "
                   f"(backup taken {result['created_at']})")
        if result["erasure_ledger"] is None:
            click.echo("note: no erasure ledger came with the target or --erasure-ledger: erasures made after "
                       "this backup elsewhere cannot be re-applied", err=True)
        for report in result["erasures_reapplied"]:
            click.echo(f"re-applied {report['selection']['reapplies']} as {report['request_id']}: erased "
                       f"{report['counts']['facts_erased']} fact(s) the backup brought back"
                       + ("" if report["ok"] else " - ERASURE NOT VERIFIED"))
    if not verify_only and not result["ok"]:
        sys.exit(1)


COMMANDS = (backup, restore)
