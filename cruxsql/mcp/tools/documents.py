"""Document tools: query, query_scan, query_expand (crates/crux-mcp/src/tools/query.rs) and ingest_document (cruxsql's).

The tenant is the connection's. Crux takes it from a `tenant_id` argument; here that argument is
optional and, when given, must name the connection's own tenant.
"""

from __future__ import annotations

from typing import Any, Literal, Optional, Union

from ...accounting.holdout import pretty_json
from ...documents.sources import chunk_document
from ...recall.tokens import compact_json
from ...documents.response_shapes import budgeted_search
from ..answer_budget import shaped_within, wire_tokens
from ..arguments import Contract
from ..call import Call
from ..registry import READ, WRITE, ToolError, ToolResult, reads, shape, tool, writes

MAX_INGEST_BYTES = 256 * 1024


def _tenant(call: Call, tenant_id: Optional[str]) -> str:
    if tenant_id is not None and tenant_id.strip() != call.tenant:
        raise ToolError(f"tenant_id {tenant_id!r} is not this connection's tenant")
    return call.tenant


def _answer(call: Call, payload: Union[dict[str, Any], str]) -> ToolResult:
    """Crux answers with the JSON as text only: compact, or pretty in the holdout's control arm."""
    if isinstance(payload, str):
        return ToolResult(payload)
    return ToolResult(pretty_json(payload) if call.control else compact_json(payload), payload=payload)


@tool(kind=READ, hints=reads("Search documents"), core=True, holdout=True)
def query(call: Call, query: str, limit: int = 10, token_budget: Optional[int] = None,
          min_score: Optional[float] = None, contract: Contract = None,
          tenant_id: Optional[str] = None, dense: bool = True, fused: bool = False,
          fusion: Literal["weighted", "rrf"] = "weighted") -> ToolResult:
    """BM25 search (dense re-ranked when vectors exist; fused: all lanes) with pointers and coverage."""
    if limit < 0:
        raise ToolError(f"limit {limit} must not be negative")
    if fused:
        return _answer(call, call.lane.fused_query(query, _tenant(call, tenant_id), limit, fusion, dense))
    tenant, budget = _tenant(call, tenant_id), call.budget(token_budget)

    def answer(shaped_to: Optional[int]) -> ToolResult:
        return _answer(call, call.lane.query(query, tenant, limit, shaped_to, min_score, contract,
                                             shaped=not call.control, dense=dense))
    if budget is None or call.control:
        return answer(budget)
    return shaped_within(budget, answer)  # the lean envelope's JSON fits; so does the whole answer


@tool(kind=READ, hints=reads("Scan documents"), holdout=True)
def query_scan(call: Call, query: str, limit: int = 20, token_budget: Optional[int] = None,
               contract: Contract = None, tenant_id: Optional[str] = None) -> ToolResult:
    """BM25 search charging whole documents against token_budget; says when the budget cut it."""
    if limit < 0:
        raise ToolError(f"limit {limit} must not be negative")
    budget = call.budget(token_budget)
    payload = call.lane.query_scan(query, _tenant(call, tenant_id), limit, budget, contract)
    answer = _answer(call, payload)
    if budget is None or call.control or not isinstance(payload, dict) or payload.get("contract") != "crc-v1" \
            or wire_tokens(answer) <= budget:
        return answer
    # Crux charges the hits' documents, not its envelope: past the budget, `query`'s lean envelope
    return _answer(call, budgeted_search(payload, None, budget, lambda lean: wire_tokens(_answer(call, lean))))


@tool(kind=READ, hints=reads("Read search results"), core=True, holdout=True)
def query_expand(call: Call, result_ids: list[str], contract: Contract = None,
                 tenant_id: Optional[str] = None) -> ToolResult:
    """The text of search results by result_id ("segment:doc")."""
    return _answer(call, call.lane.query_expand(result_ids, _tenant(call, tenant_id), contract))


@tool(kind=WRITE, hints=writes("Ingest a document", destructive=False, idempotent=True),
      output=shape(ingested="integer", documents="integer", frame_count="integer", duplicates="integer",
                   sealed="boolean", segment_seq="integer?", segment_id="string?", file_name="string?",
                   blake3="string?"))   # no segment fields when every chunk was a duplicate
def ingest_document(call: Call, doc_id: str, text: str, markdown: bool = True) -> ToolResult:
    """Add a note or document (at most 256 KiB) to the searchable documents."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_INGEST_BYTES:
        raise ToolError(f"`text` is {size} bytes; the limit is {MAX_INGEST_BYTES}")
    report = call.lane.ingest([chunk_document(doc_id, text, markdown)], tenant=call.tenant)
    fields = report.to_json()
    return ToolResult(f"ingested {report.ingested} chunk(s) of {doc_id} ({report.duplicates} already stored)", fields)
