-- Relations are facts (`from`, `relation:<R>:<to>`, `to`: cruxsql/recall/relations.py). Outgoing ones are
-- found by entity; this partial index finds the incoming ones by their target (the value), and holds
-- only relation facts, so no other write pays for it. Its condition is comparisons, not GLOB: a function
-- in a partial index's condition may fail, so SQLite would journal every multi-row change of `facts`
-- (a compaction's) in a statement journal, a temp file outside the data directory.
CREATE INDEX facts_relation_target ON facts (value, tenant_hash) WHERE key >= 'relation:' AND key < 'relation;';
