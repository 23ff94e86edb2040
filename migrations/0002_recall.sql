-- Fact recall (query_facts / get_bootstrap / memory_view): derived indexes over `facts`, kept current
-- lazily by cruxsql/fact_index.py, and the opt-in salience counters (never written to the journal).

-- Recall follows facts by seq (insertion order) through 0001's facts_seq index.

-- Which generation of the fact tables the indexes below were built for, and how far they got.
CREATE TABLE recall_index_state (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    generation TEXT NOT NULL,
    last_seq   INTEGER NOT NULL
);

-- Per fact (by seq): the agent scope split and the Rust-lowercased text the OR-match runs on.
-- A lowercased column is NULL when it equals the original (facts.value / facts.key / facts.entity).
CREATE TABLE recall_text (
    seq            INTEGER PRIMARY KEY,
    owner          TEXT,   -- `<owner>` of an `__agent::<owner>::<logical>` entity, else NULL
    visible_entity TEXT,   -- `<logical>` of such an entity, else NULL (visible under the stored entity)
    lc_value       TEXT,
    lc_key         TEXT,
    lc_entity      TEXT    -- lowercased visible entity
);

-- Trigram postings (FTS5-free): one row per (trigram, block of 65536 seqs), the seqs in the block as
-- little-endian uint16 offsets. gram = (c1 << 42) | (c2 << 21) | c3 over code points of the lowercased
-- value, key and visible entity. Postings are a superset: candidates are re-checked against the rows.
CREATE TABLE recall_grams (
    gram  INTEGER NOT NULL,
    block INTEGER NOT NULL,
    seqs  BLOB NOT NULL,
    PRIMARY KEY (gram, block)
) WITHOUT ROWID;

-- Facts whose text changed in place (an erasure or redaction) and must be re-indexed.
CREATE TABLE recall_dirty (seq INTEGER PRIMARY KEY);

-- Opt-in access counting (CORECRUXD_MEMORY_SALIENCE): kept in the view only, never journaled, so a
-- compaction can never bake it into facts.jsonl. It survives view rebuilds (keyed by fact_id).
CREATE TABLE recall_salience (
    fact_id             TEXT PRIMARY KEY,
    access_count        INTEGER NOT NULL,
    last_accessed_at_ns INTEGER
) WITHOUT ROWID;

-- Transaction-time travel (`known_at`), built on first use: event times by journal line, and for
-- every fact a later event changed, its attribute values after each change (plus its values at birth).
CREATE TABLE recall_timeline_state (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    generation TEXT NOT NULL,
    last_line  INTEGER NOT NULL
);
CREATE TABLE recall_event_times (
    line_no INTEGER PRIMARY KEY,
    at_ns   INTEGER
);
CREATE TABLE recall_changes (
    fact_id TEXT NOT NULL,
    attr    TEXT NOT NULL CHECK (attr IN ('deleted', 'superseded_by', 'validity', 'horizon', 'reverified')),
    line_no INTEGER NOT NULL,
    at_ns   INTEGER NOT NULL,
    v_int   INTEGER,
    v_int2  INTEGER,
    v_text  TEXT,
    PRIMARY KEY (fact_id, attr, line_no)
) WITHOUT ROWID;

-- Rebuilding the fact tables from scratch, or rewriting them in place under a new generation, empties
-- every derived recall table in the same transaction (erasure must reach every copy). A per-row delete
-- trigger on facts would cost a rebuild ~12 s per million facts, so a fact deleted from the view
-- without a new generation (replace_latest) keeps its recall_text row until the next rewrite; recall
-- joins on facts and never returns it. Text changed in place is dropped now and re-indexed lazily.
CREATE TRIGGER recall_fact_text_changed AFTER UPDATE OF entity, key, value, private ON facts BEGIN
    DELETE FROM recall_text WHERE seq = old.seq;
    INSERT OR IGNORE INTO recall_dirty (seq) VALUES (new.seq);
END;
CREATE TRIGGER recall_view_reset AFTER DELETE ON journal_checkpoint BEGIN
    DELETE FROM recall_text;
    DELETE FROM recall_grams;
    DELETE FROM recall_dirty;
    DELETE FROM recall_index_state;
    DELETE FROM recall_event_times;
    DELETE FROM recall_changes;
    DELETE FROM recall_timeline_state;
END;
-- A view rewritten in place (e.g. compaction's direct path) carries a new generation: drop what was
-- derived from the old one right away, inside the same transaction, rather than at the next read.
CREATE TRIGGER recall_generation_changed AFTER INSERT ON journal_checkpoint
WHEN EXISTS (SELECT 1 FROM recall_index_state WHERE generation != new.generation)
  OR EXISTS (SELECT 1 FROM recall_timeline_state WHERE generation != new.generation)
BEGIN
    DELETE FROM recall_text;
    DELETE FROM recall_grams;
    DELETE FROM recall_dirty;
    DELETE FROM recall_index_state;
    DELETE FROM recall_event_times;
    DELETE FROM recall_changes;
    DELETE FROM recall_timeline_state;
END;
