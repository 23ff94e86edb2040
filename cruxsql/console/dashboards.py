"""The console's dashboard, as datasette-dashboards configuration (Vega-Lite charts over the view).

Facts stored per day by tenant, live vs deleted vs superseded, the age of live facts by horizon class
against the freshness horizons (past-horizon bars are the stale ones), and the journal's events and
size over time. Every query is an index range or a covering-index scan (migration 0011).
"""

from __future__ import annotations

from typing import Any

from ..recall.freshness import DecayPolicy
from .canned import NOW_NS

DASHBOARD = "memory"
_DAY_NS = 86_400_000_000_000
_AGE_BUCKETS = (("1 < 1 hour", 3_600_000_000_000), ("2 < 1 day", _DAY_NS), ("3 < 1 week", 7 * _DAY_NS),
                ("4 < 35 days", 35 * _DAY_NS), ("5 < 90 days", 90 * _DAY_NS), ("6 < 1 year", 365 * _DAY_NS))


def _age_bucket_sql(column: str) -> str:
    arms = " ".join(f"WHEN {column} < {limit} THEN '{label}'" for label, limit in _AGE_BUCKETS)
    return f"CASE {arms} ELSE '7 ≥ 1 year' END"


def _charts(db: str, policy: DecayPolicy) -> dict[str, Any]:
    horizons = ", ".join(f"('{c}', {policy.base_ms(c) * 1_000_000})" for c in ("volatile", "medium", "stable"))
    return {
        "live-facts": {
            "title": "Live facts", "db": db, "library": "metric",
            "query": "SELECT count(*) AS n FROM facts WHERE deleted = 0 AND superseded_by IS NULL",
            "display": {"field": "n"}},
        "journal-size": {
            "title": "Journal size (MiB)", "db": db, "library": "metric",
            "query": "SELECT round(coalesce((SELECT byte_offset + byte_length FROM journal_events "
                     "ORDER BY line_no DESC LIMIT 1), 0) / 1048576.0, 1) AS mib",
            "display": {"field": "mib"}},
        "journal-events": {
            "title": "Journal events", "db": db, "library": "metric",
            "query": "SELECT count(*) AS n FROM journal_events", "display": {"field": "n"}},
        "corrupt-lines": {
            "title": "Corrupt journal lines", "db": db, "library": "metric",
            "query": "SELECT count(*) AS n FROM journal_corrupt_lines", "display": {"field": "n"}},
        "stored-per-day": {
            "title": "Facts stored per day, by tenant", "db": db, "library": "vega-lite",
            "query": f"""SELECT date(stored_at_ns / 1000000000, 'unixepoch') AS day, tenant_hash AS tenant,
  count(*) AS facts FROM facts
WHERE stored_at_ns >= {NOW_NS} - CAST(coalesce(nullif(:days, ''), '90') AS REAL) * {_DAY_NS}
GROUP BY day, tenant ORDER BY day""",
            "display": {"mark": {"type": "bar", "tooltip": True},
                        "encoding": {"x": {"field": "day", "type": "temporal", "timeUnit": "utcyearmonthdate",
                                           "title": "day (UTC)"},
                                     "y": {"field": "facts", "type": "quantitative", "aggregate": "sum",
                                           "title": "facts stored"},
                                     "color": {"field": "tenant", "type": "nominal"}}}},
        "fact-states": {
            "title": "Live, deleted, superseded", "db": db, "library": "vega-lite",
            "query": """SELECT 'live' AS state, count(*) AS facts FROM facts WHERE deleted = 0 AND superseded_by IS NULL
UNION ALL SELECT 'deleted', count(*) FROM facts WHERE deleted = 1
UNION ALL SELECT 'superseded', count(*) FROM facts WHERE deleted = 0 AND superseded_by IS NOT NULL""",
            "display": {"mark": {"type": "arc", "innerRadius": 40, "tooltip": True},
                        "encoding": {"theta": {"field": "facts", "type": "quantitative"},
                                     "color": {"field": "state", "type": "nominal",
                                               "scale": {"domain": ["live", "superseded", "deleted"]}}}}},
        "age-by-horizon": {
            "title": "Age of live facts by horizon class (faded: past the horizon, stale)", "db": db,
            "library": "vega-lite",
            "query": f"""WITH horizons(horizon_class, stale_after_ns) AS (VALUES {horizons}),
ages AS (SELECT horizon_class, {NOW_NS} - coalesce(reverified_at_ns, stored_at_ns) AS age_ns
         FROM facts WHERE deleted = 0 AND superseded_by IS NULL)
SELECT a.horizon_class, {_age_bucket_sql('a.age_ns')} AS age,
  CASE WHEN h.stale_after_ns IS NULL THEN 'never stale' WHEN a.age_ns > h.stale_after_ns THEN 'stale'
       ELSE 'fresh' END AS freshness, count(*) AS facts
FROM ages a LEFT JOIN horizons h USING (horizon_class) GROUP BY 1, 2, 3""",
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
            "query": """SELECT substr(event_at, 1, 10) AS day, op, count(*) AS events FROM journal_events
WHERE event_at IS NOT NULL GROUP BY day, op ORDER BY day""",
            "display": {"mark": {"type": "bar", "tooltip": True},
                        "encoding": {"x": {"field": "day", "type": "temporal", "timeUnit": "utcyearmonthdate",
                                           "title": "day (UTC)"},
                                     "y": {"field": "events", "type": "quantitative", "aggregate": "sum",
                                           "title": "events"},
                                     "color": {"field": "op", "type": "nominal"}}}},
        "journal-growth": {
            "title": "Journal size over time (bytes appended, cumulative)", "db": db, "library": "vega-lite",
            "query": """SELECT day, sum(bytes) OVER (ORDER BY day) AS journal_bytes FROM (
  SELECT substr(event_at, 1, 10) AS day, sum(byte_length) AS bytes FROM journal_events
  WHERE event_at IS NOT NULL GROUP BY day) ORDER BY day""",
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
