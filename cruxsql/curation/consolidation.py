"""Consolidation and its undo (`consolidate_facts_v1`, `consolidate_undo_v1`, fact_store.rs).

A consolidation replaces the live versions of one (entity, key) with a canonical fact: every guard
of the V-C order runs first (the first failing one is the error, its text exactly Crux's), then one
`consolidate` line is appended through `Store.commit` (the commit point; on any error the journal is
untouched). Replay does the rest: the canonical is inserted, each target's `superseded_by` points at
it, and `consolidation_sources` records the edges. Undo appends one `consolidate_undo` line: the
canonical is deleted and the sources are live again. Both run under the writer lock after catching
up with the journal, so of two concurrent consolidations of one chain the second sees the targets
already superseded and fails with `TargetAlreadySuperseded`.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional

import blake3

from ..errors import CAPABILITY_DENIED, INVALID_PARAMS, CruxsqlError, InvalidInput, JournalError, ToolError
from ..facts import codec, timestamps
from ..facts.codec import Fact
from ..facts.privacy import owned_prefix
from ..facts.store import Store, check_confidence
from ..recall import scope
from .contradictions import require_consolidation_feature

DEFAULT_CONFIDENCE_FLOOR = 0.99

# cruxsql's `reason` code and MCP error code per store error. Crux's handler maps the V-A errors
# (first block); it has no mapping for the V-C-only ones, which get codes named after themselves.
REASONS: dict[str, tuple[str, int]] = {
    "NoTargets": ("invalid_request", -32602),
    "TargetOutsideEntityKey": ("invalid_request", -32602),
    "TargetNotFound": ("target_not_found", -32602),
    "TargetDeleted": ("target_deleted", -32030),
    "TargetPinned": ("target_pinned", -32030),
    "TargetPrivate": ("target_private", -32030),
    "TargetReceiptLinked": ("target_receipt_linked", -32030),
    "TargetHighConfidence": ("target_high_confidence", -32030),
    "Journal": ("journal_error", -32603),
    "MissingConsolidationId": ("invalid_request", -32602),
    "DuplicateTarget": ("invalid_request", -32602),
    "TargetAlreadySuperseded": ("target_already_superseded", -32030),
    "TargetDaemonOwned": ("target_daemon_owned", -32030),
    "ImplicitPriorNotTarget": ("implicit_prior_not_target", -32030),
    "NoUndoSources": ("invalid_request", -32602),
    "NotConsolidationCanonical": ("not_consolidation_canonical", -32030),
    "CanonicalSuperseded": ("canonical_superseded", -32030),
    "UndoSourceMismatch": ("undo_source_mismatch", -32030),
}


class ConsolidationError(CruxsqlError):
    """A refused consolidation or undo: `kind` is the Crux error variant, `reason` cruxsql's code,
    `fact_id` the fact it names (if any); the message is Crux's Display text."""

    def __init__(self, kind: str, message: str, fact_id: Optional[str] = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.reason, self.code = REASONS[kind]
        self.fact_id = fact_id

    def data(self) -> dict[str, Any]:
        """The MCP error `data`: `{reason, protected: true}`."""
        return {"reason": self.reason, "protected": True}


@dataclass
class ConsolidationRequest:
    """Crux's `ConsolidationRequestV1`; `source_receipt` is accepted and ignored, as in V-C (the
    canonical's receipt is always `consolidation:<consolidation_id>`)."""

    consolidation_id: str
    entity: str
    key: str
    canonical_value: str
    target_fact_ids: list[str]
    protected_fact_ids: list[str] = field(default_factory=list)
    confidence: float = 1.0
    source_receipt: Optional[str] = None
    actor: Optional[str] = None
    horizon_class: Optional[str] = None
    protected_confidence_floor: float = DEFAULT_CONFIDENCE_FLOOR


def canonical_hash(value: str) -> str:
    """`"blake3:"` + lowercase hex BLAKE3-256 of the UTF-8 value."""
    return "blake3:" + blake3.blake3(value.encode("utf-8")).hexdigest()


def new_consolidation_id() -> str:
    """The MCP default id: `mcp-<uuid, hyphenated>`."""
    return f"mcp-{uuid.uuid4()}"


Viewer = Optional[Callable[[Fact], bool]]
"""Which facts the caller may see (None: an operator, who sees all); any other fact answers as missing."""


def agent_viewer(agent: Optional[str]) -> Callable[[Fact], bool]:
    """An agent sees public facts and its own private ones."""
    return lambda fact: scope.visible_entity(fact.entity, fact.private, agent) is not None


def _row(store: Store, fact_id: str, tenant: str, viewer: Viewer = None) -> Optional[Fact]:
    try:
        fact = store.get(fact_id, tenant)
    except CruxsqlError:
        return None
    return fact if viewer is None or viewer(fact) else None


def _check_targets(store: Store, tenant: str, req: ConsolidationRequest, viewer: Viewer = None) -> list[Fact]:
    if not req.target_fact_ids:
        raise ConsolidationError("NoTargets", "consolidation requires at least one target fact")
    if not req.consolidation_id.strip():
        raise ConsolidationError("MissingConsolidationId", "consolidation_id must not be empty")
    floor = codec.to_f32(req.protected_confidence_floor)
    protected = set(req.protected_fact_ids)
    seen: set[str] = set()
    targets = []
    for fid in req.target_fact_ids:
        def fail(kind: str, text: str) -> ConsolidationError:
            return ConsolidationError(kind, text, fid)  # noqa: B023 (raised within this iteration)
        if fid in seen:
            raise fail("DuplicateTarget", f"duplicate target fact id: {fid}")
        seen.add(fid)
        fact = _row(store, fid, tenant, viewer)
        if fact is None:
            raise fail("TargetNotFound", f"target fact not found: {fid}")
        if fact.deleted:
            raise fail("TargetDeleted", f"target fact is deleted: {fid}")
        if fact.superseded_by is not None:
            raise fail("TargetAlreadySuperseded", f"target fact is already superseded: {fid}")
        if fid in protected:
            raise fail("TargetPinned", f"target fact is protected by caller: {fid}")
        prefix = owned_prefix(fact.entity)     # Crux's daemon-owned list plus cruxsql's own (erasure reports)
        if prefix is not None:
            raise fail("TargetDaemonOwned", f"target fact belongs to daemon-owned namespace '{prefix}': {fid}")
        if fact.private:
            raise fail("TargetPrivate", f"target fact is private: {fid}")
        if fact.source_receipt is not None:
            raise fail("TargetReceiptLinked", f"target fact is receipt-linked: {fid}")
        if fact.confidence >= floor:
            raise fail("TargetHighConfidence",
                       f"target fact confidence is protected: {fid} confidence={fact.confidence:.3f}")
        if fact.entity != req.entity or fact.key != req.key:
            raise fail("TargetOutsideEntityKey", f"target fact is outside requested entity/key: {fid}")
        targets.append(fact)
    return targets


def _build_canonical(store: Store, tenant: str, req: ConsolidationRequest, now: int) -> Fact:
    prev = store.db.execute(
        "SELECT fact_id, version FROM facts WHERE tenant_hash = ? AND entity = ? AND key = ? AND deleted = 0 "
        "ORDER BY seq DESC LIMIT 1", (tenant, req.entity, req.key)).fetchone()
    if prev is not None and prev[0] not in req.target_fact_ids:
        raise ConsolidationError("ImplicitPriorNotTarget",
                                 f"current prior version must be an explicitly validated target: {prev[0]}", prev[0])
    horizon = codec.parse_horizon(req.horizon_class) if req.horizon_class is not None \
        else codec.default_horizon_for_entity(req.entity)
    return Fact(
        fact_id="f_" + uuid.uuid4().hex, tenant_hash=tenant, entity=req.entity, key=req.key,
        value=req.canonical_value, source_receipt=f"consolidation:{req.consolidation_id}",
        confidence=check_confidence(req.confidence), stored_at=now, tokens=codec.token_cost(req.canonical_value),
        version=prev[1] + 1 if prev else 1, supersedes=prev[0] if prev else None,
        # Crux builds the canonical public and only replay re-applies the prefix policy (docs/curation.md);
        # cruxsql applies it up front, so the view never differs from a replay.
        private=store.policy.enforce(req.entity, False), horizon_class=horizon, actor=req.actor,
    )


def consolidate_facts_v1(store: Store, req: ConsolidationRequest, tenant: str = "default",
                         viewer: Viewer = None) -> dict[str, Any]:
    """Run every guard, then commit one `consolidate` line. Returns `{status: "consolidated", receipt}`."""
    built: dict[str, Fact] = {}

    def build() -> list[codec.Event]:
        _check_targets(store, tenant, req, viewer)
        now = timestamps.now_ns()
        built["canonical"] = _build_canonical(store, tenant, req, now)
        return [codec.ConsolidateEvent(built["canonical"], list(req.target_fact_ids),
                                       timestamps.format_event_time(timestamps.now_ns()))]

    _commit(store, build)
    canonical = built["canonical"]
    return {"status": "consolidated", "receipt": {
        "consolidation_id": req.consolidation_id, "canonical_fact_id": canonical.fact_id,
        "canonical_hash": canonical_hash(canonical.value), "superseded_fact_ids": list(req.target_fact_ids),
        "source_fact_ids": list(req.target_fact_ids)}}


def consolidate_undo_v1(store: Store, canonical_fact_id: str, source_fact_ids: list[str],
                        tenant: str = "default", viewer: Viewer = None) -> dict[str, Any]:
    """Undo a consolidation given its canonical and its exact source set.

    Returns `{status: "undone" | "already_undone", canonical_fact_id, restored_fact_ids}`."""
    cid = canonical_fact_id
    outcome: dict[str, Any] = {}

    def build() -> list[codec.Event]:
        if not source_fact_ids:
            raise ConsolidationError("NoUndoSources", "consolidation undo requires a non-empty exact source set")
        canonical = _row(store, cid, tenant, viewer)
        if canonical is None:
            raise ConsolidationError("TargetNotFound", f"target fact not found: {cid}", cid)
        recorded = sorted(r[0] for r in store.db.execute(
            "SELECT source_fact_id FROM consolidation_sources WHERE canonical_fact_id = ?", (cid,)))
        if not recorded:
            raise ConsolidationError("NotConsolidationCanonical", f"fact is not a consolidation canonical: {cid}", cid)
        if canonical.superseded_by is not None:
            raise ConsolidationError("CanonicalSuperseded",
                                     f"consolidation canonical has a newer successor and cannot be undone: {cid}", cid)
        mismatch = ConsolidationError("UndoSourceMismatch",
                                      f"consolidation undo source set does not match canonical edges: {cid}", cid)
        if sorted(set(source_fact_ids)) != recorded:
            raise mismatch
        sources = [_row(store, sid, tenant) for sid in recorded]
        if canonical.deleted:
            if all(s is not None and not s.deleted and s.superseded_by is None for s in sources):
                outcome.update(status="already_undone", restored=[])
                return []
            raise mismatch
        if not all(s is not None and not s.deleted and s.superseded_by == cid for s in sources):
            raise mismatch
        outcome.update(status="undone", restored=recorded)
        return [codec.ConsolidateUndoEvent(cid, recorded, timestamps.format_event_time(timestamps.now_ns()))]

    _commit(store, build)
    return {"status": outcome["status"], "canonical_fact_id": cid, "restored_fact_ids": outcome["restored"]}


def _commit(store: Store, build) -> None:
    try:
        store.commit(build)
    except JournalError as exc:
        raise ConsolidationError("Journal", f"fact journal append failed: {exc}") from exc


def _string_list(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _number(arguments: dict[str, Any], name: str, default: float) -> float:
    value = arguments.get(name)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else default


def memory_consolidate(store: Store, arguments: dict[str, Any], *, agent: Optional[str], tenant: str = "default",
                       env: Optional[Mapping[str, str]] = None) -> dict[str, Any]:
    """The `memory_consolidate` tool: Crux's argument handling (`crates/crux-mcp/src/tools/consolidation.rs`),
    the acting agent as the canonical's actor, store errors as `ToolError`s with `data {reason, protected: true}`."""
    require_consolidation_feature(env)
    if not agent:
        raise ToolError("memory_consolidate requires an authenticated passport (anonymous calls "
                        "rejected)", {"tool": "memory_consolidate", "requires_passport": True}, code=CAPABILITY_DENIED)
    for name in ("entity", "key", "canonical_value"):
        if not isinstance(arguments.get(name), str):
            raise ToolError(f"missing required param: {name}", {"param": name, "required": True}, code=INVALID_PARAMS)
    targets = _string_list(arguments.get("target_fact_ids"))
    if not targets:
        raise ToolError("target_fact_ids must be a non-empty array",
                        {"param": "target_fact_ids", "required": True}, code=INVALID_PARAMS)
    horizon = arguments.get("horizon_class")
    if not isinstance(horizon, str) or horizon not in codec.HORIZON_CLASSES:
        horizon = None     # Crux drops an unparsable horizon silently
    cid = arguments.get("consolidation_id")
    req = ConsolidationRequest(
        consolidation_id=cid if isinstance(cid, str) else new_consolidation_id(), entity=arguments["entity"],
        key=arguments["key"], canonical_value=arguments["canonical_value"], target_fact_ids=targets,
        protected_fact_ids=_string_list(arguments.get("protected_fact_ids")),
        confidence=_number(arguments, "confidence", 1.0), actor=agent, horizon_class=horizon,
        protected_confidence_floor=_number(arguments, "protected_confidence_floor", DEFAULT_CONFIDENCE_FLOOR))
    try:
        report = consolidate_facts_v1(store, req, tenant, agent_viewer(agent))
    except ConsolidationError as exc:
        raise ToolError(str(exc), exc.data(), code=exc.code) from exc
    except InvalidInput as exc:      # e.g. a confidence outside 0..=1 (Crux never checks it)
        raise ToolError(str(exc), {"reason": "invalid_request", "protected": True}, code=INVALID_PARAMS) from exc
    receipt = report["receipt"]
    text = (f"consolidated {len(targets)} target(s) into canonical fact {receipt['canonical_fact_id']} "
            f"(receipt {receipt['consolidation_id']}); history preserved")
    return {"content": [{"type": "text", "text": text}], "structuredContent": report}
