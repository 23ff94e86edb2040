"""The view's SQLite file: its name, the connection pragmas, the read-only snapshot and schema migrations.

`cruxsql.db` is derived data: everything in it is rebuilt from the journal, so its connections trade
fsyncs for speed (WAL, synchronous=NORMAL) but never risk corruption. The schema is the ordered
`NNNN_name.sql` files of `migrations/`, each applied once and recorded in `schema_migrations`; a file
with a newer schema than this cruxsql knows is refused (ViewTooNew), never downgraded.
"""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path
from typing import Optional

import apsw

from ..errors import ViewTooNew
from . import event_indexes, timestamps
from .busy import retry_busy, wait_when_busy

DB_NAME = "cruxsql.db"
_MIGRATION_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


def migrations_dir() -> Path:
    """`migrations/` at the repository root in a checkout, or `cruxsql/migrations` in a wheel."""
    packaged = resources.files("cruxsql") / "migrations"
    if packaged.is_dir():
        return Path(str(packaged))
    return Path(__file__).resolve().parents[2] / "migrations"


def open_connection(path: Path, migrate_schema: bool = True) -> apsw.Connection:
    """An apsw connection to the view with the pragmas docs/architecture.md names, migrated (unless
    `migrate_schema` is False: the caller checks `pending_migrations` itself)."""
    db = apsw.Connection(str(path))
    wait_when_busy(db)
    # Turning a fresh (rollback-journal) file into WAL needs its exclusive lock; a peer that holds a
    # shared lock on it and wants more makes SQLite fail one of the two at once (its deadlock rule),
    # without the busy handler: that one retries.
    retry_busy(lambda: db.execute("PRAGMA journal_mode=WAL").get)
    # The view's commits do not fsync (WAL + NORMAL: only checkpoints sync, and they run off the write
    # path, see checkpointer.py). What that risks is losing the view's last transactions to a power cut
    # or OS crash, never corrupting it; and nothing of value goes with them: every transaction carries
    # the checkpoint row, so a lost one takes its checkpoint with it, and the next open replays those
    # journal lines, which were fsynced before the transaction was even committed. The journal's fsync
    # is the one durability step of a write. (synchronous=OFF would also skip the checkpoints' syncs,
    # which can corrupt the database file on power loss: that is not a trade the view should make.)
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("PRAGMA cache_size=-65536")  # 64 MiB: replay inserts into random-keyed B-trees
    db.execute("PRAGMA secure_delete=ON")
    db.execute("PRAGMA foreign_keys=ON")
    if migrate_schema:
        migrate(db)
    return db


def is_wal_file(path: Path) -> bool:
    """Whether `path` is an SQLite file already in WAL mode (header bytes 18-19 are 2: SQLite's file
    format), read without opening it in SQLite, so without taking any of its locks."""
    try:
        with path.open("rb") as handle:
            header = handle.read(20)
    except OSError:
        return False
    return len(header) == 20 and header.startswith(b"SQLite format 3\x00") and header[18:20] == b"\x02\x02"


def open_snapshot(path: Path) -> apsw.Connection:
    """A private in-memory copy of the view at `path`, for a data directory that cannot be written.

    The file is read with `immutable=1` (no lock, WAL or shm file is touched); an uncheckpointed WAL
    is left out, which only makes the copy older: its checkpoint row says how far it got, so replaying
    the journal tail brings it up to date. An unreadable view yields an empty copy (a full replay).
    """
    db = apsw.Connection(":memory:")
    if path.is_file():
        try:
            source = apsw.Connection(f"file:{path.resolve()}?immutable=1",
                                     flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI)
            try:
                with db.backup("main", source, "main") as backup:
                    backup.step()
            finally:
                source.close()
        except apsw.Error:
            db.close()
            db = apsw.Connection(":memory:")
    db.execute("PRAGMA foreign_keys=ON")
    migrate(db)
    return db


def _migration_files(directory: Optional[Path] = None) -> list[tuple[int, str, Path]]:
    directory = directory or migrations_dir()
    return [(int(m.group(1)), m.group(2), path) for path in sorted(directory.glob("*.sql"))
            if (m := _MIGRATION_NAME.match(path.name))]


def pending_migrations(db: apsw.Connection, directory: Optional[Path] = None) -> list[str]:
    """The migrations `db` lacks, read without taking SQLite's write lock (a view opened beside a long
    writer need not wait for it when its schema is current)."""
    try:
        applied = {row[0] for row in db.execute("SELECT version FROM schema_migrations")}
    except apsw.SQLError:
        applied = set()
    return [path.name for version, _, path in _migration_files(directory) if version not in applied]


def migrate(db: apsw.Connection, directory: Optional[Path] = None) -> list[str]:
    """Apply every `NNNN_name.sql` not yet recorded in `schema_migrations`, in order."""
    pending = _migration_files(directory)
    if pending and not pending_migrations(db, directory) and db.execute(
            "SELECT max(version) FROM schema_migrations").get <= pending[-1][0]:
        return []  # nothing to apply (and not a newer schema, refused below): no write lock taken
    done = []
    # BEGIN IMMEDIATE takes the write lock before reading what is applied: a deferred transaction that
    # reads and then writes cannot wait for another writer and fails with SQLITE_BUSY instead.
    db.execute("BEGIN IMMEDIATE")
    try:
        db.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, "
            "applied_at TEXT NOT NULL)"
        )
        applied = {row[0] for row in db.execute("SELECT version FROM schema_migrations")}
        known = {version for version, _, _ in pending}
        if applied and known and max(applied) > max(known):
            raise ViewTooNew(f"{DB_NAME} has schema version {max(applied)}, newer than this cruxsql knows "
                             f"({max(known)}): upgrade cruxsql, or delete {DB_NAME} to rebuild it from the journal")
        if any(version not in applied for version, _, _ in pending):
            event_indexes.restore_names(db)  # (a compaction may have left their alternate names)
        for version, name, path in pending:
            if version in applied:
                continue
            db.execute(path.read_text(encoding="utf-8"))
            db.execute(
                "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
                (version, name, timestamps.format_event_time(timestamps.now_ns())),
            )
            done.append(path.name)
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    return done
