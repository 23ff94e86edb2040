-- Curation views for operators (issue 13). All derived from `facts` and the journal tables: nothing
-- here is written by replay or journaled, so they are always current and need no rebuild.
-- The Python API (cruxsql.curation) is the reference; see README "Curation" for where these differ.

-- Crux's polarity class of every live (not deleted, not superseded), non-private fact: the value
-- trimmed of whitespace and punctuation, ASCII-lowercased (SQLite's lower()), matched against 27 words.
CREATE VIEW fact_polarity AS
SELECT fact_id, tenant_hash, entity, key, value,
       CASE WHEN p IN ('true', 'yes', 'y', 'on', 'enabled', 'enable', 'active', 'complete', 'completed',
                       'passed', 'pass', 'approved', 'approve', 'present') THEN 'positive'
            WHEN p IN ('false', 'no', 'n', 'off', 'disabled', 'disable', 'inactive', 'blocked', 'failed',
                       'fail', 'rejected', 'reject', 'absent') THEN 'negative' END AS polarity
FROM (SELECT fact_id, tenant_hash, entity, key, value,
             lower(trim(value, ' ' || char(9, 10, 11, 12, 13, 133, 160, 8232, 8233, 12288)
                               || '!"#$%&''()*+,-./:;<=>?@[\]^`{|}~' || '…“”‘’«»•·–—✓✔✗✘✅❌')) AS p
      FROM facts WHERE deleted = 0 AND superseded_by IS NULL AND private = 0);

-- Crux's contradiction candidates (contradiction_candidates_v1), all tenants: (entity, key) groups
-- holding both polarities; ids and values negative first, then by fact_id. Only groups with two or
-- more live facts are looked at (found in the facts_live_chain index below).
CREATE VIEW contradiction_candidates AS
WITH shared AS (
    SELECT tenant_hash, entity, key FROM facts WHERE deleted = 0 AND superseded_by IS NULL AND private = 0
    GROUP BY tenant_hash, entity, key HAVING count(*) >= 2
), polar AS (
    SELECT p.tenant_hash, p.entity, p.key, p.polarity, p.fact_id, p.value
    FROM shared s JOIN fact_polarity p ON p.tenant_hash = s.tenant_hash AND p.entity = s.entity AND p.key = s.key
    WHERE p.polarity IS NOT NULL
    ORDER BY p.tenant_hash, p.entity, p.key, p.polarity, p.fact_id
)
SELECT tenant_hash, entity, key, 'opposite_polarity_same_entity_key' AS reason,
       'negative' AS polarity_a, 'positive' AS polarity_b,
       json_group_array(fact_id) AS fact_ids, json_group_array(value) AS "values"
FROM polar
GROUP BY tenant_hash, entity, key HAVING count(DISTINCT polarity) = 2
ORDER BY tenant_hash, entity, key;

-- Exact duplicates inside one entity (across its keys): live, non-private facts whose values are equal
-- after lowercasing and trimming. `cruxsql curate duplicates` adds the near (MinHash-verified) ones.
CREATE VIEW duplicate_candidates AS
WITH live AS (
    SELECT fact_id, tenant_hash, entity, key, value, lower(trim(value)) AS norm
    FROM facts WHERE deleted = 0 AND superseded_by IS NULL AND private = 0
)
SELECT a.tenant_hash, a.entity, 'exact_duplicate' AS reason, a.fact_id AS fact_id_a, b.fact_id AS fact_id_b,
       a.key AS key_a, b.key AS key_b, a.value AS value_a, b.value AS value_b
FROM live a JOIN live b ON b.tenant_hash = a.tenant_hash AND b.entity = a.entity AND b.norm = a.norm
     AND b.fact_id > a.fact_id
ORDER BY a.tenant_hash, a.entity, a.fact_id, b.fact_id;

-- Version-chain steps where a different actor replaced the value within 24 hours (disagreeing agents
-- that each re-store silently supersedes). `cruxsql curate disagreements` adds confidence and reverts.
CREATE VIEW actor_flip_flops AS
SELECT f.tenant_hash, f.entity, f.key, p.fact_id AS from_fact_id, f.fact_id AS to_fact_id,
       p.actor AS from_actor, f.actor AS to_actor, p.value AS from_value, f.value AS to_value,
       (f.stored_at_ns - p.stored_at_ns) / 1e9 AS seconds_apart
FROM facts f JOIN facts p ON p.fact_id = f.supersedes
WHERE f.actor IS NOT NULL AND p.actor IS NOT NULL AND f.actor != p.actor AND f.value != p.value
  AND p.tenant_hash = f.tenant_hash AND p.entity = f.entity AND p.key = f.key
  AND f.deleted = 0 AND p.deleted = 0 AND f.private = 0 AND p.private = 0
  AND f.stored_at_ns - p.stored_at_ns <= 86400000000000;

-- Every consolidation, provenance and undo event of the journal, with its canonical and sources.
CREATE VIEW consolidation_history AS
SELECT e.line_no, e.op, e.event_at, e.applied, e.skip_reason, e.fact_id AS canonical_fact_id,
       c.tenant_hash, c.entity, c.key, c.value AS canonical_value, c.deleted AS canonical_deleted,
       (SELECT json_group_array(x.fact_id) FROM journal_event_facts x
        WHERE x.line_no = e.line_no AND x.role IN ('source', 'restored')) AS source_fact_ids
FROM journal_events e LEFT JOIN facts c ON c.fact_id = e.fact_id
WHERE e.op IN ('consolidate', 'consolidation_provenance', 'consolidate_undo')
ORDER BY e.line_no;

-- Consolidations in force: canonical live, each source still superseded by it.
CREATE VIEW active_consolidations AS
SELECT cs.canonical_fact_id, c.tenant_hash, c.entity, c.key, c.value AS canonical_value, cs.position,
       cs.source_fact_id, s.value AS source_value
FROM consolidation_sources cs
JOIN facts c ON c.fact_id = cs.canonical_fact_id
JOIN facts s ON s.fact_id = cs.source_fact_id
WHERE c.deleted = 0 AND s.superseded_by = cs.canonical_fact_id
ORDER BY cs.canonical_fact_id, cs.position;

-- Live, shared facts by (tenant, entity, key): the contradiction and disagreement scans read only the
-- (entity, key) groups holding two or more of them from this index, without touching the table.
CREATE INDEX facts_live_chain ON facts (tenant_hash, entity, key)
    WHERE deleted = 0 AND superseded_by IS NULL AND private = 0;
