-- Indexes the operators' console needs so its canned queries and dashboard charts stay within
-- Datasette's 1 s time limit on a 1M-fact view (cruxsql/console/canned.py, dashboards.py).

-- "Live facts of a tenant", newest first; the dashboard's facts stored per (day, tenant) range counts.
CREATE INDEX facts_tenant_stored ON facts (tenant_hash, stored_at_ns);

-- "What an actor wrote in a time range".
CREATE INDEX facts_actor ON facts (actor, stored_at_ns) WHERE actor IS NOT NULL;

-- "Stale facts by horizon class" and the age-by-horizon chart: freshness is counted from
-- re-verification, else storage.
CREATE INDEX facts_live_horizon ON facts (horizon_class, coalesce(reverified_at_ns, stored_at_ns))
    WHERE deleted = 0 AND superseded_by IS NULL;

-- The dashboard's journal events per (op, day) and journal growth: range counts and sums, covered.
CREATE INDEX journal_events_op_time ON journal_events (op, event_at, byte_length);
