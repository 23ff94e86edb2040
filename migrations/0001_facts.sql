-- The fact view: one row per fact, one row per applied journal line, and the replay checkpoint.
-- Every column of `facts` is named exactly like the Fact JSON key it holds; timestamps are kept as the
-- journal's text and, beside them, as integer epoch nanoseconds (`<name>_ns`) for sorting.

CREATE TABLE facts (
    fact_id             TEXT PRIMARY KEY,
    tenant_hash         TEXT NOT NULL,
    entity              TEXT NOT NULL,
    key                 TEXT NOT NULL,
    value               TEXT NOT NULL,
    source_receipt      TEXT,
    confidence          REAL NOT NULL,
    stored_at           TEXT NOT NULL,
    stored_at_ns        INTEGER NOT NULL,
    tokens              INTEGER NOT NULL,
    deleted             INTEGER NOT NULL CHECK (deleted IN (0, 1)),
    version             INTEGER NOT NULL,
    supersedes          TEXT,
    private             INTEGER NOT NULL CHECK (private IN (0, 1)),
    horizon_class       TEXT NOT NULL CHECK (horizon_class IN ('volatile', 'medium', 'stable', 'none')),
    reverified_at       TEXT,
    reverified_at_ns    INTEGER,
    superseded_by       TEXT,
    actor               TEXT,
    valid_from          TEXT,
    valid_from_ns       INTEGER,
    valid_to            TEXT,
    valid_to_ns         INTEGER,
    access_count        INTEGER NOT NULL DEFAULT 0,
    last_accessed_at    TEXT,
    last_accessed_at_ns INTEGER,
    seq                 INTEGER NOT NULL,  -- order in which replay inserted the fact (version-chain order)
    line_no             INTEGER NOT NULL   -- the journal line that stored it
);
CREATE UNIQUE INDEX facts_seq ON facts (seq);
CREATE INDEX facts_chain ON facts (tenant_hash, entity, key, seq);
CREATE INDEX facts_entity ON facts (entity);
CREATE INDEX facts_stored_at ON facts (stored_at_ns, fact_id);
CREATE INDEX facts_supersedes ON facts (supersedes) WHERE supersedes IS NOT NULL;
CREATE INDEX facts_superseded_by ON facts (superseded_by) WHERE superseded_by IS NOT NULL;
CREATE INDEX facts_deleted ON facts (fact_id) WHERE deleted = 1;

-- One row per journal line that decoded; `applied` is 0 when replay's rules skipped it (skip_reason says why).
CREATE TABLE journal_events (
    line_no     INTEGER PRIMARY KEY,
    byte_offset INTEGER NOT NULL,
    byte_length INTEGER NOT NULL,
    op          TEXT NOT NULL,
    fact_id     TEXT,
    event_at    TEXT,
    applied     INTEGER NOT NULL CHECK (applied IN (0, 1)),
    skip_reason TEXT
);
CREATE INDEX journal_events_fact ON journal_events (fact_id);

-- Every fact an event names, with its role (stored, deleted, superseded, superseding, ...).
CREATE TABLE journal_event_facts (
    line_no INTEGER NOT NULL REFERENCES journal_events (line_no),
    fact_id TEXT NOT NULL,
    role    TEXT NOT NULL,
    PRIMARY KEY (line_no, fact_id, role)
) WITHOUT ROWID;
CREATE INDEX journal_event_facts_fact ON journal_event_facts (fact_id);

-- Lines that could not be decoded (bad JSON, unknown op, wrong types, invalid UTF-8): skipped, kept here.
CREATE TABLE journal_corrupt_lines (
    line_no     INTEGER PRIMARY KEY,
    byte_offset INTEGER NOT NULL,
    byte_length INTEGER NOT NULL,
    reason      TEXT NOT NULL
);

-- Active consolidation edges (canonical -> sources, in recorded order).
CREATE TABLE consolidation_sources (
    canonical_fact_id TEXT NOT NULL,
    position          INTEGER NOT NULL,
    source_fact_id    TEXT NOT NULL,
    PRIMARY KEY (canonical_fact_id, position)
) WITHOUT ROWID;
CREATE INDEX consolidation_sources_source ON consolidation_sources (source_fact_id);

-- How far the view has replayed the journal, and the fingerprint of the bytes it replayed.
-- Derived indexes that follow `facts` by seq compare `generation` to know when to start over.
CREATE TABLE journal_checkpoint (
    id            INTEGER PRIMARY KEY CHECK (id = 1),
    byte_offset   INTEGER NOT NULL,
    line_count    INTEGER NOT NULL,
    inode         INTEGER NOT NULL,
    tail_hash     TEXT NOT NULL,
    next_seq      INTEGER NOT NULL,  -- seq the next inserted fact gets
    generation    TEXT NOT NULL,     -- changes whenever the fact tables are rebuilt from scratch
    updated_at_ns INTEGER NOT NULL
);

CREATE VIEW live_facts AS
    SELECT * FROM facts WHERE deleted = 0 AND superseded_by IS NULL;

CREATE VIEW fact_versions AS
    SELECT tenant_hash, entity, key, version, fact_id, value, stored_at, deleted, supersedes, superseded_by
    FROM facts ORDER BY tenant_hash, entity, key, seq;
