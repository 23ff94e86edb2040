"""`cruxsql backup` and `cruxsql restore`."""

from __future__ import annotations

from pathlib import Path

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
@json_flag("Print the result as JSON.")
@fails_cleanly
def restore(src: Path, target: Path, force: bool, verify_only: bool, as_json: bool) -> None:
    """Restore the backup SRC into the data directory TARGET.

    Every checksum is verified before anything is written; a TARGET that holds anything is refused
    unless --force. The new directory is built beside TARGET and renamed into place.
    """
    if verify_only:
        manifest = backups.verify_backup(src)
        result = {"verified": str(src), "created_at": manifest["created_at"], "files": len(manifest["files"])}
    else:
        result = backups.restore(src, target, force=force)
    if as_json:
        echo_json(result)
    elif verify_only:
        click.echo(f"backup {src} verified: {result['files']} files match their checksums "
                   f"(taken {result['created_at']})")
    else:
        click.echo(f"restored {result['files']} files from {src} into {target} (backup taken {result['created_at']})")


COMMANDS = (backup, restore)
