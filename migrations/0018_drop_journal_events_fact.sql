-- journal_events' index on its first fact id goes (issue 15). Nothing reads events by that column: a
-- fact's events are found through journal_event_facts, which names every fact of every event with its
-- role and is indexed by fact (the README's query). The index cost every write a random B-tree page per
-- journal line (fact ids are UUIDv4), ~0.8 s of a 1M-event rebuild and ~0.9 s of a 1M compaction.
DROP INDEX IF EXISTS journal_events_fact;
