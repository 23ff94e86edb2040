-- Relations are facts (`from`, `relation:<R>:<to>`, `to`: cruxsql/recall/relations.py). Outgoing ones are
-- found by entity; this partial index finds the incoming ones by their target (the value), and holds
-- only relation facts, so no other write pays for it.
CREATE INDEX facts_relation_target ON facts (value, tenant_hash) WHERE key GLOB 'relation:*';
