"""Beyond Crux: disagreements its 27-word detector misses. Advisory findings, never mutations.

Each finding has a `reason`, the facts, `evidence` and a `confidence` in [0, 1]:

* `numeric_disagreement` — two live facts of one (entity, key) state different numbers for the same
  thing ("3" / "7", "120 ms" / "95ms"), see `phrases.numeric_disagreement`;
* `phrase_polarity` — two live facts of one (entity, key) with opposite polarity inside short
  phrases, negation aware ("deployed to prod" / "not deployed", "rolled back"); pairs Crux's own
  whole-value detector reports are left to it;
* `actor_flip_flop` — a version chain where a different `actor` replaced the value within the
  window (default 24 h). Each re-store silently supersedes the previous one, so agents that disagree
  never show up as live contradictions; this surfaces them. A change that goes back to an earlier
  actor's value (A -> B -> A) is a flip-flop proper and ranks highest.

All of them read the view of one tenant, skip private and deleted facts, and are recomputed on
every call (never journaled).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import apsw

from ..errors import InvalidInput
from ..recall.tokens import estimate_tokens, largest_within
from .contradictions import SHARED_LIVE_SQL
from .phrases import numeric_disagreement, polarity_disagreement
from .polarity import polarity_class_v1
from .shingles import normalise

DEFAULT_WINDOW_NS = 24 * 3600 * 1_000_000_000
REASONS = ("numeric_disagreement", "phrase_polarity", "actor_flip_flop")

_TRANSITIONS_SQL = """
SELECT f.entity, f.key, p.fact_id, p.actor, p.value, p.stored_at_ns, p.version,
       f.fact_id, f.actor, f.value, f.stored_at_ns, f.version
FROM facts f JOIN facts p ON p.fact_id = f.supersedes
WHERE f.tenant_hash = ?1 AND f.actor IS NOT NULL AND f.deleted = 0 AND f.private = 0
  AND p.tenant_hash = ?1 AND p.entity = f.entity AND p.key = f.key
  AND p.actor IS NOT NULL AND p.deleted = 0 AND p.private = 0
ORDER BY f.entity, f.key, f.seq
"""


@dataclass
class Finding:
    reason: str
    entity: str
    key: str
    fact_ids: list[str]
    values: list[str]
    confidence: float
    evidence: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"reason": self.reason, "entity": self.entity, "key": self.key, "fact_ids": self.fact_ids,
                "values": self.values, "confidence": self.confidence, "evidence": self.evidence}


def classify_pair(a: str, b: str) -> Optional[tuple[str, float, dict]]:
    """The (reason, confidence, evidence) two values of one (entity, key) disagree with, if any:
    the numeric reading first, then phrase polarity (unless Crux's whole-value detector fires)."""
    numeric = numeric_disagreement(a, b)
    if numeric is not None:
        return "numeric_disagreement", (0.9 if numeric["match"] == "template" else 0.8), numeric
    pa, pb = polarity_class_v1(a), polarity_class_v1(b)
    if pa is not None and pb is not None:
        return None      # Crux's own detector covers (or rightly ignores) whole-value polarity words
    polar = polarity_disagreement(a, b)
    if polar is not None:
        return "phrase_polarity", (0.85 if polar["shared_words"] else 0.7), polar
    return None


def live_disagreements(db: apsw.Connection, tenant: str = "default") -> list[Finding]:
    """Numeric and phrase-polarity disagreements between live facts sharing (entity, key)."""
    groups: dict[tuple[str, str], list[tuple]] = {}
    for entity, key, fid, value, actor in db.execute(SHARED_LIVE_SQL, (tenant,)):
        groups.setdefault((entity, key), []).append((fid, value, actor))
    out = []
    for (entity, key), members in sorted(groups.items()):
        members.sort()
        for i, (fa, va, aa) in enumerate(members):
            for fb, vb, ab in members[i + 1:]:
                hit = classify_pair(va, vb)
                if hit is not None:
                    reason, confidence, evidence = hit
                    evidence = {**evidence, "actors": [aa, ab]}
                    out.append(Finding(reason, entity, key, [fa, fb], [va, vb], confidence, evidence))
    return out


def actor_flip_flops(db: apsw.Connection, tenant: str = "default", window_ns: int = DEFAULT_WINDOW_NS) -> list[Finding]:
    """Version-chain steps where a different actor replaced the value within `window_ns`."""
    if isinstance(window_ns, bool) or not isinstance(window_ns, int) or window_ns < 0:
        raise InvalidInput(f"window must be a non-negative duration, got {window_ns!r}")
    out: list[Finding] = []
    previous_step: dict[tuple[str, str], tuple] = {}
    for row in db.execute(_TRANSITIONS_SQL, (tenant,)):
        entity, key, pid, pactor, pvalue, pat, pver, fid, factor, fvalue, fat, fver = row
        chain = (entity, key)
        earlier = previous_step.get(chain)
        previous_step[chain] = row
        if pactor == factor or fat - pat > window_ns or normalise(pvalue) == normalise(fvalue):
            continue
        reverted = earlier is not None and earlier[7] == pid and earlier[3] == factor \
            and normalise(earlier[4]) == normalise(fvalue)
        change = classify_pair(pvalue, fvalue)
        confidence = 0.95 if reverted else (0.8 if change is not None else 0.6)
        evidence = {"actors": [pactor, factor], "versions": [pver, fver], "seconds_apart": (fat - pat) / 1e9,
                    "reverted_to_earlier_value": reverted, "change": change[0] if change else "value_changed"}
        out.append(Finding("actor_flip_flop", entity, key, [pid, fid], [pvalue, fvalue], confidence, evidence))
    return out


def disagreements(db: apsw.Connection, tenant: str = "default", window_ns: int = DEFAULT_WINDOW_NS,
                  reasons: Optional[set[str]] = None) -> list[Finding]:
    """Every beyond-Crux finding of the tenant (optionally only some reasons), by entity, key."""
    wanted = set(REASONS) if reasons is None else reasons
    unknown = wanted - set(REASONS)
    if unknown:
        raise InvalidInput(f"unknown reason(s) {', '.join(sorted(unknown))} (expected {', '.join(REASONS)})")
    found: list[Finding] = []
    if wanted & {"numeric_disagreement", "phrase_polarity"}:
        found += [f for f in live_disagreements(db, tenant) if f.reason in wanted]
    if "actor_flip_flop" in wanted:
        found += actor_flip_flops(db, tenant, window_ns)
    return sorted(found, key=lambda f: (f.entity, f.key, f.reason, f.fact_ids))


def _line(f: Finding) -> str:
    pair = " vs ".join(f"{fid} {value!r}" for fid, value in zip(f.fact_ids, f.values))
    actors = [a for a in f.evidence.get("actors", []) if a]
    who = f"; actors {', '.join(actors)}" if actors else ""
    return f"{f.reason} [{f.entity}] {f.key}: {pair} (confidence {f.confidence:.2f}{who})"


def memory_disagreements(db: apsw.Connection, tenant: str, token_budget: int, limit: int,
                         reasons: Optional[set[str]] = None, window_ns: int = DEFAULT_WINDOW_NS) -> dict[str, Any]:
    """The `memory_disagreements` tool result (cruxsql's): one line per finding with its reason, facts,
    values and confidence, and in the structured content the findings with their evidence. The whole
    answer (both channels and the MCP result around them) fits `token_budget`: findings past it are
    pointers (reason, entity, key, fact ids) as far as they fit, the rest only counted (`left_out`), and
    the text says so. Only public live facts are read, so the answer
    is the same for every caller."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise InvalidInput(f"limit must be a non-negative integer, got {limit!r}")
    if isinstance(token_budget, bool) or not isinstance(token_budget, int) or token_budget < 0:
        raise InvalidInput(f"token_budget must be a non-negative integer, got {token_budget!r}")
    found = disagreements(db, tenant, window_ns, reasons)
    listed = found[:limit] if limit else found

    def answer(k: int, p: int) -> tuple[str, dict[str, Any]]:
        """k findings in full, then p pointers; the rest counted."""
        pointers = [{"reason": f.reason, "entity": f.entity, "key": f.key, "fact_ids": f.fact_ids}
                    for f in listed[k:k + p]]
        left_out = len(found) - k - p
        lines = [_line(f) for f in listed[:k]]
        if pointers:
            lines.append(f"+{len(pointers)} more as pointers in the structured content (ask with a larger "
                         "token_budget or a narrower reason)")
        if left_out:
            lines.append(f"-- {left_out} more left out (token_budget={token_budget}, limit={limit})")
        text = "\n".join(lines) if lines else "no disagreements (numeric, phrase polarity or actor flip-flops)"
        return text, {"findings": [f.to_dict() for f in listed[:k]], "pointers": pointers, "count": len(found),
                      "left_out": left_out}

    def cost(k: int, p: int) -> int:
        text, structured = answer(k, p)  # as an MCP result carries it to the agent
        return estimate_tokens({"content": [{"type": "text", "text": text}], "structuredContent": structured,
                                "isError": False, "resultType": "complete"})

    full = largest_within(len(listed), lambda k: cost(k, 0), token_budget)
    shown = largest_within(len(listed) - full, lambda p: cost(full, p), token_budget)
    text, structured = answer(full, shown)
    return {"content": [{"type": "text", "text": text}], "structuredContent": structured}
