-- Exact duplicates without a self-join of every live fact (issue 16): the console's duplicate_candidates
-- query took 9.1 s on a 1M-fact view, past Datasette's 1 s time limit. `fact_norms` holds every live,
-- non-private fact's value lowercased and trimmed (the 0009 view's normalisation), keyed by (tenant,
-- entity, value), with `duplicated` = 1 when another fact of the group has the same key. Replay keeps it
-- current (cruxsql/curation/exact_duplicates.py, a view.on_replay hook: the facts every replayed line
-- names, and their groups; recomputed whole after a rebuild or compaction); this migration fills it for
-- a view built before it. The view then walks only the duplicated rows.

CREATE TABLE fact_norms (
    tenant_hash TEXT NOT NULL,
    entity      TEXT NOT NULL,
    norm        TEXT NOT NULL,                 -- lower(trim(value))
    fact_id     TEXT NOT NULL,
    duplicated  INTEGER NOT NULL CHECK (duplicated IN (0, 1)),
    PRIMARY KEY (tenant_hash, entity, norm, fact_id)
) WITHOUT ROWID;
CREATE UNIQUE INDEX fact_norms_fact ON fact_norms (fact_id);
CREATE INDEX fact_norms_duplicated ON fact_norms (tenant_hash, entity, fact_id) WHERE duplicated = 1;

-- Which generation of the fact tables, and how many journal lines of it, fact_norms reflects.
CREATE TABLE fact_norms_state (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    generation TEXT NOT NULL,
    last_line  INTEGER NOT NULL
);

INSERT INTO fact_norms (tenant_hash, entity, norm, fact_id, duplicated)
SELECT tenant_hash, entity, lower(trim(value)), fact_id, 0 FROM facts
WHERE deleted = 0 AND superseded_by IS NULL AND private = 0
ORDER BY 1, 2, 3, 4;
UPDATE fact_norms SET duplicated = 1 WHERE (tenant_hash, entity, norm) IN (
    SELECT tenant_hash, entity, norm FROM fact_norms GROUP BY tenant_hash, entity, norm HAVING count(*) > 1);
INSERT INTO fact_norms_state (id, generation, last_line) SELECT 1, generation, line_count FROM journal_checkpoint;

-- Same rows, same order as migration 0009's self-join: each duplicated fact with its higher-id partners,
-- the facts walked in (tenant, entity, fact_id) order from fact_norms_duplicated, only each one's
-- partners sorted: the first page needs neither a scan of every fact nor a sort of every pair.
DROP VIEW duplicate_candidates;
CREATE VIEW duplicate_candidates AS
SELECT a.tenant_hash, a.entity, 'exact_duplicate' AS reason, a.fact_id AS fact_id_a, b.fact_id AS fact_id_b,
       a.key AS key_a, b.key AS key_b, a.value AS value_a, b.value AS value_b
FROM fact_norms m
CROSS JOIN fact_norms p ON p.tenant_hash = m.tenant_hash AND p.entity = m.entity AND p.norm = m.norm
     AND p.fact_id > m.fact_id
CROSS JOIN facts a ON a.fact_id = m.fact_id
CROSS JOIN facts b ON b.fact_id = p.fact_id
WHERE m.duplicated = 1
ORDER BY m.tenant_hash, m.entity, m.fact_id, p.fact_id;
