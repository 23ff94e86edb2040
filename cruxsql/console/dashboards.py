"""The console's dashboard, as datasette-dashboards configuration (Vega-Lite charts over the view).

Facts stored per day by tenant, live vs deleted vs superseded, the age of live facts by horizon class
against the freshness horizons (past-horizon bars are the stale ones), and the journal's events and
size over time. On a 1M-fact view a GROUP BY over every row takes seconds, past Datasette's 1 s
limit, so each chart is built from index range counts instead: a recursive CTE walks the days (and the
tenants or ops, by a loose index scan) and counts each (day, tenant) range of an index of migration
0011; the age histogram counts one range of `facts_live_horizon` per (class, age bucket, fresh/stale).
"""

from __future__ import annotations

from typing import Any

from ..recall.freshness import DecayPolicy
from .canned import NOW_NS

DASHBOARD = "memory"
_DAY_NS = 86_400_000_000_000
_AGE_EDGES = ((0, "1 < 1 hour"), (3_600_000_000_000, "2 < 1 day"), (_DAY_NS, "3 < 1 week"),
              (7 * _DAY_NS, "4 < 35 days"), (35 * _DAY_NS, "5 < 90 days"), (90 * _DAY_NS, "6 < 1 year"),
              (365 * _DAY_NS, "7 ≥ 1 year"))
_FOREVER = 2 ** 62
_WINDOW_DAYS = "min(max(CAST(coalesce(nullif(:days, ''), '90') AS INTEGER), 1), 3660)"
_NOW = f"now AS MATERIALIZED (SELECT {NOW_NS} AS ns, {NOW_NS} / {_DAY_NS} AS day)"
_DAYS = (f"days(d) AS (SELECT day - {_WINDOW_DAYS} + 1 FROM now UNION ALL "
         f"SELECT d + 1 FROM days, now WHERE d < now.day)")


def _loose_scan(name: str, table: str, column: str, where: str = "") -> str:
    """Every distinct value of an indexed column, one index seek each (SQLite has no skip-scan here)."""
    cond = f" AND {where}" if where else ""
    return (f"{name}(v) AS (SELECT min({column}) FROM {table} WHERE {column} IS NOT NULL{cond} UNION ALL "
            f"SELECT (SELECT min({column}) FROM {table} WHERE {column} > v{cond}) FROM {name} WHERE v IS NOT NULL)")


def _age_ranges(policy: DecayPolicy) -> str:
    """(class, age label, freshness, lo, hi) rows: age in [lo, hi) ns, each range inside one bucket and on
    one side of the class's horizon (stale = age > horizon)."""
    rows = []
    for cls in ("medium", "none", "stable", "volatile"):
        base = policy.base_ms(cls)
        horizon = None if base is None else base * 1_000_000
        edges = sorted({e for e, _ in _AGE_EDGES} | ({horizon + 1} if horizon is not None else set()))
        for lo, hi in zip(edges, edges[1:] + [_FOREVER]):
            label = [name for edge, name in _AGE_EDGES if edge <= lo][-1]
            fresh = "never stale" if horizon is None else ("stale" if lo > horizon else "fresh")
            rows.append(f"('{cls}', '{label}', '{fresh}', {lo}, {hi})")
    return ", ".join(rows)


def readable_bytes(expr: str) -> str:
    """SQL turning the byte count `expr` into text in the largest unit it reaches: 812 B, 24.1 KiB, 3.0 MiB."""
    return (f"(SELECT CASE WHEN b < 1024 THEN b || ' B' WHEN b < 1048576 THEN printf('%.1f KiB', b / 1024.0) "
            f"WHEN b < 1073741824 THEN printf('%.1f MiB', b / 1048576.0) ELSE printf('%.1f GiB', b / 1073741824.0) "
            f"END FROM (SELECT {expr} AS b))")


def _charts(db: str, policy: DecayPolicy) -> dict[str, Any]:
    return {
        "live-facts": {
            "title": "Live facts", "db": db, "library": "metric",
            "query": "SELECT count(*) AS n FROM facts WHERE deleted = 0 AND superseded_by IS NULL",
            "display": {"field": "n"}},
        "journal-size": {
            "title": "Journal size", "db": db, "library": "metric",
            "query": "SELECT " + readable_bytes("coalesce((SELECT byte_offset + byte_length FROM journal_events "
                                                "ORDER BY line_no DESC LIMIT 1), 0)") + " AS size",
            "display": {"field": "size"}},
        "journal-events": {
            "title": "Journal events", "db": db, "library": "metric",
            "query": "SELECT count(*) AS n FROM journal_events", "display": {"field": "n"}},
        "corrupt-lines": {
            "title": "Corrupt journal lines", "db": db, "library": "metric",
            "query": "SELECT count(*) AS n FROM journal_corrupt_lines", "display": {"field": "n"}},
        "stored-per-day": {
            "title": "Facts stored per day, by tenant", "db": db, "library": "vega-lite",
            "query": f"""WITH RECURSIVE {_NOW}, {_DAYS}, {_loose_scan('tenants', 'facts', 'tenant_hash')}
SELECT day, tenant, facts FROM (
  SELECT date(d * 86400, 'unixepoch') AS day, v AS tenant,
    (SELECT count(*) FROM facts WHERE tenant_hash = v
       AND stored_at_ns >= d * {_DAY_NS} AND stored_at_ns < (d + 1) * {_DAY_NS}) AS facts
  FROM days, tenants WHERE v IS NOT NULL)
WHERE facts > 0 ORDER BY day, tenant""",
            "display": {"mark": {"type": "bar", "tooltip": True},
                        "encoding": {"x": {"field": "day", "type": "temporal", "timeUnit": "utcyearmonthdate",
                                           "title": "day (UTC)"},
                                     "y": {"field": "facts", "type": "quantitative", "aggregate": "sum",
                                           "title": "facts stored"},
                                     "color": {"field": "tenant", "type": "nominal"}}}},
        "fact-states": {
            "title": "Live, deleted, superseded", "db": db, "library": "vega-lite",
            "query": """WITH n AS MATERIALIZED (SELECT
  (SELECT count(*) FROM facts) AS total,
  (SELECT count(*) FROM facts WHERE deleted = 0 AND superseded_by IS NULL) AS live,
  (SELECT count(*) FROM facts WHERE deleted = 1) AS deleted)
SELECT 'live' AS state, live AS facts FROM n UNION ALL SELECT 'deleted', deleted FROM n
UNION ALL SELECT 'superseded', total - live - deleted FROM n""",
            "display": {"mark": {"type": "arc", "innerRadius": 40, "tooltip": True},
                        "encoding": {"theta": {"field": "facts", "type": "quantitative"},
                                     "color": {"field": "state", "type": "nominal",
                                               "scale": {"domain": ["live", "superseded", "deleted"]}}}}},
        "age-by-horizon": {
            "title": "Age of live facts by horizon class (faded: past the horizon, stale)", "db": db,
            "library": "vega-lite",
            "query": f"""WITH {_NOW}, ranges(horizon_class, age, freshness, lo, hi) AS (VALUES {_age_ranges(policy)})
SELECT horizon_class, age, freshness, sum(facts) AS facts FROM (
  SELECT r.horizon_class, r.age, r.freshness, (SELECT count(*) FROM facts f
    WHERE f.deleted = 0 AND f.superseded_by IS NULL AND f.horizon_class = r.horizon_class
      AND coalesce(f.reverified_at_ns, f.stored_at_ns) > now.ns - r.hi
      AND coalesce(f.reverified_at_ns, f.stored_at_ns) <= now.ns - r.lo) AS facts
  FROM ranges r, now)
WHERE facts > 0 GROUP BY 1, 2, 3""",
            "display": {"mark": {"type": "bar", "tooltip": True},
                        "encoding": {"x": {"field": "age", "type": "ordinal",
                                           "title": "age, from re-verification or storage",
                                           "axis": {"labelExpr": "slice(datum.label, 2)", "labelAngle": 0}},
                                     "xOffset": {"field": "horizon_class"},
                                     "y": {"field": "facts", "type": "quantitative", "aggregate": "sum",
                                           "title": "live facts"},
                                     "color": {"field": "horizon_class", "type": "nominal"},
                                     "detail": {"field": "freshness"},  # keeps it a group field for the test below
                                     "opacity": {"condition": {"test": "datum.freshness === 'stale'",
                                                               "value": 0.35}, "value": 1}}}},
        "events-by-op": {
            "title": "Journal events per day, by op", "db": db, "library": "vega-lite",
            "query": f"""WITH RECURSIVE {_NOW}, {_DAYS}, {_loose_scan('ops', 'journal_events', 'op')}
SELECT day, op, events FROM (
  SELECT date(d * 86400, 'unixepoch') AS day, v AS op,
    (SELECT count(*) FROM journal_events WHERE op = v
       AND event_at >= date(d * 86400, 'unixepoch') AND event_at < date((d + 1) * 86400, 'unixepoch')) AS events
  FROM days, ops WHERE v IS NOT NULL)
WHERE events > 0 ORDER BY day, op""",
            "display": {"mark": {"type": "bar", "tooltip": True},
                        "encoding": {"x": {"field": "day", "type": "temporal", "timeUnit": "utcyearmonthdate",
                                           "title": "day (UTC)"},
                                     "y": {"field": "events", "type": "quantitative", "aggregate": "sum",
                                           "title": "events"},
                                     "color": {"field": "op", "type": "nominal"}}}},
        "journal-growth": {
            "title": "Journal size over time (bytes of the events kept, by event day)", "db": db, "library": "vega-lite",
            "query": f"""WITH RECURSIVE {_NOW}, {_DAYS}, {_loose_scan('ops', 'journal_events', 'op')},
before AS (SELECT total((SELECT total(byte_length) FROM journal_events WHERE op = v AND event_at IS NOT NULL
  AND event_at < date((SELECT min(d) FROM days) * 86400, 'unixepoch'))) AS bytes FROM ops WHERE v IS NOT NULL),
daily AS (SELECT d, (SELECT total(byte_length) FROM journal_events WHERE op = v
    AND event_at >= date(d * 86400, 'unixepoch') AND event_at < date((d + 1) * 86400, 'unixepoch')) AS bytes
  FROM days, ops WHERE v IS NOT NULL)
SELECT date(d * 86400, 'unixepoch') AS day,
  CAST((SELECT bytes FROM before) + sum(sum(bytes)) OVER (ORDER BY d) AS INTEGER) AS journal_bytes
FROM daily GROUP BY d ORDER BY d""",
            "display": {"mark": {"type": "area", "line": True, "tooltip": True},
                        "encoding": {"x": {"field": "day", "type": "temporal", "timeUnit": "utcyearmonthdate",
                                           "title": "day (UTC)"},
                                     "y": {"field": "journal_bytes", "type": "quantitative", "title": "bytes"}}}},
    }


def _svg(charts: dict[str, Any]) -> dict[str, Any]:
    """Vega-Lite charts drawn as SVG (crisp, and their marks are elements a browser test can count)."""
    for chart in charts.values():
        if chart["library"] == "vega-lite":
            chart["display"]["usermeta"] = {"embedOptions": {"renderer": "svg", "actions": False}}
    return charts


def dashboards(db: str, policy: DecayPolicy | None = None) -> dict[str, Any]:
    """The `datasette-dashboards` plugin configuration for the view served as database `db`."""
    policy = policy or DecayPolicy.from_env()
    return {DASHBOARD: {
        "title": "cruxsql memory",
        "description": "What the agents know, how fresh it is, and how the journal grows.",
        "settings": {"allow_fullscreen": True},
        "filters": {"days": {"name": "Stored in the last N days", "type": "number", "default": 90, "min": 1}},
        "layout": [
            ["live-facts", "journal-events", "journal-size", "corrupt-lines"],
            ["stored-per-day", "stored-per-day", "stored-per-day", "fact-states"],
            ["age-by-horizon", "age-by-horizon", "events-by-op", "events-by-op"],
            ["journal-growth", "journal-growth", "journal-growth", "journal-growth"],
        ],
        "charts": _svg(_charts(db, policy)),
    }}
