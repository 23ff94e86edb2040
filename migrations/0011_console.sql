-- Indexes the operators' console needs so its canned queries and dashboards stay within Datasette's
-- time limit on a 1M-fact view (cruxsql/console/canned.py, dashboards.py).

-- "Live facts of a tenant", newest first; the dashboards' per-tenant daily counts.
CREATE INDEX facts_live_tenant ON facts (tenant_hash, stored_at_ns)
    WHERE deleted = 0 AND superseded_by IS NULL;

-- "What an actor wrote in a time range".
CREATE INDEX facts_actor ON facts (actor, stored_at_ns) WHERE actor IS NOT NULL;

-- "Stale facts by horizon class" and the age-by-horizon dashboard: freshness is counted from
-- re-verification, else storage.
CREATE INDEX facts_live_horizon ON facts (horizon_class, coalesce(reverified_at_ns, stored_at_ns))
    WHERE deleted = 0 AND superseded_by IS NULL;
