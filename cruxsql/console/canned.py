"""Canned, parameterised queries an operator reaches for, as Datasette canned queries.

Each query states the tables (and columns) it needs; one whose table does not exist in the database
being browsed (token usage from the MCP server, the curation views) is simply not offered. The
queries run under Datasette's time limit on a 1M-fact view thanks to migration 0011's indexes and, for
`duplicate_candidates`, curation's `fact_norms` (migration 0016).
Legal-hold resolution and retention's protection reasons restate, in SQL, the rules of
`governance.legal_holds` and `governance.retention` (tests compare them with those modules).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from ..facts.privacy import DAEMON_OWNED_ENTITY_PREFIXES
from ..governance.legal_holds import LEGAL_HOLD_ENTITY_PREFIX, STATE_KEY
from ..governance.erasure_proof import ERASURE_REPORT_PREFIX, REPORT_KEY
from ..governance.retention import GOVERNANCE_STATE_PREFIXES, SYNC_TOMBSTONE_PREFIX
from ..recall.freshness import DecayPolicy

NOW_NS = "(CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER) * 1000000)"
REPORT_HASH_FUNCTION = "cruxsql_report_hash"  # both registered on the console's connections by the plugin
BLAKE3_FUNCTION = "cruxsql_blake3"


@dataclass(frozen=True)
class CannedQuery:
    name: str
    title: str
    description: str
    sql: str
    requires: Mapping[str, frozenset[str]] = field(default_factory=dict)  # table -> columns it must have

    def to_metadata(self) -> dict[str, Any]:
        # the form and the rows first: the SQL is one `(show)` click away
        return {"sql": self.sql.strip(), "title": self.title, "description": self.description, "hide_sql": True}

    def available(self, columns_of: Mapping[str, set[str]]) -> bool:
        """Whether every required table exists (in `columns_of`) with the required columns."""
        return all(t in columns_of and cols <= columns_of[t] for t, cols in self.requires.items())


def _sql_str(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _prefix_range(prefix: str) -> str:
    """`entity >= prefix AND entity < prefix-successor`: an index range over facts_entity."""
    return f"entity >= {_sql_str(prefix)} AND entity < {_sql_str(prefix[:-1] + chr(ord(prefix[-1]) + 1))}"


def _text(json_path: str) -> str:
    return f"json_type(value, '{json_path}') = 'text'"


# A hold's state is its newest row (version, stored_at, fact_id descending; deleted rows included) whose
# value parses as crux.legal_hold.v1; when none parses, the hold stands fail-closed over the newest
# row's whole tenant (legal_holds.resolve_holds).
HOLDS_CTE = f"""
hold_rows AS MATERIALIZED (
  SELECT entity, tenant_hash, value, stored_at, actor,
    row_number() OVER (PARTITION BY entity ORDER BY version DESC, stored_at_ns DESC, fact_id DESC) AS newest,
    CASE WHEN json_valid(value) AND json_type(value) = 'object' THEN
      {_text('$.schema')} AND {_text('$.hold_id')} AND {_text('$.tenant_id')} AND {_text('$.reason')}
      AND {_text('$.placed_at')} AND {_text('$.placed_by')} AND {_text('$.place_receipt_id')}
      AND json_type(value, '$.entity_prefixes') = 'array'
      AND NOT EXISTS (SELECT 1 FROM json_each(value, '$.entity_prefixes') WHERE type != 'text')
      AND coalesce(json_type(value, '$.released_at'), 'null') IN ('null', 'text')
      AND coalesce(json_type(value, '$.released_by'), 'null') IN ('null', 'text')
      AND coalesce(json_type(value, '$.release_receipt_id'), 'null') IN ('null', 'text')
    ELSE 0 END AS parses
  FROM facts WHERE {_prefix_range(LEGAL_HOLD_ENTITY_PREFIX)} AND key = {_sql_str(STATE_KEY)}
),
hold_pick AS (
  SELECT *, row_number() OVER (PARTITION BY entity ORDER BY parses DESC, newest) AS pick FROM hold_rows
),
holds AS MATERIALIZED (
  SELECT substr(entity, {len(LEGAL_HOLD_ENTITY_PREFIX) + 1}) AS hold_id,
    CASE WHEN parses THEN json_extract(value, '$.tenant_id') ELSE tenant_hash END AS tenant_id,
    CASE WHEN parses THEN json_extract(value, '$.entity_prefixes') ELSE '[]' END AS entity_prefixes,
    CASE WHEN parses THEN json_extract(value, '$.reason')
         ELSE 'stored legal-hold state is unparsable; enforcing tenant-wide fail-closed marker' END AS reason,
    CASE WHEN parses THEN json_extract(value, '$.placed_at') ELSE stored_at END AS placed_at,
    CASE WHEN parses THEN json_extract(value, '$.placed_by') ELSE coalesce(actor, 'unresolved') END AS placed_by,
    CASE WHEN parses THEN json_extract(value, '$.released_at') END AS released_at,
    NOT parses AS fail_closed
  FROM hold_pick WHERE pick = 1
),
active_holds AS (SELECT * FROM holds WHERE released_at IS NULL)"""


def _covering_holds(alias: str) -> str:
    """Comma-separated ids of the active holds covering the fact `alias` (NULL when none)."""
    return f"""(SELECT group_concat(hold_id, ', ') FROM (
      SELECT h.hold_id FROM active_holds h WHERE h.tenant_id = {alias}.tenant_hash
        AND (json_array_length(h.entity_prefixes) = 0 OR EXISTS (
          SELECT 1 FROM json_each(h.entity_prefixes) p WHERE substr({alias}.entity, 1, length(p.value)) = p.value))
      ORDER BY h.hold_id))"""


def _daemon_prefixes_cte() -> str:
    rows = ", ".join(f"({i}, {_sql_str(p)})" for i, p in enumerate(DAEMON_OWNED_ENTITY_PREFIXES))
    return f"daemon_prefixes(position, prefix) AS (VALUES {rows})"


def _retention_sql() -> str:
    tombstone = _sql_str(SYNC_TOMBSTONE_PREFIX)
    return f"""
WITH {HOLDS_CTE},
{_daemon_prefixes_cte()},
members(fact_id) AS MATERIALIZED (
  SELECT canonical_fact_id FROM consolidation_sources
  UNION SELECT source_fact_id FROM consolidation_sources cs WHERE EXISTS (
    SELECT 1 FROM facts s WHERE s.fact_id = cs.source_fact_id AND s.superseded_by = cs.canonical_fact_id)
),
candidates AS (
  SELECT f.fact_id, f.tenant_hash, f.entity, f.key, f.stored_at, f.stored_at_ns, f.private,
    length(CAST(f.value AS BLOB)) AS value_bytes,
    (SELECT prefix FROM daemon_prefixes d WHERE substr(f.entity, 1, length(d.prefix)) = d.prefix
      ORDER BY d.position LIMIT 1) AS daemon_prefix,
    {_covering_holds('f')} AS hold_ids
  FROM facts f
  WHERE f.deleted = 0 AND f.stored_at_ns < {NOW_NS} - CAST(:days AS REAL) * 86400000000000
    AND (:tenant = '' OR f.tenant_hash = :tenant)
    AND NOT ({" OR ".join(f"f.entity GLOB {_sql_str(p + '*')}" for p in GOVERNANCE_STATE_PREFIXES)})
)
SELECT fact_id, tenant_hash, entity, key, stored_at, value_bytes,
  CASE WHEN private THEN 'private'
       WHEN substr(entity, 1, {len(SYNC_TOMBSTONE_PREFIX)}) = {tombstone} THEN 'sync tombstone'
       WHEN daemon_prefix IS NOT NULL THEN 'daemon-owned prefix ' || daemon_prefix
       WHEN hold_ids IS NOT NULL THEN 'legal hold'
       WHEN fact_id IN members THEN 'consolidation member'
  END AS protected_by,
  CASE WHEN NOT private AND daemon_prefix IS NULL
        AND substr(entity, 1, {len(SYNC_TOMBSTONE_PREFIX)}) != {tombstone} THEN hold_ids END AS hold_ids
FROM candidates ORDER BY stored_at_ns, fact_id"""


def _erasure_reports_sql() -> str:
    return f"""
WITH reports AS (
  SELECT fact_id, stored_at, stored_at_ns, value, json_valid(value) AS parses
  FROM facts WHERE {_prefix_range(ERASURE_REPORT_PREFIX)} AND key = {_sql_str(REPORT_KEY)}
),
chained AS (
  SELECT fact_id, stored_at, stored_at_ns, value,
    json_extract(value, '$.report_hash') AS report_hash,
    json_extract(value, '$.prev_report_hash') AS prev_report_hash,
    lag(json_extract(value, '$.report_hash')) OVER (ORDER BY stored_at_ns, fact_id) AS previous_hash
  FROM reports WHERE parses
)
SELECT json_extract(value, '$.request_id') AS request_id, fact_id, stored_at,
  json_extract(value, '$.kind') AS kind, json_extract(value, '$.actor') AS actor,
  json_extract(value, '$.reason') AS reason, json_extract(value, '$.counts.facts_erased') AS facts_erased,
  report_hash, prev_report_hash,
  {REPORT_HASH_FUNCTION}(value) IS report_hash AS hash_ok,
  prev_report_hash IS previous_hash AS chain_ok
FROM chained
UNION ALL
SELECT NULL, fact_id, stored_at, NULL, NULL, 'report does not parse', NULL, NULL, NULL, 0, 0
FROM reports WHERE NOT parses
ORDER BY stored_at"""


def _stale_sql(policy: DecayPolicy) -> str:
    """One arm per class, each an index range in anchor order, merged: no sort of every stale fact."""
    arms = []
    for cls in ("medium", "stable", "volatile"):
        base_ms = policy.base_ms(cls)
        assert base_ms is not None     # only class `none` has no stale threshold
        horizon = base_ms * 1_000_000
        arms.append(f"""SELECT f.horizon_class, f.fact_id, f.tenant_hash, f.entity, f.key, f.value, f.stored_at,
  f.reverified_at, coalesce(f.reverified_at_ns, f.stored_at_ns) AS anchor_ns,
  ({NOW_NS} - coalesce(f.reverified_at_ns, f.stored_at_ns)) / 3600000000000 AS age_hours,
  {horizon // 3_600_000_000_000} AS stale_after_hours
FROM facts f WHERE f.horizon_class = {_sql_str(cls)} AND (:horizon_class = '' OR :horizon_class = {_sql_str(cls)})
  AND f.deleted = 0 AND f.superseded_by IS NULL
  AND coalesce(f.reverified_at_ns, f.stored_at_ns) > 0
  AND coalesce(f.reverified_at_ns, f.stored_at_ns) < {NOW_NS} - {horizon}""")
    return "\nUNION ALL\n".join(arms) + "\nORDER BY horizon_class, anchor_ns"


_CHAIN_FILTER = "f.tenant_hash = t.tenant_hash AND f.entity = t.entity AND f.key = t.key"
_TIME_BOUND = "coalesce(CAST(strftime('%s', nullif(:{name}, '')) AS INTEGER) * 1000000000, {default})"


def view_queries(policy: DecayPolicy | None = None) -> tuple[CannedQuery, ...]:
    """The live view's canned queries (stale thresholds from `policy`, default: the environment's)."""
    policy = policy or DecayPolicy.from_env()
    facts: dict[str, frozenset[str]] = {"facts": frozenset()}
    return (
        CannedQuery(
            "live_facts_of_tenant", "Live facts of a tenant",
            "Facts neither deleted nor superseded in one tenant, newest first (private ones included).",
            """SELECT fact_id, entity, key, value, confidence, horizon_class, stored_at, actor, private, version
FROM live_facts WHERE tenant_hash = :tenant ORDER BY stored_at_ns DESC""", facts),
        CannedQuery(
            "fact_history", "One fact's whole history",
            "Every version of the fact's (tenant, entity, key) chain, with each journal line that touched it.",
            f"""WITH t AS (SELECT tenant_hash, entity, key FROM facts WHERE fact_id = :fact_id)
SELECT f.version, f.fact_id, f.value, f.stored_at, f.deleted, f.superseded_by, f.actor,
  e.line_no, e.op, e.event_at, r.role, e.applied, e.skip_reason
FROM t JOIN facts f ON {_CHAIN_FILTER}
LEFT JOIN journal_event_facts r ON r.fact_id = f.fact_id
LEFT JOIN journal_events e ON e.line_no = r.line_no
ORDER BY f.seq, e.line_no""", facts),
        CannedQuery(
            "actor_writes", "What an actor wrote in a time range",
            "Facts stored by one actor (agent or operator) from `since` (inclusive) to `until` (exclusive); "
            "times as RFC 3339 or YYYY-MM-DD, UTC; leave one empty for an open range.",
            f"""SELECT fact_id, tenant_hash, entity, key, value, stored_at, version, deleted, superseded_by
FROM facts WHERE actor = :actor
  AND stored_at_ns >= {_TIME_BOUND.format(name='since', default=-(2 ** 63))}
  AND stored_at_ns < {_TIME_BOUND.format(name='until', default=2 ** 63 - 1)}
ORDER BY stored_at_ns, fact_id""", facts),
        CannedQuery(
            "retention_candidates", "Retention candidates older than N days",
            "Every version not deleted (superseded ones too: retention sweeps them, unlike `live_facts`) "
            "stored more than `days` days ago (optionally in one `tenant`), oldest first, governance's own "
            "holds and reports left out; `protected_by` says why retention keeps one (private, sync tombstone, "
            "daemon-owned prefix, legal hold, consolidation member) and is empty for those `cruxsql retention "
            "apply` would delete.",
            _retention_sql(), facts),
        CannedQuery(
            "active_legal_holds", "Active legal holds",
            "Holds not released, resolved from their state facts as compaction and retention see them; "
            "`fail_closed` = 1 when no state row parses and the hold covers its whole tenant.",
            f"""WITH {HOLDS_CTE}
SELECT hold_id, tenant_id, entity_prefixes, reason, placed_at, placed_by, fail_closed
FROM active_holds ORDER BY placed_at, hold_id""", facts),
        CannedQuery(
            "erasure_reports", "Erasure reports and their hash chain",
            "Every erasure report, oldest first: `hash_ok` = 1 when its report_hash matches its content, "
            "`chain_ok` = 1 when it names the previous report's hash (as `cruxsql verify --erasure` checks).",
            _erasure_reports_sql(), facts),
        CannedQuery(
            "corrupt_journal_lines", "Corrupt journal lines",
            "Lines of facts.jsonl that could not be decoded; replay skipped them and reports them here.",
            "SELECT line_no, byte_offset, byte_length, reason FROM journal_corrupt_lines ORDER BY line_no",
            {"journal_corrupt_lines": frozenset()}),
        CannedQuery(
            "stale_facts", "Stale facts by horizon class",
            f"Live facts older than their horizon class allows ({policy.volatile_hours} h volatile, "
            f"{policy.medium_days} d medium, {policy.stable_days} d stable, counted from re-verification or "
            "storage): recall halves their confidence. Leave `horizon_class` empty for all classes.",
            _stale_sql(policy), facts),
        CannedQuery(
            "token_usage_by_agent", "Token usage by agent",
            "Calls and tokens per agent, summed over days, from the MCP server's accounting.",
            """SELECT agent, sum(calls) AS calls, sum(tokens_in) AS tokens_in, sum(tokens_out) AS tokens_out
FROM token_usage GROUP BY agent ORDER BY tokens_out DESC""",
            {"token_usage": frozenset({"agent", "calls", "tokens_in", "tokens_out"})}),
        CannedQuery(
            "contradiction_candidates", "Contradiction candidates",
            "Advisory contradictions found by curation (never a mutation).",
            "SELECT * FROM contradiction_candidates", {"contradiction_candidates": frozenset()}),
        CannedQuery(
            "duplicate_candidates", "Duplicate candidates",
            "Pairs of live, non-private facts of one entity whose values are equal once lowercased and "
            "trimmed; advisory, never a mutation (`cruxsql curate duplicates` adds the near ones).",
            "SELECT * FROM duplicate_candidates", {"duplicate_candidates": frozenset()}),
    )


def audit_queries() -> tuple[CannedQuery, ...]:
    """Canned queries of an audit export database."""
    return (
        CannedQuery(
            "fact_history", "One fact's events",
            "Every exported event that touched the fact, with its state after each.",
            """SELECT e.line_no, e.op, e.event_at, ef.role, ef.value, ef.deleted, ef.superseded_by, e.chain_blake3
FROM event_facts ef JOIN events e USING (line_no) WHERE ef.fact_id = :fact_id ORDER BY e.line_no""",
            {"event_facts": frozenset(), "events": frozenset()}),
        CannedQuery(
            "hash_chain", "Hash chain check",
            "Each event's chain hash recomputed from the previous one and its line hash: `chain_ok` = 0 "
            "marks where the export was altered.",
            f"""SELECT line_no, op, event_at, line_blake3, chain_blake3,
  {BLAKE3_FUNCTION}(coalesce(lag(chain_blake3) OVER (ORDER BY line_no), '') || line_blake3) = chain_blake3
    AS chain_ok
FROM events ORDER BY line_no""", {"events": frozenset()}),
    )
