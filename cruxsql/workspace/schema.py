"""`workspace.db`: the derived index of one workspace folder (a view: delete it and reindex).

The schema version and the ranking configuration are hashed into the config fingerprint stored in
`meta`; a database written under another fingerprint is rebuilt rather than trusted, and every
cached verb result is keyed by the fingerprint, so a toggled signal never serves stale results.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import apsw

from .ranking import RankingConfig

SCHEMA_VERSION = 2
DB_NAME = "workspace.db"

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS files (
    file_id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE, lang TEXT NOT NULL, path_class TEXT NOT NULL,
    bytes INTEGER NOT NULL, lines INTEGER NOT NULL, sha TEXT NOT NULL, mtime_ns INTEGER NOT NULL,
    tokens INTEGER NOT NULL, length INTEGER NOT NULL, approx TEXT NOT NULL DEFAULT '');
CREATE TABLE IF NOT EXISTS skipped (path TEXT PRIMARY KEY, reason TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS symbols (
    file_id INTEGER NOT NULL REFERENCES files ON DELETE CASCADE, name TEXT NOT NULL, qualname TEXT NOT NULL,
    kind TEXT NOT NULL, start INTEGER NOT NULL, end INTEGER NOT NULL, signature TEXT NOT NULL,
    depth INTEGER NOT NULL, doc TEXT NOT NULL, approx INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS symbols_name ON symbols(name);
CREATE INDEX IF NOT EXISTS symbols_lname ON symbols(lower(name));
CREATE INDEX IF NOT EXISTS symbols_file ON symbols(file_id, start);
CREATE TABLE IF NOT EXISTS imports (
    file_id INTEGER NOT NULL REFERENCES files ON DELETE CASCADE, module TEXT NOT NULL, line INTEGER NOT NULL,
    resolved TEXT);
CREATE INDEX IF NOT EXISTS imports_file ON imports(file_id);
CREATE INDEX IF NOT EXISTS imports_resolved ON imports(resolved);
CREATE TABLE IF NOT EXISTS md_sections (
    file_id INTEGER NOT NULL REFERENCES files ON DELETE CASCADE, level INTEGER NOT NULL, title TEXT NOT NULL,
    slug TEXT NOT NULL, start INTEGER NOT NULL, end INTEGER NOT NULL, tokens INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS md_sections_file ON md_sections(file_id, start);
-- BM25 postings in the document lane's format: one row per (term, file); each file is a one-document segment.
CREATE TABLE IF NOT EXISTS postings (
    term TEXT NOT NULL, file_id INTEGER NOT NULL REFERENCES files ON DELETE CASCADE, doc_count INTEGER NOT NULL,
    doc_ids BLOB NOT NULL, tfs BLOB NOT NULL, PRIMARY KEY (term, file_id)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS postings_file ON postings(file_id);
CREATE TABLE IF NOT EXISTS cochange (
    path TEXT NOT NULL, partner TEXT NOT NULL, shared INTEGER NOT NULL, PRIMARY KEY (path, partner)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS handles (
    handle TEXT PRIMARY KEY, kind TEXT NOT NULL, path TEXT, start INTEGER, end INTEGER, body TEXT);
CREATE TABLE IF NOT EXISTS result_cache (key TEXT PRIMARY KEY, payload TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS ledger (
    seq INTEGER PRIMARY KEY, session TEXT NOT NULL, verb TEXT NOT NULL, args TEXT NOT NULL,
    signature TEXT NOT NULL, returned_tokens INTEGER NOT NULL, full_read_tokens INTEGER NOT NULL,
    files TEXT NOT NULL, nudged INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS ledger_session ON ledger(session, seq);
CREATE VIEW IF NOT EXISTS ledger_savings AS
    SELECT session, count(*) AS calls, sum(returned_tokens) AS returned_tokens,
           sum(full_read_tokens) AS full_read_tokens, sum(full_read_tokens) - sum(returned_tokens) AS saved_tokens,
           round(1.0 - 1.0 * sum(returned_tokens) / max(1, sum(full_read_tokens)), 4) AS saved_share,
           sum(nudged) AS nudges
    FROM ledger GROUP BY session;
"""


def fingerprint(config: RankingConfig) -> str:
    """SHA-256 of schema version, ranking constants and flags: part of every cache key."""
    blob = json.dumps({"schema": SCHEMA_VERSION, "ranking": config.as_dict()}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def open_db(data_dir: Path) -> apsw.Connection:
    data_dir.mkdir(parents=True, exist_ok=True)
    db = apsw.Connection(str(data_dir / DB_NAME))
    db.setbusytimeout(30_000)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("PRAGMA foreign_keys=ON")
    version = db.execute("PRAGMA user_version").get
    if version not in (0, SCHEMA_VERSION):
        with db:
            for (name, kind) in list(db.execute(
                    "SELECT name, type FROM sqlite_master WHERE type IN ('table','view') AND name NOT LIKE 'sqlite_%'")):
                db.execute(f"DROP {kind.upper()} IF EXISTS \"{name}\"")
    with db:
        db.execute(SCHEMA)
        db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
    return db


def meta(db: apsw.Connection, key: str, default: str = "") -> str:
    row = db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
    return row[0] if row else default


def set_meta(db: apsw.Connection, key: str, value: str) -> None:
    db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))
