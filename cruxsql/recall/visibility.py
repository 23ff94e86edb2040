"""The visible facts of one store: the pipeline every recall read shares (query_facts, get_bootstrap,
memory_view and the ranked `recall`): catching the derived tables up and opening one read snapshot,
then tenant, agent scope and entity conditions (`visibility_plan`) and the facts passing them that are
visible: not deleted, valid at `as_of`, not superseded, as the store believed at `known_at`, with their
freshness and effective confidence (`visible_sql`)."""

from __future__ import annotations

import functools
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Optional, TypeVar

import apsw

from ..embeddings import Embedder
from ..facts.store import Store
from . import scope
from .freshness import STALE_DEMOTION_FACTOR, DecayPolicy, ns_to_ms
from .text_index import INDEX_EVERY, TextIndex
from .timeline import Timeline

F = TypeVar("F", bound=Callable[..., Any])
_I64_MAX = 9223372036854775807


@dataclass
class VisibilityPlan:
    """SQL conditions on `facts f JOIN recall_text t` and their named parameters."""

    where: list[str] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)


def floor_ms(expr: str) -> str:
    """chrono `timestamp_millis` (floor) of an epoch-ns SQL expression."""
    return f"(({expr}) - ((({expr}) % 1000000) + 1000000) % 1000000) / 1000000"


def on_one_snapshot(read: F) -> F:
    """Run a read of a `VisibleFacts` in its `_one_snapshot`."""
    @functools.wraps(read)
    def run(self: "VisibleFacts", *args: Any, **kwargs: Any) -> Any:
        with self._one_snapshot():
            return read(self, *args, **kwargs)
    return run  # type: ignore[return-value]


class VisibleFacts:
    """One store's facts as recall reads them; `Recall` (facade.py) answers the calls over it."""

    def __init__(self, store: Store, refresh: bool = True, policy: Optional[DecayPolicy] = None,
                 embedder: Optional[Embedder] = None) -> None:
        """`embedder`: with one, `get_bootstrap` ranks by 0.6·cosine + 0.4·confidence as Crux's store does."""
        self.store = store
        self.embedder = embedder
        self.db: apsw.Connection = store.db
        self.refresh = refresh
        self.policy = policy
        self.index = TextIndex(self.db)
        self.timeline = Timeline(self.db, store.journal)
        self._reads: Optional[ExitStack] = None  # the snapshot of the read in progress (`_one_snapshot`)
        self._after_read: list[Callable[[], None]] = []
        self.search_cache: dict[str, Any] = {}   # the ranked recall's embedder and vector matrix (relevance.py)

    # --- shared plumbing --------------------------------------------------------------------------

    @contextmanager
    def _one_snapshot(self) -> Iterator[None]:
        """Around a read: `prepare` opens a read snapshot once the derived tables are caught up, and
        writes the read makes (access counts) wait until it has ended. Nested reads share it."""
        if self._reads is not None:
            yield
            return
        self._reads, after = ExitStack(), []
        try:
            with self._reads:
                yield
            after = self._after_read
        finally:
            self._reads, self._after_read = None, []
        for write in after:
            write()

    def prepare(self, known_at: Optional[int] = None) -> None:
        if self.store.in_snapshot:
            return  # a read nested in another: its snapshot is already open, caught up
        if self.refresh:
            self.store.refresh()
        self.index.catch_up(scan_below=INDEX_EVERY)
        if known_at is not None:
            self.timeline.sync()
        if self._reads is not None:
            self._reads.enter_context(self.store.read_snapshot())
        self.index.open_tail()

    def decay(self) -> DecayPolicy:
        return self.policy or DecayPolicy.from_env()

    @staticmethod
    def _attr_exprs(known_at: Optional[int]) -> dict[str, str]:
        """SQL for each mutable attribute: the current column, or its value at transaction time :T."""
        if known_at is None:
            return {"deleted": "f.deleted", "superseded_by": "f.superseded_by", "valid_from": "f.valid_from_ns",
                    "valid_to": "f.valid_to_ns", "horizon": "f.horizon_class", "reverified": "f.reverified_at_ns"}

        def at_t(attr: str, col: str, current: str) -> str:
            # an attribute with no rows never changed: its current column is its value at every T
            changes = f"FROM recall_changes c WHERE c.fact_id = f.fact_id AND c.attr = '{attr}'"
            return (f"(CASE WHEN EXISTS (SELECT 1 {changes}) THEN (SELECT c.{col} {changes} "
                    f"AND c.at_ns <= :known_at ORDER BY c.line_no DESC LIMIT 1) ELSE {current} END)")

        # A compaction bakes `superseded_by` into the store line, so a fact can look superseded from
        # birth: it only counts once its successor was itself stored by :T.
        successor = at_t("superseded_by", "v_text", "f.superseded_by")
        superseded_by = (f"(CASE WHEN (SELECT e.at_ns FROM facts g JOIN recall_event_times e ON e.line_no = g.line_no "
                         f"WHERE g.fact_id = {successor}) > :known_at THEN NULL ELSE {successor} END)")
        return {"deleted": at_t("deleted", "v_int", "f.deleted"),
                "superseded_by": superseded_by,
                "valid_from": at_t("validity", "v_int", "f.valid_from_ns"),
                "valid_to": at_t("validity", "v_int2", "f.valid_to_ns"),
                "horizon": at_t("horizon", "v_text", "f.horizon_class"),
                "reverified": at_t("reverified", "v_int", "f.reverified_at_ns")}

    @staticmethod
    def _unstretched_freshness_sql(policy: DecayPolicy, now_ms: int) -> Optional[tuple[str, dict[str, int]]]:
        """The same decision for rows without access counts (ac = 0, factor 1.0), as plain comparisons of
        the anchor's nanoseconds with bounds computed here once per query: floor_ms(a) <= 0 iff a < 10^6,
        floor_ms(a) > now_ms iff a >= (now_ms + 1) * 10^6, now_ms - floor_ms(a) > thr iff
        a < (now_ms - thr) * 10^6. A scan evaluates it per matching fact: the general expression costs
        as much as the scan itself. None when a bound leaves 64 bits (then the general one is used)."""
        if now_ms <= 0:
            return None
        params = {"fr_unknown": (now_ms + 1) * 1_000_000}
        for hz in ("volatile", "medium", "stable"):
            base = policy.base_ms(hz)
            assert base is not None  # the three classes with a horizon
            as_real = float(base) * 1.0  # SQLite: CAST(base * 1.0 AS INTEGER), saturating
            thr = _I64_MAX if as_real >= 9.223372036854775807e18 else max(int(as_real), -_I64_MAX - 1)
            params[f"fr_{hz}"] = (now_ms - thr) * 1_000_000
        if any(not -_I64_MAX - 1 <= v <= _I64_MAX for v in params.values()):
            return None
        return ("(CASE WHEN hz = 'none' THEN 'fresh' WHEN coalesce(rv, stored_at_ns) < 1000000 "
                "OR coalesce(rv, stored_at_ns) >= :fr_unknown THEN 'unknown' WHEN coalesce(rv, stored_at_ns) < "
                "(CASE hz WHEN 'volatile' THEN :fr_volatile WHEN 'medium' THEN :fr_medium ELSE :fr_stable END) "
                "THEN 'stale' ELSE 'fresh' END)", params)

    def _freshness_sql(self, policy: DecayPolicy) -> str:
        """`apply_at_chrono_salient` over the inner columns (hz, rv, stored_at_ns, ac) at :now_ms, in SQL,
        so that ranking, the floor and the returned rows all use one computation."""
        anchor = floor_ms("coalesce(rv, stored_at_ns)")
        base = (f"(CASE hz WHEN 'volatile' THEN {policy.base_ms('volatile')} WHEN 'medium' THEN "
                f"{policy.base_ms('medium')} WHEN 'stable' THEN {policy.base_ms('stable')} END)")
        factor = "(CASE WHEN ac > 0 THEN min(max(1.0 + 0.25 * ln(ac + 1), 1.0), 4.0) ELSE 1.0 END)"
        return (f"(CASE WHEN hz = 'none' THEN 'fresh' "
                f"WHEN {anchor} <= 0 OR :now_ms <= 0 OR {anchor} > :now_ms THEN 'unknown' "
                f"WHEN :now_ms - {anchor} > min(CAST({base} * {factor} AS INTEGER), 9223372036854775807) "
                f"THEN 'stale' ELSE 'fresh' END)")

    def _inner_sql(self, known_at: Optional[int], static_where: list[str], salience: bool = True,
                   scan: bool = False) -> str:
        """The per-fact columns recall ranks by. `scan`: every fact is a candidate, so read `facts` in
        table order (NOT INDEXED): the planner otherwise walks the live-facts partial index, which
        visits the same rows in random order (3x an `instr()` scan at 1M facts). `facts` is the outer
        loop (CROSS JOIN): recall_text has no index of its own; driven from it, every candidate's text row
        was read before its tenant was judged (184 against 139 ms for a common word at 1M facts)."""
        a = self._attr_exprs(known_at)
        where = list(static_where)
        if known_at is not None:
            where.append("(SELECT e.at_ns FROM recall_event_times e WHERE e.line_no = f.line_no) <= :known_at")
        return (
            "SELECT f.seq AS seq, f.fact_id AS fact_id, f.tenant_hash AS tenant_hash, f.entity AS entity, "
            "f.key AS key, f.value AS value, f.confidence AS confidence, f.stored_at_ns AS stored_at_ns, "
            "f.tokens AS tokens, f.private AS private, f.actor AS actor, f.version AS version, "
            "f.source_receipt AS source_receipt, t.owner AS owner, t.visible_entity AS visible_entity, "
            f"f.access_count{' + coalesce(s.access_count, 0)' if salience else ''} AS ac, {a['deleted']} AS deleted, "
            f"{a['superseded_by']} AS superseded_by, {a['valid_from']} AS valid_from, {a['valid_to']} AS valid_to, "
            f"{a['horizon']} AS hz, {a['reverified']} AS rv "
            f"FROM facts f{' NOT INDEXED' if scan else ''} CROSS JOIN recall_text t ON t.seq = f.seq "
            + ("LEFT JOIN recall_salience s ON s.fact_id = f.fact_id" if salience else "")
            + (" WHERE " + " AND ".join(where) if where else "")
        )

    @staticmethod
    def entity_filters(plan: VisibilityPlan, agent: Optional[str], entity: Optional[str],
                        entity_prefix: Optional[str]) -> None:
        if entity_prefix is not None and entity_prefix != "":
            plan.params["ep"] = entity_prefix
            hi = scope.prefix_upper_bound(entity_prefix)
            ranges = ["(f.entity >= :ep" + (" AND f.entity < :ep_hi)" if hi is not None else ")")]
            plan.params["ep_hi"] = hi
            if agent is not None:
                aprefix = scope.owner_entity(agent, entity_prefix)
                plan.params["aep"], plan.params["aep_hi"] = aprefix, scope.prefix_upper_bound(aprefix)
                ranges.append("(f.entity >= :aep AND f.entity < :aep_hi)")
            plan.where.append("(" + " OR ".join(ranges) + ")")
        if entity is not None:
            plan.params["ent"] = entity
            if agent is not None:
                plan.params["aent"] = scope.owner_entity(agent, entity)
                plan.where.append("f.entity IN (:ent, :aent)")
            else:
                plan.where.append("f.entity = :ent")


    # --- the visibility pipeline (query_facts and the ranked `recall` share it) ----------------------

    def visibility_plan(self, tenant: str, agent: Optional[str], now_ns: int, entity: Optional[str],
                         entity_prefix: Optional[str]) -> VisibilityPlan:
        """The tenant, agent-scope and entity conditions on `facts f JOIN recall_text t`."""
        plan = VisibilityPlan(params={"tenant": tenant, "agent": agent, "now_ms": ns_to_ms(now_ns)})
        plan.where.append("+f.tenant_hash = :tenant")  # never drive the plan from the tenant
        plan.where.append("((t.owner IS NULL AND f.private = 0) OR t.owner = :agent)")
        self.entity_filters(plan, agent, entity, entity_prefix)
        return plan

    def visible_sql(self, plan: VisibilityPlan, policy: DecayPolicy, known_ns: Optional[int], as_of_ns: Optional[int],
                     include_superseded: bool) -> Callable[..., str]:
        """`where -> SQL` of the facts passing `where` that are visible: not deleted, valid at `as_of`, not
        superseded (unless included), as the store believed at `known_at`; with their freshness `fr` and
        effective confidence `eff` (the inner columns of `_inner_sql` besides)."""
        outer = ["deleted = 0"]
        if as_of_ns is not None:
            plan.params["as_of"] = as_of_ns
            outer.append("(valid_from IS NULL OR valid_from <= :as_of) AND (valid_to IS NULL OR :as_of < valid_to)")
        if not include_superseded:
            outer.append("superseded_by IS NULL")
        if known_ns is not None:
            plan.params["known_at"] = known_ns
        # salience counts only exist once an access was recorded: skip the per-row lookup until then
        salience = self.db.execute("SELECT 1 FROM recall_salience LIMIT 1").fetchone() is not None

        freshness = self._freshness_sql(policy)
        unstretched = self._unstretched_freshness_sql(policy, plan.params["now_ms"])
        if unstretched is not None:
            freshness = f"(CASE WHEN ac > 0 THEN {freshness} ELSE {unstretched[0]} END)"
            plan.params.update(unstretched[1])

        def matched_sql_where(where: list[str], scan: bool = False) -> str:
            return (f"SELECT *, CASE WHEN fr = 'stale' THEN confidence * {STALE_DEMOTION_FACTOR} "
                    f"ELSE confidence END AS eff FROM (SELECT *, {freshness} AS fr "
                    f"FROM ({self._inner_sql(known_ns, where, salience, scan)}) WHERE {' AND '.join(outer)})")
        return matched_sql_where
