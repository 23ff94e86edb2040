"""`DocumentLane`: the segment lane's API over a Store (ingest, search, expand, rebuild, verify, erase).

Files are the truth: a sealed segment file is written and listed in MANIFEST.json before the view sees
it, and the view's document tables can always be rebuilt from the manifest. Opening a lane brings the
view up to date with the manifest (after a crash, or after cruxsql.db was deleted). The lane holds
the store's writer lock around every write, and the corpus cache of its reads; the work itself lives in
`ingest`, `manifest_sync`, `segment_view`, `sidecars`, `tenant_erasure`, `retrieval`, `expand` and
`query_tools`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Sequence, Union

from ..embeddings import Embedder, configured_embedder
from ..facts.store import Progress, Store
from . import manifest_sync, query_tools, retrieval, tenant_erasure, verify
from .bm25 import Bm25SearchResult
from .corpus_cache import CorpusCache
from .dense import Ranking
from .expand import expand
from .fusion import FusedResult, FusionWeights
from .ingest import DEFAULT_CORPUS, ChunkInput, DocumentInput, IngestReport, seal_new_chunks, validate
from .replica import ReplicaMoved, SegmentReplica
from .response_shapes import ExpandedChunk, ExpandError
from .segment_view import SegmentSummary, index_into_view, summaries
from .segments import SegmentError, segments_dir
from .tenants import DEFAULT_TENANT, concrete_tenant

__all__ = ["DEFAULT_CORPUS", "DEFAULT_TENANT", "ChunkInput", "DocumentInput", "DocumentLane", "IngestReport",
           "SegmentSummary"]

_CONFIGURED: Any = object()
MAX_REPLICA_ATTEMPTS = 20  # cluster mode: seals lost to another node's before giving up


class DocumentLane:
    """The document lane of one store. Holds a cache of the corpus statistics, refreshed when segments change."""

    def __init__(self, store: Store, embedder: Optional[Embedder] = _CONFIGURED) -> None:
        """`embedder`: the one `CRUXSQL_EMBEDDER` names unless given; None turns the dense lane off."""
        self._store = store
        self.embedder: Optional[Embedder] = configured_embedder() if embedder is _CONFIGURED \
            else embedder
        self._db = store.db
        self._dir: Path = segments_dir(Path(store.data_dir))
        self._cache = CorpusCache(self._db, self._dir)
        self._replica: Optional[SegmentReplica] = getattr(store, "segment_replica", None)
        if self._replica is not None:
            with store.writer_lock():
                self._catch_up()
            return
        try:
            lagging = manifest_sync.view_lags_manifest(self._db, self._dir)
        except SegmentError:
            lagging = False     # an unreadable manifest: searches use the view as it is; verify() reports it
        if lagging:
            with store.writer_lock():
                self._catch_up()

    def _catch_up(self) -> None:
        """The view lists the manifest's (in cluster mode the fleet's) segments; the caller holds the lock."""
        try:
            manifest_sync.catch_up(self._db, self._dir, self._replica)
        finally:
            self._cache.invalidate()

    # ---- writing -------------------------------------------------------------------------------

    def ingest(self, documents: Sequence[DocumentInput], tenant: str = DEFAULT_TENANT,
               corpus: str = DEFAULT_CORPUS, progress: Progress = None) -> IngestReport:
        """Seal the chunks not stored yet into one new segment; re-sent chunk ids are no-ops."""
        tenant = concrete_tenant(tenant)
        validate(documents, corpus)
        corpus = corpus.strip()
        for _ in range(MAX_REPLICA_ATTEMPTS):
            try:
                return self._ingest(documents, tenant, corpus, progress)
            except ReplicaMoved:
                continue    # another node sealed a segment meanwhile: take it, then seal again
        raise ReplicaMoved(f"gave up sealing after {MAX_REPLICA_ATTEMPTS} attempts: other nodes keep ingesting")

    def _ingest(self, documents: Sequence[DocumentInput], tenant: str, corpus: str,
                progress: Progress) -> IngestReport:
        with self._store.writer_lock():
            self._catch_up()
            sealed, report = seal_new_chunks(self._db, self._dir, self.embedder, self._replica, documents, tenant,
                                             corpus)
            if sealed is not None:
                index_into_view(self._db, sealed, progress)
                self._cache.invalidate()
        return report

    def rebuild(self, progress: Progress = None) -> int:
        """Recreate the document tables from the segment files; returns the number of segments indexed."""
        with self._store.writer_lock():
            self._cache.invalidate()
            try:
                return manifest_sync.rebuild(self._db, self._dir, self.embedder, progress)
            finally:
                self._cache.invalidate()

    def erase_tenant(self, tenant: str) -> dict[str, int]:
        """Rewrite every segment holding `tenant`'s chunks without them (new file, old removed)."""
        tenant = concrete_tenant(tenant)
        with self._store.writer_lock():
            self._catch_up()
            counts = tenant_erasure.erase_tenant(self._db, self._dir, self._replica, tenant)
            if counts["segments_rewritten"] or counts["segments_removed"]:
                self._cache.invalidate()
        return counts

    # ---- reading -------------------------------------------------------------------------------

    def search(self, query: str, tenant: Optional[str] = DEFAULT_TENANT, top_k: int = 10,
               min_score: Optional[float] = None, tenant_statistics: bool = False) -> Bm25SearchResult:
        """Crux `bm25_search` over every segment; `tenant=None` searches all tenants (admin).

        `tenant_statistics`: N, avg_dl and df over `tenant`'s documents only (not Crux's global rule),
        for deployments where scores must not reveal other tenants' corpora."""
        return retrieval.search(self._cache, query, tenant, top_k, min_score, tenant_statistics)

    def ranked_search(self, query: str, tenant: str = DEFAULT_TENANT, top_k: int = 10,
                      min_score: Optional[float] = None, dense: bool = True,
                      tenant_statistics: bool = False, rerank_depth: Optional[int] = None
                      ) -> tuple[Bm25SearchResult, Ranking]:
        """BM25 (`search`), then Crux's dense re-rank of the hits when vectors of the configured profile exist.

        Crux re-ranks the `top_k` hits it returns. `rerank_depth` (a cruxsql option) re-ranks the best
        `rerank_depth` BM25 hits instead and keeps the first `top_k`: MiniLM then lifts relevant chunks that
        BM25 ranked just below the cut (SciFact nDCG@10 0.689 at Crux's depth 10, 0.701 at depth 50).
        """
        return retrieval.ranked_search(self._cache, self.embedder, query, tenant, top_k, min_score, dense,
                                       tenant_statistics, rerank_depth)

    def fused_search(self, query: str, tenant: str = DEFAULT_TENANT, top_k: int = 20, mode: str = "weighted",
                     weights: FusionWeights = FusionWeights(),
                     cold_start_threshold: int = retrieval.COLD_START_THRESHOLD, dense: bool = True) -> FusedResult:
        """`fused_retrieve` over the BM25, dense and graph lanes (or RRF with `mode="rrf"`)."""
        return retrieval.fused_search(self._cache, self.embedder, query, tenant, top_k, mode, weights,
                                      cold_start_threshold, dense)

    def total_docs(self) -> int:
        return retrieval.total_docs(self._cache)

    def fused_query(self, query: str, tenant: str = DEFAULT_TENANT, limit: int = 10, mode: str = "weighted",
                    dense: bool = True) -> Union[dict[str, Any], str]:
        """`search --fused` and MCP `query` with `fused`: the fused payload with its per-hit score breakdown
        and the dense lane's profile; a plain message when the index is empty."""
        return query_tools.fused_query(self._cache, self.embedder, query, tenant, limit, mode, dense)

    def query(self, query: str, tenant: str = DEFAULT_TENANT, limit: int = 10, token_budget: Optional[int] = None,
              min_score: Optional[float] = None, contract: Optional[str] = None,
              coverage_style: str = "missing_tokens", tenant_statistics: bool = False,
              shaped: bool = True, dense: bool = True, rerank_depth: Optional[int] = None
              ) -> Union[dict[str, Any], str]:
        """MCP `query`: the CRC-v1 envelope (or legacy payload); a plain message when the index is empty.

        With vectors of the configured embedder's profile (and `dense`), hits are re-ranked 0.7/0.3 (query.rs),
        the first `limit` BM25 hits as Crux does, or the first `rerank_depth` (`ranked_search`).
        """
        return query_tools.query(self._cache, self.embedder, query, tenant, limit, token_budget, min_score, contract,
                             coverage_style, tenant_statistics, shaped, dense, rerank_depth)

    def query_scan(self, query: str, tenant: str = DEFAULT_TENANT, limit: int = 20,
                   token_budget: Optional[int] = None, contract: Optional[str] = None,
                   tenant_statistics: bool = False) -> Union[dict[str, Any], str]:
        """MCP `query_scan`: hits charged at whole-document tokens, stopping at the budget (≥ 1 hit)."""
        return query_tools.query_scan(self._cache, query, tenant, limit, token_budget, contract, tenant_statistics)

    def expand(self, result_ids: Sequence[str], tenant: str = DEFAULT_TENANT
               ) -> tuple[list[ExpandedChunk], list[ExpandError]]:
        """Resolve `"{segment_index}:{doc_id}"` ids to chunks with text, or typed per-id errors."""
        return expand(self._db, self._dir, result_ids, tenant)

    def query_expand(self, result_ids: Sequence[str], tenant: str = DEFAULT_TENANT,
                     contract: Optional[str] = None) -> dict[str, Any]:
        """MCP `query_expand`, returning each chunk's text with its metadata."""
        return query_tools.query_expand(self._cache, result_ids, tenant, contract)

    def segments(self) -> list[SegmentSummary]:
        return summaries(self._db)

    def verify(self) -> list[str]:
        """Problems between manifest, segment files and view; an empty list means consistent."""
        return verify.lane_problems(self._dir, self._db)
