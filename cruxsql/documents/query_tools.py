"""The document lane's MCP query tools: `query`, `query_scan`, `query_expand`, and `fused` queries.

Each returns the tool's payload as Crux shapes it: the CRC-v1 envelope when the contract asks for it,
the legacy payload otherwise, and Crux's plain message (not an empty payload) when the index holds no
chunk. A token budget is never negative; within it, results are cut as `response_shapes.py` describes.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence, Union

from ..embeddings import Embedder
from ..errors import InvalidInput
from .corpus_cache import CorpusCache
from .expand import expand
from .fusion import FusionWeights, fused_payload
from .retrieval import COLD_START_THRESHOLD, fused_search, ranked_search, search, total_docs
from .response_shapes import (
    EMPTY_INDEX_QUERY,
    EMPTY_INDEX_SCAN,
    budgeted_search,
    contract_is_crc_v1,
    expand_payload,
    profile_meta,
    query_payload,
    scan_payload,
    wrap_crc_v1,
)
from .tenants import concrete_tenant


def _check_budget(token_budget: Optional[int]) -> None:
    if token_budget is not None and token_budget < 0:
        raise InvalidInput(f"token budget {token_budget} must not be negative")


def fused_query(cache: CorpusCache, embedder: Optional[Embedder], query: str, tenant: str, limit: int,
                mode: str, dense: bool) -> Union[dict[str, Any], str]:
    """The fused payload with its per-hit score breakdown and the dense lane's profile."""
    if total_docs(cache) == 0:
        return EMPTY_INDEX_QUERY
    ranking = ranked_search(cache, embedder, "", tenant, 0, None, dense, False, None)[1]
    fused = fused_search(cache, embedder, query, tenant, limit, mode, FusionWeights(), COLD_START_THRESHOLD, dense)
    return fused_payload(fused, profile_meta(ranking))


def query(cache: CorpusCache, embedder: Optional[Embedder], query: str, tenant: str, limit: int,
          token_budget: Optional[int], min_score: Optional[float], contract: Optional[str], coverage_style: str,
          tenant_statistics: bool, shaped: bool, dense: bool, rerank_depth: Optional[int]
          ) -> Union[dict[str, Any], str]:
    """MCP `query`: the CRC-v1 envelope (or legacy payload), ranked as `ranked_search` does."""
    tenant = concrete_tenant(tenant)
    _check_budget(token_budget)
    if total_docs(cache) == 0:
        return EMPTY_INDEX_QUERY
    result, ranking = ranked_search(cache, embedder, query, tenant, limit, min_score, dense, tenant_statistics,
                                    rerank_depth)
    inner = query_payload(result, token_budget, coverage_style, shaped, ranking)
    if not contract_is_crc_v1(contract):
        return inner
    envelope = wrap_crc_v1(inner, "search")
    if token_budget is None or not shaped:
        return envelope
    best = expand(cache.db, cache.directory, [envelope["pointers"][0]["id"]], tenant)[0] \
        if envelope["pointers"] else []
    return budgeted_search(envelope, best[0].text if best else None, token_budget)


def query_scan(cache: CorpusCache, query: str, tenant: str, limit: int, token_budget: Optional[int],
               contract: Optional[str], tenant_statistics: bool) -> Union[dict[str, Any], str]:
    """MCP `query_scan`: hits charged at whole-document tokens, stopping at the budget (≥ 1 hit)."""
    tenant = concrete_tenant(tenant)
    _check_budget(token_budget)
    if total_docs(cache) == 0:
        return EMPTY_INDEX_SCAN
    inner = scan_payload(search(cache, query, tenant, limit, None, tenant_statistics), token_budget)
    return wrap_crc_v1(inner, "search") if contract_is_crc_v1(contract) else inner


def query_expand(cache: CorpusCache, result_ids: Sequence[str], tenant: str,
                 contract: Optional[str]) -> dict[str, Any]:
    """MCP `query_expand`, returning each chunk's text with its metadata."""
    inner = expand_payload(*expand(cache.db, cache.directory, result_ids, tenant))
    return wrap_crc_v1(inner, "addressed") if contract_is_crc_v1(contract) else inner
