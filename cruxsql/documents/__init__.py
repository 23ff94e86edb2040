"""The document (segment) lane: chunking, analyzer, sealed segments, postings, BM25, query/scan/expand.

    import cruxsql
    from cruxsql.documents import ChunkInput, DocumentInput, DocumentLane

    with cruxsql.open("./cruxsql-data") as store:
        lane = DocumentLane(store)
        lane.ingest([DocumentInput("notes.md", [ChunkInput("notes.md#0", "Terraform drift runs nightly")])])
        envelope = lane.query("terraform drift", tenant="default", token_budget=400)   # CRC-v1 pointers
        chunks, errors = lane.expand([p["id"] for p in envelope["pointers"]], tenant="default")

Modules: `chunking` (Crux's 1800/1200/180 chunker), `analyzer` (tokenizer v1 and stemmer), `segments`
(sealed JSONL segment files and the BLAKE3 manifest), `postings` (per-segment postings blobs), `bm25`
(f32 scoring, coverage), `response_shapes` (MCP/HTTP response shapes, budgets, CRC-v1), `sources` (files,
folders and JSONL requests), `dense` (vector sidecars, dense index, Crux's re-rank), `fusion` (fused
retrieval and RRF), `graph` (links, entity matches, graph boost), `lane` (the `DocumentLane` facade), `verify`
(manifest, files and view agree).

Behind the facade: `ingest` (requests sealed into a new segment), `sidecars` (a segment's `.ccxv`/`.ccxp`),
`segment_view` (one segment in or out of the view's tables), `manifest_sync` (the view follows the
manifest; rebuild), `tenant_erasure` (segments rewritten without a tenant), `corpus_cache` (the cached
corpus statistics and dense index), `retrieval` (BM25, dense re-rank, fused), `expand` (result ids to
chunks), `query_tools` (each MCP query tool's payload), `tenants` (one concrete tenant per call), `replica`
(the fleet's copy in cluster mode).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy_exports import lazy_attributes

_EXPORTS = {"ChunkInput": "lane", "DocumentInput": "lane", "DocumentLane": "lane", "IngestReport": "lane", "SegmentSummary": "lane"}   # name -> module, imported on first use
__all__ = ['ChunkInput', 'DocumentInput', 'DocumentLane', 'IngestReport', 'SegmentSummary']

__getattr__ = lazy_attributes(__name__, _EXPORTS)


if TYPE_CHECKING:
    from .lane import ChunkInput, DocumentInput, DocumentLane, IngestReport, SegmentSummary
