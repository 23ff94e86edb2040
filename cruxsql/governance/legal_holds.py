"""Legal holds (corecrux-memory/src/legal_hold.rs): placed, released in two phases, listed; stored as facts like Crux.

A hold is a fact in the hold's tenant with entity `__legal_hold__::<hold_id>`, key `state`, value the
`LegalHold` JSON, `source_receipt` the receipt id, confidence 1.0, private, horizon `none`, actor the
placer/releaser; every state change is a new version of that key. A hold's state is the newest row
(deleted rows included) whose value parses; when none parses the hold is enforced fail-closed over
its whole tenant.

Override receipts (`legal_hold_overridden`) are stored as facts under `__legal_hold_receipt__::<id>`,
key `receipt`. cruxsql also stores the release receipt there before the released state (the durable
receipt the second phase of a release refers to).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Iterable, Optional

from ..errors import Conflict, InvalidInput, NotFound
from ..facts import timestamps
from ..facts.privacy import NamespaceOwner
from ..recall.relations import PREFIX as RELATION
from . import erasure_ledger, erasure_lock

if TYPE_CHECKING:
    from ..facts.store import Store

LEGAL_HOLD_SCHEMA_V1 = "crux.legal_hold.v1"
LEGAL_HOLD_RECEIPT_SCHEMA_V1 = "crux.legal_hold.receipt.v1"
LEGAL_HOLD_ENTITY_PREFIX = "__legal_hold__::"
LEGAL_HOLD_RECEIPT_ENTITY_PREFIX = "__legal_hold_receipt__::"
# The one writer of holds and their receipts (the store refuses these namespaces to everyone else).
OWNER = NamespaceOwner("legal holds", (LEGAL_HOLD_ENTITY_PREFIX, LEGAL_HOLD_RECEIPT_ENTITY_PREFIX))
STATE_KEY = "state"
RECEIPT_KEY = "receipt"
KIND_PLACED = "legal_hold_placed"
KIND_RELEASED = "legal_hold_released"
KIND_OVERRIDDEN = "legal_hold_overridden"
RECEIPT_KINDS = (KIND_PLACED, KIND_RELEASED, KIND_OVERRIDDEN)
UNPARSABLE_REASON = "stored legal-hold state is unparsable; enforcing tenant-wide fail-closed marker"
DEFAULT_ACTOR = "operator"


def _jstr(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _str_list(items: Iterable[str]) -> str:
    return "[" + ",".join(_jstr(i) for i in items) + "]"


def normalise_prefixes(prefixes: Optional[Iterable[str]]) -> list[str]:
    """Trimmed, empties dropped, sorted, deduplicated (as Crux does when placing a hold)."""
    return sorted({p.strip() for p in (prefixes or ()) if p and p.strip()})


@dataclass(frozen=True)
class LegalHold:
    """`LegalHold` (crux.legal_hold.v1); times are epoch nanoseconds."""

    hold_id: str
    tenant_id: str
    entity_prefixes: tuple[str, ...]
    reason: str
    placed_at: int
    placed_by: str
    place_receipt_id: str
    released_at: Optional[int] = None
    released_by: Optional[str] = None
    release_receipt_id: Optional[str] = None
    schema: str = LEGAL_HOLD_SCHEMA_V1
    unparsable: bool = False  # a fail-closed marker synthesised from an unreadable state row

    @property
    def active(self) -> bool:
        return self.released_at is None

    @property
    def entity(self) -> str:
        return LEGAL_HOLD_ENTITY_PREFIX + self.hold_id

    def covers(self, tenant: str, entity: str) -> bool:
        """Active, same tenant, and no prefixes (whole tenant) or the entity starts with one of them."""
        return self.active and tenant == self.tenant_id and (
            not self.entity_prefixes or entity.startswith(tuple(self.entity_prefixes)))

    def to_json(self) -> str:
        """The stored JSON, in Crux's field order; the release fields are omitted while None."""
        out = ('{"schema":' + _jstr(self.schema) + ',"hold_id":' + _jstr(self.hold_id) + ',"tenant_id":'
               + _jstr(self.tenant_id) + ',"entity_prefixes":' + _str_list(self.entity_prefixes) + ',"reason":'
               + _jstr(self.reason) + ',"placed_at":"' + timestamps.format_fact_time(self.placed_at)
               + '","placed_by":' + _jstr(self.placed_by) + ',"place_receipt_id":' + _jstr(self.place_receipt_id))
        if self.released_at is not None:
            out += ',"released_at":"' + timestamps.format_fact_time(self.released_at) + '"'
        if self.released_by is not None:
            out += ',"released_by":' + _jstr(self.released_by)
        if self.release_receipt_id is not None:
            out += ',"release_receipt_id":' + _jstr(self.release_receipt_id)
        return out + "}"

    def to_dict(self) -> dict[str, Any]:
        d = json.loads(self.to_json())
        d["active"] = self.active
        if self.unparsable:
            d["unparsable"] = True
        return d

    @classmethod
    def parse(cls, text: str) -> "LegalHold":
        """Parse stored JSON with serde's rules (unknown keys ignored); ValueError when it does not parse."""
        obj = json.loads(text)
        if not isinstance(obj, dict):
            raise ValueError("legal hold state is not a JSON object")

        def req_str(name: str) -> str:
            v = obj.get(name)
            if not isinstance(v, str):
                raise ValueError(f"legal hold `{name}` missing or not a string")
            return v

        def opt_str(name: str) -> Optional[str]:
            v = obj.get(name)
            if v is not None and not isinstance(v, str):
                raise ValueError(f"legal hold `{name}` is not a string")
            return v

        prefixes = obj.get("entity_prefixes", [])
        if prefixes is None or not isinstance(prefixes, list) or not all(isinstance(p, str) for p in prefixes):
            raise ValueError("legal hold `entity_prefixes` is not an array of strings")
        released = opt_str("released_at")
        return cls(
            schema=req_str("schema"), hold_id=req_str("hold_id"), tenant_id=req_str("tenant_id"),
            entity_prefixes=tuple(prefixes), reason=req_str("reason"),
            placed_at=timestamps.parse_ns(req_str("placed_at")), placed_by=req_str("placed_by"),
            place_receipt_id=req_str("place_receipt_id"),
            released_at=None if released is None else timestamps.parse_ns(released),
            released_by=opt_str("released_by"), release_receipt_id=opt_str("release_receipt_id"),
        )


@dataclass(frozen=True)
class LegalHoldReceipt:
    """`LegalHoldReceiptV1` (crux.legal_hold.receipt.v1)."""

    receipt_id: str
    kind: str
    hold_ids: tuple[str, ...]
    tenant_id: str
    entity_prefixes: tuple[str, ...]
    reason: str
    actor: str
    fact_ids: tuple[str, ...] = ()
    recorded_at: int = 0
    schema: str = LEGAL_HOLD_RECEIPT_SCHEMA_V1

    def to_json(self) -> str:
        out = ('{"schema":' + _jstr(self.schema) + ',"receipt_id":' + _jstr(self.receipt_id) + ',"kind":'
               + _jstr(self.kind) + ',"hold_ids":' + _str_list(self.hold_ids) + ',"tenant_id":'
               + _jstr(self.tenant_id) + ',"entity_prefixes":' + _str_list(self.entity_prefixes) + ',"reason":'
               + _jstr(self.reason) + ',"actor":' + _jstr(self.actor))
        if self.fact_ids:
            out += ',"fact_ids":' + _str_list(self.fact_ids)
        return out + ',"recorded_at":"' + timestamps.format_fact_time(self.recorded_at) + '"}'

    def to_dict(self) -> dict[str, Any]:
        return json.loads(self.to_json())

    @classmethod
    def from_obj(cls, obj: Any) -> "LegalHoldReceipt":
        """A receipt from decoded JSON; InvalidInput names the bad key."""
        if not isinstance(obj, dict):
            raise InvalidInput("legal-hold receipt: expected a JSON object")

        def strs(name: str, required: bool = False) -> tuple[str, ...]:
            v = obj.get(name)
            if v is None and not required:
                return ()
            if not isinstance(v, list) or not all(isinstance(i, str) for i in v):
                raise InvalidInput(f"legal-hold receipt: `{name}` must be an array of strings")
            return tuple(v)

        def s(name: str, default: Optional[str] = None) -> str:
            v = obj.get(name, default)
            if not isinstance(v, str):
                raise InvalidInput(f"legal-hold receipt: `{name}` is required and must be a string")
            return v

        recorded = obj.get("recorded_at")
        return cls(
            schema=s("schema", LEGAL_HOLD_RECEIPT_SCHEMA_V1), receipt_id=s("receipt_id"), kind=s("kind"),
            hold_ids=strs("hold_ids", True), tenant_id=s("tenant_id", ""), entity_prefixes=strs("entity_prefixes"),
            reason=s("reason", ""), actor=s("actor", DEFAULT_ACTOR), fact_ids=strs("fact_ids"),
            recorded_at=timestamps.parse_ns(recorded) if isinstance(recorded, str) else timestamps.now_ns(),
        )


def new_hold_id() -> str:
    return "lh_" + uuid.uuid4().hex


def new_receipt_id(kind: str) -> str:
    stem = {KIND_PLACED: "place", KIND_RELEASED: "release", KIND_OVERRIDDEN: "override"}[kind]
    return f"r_legal_hold_{stem}_{uuid.uuid4().hex}"


# --- resolution ------------------------------------------------------------------------------------


def _state_rows(db) -> list[tuple]:
    lo, hi = LEGAL_HOLD_ENTITY_PREFIX, LEGAL_HOLD_ENTITY_PREFIX[:-1] + chr(ord(LEGAL_HOLD_ENTITY_PREFIX[-1]) + 1)
    return list(db.execute(
        "SELECT entity, tenant_hash, value, version, stored_at_ns, fact_id, actor, source_receipt, deleted "
        "FROM facts WHERE entity >= ? AND entity < ? AND key = ? "
        "ORDER BY entity, version DESC, stored_at_ns DESC, fact_id DESC",
        (lo, hi, STATE_KEY),
    ))


def resolve_holds(db) -> list[LegalHold]:
    """Every hold, resolved from its state rows (deleted included), sorted by (placed_at, hold_id).

    The newest row (version, stored_at, fact_id descending) whose value parses wins; when none
    parses, a fail-closed active hold over the newest row's whole tenant stands in for it.
    """
    holds: list[LegalHold] = []
    current = ""            # the entity of the hold in `rows`; every hold's entity has the prefix
    rows: list[tuple] = []

    def settle(hold_id: str, rows: list[tuple]) -> None:
        for row in rows:
            try:
                hold = LegalHold.parse(row[2])
            except (ValueError, InvalidInput):
                continue
            holds.append(hold)
            return
        newest = rows[0]
        holds.append(LegalHold(
            hold_id=hold_id, tenant_id=newest[1], entity_prefixes=(), reason=UNPARSABLE_REASON,
            placed_at=newest[4], placed_by=newest[6] or "unresolved", place_receipt_id=newest[7] or newest[5],
            unparsable=True,
        ))

    for row in _state_rows(db):
        if row[0] != current:
            if rows:
                settle(current[len(LEGAL_HOLD_ENTITY_PREFIX):], rows)
            current, rows = row[0], []
        rows.append(row)
    if rows:
        settle(current[len(LEGAL_HOLD_ENTITY_PREFIX):], rows)
    holds.sort(key=lambda h: (h.placed_at, h.hold_id))
    return holds


def active_holds(db) -> list[LegalHold]:
    return [h for h in resolve_holds(db) if h.active]


def covering_holds(holds: list[LegalHold], tenant: str, entity: str, key: str = "", value: str = "") -> list[str]:
    """Ids of the active holds that cover (tenant, entity), sorted; a relation (key `relation:<R>:<to>`,
    value `to`: cruxsql/recall/relations.py) names two entities and is covered by a hold on either."""
    ends = (entity, value) if key.startswith(RELATION) else (entity,)
    return sorted(h.hold_id for h in holds if any(h.covers(tenant, end) for end in ends))


def _prefix_clause(prefixes: tuple[str, ...]) -> tuple[str, list]:
    if not prefixes:
        return "", []
    return " AND (" + " OR ".join("substr(entity, 1, ?) = ?" for _ in prefixes) + ")", \
        [x for p in prefixes for x in (len(p), p)]


def deleted_facts_covered(db, holds: Optional[list[LegalHold]] = None) -> list[tuple[str, list[str]]]:
    """Every deleted fact covered by an active hold, or that is a hold's own state row.

    Returns `(fact_id, [hold_ids])` sorted by fact_id. A deleted state row of any hold (active or
    released) counts as covered by that hold: the hold's history is itself under the hold.
    """
    holds = resolve_holds(db) if holds is None else holds
    covered: dict[str, set[str]] = {}
    for hold in holds:
        if hold.active:
            clause, params = _prefix_clause(hold.entity_prefixes)
            for (fid,) in db.execute(
                    "SELECT fact_id FROM facts WHERE deleted = 1 AND tenant_hash = ?" + clause,
                    [hold.tenant_id, *params]):
                covered.setdefault(fid, set()).add(hold.hold_id)
        for (fid,) in db.execute("SELECT fact_id FROM facts WHERE deleted = 1 AND entity = ? AND key = ?",
                                 (hold.entity, STATE_KEY)):
            covered.setdefault(fid, set()).add(hold.hold_id)
    return [(fid, sorted(ids)) for fid, ids in sorted(covered.items())]


# --- mutations -------------------------------------------------------------------------------------


def _store_state(store: Store, hold: LegalHold, receipt_id: str, actor: str) -> None:
    store.store(hold.entity, STATE_KEY, hold.to_json(), tenant=hold.tenant_id, confidence=1.0,
                source_receipt=receipt_id, private=True, horizon_class="none", actor=actor, owner=OWNER)


def store_receipt(store: Store, receipt: LegalHoldReceipt) -> None:
    """Persist a receipt as a fact (`__legal_hold_receipt__::<id>`, key `receipt`, private)."""
    store.store(LEGAL_HOLD_RECEIPT_ENTITY_PREFIX + receipt.receipt_id, RECEIPT_KEY, receipt.to_json(),
                tenant=receipt.tenant_id or "default", confidence=1.0, source_receipt=receipt.receipt_id,
                private=True, horizon_class="none", actor=receipt.actor, owner=OWNER)


def place_hold(store: Store, tenant_id: str, reason: str, entity_prefixes: Optional[Iterable[str]] = None,
               actor: Optional[str] = None) -> tuple[LegalHold, LegalHoldReceipt]:
    """Place a hold over a tenant (or some entity prefixes of it); returns the hold and its receipt."""
    tenant = (tenant_id or "").strip()
    if not tenant:
        raise InvalidInput("tenant_id is required")
    why = (reason or "").strip()
    if not why:
        raise InvalidInput("reason is required")
    who = (actor or "").strip() or DEFAULT_ACTOR
    prefixes = tuple(normalise_prefixes(entity_prefixes))
    now = timestamps.now_ns()
    receipt_id = new_receipt_id(KIND_PLACED)
    hold = LegalHold(hold_id=new_hold_id(), tenant_id=tenant, entity_prefixes=prefixes, reason=why,
                     placed_at=now, placed_by=who, place_receipt_id=receipt_id)
    # Not while an erasure runs: between its delete and its compaction a new hold could cover a fact it
    # deleted already and make the compaction refuse half-way (governance/erasure_lock.py).
    with erasure_lock.held(store):
        _store_state(store, hold, receipt_id, who)
    receipt = LegalHoldReceipt(receipt_id=receipt_id, kind=KIND_PLACED, hold_ids=(hold.hold_id,),
                               tenant_id=tenant, entity_prefixes=prefixes, reason=why, actor=who, recorded_at=now)
    return hold, receipt


@dataclass(frozen=True)
class PreparedRelease:
    """Phase one of a release: the released state, built against one stored state row."""

    hold: LegalHold
    released: LegalHold
    state_fact_id: str
    actor: str
    reason: str


def _current_state(store: Store, hold_id: str) -> tuple[LegalHold, str]:
    store.refresh()
    row = store.db.execute(
        "SELECT fact_id FROM facts WHERE entity = ? AND key = ? ORDER BY version DESC, stored_at_ns DESC, "
        "fact_id DESC LIMIT 1", (LEGAL_HOLD_ENTITY_PREFIX + hold_id, STATE_KEY)).fetchone()
    if row is None:
        raise NotFound(f"unknown legal hold {hold_id!r}")
    hold = next(h for h in resolve_holds(store.db) if h.hold_id == hold_id)
    return hold, row[0]


def prepare_release(store: Store, hold_id: str, actor: Optional[str] = None, reason: Optional[str] = None) -> PreparedRelease:
    """Build the release of an active hold (nothing is written)."""
    hold, state_fact_id = _current_state(store, hold_id)
    if not hold.active:
        raise Conflict(f"legal hold {hold_id} is already released")
    if hold.unparsable:
        raise Conflict(f"legal hold {hold_id} has unparsable stored state; it stays enforced (fail-closed) "
                       "until a parsable state is stored")
    who = (actor or "").strip() or DEFAULT_ACTOR
    now = timestamps.now_ns()
    released = replace(hold, released_at=now, released_by=who)
    return PreparedRelease(hold, released, state_fact_id, who, (reason or "").strip() or hold.reason)


def release_hold(store: Store, prepared: PreparedRelease, durable_receipt_id: str) -> LegalHold:
    """Phase two: re-validate under the writer lock and store the released state naming the receipt."""
    if not durable_receipt_id or not durable_receipt_id.strip():
        raise InvalidInput("a durable release receipt id is required")
    with store.writer_lock():
        hold, state_fact_id = _current_state(store, prepared.hold.hold_id)
        if not hold.active:
            raise Conflict(f"legal hold {hold.hold_id} is already released")
        if state_fact_id != prepared.state_fact_id:
            raise Conflict(f"legal hold {hold.hold_id} changed since the release was prepared; prepare it again")
        released = replace(prepared.released, release_receipt_id=durable_receipt_id.strip())
        _store_state(store, released, durable_receipt_id.strip(), prepared.actor)
    # (the erasure ledger outlives a restore: a backup taken while the hold was active restores it released)
    assert released.released_at is not None     # prepare_release sets it
    erasure_ledger.hold_released(store.data_dir, receipt_id=durable_receipt_id.strip(), hold_id=hold.hold_id,
                                 released_at=timestamps.format_fact_time(released.released_at),
                                 released_by=prepared.actor, reason=prepared.reason)
    return released


def release(store: Store, hold_id: str, actor: Optional[str] = None,
            reason: Optional[str] = None) -> tuple[LegalHold, LegalHoldReceipt]:
    """Both phases: prepare, persist the release receipt durably, then store the released state."""
    with store.writer_lock():
        prepared = prepare_release(store, hold_id, actor, reason)
        assert prepared.released.released_at is not None     # prepare_release sets it
        receipt = LegalHoldReceipt(
            receipt_id=new_receipt_id(KIND_RELEASED), kind=KIND_RELEASED, hold_ids=(hold_id,),
            tenant_id=prepared.hold.tenant_id, entity_prefixes=prepared.hold.entity_prefixes,
            reason=prepared.reason, actor=prepared.actor, recorded_at=prepared.released.released_at)
        store_receipt(store, receipt)
        hold = release_hold(store, prepared, receipt.receipt_id)
    return hold, receipt


def reinstate_releases(store: Store, releases: Iterable[dict[str, Any]]) -> list[str]:
    """Release again, as they were released, the holds a restored backup brought back active: `releases`
    are erasure-ledger `hold_released` lines (or the same fields read from the store the backup came
    from). Each gets its release receipt and its released state, naming the original receipt. Returns
    the ids of the holds released."""
    done = []
    with store.writer_lock():
        store.refresh()
        active = {h.hold_id: h for h in active_holds(store.db) if not h.unparsable}
        for entry in releases:
            hold = active.pop(entry["hold_id"], None)  # (several sources may name one release)
            if hold is None:
                continue
            released_at = timestamps.parse_ns(entry["released_at"])
            receipt = LegalHoldReceipt(
                receipt_id=entry["request_id"], kind=KIND_RELEASED, hold_ids=(hold.hold_id,),
                tenant_id=hold.tenant_id, entity_prefixes=hold.entity_prefixes,
                reason=entry.get("reason") or hold.reason, actor=entry["released_by"], recorded_at=released_at)
            store_receipt(store, receipt)
            _store_state(store, replace(hold, released_at=released_at, released_by=entry["released_by"],
                                        release_receipt_id=receipt.receipt_id), receipt.receipt_id,
                         entry["released_by"])
            done.append(hold.hold_id)
    return done


def releases_of(holds: Iterable[LegalHold]) -> list[dict[str, Any]]:
    """The released holds among `holds` as `reinstate_releases` takes them."""
    return [{"hold_id": h.hold_id, "request_id": h.release_receipt_id or new_receipt_id(KIND_RELEASED),
             "released_at": timestamps.format_fact_time(h.released_at), "released_by": h.released_by or DEFAULT_ACTOR,
             "reason": h.reason} for h in holds if h.released_at is not None]


def list_holds(store: Store, active_only: bool = False) -> list[LegalHold]:
    store.refresh()
    holds = resolve_holds(store.db)
    return [h for h in holds if h.active] if active_only else holds


def build_override_receipt(covered: list[tuple[str, list[str]]], reason: str, actor: Optional[str] = None,
                           tenant_id: str = "") -> LegalHoldReceipt:
    """A `legal_hold_overridden` receipt naming every blocked fact and hold (for the operator to review)."""
    why = (reason or "").strip()
    if not why:
        raise InvalidInput("reason is required")
    return LegalHoldReceipt(
        receipt_id=new_receipt_id(KIND_OVERRIDDEN), kind=KIND_OVERRIDDEN,
        hold_ids=tuple(sorted({h for _, hs in covered for h in hs})), tenant_id=tenant_id, entity_prefixes=(),
        reason=why, actor=(actor or "").strip() or DEFAULT_ACTOR, fact_ids=tuple(fid for fid, _ in covered),
        recorded_at=timestamps.now_ns(),
    )
