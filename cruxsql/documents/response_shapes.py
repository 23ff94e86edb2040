"""Response shapes of the segment lane: query, query_scan, query_expand (crates/crux-mcp/src/tools/query.rs).

Features return plain dicts with Crux's field names and key order; surfaces serialise them. The legacy
inner payloads are built first; the CRC-v1 envelope (the default contract) is derived from them exactly
as Crux's `wrap_query` / `wrap_scan` / `wrap_expand` do.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

from .bm25 import Bm25Hit, Bm25SearchResult, Coverage, result_id
from .dense import Ranking

POINTER_TOKENS = 40
SUMMARY_TOKENS = 150
SOURCE_LABEL = "local_tenant_index"
SCORE_SPACE = "bm25_lexical"
SCORE_MERGE_RULE = "single_score_space"
MIXED_PROFILE_MERGE_RULE = "rank_fusion_or_single_profile_rerank_required"
CRC_V1_SCHEMA = "https://cuecrux.com/contracts/crc-v1.schema.json"
LEGACY_CONTRACTS = frozenset({"legacy", "v0", "none", "off"})
COVERAGE_STYLES = ("missing_tokens", "gaps")
EMPTY_INDEX_QUERY = "index is empty \u2014 ingest data first"
EMPTY_INDEX_SCAN = "index is empty"
# `wrap_query` / `wrap_scan`: a literal template telling the agent how to call expand, not filled ids.
NEXT_EXPAND = 'query_expand {result_ids:["<seg>:<doc>"...]}'


@dataclass(frozen=True)
class ExpandedChunk:
    """A chunk resolved from a result id: Crux's pointer metadata plus the text and where it came from."""

    segment_index: int
    segment_seq: int
    doc_id: int
    frame_offset: int
    token_count: int
    tenant_id: str
    corpus_id: str
    document_id: str
    chunk_id: str
    text: str


@dataclass(frozen=True)
class ExpandError:
    result_id: str
    error: str
    error_kind: str


def contract_is_crc_v1(contract: Optional[str]) -> bool:
    """CRC-v1 unless the caller asked for `legacy`, `v0`, `none` or `off` (trimmed, any case)."""
    return contract is None or contract.strip().lower() not in LEGACY_CONTRACTS


def pointers_within_budget(budget: int) -> int:
    """How many pointers a token budget buys at 40 tokens each (at least one)."""
    return max(1, budget // POINTER_TOKENS)


def scan_within_budget(hits: Sequence[Bm25Hit], budget: Optional[int]) -> tuple[list[Bm25Hit], int, bool]:
    """query_scan's whole-document charge: (hits kept, tokens_returned, budget_truncated); always ≥ 1 hit."""
    kept: list[Bm25Hit] = []
    used = 0
    for hit in hits:
        if budget is not None and kept and used + hit.doc_length_tokens > budget:
            return kept, used, True
        kept.append(hit)
        used += hit.doc_length_tokens
    return kept, used, False


def gaps(missing_tokens: Sequence[str]) -> list[dict[str, Any]]:
    """The HTTP text-search coverage shape: one gap per missing word, in order, duplicates kept."""
    return [
        {"query_terms": [word], "match_quality": "none", "suggestion": f"No documents in corpus contain '{word}'"}
        for word in missing_tokens
    ]


def coverage_json(coverage: Coverage, style: str = "missing_tokens") -> dict[str, Any]:
    if style == "gaps":
        return {"score": coverage.score, "gaps": gaps(coverage.missing_tokens), "below_floor": coverage.below_floor}
    return {"score": coverage.score, "missing_tokens": list(coverage.missing_tokens),
            "below_floor": coverage.below_floor}


def _hit_json(hit: Bm25Hit, rank: int, ranking: Ranking = Ranking()) -> dict[str, Any]:
    return {
        "result_id": hit.result_id, "rank": rank, "score": hit.score, "source_label": SOURCE_LABEL,
        "score_space": ranking.score_space, "semantic_profile_id": None,
        "local_semantic_profile_id": ranking.profile.profile_id if ranking.profile else None,
        "segment_index": hit.segment_index, "doc_id": hit.doc_id, "doc_length_tokens": hit.doc_length_tokens,
    }


def profile_meta(ranking: Ranking = Ranking()) -> dict[str, Any]:
    """The node embedder's profile fields of a response's meta (null without an embedder)."""
    profile = ranking.profile
    return {"semantic_profile_id": None, "local_semantic_profile_id": profile.profile_id if profile else None,
            "local_semantic_profile": profile.to_json() if profile else None,
            "embedding_fingerprint": profile.fingerprint_json() if profile else None}



def provenance(hits: Sequence[Bm25Hit]) -> dict[str, int]:
    """Tally over the distinct segments of the returned hits; every cruxsql segment is locally ingested."""
    contributing = len({hit.segment_index for hit in hits})
    return {"contributing_segments": contributing, "platform": 0, "local": contributing, "invalid": 0, "none": 0}


def legacy_within_budget(hits: Sequence[Bm25Hit], budget: int) -> list[Bm25Hit]:
    """The unshaped budget drop (holdout control arm): hits while the running sum of their whole-document
    tokens stays within the budget, stopping at the first overflow (possibly no hit at all)."""
    kept: list[Bm25Hit] = []
    used = 0
    for hit in hits:
        used += hit.doc_length_tokens
        if used > budget:
            break
        kept.append(hit)
    return kept


def query_payload(result: Bm25SearchResult, token_budget: Optional[int] = None,
                  coverage_style: str = "missing_tokens", shaped: bool = True,
                  ranking: Ranking = Ranking()) -> dict[str, Any]:
    """The legacy `query` payload; a token budget keeps `max(1, budget // 40)` pointers (shaped), or
    applies the legacy drop (`shaped=False`, the savings holdout's control arm).

    `ranking` labels the scores (`bm25_lexical`, or `bm25_dense_fused` after the dense re-rank); dense
    segments left out for another embedding profile are listed in `meta.dense_segments_skipped`.
    """
    if token_budget is None:
        hits = result.hits
    elif shaped:
        hits = result.hits[: pointers_within_budget(token_budget)]
    else:
        hits = legacy_within_budget(result.hits, token_budget)
    skipped = {"dense_segments_skipped": list(ranking.segments_skipped)} if ranking.segments_skipped else {}
    return {
        "results": [_hit_json(hit, rank, ranking) for rank, hit in enumerate(hits, start=1)],
        "total_candidates": result.total_candidates,
        "coverage": coverage_json(result.coverage, coverage_style),
        "meta": {
            "source_label": SOURCE_LABEL, "provenance": provenance(hits), "score_space": ranking.score_space,
            "score_merge_rule": ranking.score_merge_rule, "mixed_profile_merge_rule": MIXED_PROFILE_MERGE_RULE,
            **profile_meta(ranking), **skipped,
        },
    }


def scan_payload(result: Bm25SearchResult, token_budget: Optional[int] = None) -> dict[str, Any]:
    """The legacy `query_scan` payload: whole-document token charge, no coverage."""
    hits, tokens_returned, truncated = scan_within_budget(result.hits, token_budget)
    return {
        "scan": [_hit_json(hit, rank) for rank, hit in enumerate(hits, start=1)],
        "total_candidates": result.total_candidates,
        "tokens_returned": tokens_returned,
        "budget_truncated": truncated,
        "meta": {"source_label": SOURCE_LABEL, "score_space": SCORE_SPACE, "score_merge_rule": SCORE_MERGE_RULE,
                 "mixed_profile_merge_rule": MIXED_PROFILE_MERGE_RULE, **profile_meta()},
    }


def expand_payload(chunks: Sequence[ExpandedChunk], errors: Sequence[ExpandError]) -> dict[str, Any]:
    """The legacy `query_expand` payload, with each chunk's text (Crux returns metadata only)."""
    payload: dict[str, Any] = {
        "chunks": [
            {"segment_index": c.segment_index, "doc_id": c.doc_id, "source_label": SOURCE_LABEL,
             "score_space": SCORE_SPACE, "semantic_profile_id": None, "local_semantic_profile_id": None,
             "frame_offset": c.frame_offset, "token_count": c.token_count, "segment_seq": c.segment_seq,
             "tenant_id": c.tenant_id, "corpus_id": c.corpus_id, "document_id": c.document_id,
             "chunk_id": c.chunk_id, "text": c.text}
            for c in chunks
        ],
        "tokens_loaded": sum(c.token_count for c in chunks),
        "meta": {"source_label": SOURCE_LABEL, "score_space": SCORE_SPACE, **profile_meta()},
    }
    if errors:
        payload["errors"] = [{"result_id": e.result_id, "error": e.error, "error_kind": e.error_kind} for e in errors]
    return payload


def _swap_remove(obj: dict[str, Any], key: str) -> Any:
    """serde_json `Map::remove` under `preserve_order` (IndexMap::swap_remove): the last key takes its place."""
    keys = list(obj)
    if key not in obj:
        return None
    index = keys.index(key)
    value = obj[key]
    last = keys[-1]
    if last != key:
        keys[index] = last
    keys.pop()
    items = {k: obj[k] for k in keys}
    obj.clear()
    obj.update(items)
    return value


def _unsigned(value: Any) -> Optional[int]:
    """serde_json `Value::as_u64`: a non-negative integer (not a bool), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _pointer_id(hit: dict[str, Any]) -> Optional[str]:
    """`hit_to_pointer`'s id: `result_id` if it is a string, else `"{segment_index}:{doc_id}"` when both
    are unsigned integers, else None (the hit gets no pointer, and nothing raises)."""
    if isinstance(hit.get("result_id"), str):
        return hit["result_id"]
    seg, doc = _unsigned(hit.get("segment_index")), _unsigned(hit.get("doc_id"))
    return None if seg is None or doc is None else result_id(seg, doc)


def wrap_crc_v1(inner: dict[str, Any], kind: str) -> dict[str, Any]:
    """The CRC-v1 envelope of a legacy payload; `kind` is `search` (query, scan) or `addressed` (expand)."""
    body = dict(inner)
    hits: list[dict[str, Any]] = []
    for array_key in ("results", "scan", "chunks"):
        if array_key in body:
            hits = _swap_remove(body, array_key)
            break
    meta = dict(_swap_remove(body, "meta") or {})
    for key, value in body.items():
        meta.setdefault(key, value)
    meta.setdefault("score_space", SCORE_SPACE)
    pointed = [(pid, hit) for hit in hits if (pid := _pointer_id(hit)) is not None]
    pointers = [{"id": pid, "score": hit.get("score")} for pid, hit in pointed]
    full = sum(_unsigned(hit.get("doc_length_tokens", hit.get("token_count"))) or 0 for hit in hits)
    search = kind == "search"
    # cruxsql's expand returns text: it travels as `content` (the fact envelope's shape), tier `full`.
    content = [{"id": pid, "text": hit["text"]} for pid, hit in pointed if "text" in hit]
    envelope: dict[str, Any] = {
        "contract": "crc-v1",
        "kind": kind,
        "hydrate_tier": "full" if content else "pointer",
        "pointers": pointers,
    }
    if content:
        envelope["content"] = content
    return {
        **envelope,
        "cost_estimate": {"pointer": POINTER_TOKENS * len(pointers), "summary": SUMMARY_TOKENS * len(pointers),
                          "full": full},
        "agent_decision": {
            "load_bearing_lane": "Bm25", "fused_confidence": None, "suggested_next_lane": "None",
            "lane_attribution": {"bm25": {"share": 1.0, "confidence": None}}, "read_pointers": [],
        } if search else None,
        "envelope": {"freshness": None, "receipts_used": [], "memories_used": [],
                     "autonomy_consumed": {"capability": "retrieve:read", "cost_credits": 0, "scope": "agent"},
                     "links": {}},
        "next": {"expand": NEXT_EXPAND if search else None, "resolution_pointer": None},
        "meta": meta,
    }


# What an agent acts on in a budgeted `query` answer; the rest of Crux's meta (the embedding profile
# twice over, provenance tallies, merge-rule labels) is dropped under a budget.
LEAN_META = ("total_candidates", "coverage", "score_space", "local_semantic_profile_id", "dense_segments_skipped")


def _text_tokens(value: Any) -> int:
    """chars/4 of the compact JSON text, as the agent receives it (Crux's estimator)."""
    return max(1, len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")) // 4)


def budgeted_search(envelope: dict[str, Any], best_text: Optional[str], budget: int,
                    cost: Callable[[dict[str, Any]], int] = _text_tokens) -> dict[str, Any]:
    """A CRC-v1 search envelope that fits `budget` tokens, envelope included (cruxsql's; Crux spends
    ~485 tokens of envelope under any budget and returns no text): the best hit's text as `content`
    (cut to fit, `truncated` said so), the other hits as pointers while they fit, and only the meta an
    agent acts on. The first pointer always stays. `cost` prices an answer (default: its JSON text)."""
    meta = {k: v for k, v in envelope.get("meta", {}).items() if k in LEAN_META}
    pointers = envelope["pointers"]

    def answer(n: int, text: Optional[str]) -> dict[str, Any]:
        out: dict[str, Any] = {"contract": envelope["contract"], "kind": envelope["kind"],
                               "hydrate_tier": "mixed" if text is not None else "pointer", "pointers": pointers[:n]}
        if text is not None and pointers:
            out["content"] = [{"id": pointers[0]["id"], "text": text,
                               **({"truncated": True} if best_text is not None and len(text) < len(best_text) else {})}]
        out["next"] = envelope["next"]
        out["meta"] = {**meta, "left_out": max(0, meta.get("total_candidates", len(pointers)) - n)}
        return out

    def fits(n: int, text: Optional[str]) -> bool:
        return cost(answer(n, text)) <= budget

    if best_text is None or not pointers or not fits(1, ""):
        best_text = None
        kept = max((n for n in range(1, len(pointers) + 1) if fits(n, None)), default=1)
        return answer(kept, None)
    lo, hi = 0, len(best_text)                 # the longest prefix of the best text that fits
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if fits(1, best_text[:mid]) else (lo, mid - 1)
    text = best_text[:lo]
    kept = max((n for n in range(1, len(pointers) + 1) if fits(n, text)), default=1)
    return answer(kept, text)
