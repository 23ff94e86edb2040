"""The legal-hold guard of a hard erasure: compaction drops deleted facts for good, so it refuses while an
active legal hold covers one of them, unless a complete `legal_hold_overridden` receipt names every such
fact and hold (Crux's `compact_journal_after_legal_hold_override_receipt`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from ..errors import Conflict, InvalidInput
from ..facts import codec
from . import legal_holds

if TYPE_CHECKING:
    from ..facts.store import Store


class LegalHoldBlocked(Conflict):
    """Compaction would hard-erase facts covered by active legal holds (PermissionDenied in Crux)."""

    def __init__(self, message: str, covered: list[tuple[str, list[str]]]) -> None:
        super().__init__(message)
        self.covered = covered

    @property
    def hold_ids(self) -> list[str]:
        return sorted({h for _, hs in self.covered for h in hs})


def _pruned_control_facts_covered(store: Store, holds: list[legal_holds.LegalHold]) -> list[tuple[str, list[str]]]:
    """Facts that only the journal still holds (pruned latest-only snapshots) and that a hold covers."""
    active = [h for h in holds if h.active]
    if not active:
        return []
    rows = cast(list[tuple[int, int, int]], store.db.execute(      # line numbers and byte spans
        "SELECT DISTINCT e.line_no, e.byte_offset, e.byte_length FROM journal_event_facts j "
        "JOIN journal_events e ON e.line_no = j.line_no "
        "WHERE j.role = 'stored' AND NOT EXISTS (SELECT 1 FROM facts f WHERE f.fact_id = j.fact_id) "
        "ORDER BY e.line_no").fetchall())
    if not rows:
        return []
    out: dict[str, set[str]] = {}
    for line_no, raw in store.journal.read_lines(rows):
        try:
            event = codec.decode_event(raw)
        except codec.CorruptLine as exc:
            raise InvalidInput(f"cannot verify legal-hold coverage for fact journal line {line_no}: {exc}") from None
        for fact in codec.event_facts(event):
            if store.db.execute("SELECT 1 FROM facts WHERE fact_id = ?", (fact.fact_id,)).fetchone():
                continue
            ids = legal_holds.covering_holds(active, fact.tenant_hash or "default", fact.entity, fact.key,
                                             fact.value)
            if ids:
                out.setdefault(fact.fact_id, set()).update(ids)
    return [(fid, sorted(ids)) for fid, ids in sorted(out.items())]

def blocked_by_holds(store: Store) -> list[tuple[str, list[str]]]:
    """`(fact_id, [hold_ids])` that compaction would hard-erase although a hold covers them."""
    holds = legal_holds.resolve_holds(store.db)
    covered = dict(legal_holds.deleted_facts_covered(store.db, holds))
    for fid, ids in _pruned_control_facts_covered(store, holds):
        covered[fid] = sorted(set(covered.get(fid, [])) | set(ids))
    return sorted(covered.items())

def check_override(receipt: legal_holds.LegalHoldReceipt, covered: list[tuple[str, list[str]]]) -> None:
    """The receipt must be `legal_hold_overridden` and name every blocked fact and every hold."""
    if receipt.kind != legal_holds.KIND_OVERRIDDEN:
        raise InvalidInput("legal-hold override requires a legal_hold_overridden receipt")
    if not receipt.receipt_id.strip():
        raise InvalidInput("legal-hold override receipt needs a receipt_id")
    facts, holds = set(receipt.fact_ids), set(receipt.hold_ids)
    missing_facts = sorted(fid for fid, _ in covered if fid not in facts)
    missing_holds = sorted({h for _, hs in covered for h in hs} - holds)
    if missing_facts or missing_holds:
        detail = []
        if missing_facts:
            detail.append("facts " + ",".join(missing_facts))
        if missing_holds:
            detail.append("holds " + ",".join(missing_holds))
        raise LegalHoldBlocked(
            "legal_hold_overridden receipt does not cover every blocked fact and hold (missing "
            + "; ".join(detail) + ")", covered)
