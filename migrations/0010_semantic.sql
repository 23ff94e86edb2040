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
