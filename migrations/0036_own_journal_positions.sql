-- How far the view has replayed each of cruxsql's own journals (cruxsql/facts/own_journal.py), and for
-- which generation of the fact tables: a rebuild or a compaction starts a new generation, and the own
-- journal is then replayed from its start onto the new tables.
CREATE TABLE own_journal_positions (
    name        TEXT PRIMARY KEY,
    generation  TEXT NOT NULL,
    byte_offset INTEGER NOT NULL,
    inode       INTEGER NOT NULL,
    tail_hash   TEXT NOT NULL
);
