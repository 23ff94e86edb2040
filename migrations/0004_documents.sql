-- Document lane (segment lane): derived from <data_dir>/segments/, rebuilt from the segment files.
-- A "doc" is one chunk; its BM25 identity is (segment_index, doc_id) where segment_index is the
-- position of its segment in ascending segment_seq order and doc_id its position in the segment.

CREATE TABLE document_segments (
    segment_seq   INTEGER PRIMARY KEY,
    segment_id    TEXT NOT NULL UNIQUE,
    file_name     TEXT NOT NULL,
    blake3        TEXT NOT NULL,            -- checksum of the segment file, as in MANIFEST.json
    byte_size     INTEGER NOT NULL,
    chunk_count   INTEGER NOT NULL,
    total_tokens  INTEGER NOT NULL,         -- sum of doc_length_tokens
    sealed_at     TEXT NOT NULL,
    tenants       TEXT NOT NULL,            -- JSON array; doc_tenants indexes into it
    doc_lengths   BLOB NOT NULL,            -- uint32 little-endian per doc_id: BM25 token count
    doc_tenants   BLOB NOT NULL             -- uint32 little-endian per doc_id: index into tenants
);

CREATE TABLE document_chunks (
    segment_seq        INTEGER NOT NULL REFERENCES document_segments (segment_seq) ON DELETE CASCADE,
    doc_id             INTEGER NOT NULL,
    tenant_id          TEXT NOT NULL,
    corpus_id          TEXT NOT NULL,
    document_id        TEXT NOT NULL,       -- the caller's doc_id (Crux stream_id)
    chunk_id           TEXT NOT NULL,       -- Crux event_id: the idempotency key
    frame_offset       INTEGER NOT NULL,    -- byte offset of the chunk's line in the segment file
    doc_length_tokens  INTEGER NOT NULL,
    ingested_at        TEXT NOT NULL,
    PRIMARY KEY (segment_seq, doc_id)
) WITHOUT ROWID;

CREATE UNIQUE INDEX document_chunks_identity ON document_chunks (tenant_id, corpus_id, chunk_id);

-- One row per (term, segment): ascending uint32 doc ids and their term frequencies (uint16, or uint32
-- when one does not fit), both little-endian blobs of doc_count entries.
CREATE TABLE document_postings (
    term         TEXT NOT NULL,
    segment_seq  INTEGER NOT NULL REFERENCES document_segments (segment_seq) ON DELETE CASCADE,
    doc_count    INTEGER NOT NULL,
    doc_ids      BLOB NOT NULL,
    tfs          BLOB NOT NULL,
    PRIMARY KEY (term, segment_seq)
) WITHOUT ROWID;

CREATE INDEX document_postings_segment ON document_postings (segment_seq);

-- Global document frequency of every analyzed term (what BM25's idf uses).
CREATE VIEW document_terms AS
    SELECT term, SUM(doc_count) AS df, COUNT(*) AS segments FROM document_postings GROUP BY term;
