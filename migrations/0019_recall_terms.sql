-- Relevance-ranked recall (`recall`, issue 32): BM25 postings of the facts' words, kept with the text
-- index of 0002 (same state row, same seq order, emptied and carried by the same hooks and triggers).

-- One row per (tenant, owner, term, block of 65536 seqs): the postings of the facts of that scope, 8
-- bytes each, little-endian: uint16 seq offset in the block, then uint8 term frequencies in the entity,
-- key and value, then uint8 word counts of the entity, key and value (capped at 255). owner is '' for
-- facts every agent of the tenant sees, else the `<owner>` of an `__agent::<owner>::` entity; a query
-- reads only its caller's two scopes, so no score depends on a fact the caller may not see.
CREATE TABLE recall_terms (
    tenant   TEXT NOT NULL,
    owner    TEXT NOT NULL,
    term     TEXT NOT NULL,
    block    INTEGER NOT NULL,
    postings BLOB NOT NULL,
    PRIMARY KEY (tenant, owner, term, block)
) WITHOUT ROWID;

-- Per scope: facts indexed and their summed word counts per field (BM25's N and average lengths).
CREATE TABLE recall_term_stats (
    tenant       TEXT NOT NULL,
    owner        TEXT NOT NULL,
    facts        INTEGER NOT NULL,
    entity_words INTEGER NOT NULL,
    key_words    INTEGER NOT NULL,
    value_words  INTEGER NOT NULL,
    PRIMARY KEY (tenant, owner)
) WITHOUT ROWID;

-- The triggers of 0002 that empty every derived recall table now empty these two as well.
DROP TRIGGER recall_view_reset;
CREATE TRIGGER recall_view_reset AFTER DELETE ON journal_checkpoint BEGIN
    DELETE FROM recall_text;
    DELETE FROM recall_grams;
    DELETE FROM recall_terms;
    DELETE FROM recall_term_stats;
    DELETE FROM recall_dirty;
    DELETE FROM recall_index_state;
    DELETE FROM recall_event_times;
    DELETE FROM recall_changes;
    DELETE FROM recall_timeline_state;
END;
DROP TRIGGER recall_generation_changed;
CREATE TRIGGER recall_generation_changed AFTER INSERT ON journal_checkpoint
WHEN EXISTS (SELECT 1 FROM recall_index_state WHERE generation != new.generation)
  OR EXISTS (SELECT 1 FROM recall_timeline_state WHERE generation != new.generation)
BEGIN
    DELETE FROM recall_text;
    DELETE FROM recall_grams;
    DELETE FROM recall_terms;
    DELETE FROM recall_term_stats;
    DELETE FROM recall_dirty;
    DELETE FROM recall_index_state;
    DELETE FROM recall_event_times;
    DELETE FROM recall_changes;
    DELETE FROM recall_timeline_state;
END;

-- A view upgraded from an earlier version has a text index but no postings: start the index over.
DELETE FROM recall_text;
DELETE FROM recall_grams;
DELETE FROM recall_dirty;
DELETE FROM recall_index_state;
