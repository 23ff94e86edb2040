-- Dense lane and graph lane of the document lane: derived from segments/ (sidecar files and chunk text).

-- One row per segment that has a vector sidecar (.ccxv) and its profile (.ccxp), as MANIFEST.json lists them.
CREATE TABLE document_vectors (
    segment_seq   INTEGER PRIMARY KEY REFERENCES document_segments (segment_seq) ON DELETE CASCADE,
    file_name     TEXT NOT NULL,
    blake3        TEXT NOT NULL,
    profile_hash  TEXT NOT NULL,            -- BLAKE3 semantic profile hash of the embedder that wrote them
    model         TEXT NOT NULL,
    dimensions    INTEGER NOT NULL
);

-- Markdown links between ingested documents: the chunk (segment_seq, doc_id) links to target_document_id.
CREATE TABLE document_links (
    segment_seq         INTEGER NOT NULL REFERENCES document_segments (segment_seq) ON DELETE CASCADE,
    doc_id              INTEGER NOT NULL,
    target_document_id  TEXT NOT NULL,
    PRIMARY KEY (segment_seq, doc_id, target_document_id)
) WITHOUT ROWID;

CREATE INDEX document_links_target ON document_links (target_document_id);
CREATE INDEX document_chunks_document ON document_chunks (tenant_id, document_id);

-- Fact embeddings (Crux's after_fact_stored: text = "{entity} {key} {value}"), derived and rebuilt on demand:
-- a fact gets its vector the first time a dense recall needs it, for the embedder profile in use.
CREATE TABLE fact_embeddings (
    fact_id       TEXT NOT NULL,
    profile_hash  TEXT NOT NULL,
    vector        BLOB NOT NULL,            -- float32 little-endian, unit length
    PRIMARY KEY (fact_id, profile_hash)
) WITHOUT ROWID;

-- A vector is derived from the fact's text: it goes when the fact is deleted, changed or erased.
CREATE TRIGGER fact_embeddings_follow_delete AFTER DELETE ON facts BEGIN
    DELETE FROM fact_embeddings WHERE fact_id = old.fact_id;
END;
CREATE TRIGGER fact_embeddings_follow_update AFTER UPDATE OF deleted, entity, key, value ON facts
WHEN new.deleted != old.deleted OR new.entity IS NOT old.entity OR new.key IS NOT old.key
     OR new.value IS NOT old.value BEGIN
    DELETE FROM fact_embeddings WHERE fact_id = old.fact_id;
END;
