"""`DocumentLane`: the segment lane's API over a Store (ingest, search, expand, rebuild, verify, erase).

Files are the truth: a sealed segment file is written and listed in MANIFEST.json before the view sees
it, and the view's document tables can always be rebuilt from the manifest. Opening a lane brings the
view up to date with the manifest (after a crash, or after cruxsql.db was deleted).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence, Union

import apsw
import numpy as np

from ..embeddings import Embedder, SemanticProfile, configured_embedder, read_ccxv
from ..errors import InvalidInput
from ..facts import timestamps
from . import verify
from .bm25 import Bm25Corpus, Bm25SearchResult, SegmentDocs
from .dense import (
    MERGE_WEIGHTED_LINEAR,
    SCORE_SPACE_DENSE_FUSED,
    DenseIndex,
    Ranking,
    VectorSidecar,
    dense_rerank,
    describe_sidecar,
    sidecar_bytes,
)
from .fusion import FUSION_MODES, FusedResult, FusionWeights, Lanes, fuse, fused_payload
from .graph import DocumentGraph, document_links
from .postings import QueryPostings, decode_array, encode_array, index_segment, postings_rows
from .replica import ReplicaMoved, SegmentReplica
from .search import (
    EMPTY_INDEX_QUERY,
    EMPTY_INDEX_SCAN,
    ExpandedChunk,
    ExpandError,
    budgeted_search,
    contract_is_crc_v1,
    expand_payload,
    profile_meta,
    query_payload,
    scan_payload,
    wrap_crc_v1,
)
from .segments import (
    ChunkRecord,
    Manifest,
    SealedSegment,
    SegmentError,
    SegmentInfo,
    load_manifest,
    read_record,
    read_segment,
    remove_segment_file,
    save_manifest,
    segment_files,
    segments_dir,
    stray_files,
    write_segment,
    write_sidecar,
)

Progress = Optional[Callable[[int, int], None]]
_CONFIGURED: Any = object()

# Children first, so a DELETE never leaves a row pointing at a removed segment.
_VIEW_TABLES = ("document_links", "document_vectors", "document_postings", "document_chunks", "document_segments")
DEFAULT_TENANT = "default"
DEFAULT_CORPUS = "default"
BM25_DEPTH = 200          # fused search: how deep BM25 scores are looked up for the other lanes' candidates
MAX_DOCUMENTS = 4096
MAX_CHUNKS = 65_536
MAX_TEXT_BYTES = 4 * 1024 * 1024
TENANT_CORPORA = 8  # tenant-statistics corpora kept at once
MAX_REPLICA_ATTEMPTS = 20  # cluster mode: seals lost to another node's before giving up


@dataclass(frozen=True)
class ChunkInput:
    chunk_id: str
    text: str


@dataclass(frozen=True)
class DocumentInput:
    """One document of an ingest request, already chunked (Crux's local-ingest shape)."""

    doc_id: str
    chunks: Sequence[ChunkInput]


@dataclass(frozen=True)
class IngestReport:
    """Outcome of one ingest call (Crux's local-ingest response fields, plus cruxsql's)."""

    ingested: int
    duplicates: int
    documents: int
    sealed: bool
    segment_seq: Optional[int]
    segment_id: Optional[str]
    file_name: Optional[str]
    blake3: Optional[str]

    def to_json(self) -> dict[str, Any]:
        return {"ingested": self.ingested, "documents": self.documents, "frame_count": self.ingested,
                "duplicates": self.duplicates, "sealed": self.sealed, "segment_seq": self.segment_seq,
                "segment_id": self.segment_id, "file_name": self.file_name, "blake3": self.blake3}


@dataclass(frozen=True)
class SegmentSummary:
    """A live segment as `segments list` shows it; `segment_index` is its position in seq order."""

    segment_index: int
    segment_seq: int
    segment_id: str
    file_name: str
    chunk_count: int
    total_tokens: int
    byte_size: int
    blake3: str
    sealed_at: str
    tenants: str
    """The tenants whose chunks the segment holds, comma-separated in order."""


def _tenant(tenant: str) -> str:
    name = tenant.strip()
    if not name or name == "*":
        raise InvalidInput(f"tenant {tenant!r} must name one concrete tenant")
    return name


def _validate(documents: Sequence[DocumentInput], corpus: str) -> None:
    if not corpus.strip():
        raise InvalidInput("corpus_id must not be empty")
    if not documents:
        raise InvalidInput("documents must not be empty")
    if len(documents) > MAX_DOCUMENTS:
        raise InvalidInput(f"{len(documents)} documents in one ingest; at most {MAX_DOCUMENTS}")
    total = 0
    for document in documents:
        if not document.doc_id:
            raise InvalidInput("doc_id must not be empty")
        if not document.chunks:
            raise InvalidInput(f"document {document.doc_id!r} has no chunks")
        for chunk in document.chunks:
            if not chunk.chunk_id:
                raise InvalidInput(f"document {document.doc_id!r}: chunk_id must not be empty")
            if not chunk.text.strip():
                raise InvalidInput(f"chunk {chunk.chunk_id!r}: text must not be empty")
            if len(chunk.text.encode("utf-8")) > MAX_TEXT_BYTES:
                raise InvalidInput(f"chunk {chunk.chunk_id!r}: text exceeds {MAX_TEXT_BYTES} bytes")
        total += len(document.chunks)
    if total > MAX_CHUNKS:
        raise InvalidInput(f"{total} chunks in one ingest; at most {MAX_CHUNKS}")


class DocumentLane:
    """The document lane of one store. Holds a cache of the corpus statistics, refreshed when segments change."""

    def __init__(self, store: Any, embedder: Optional[Embedder] = _CONFIGURED) -> None:
        """`embedder`: the one `CRUXSQL_EMBEDDER` names unless given; None turns the dense lane off."""
        self._store = store
        self.embedder: Optional[Embedder] = configured_embedder() if embedder is _CONFIGURED else embedder
        self._dense: Optional[tuple[tuple, DenseIndex, tuple[str, ...]]] = None
        self._db: apsw.Connection = store.db
        self._dir: Path = segments_dir(Path(store.data_dir))
        self._corpus: Optional[tuple[tuple, Bm25Corpus]] = None
        self._tenant_corpora: dict[str, tuple[tuple, Bm25Corpus]] = {}  # --tenant-statistics, per tenant
        self._replica: Optional[SegmentReplica] = getattr(store, "segment_replica", None)
        if self._replica is not None:
            with store.writer_lock():
                self._catch_up()
            return
        try:
            lagging = self._view_lags_manifest()
        except SegmentError:
            lagging = False     # an unreadable manifest: searches use the view as it is; verify() reports it
        if lagging:
            with store.writer_lock():
                self._sync()

    def _catch_up(self) -> None:
        """Make the view list the manifest's segments, in cluster mode after taking the fleet's manifest
        and files (the caller holds the writer lock)."""
        if self._replica is None:
            self._sync()
            return
        try:
            dropped = self._replica.pull(self._dir)
        finally:
            self._sync()
        if dropped:
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")   # the dropped rows' WAL frames

    # ---- writing -------------------------------------------------------------------------------

    def ingest(self, documents: Sequence[DocumentInput], tenant: str = DEFAULT_TENANT,
               corpus: str = DEFAULT_CORPUS, progress: Progress = None) -> IngestReport:
        """Seal the chunks not stored yet into one new segment; re-sent chunk ids are no-ops."""
        tenant = _tenant(tenant)
        _validate(documents, corpus)
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
            now = timestamps.format_event_time(time.time_ns())
            records: list[ChunkRecord] = []
            seen = self._stored_chunk_ids(tenant, corpus, [c.chunk_id for d in documents for c in d.chunks])
            duplicates = 0
            for document in documents:
                for chunk in document.chunks:
                    if chunk.chunk_id in seen:
                        duplicates += 1
                        continue
                    seen.add(chunk.chunk_id)
                    records.append(ChunkRecord(tenant, corpus, document.doc_id, chunk.chunk_id, chunk.text, now))
            if not records:
                return IngestReport(0, duplicates, len(documents), False, None, None, None, None)
            manifest = load_manifest(self._dir)
            sealed = self._with_vectors(write_segment(self._dir, manifest.next_seq, now, records))
            sealed_manifest = Manifest(manifest.next_seq + 1, [*manifest.segments, sealed.info])
            if self._replica is not None:
                try:
                    self._replica.push(self._dir, sealed_manifest, [sealed.info], [])
                except ReplicaMoved:
                    for name in segment_files(sealed.info):
                        remove_segment_file(self._dir, name)
                    raise
            save_manifest(self._dir, sealed_manifest)
            self._apply(sealed, progress)
        info = sealed.info
        return IngestReport(len(records), duplicates, len(documents), True, info.segment_seq, info.segment_id,
                            info.file_name, info.blake3)

    def rebuild(self, progress: Progress = None) -> int:
        """Recreate the document tables from the segment files; returns the number of segments indexed."""
        with self._store.writer_lock():
            manifest = load_manifest(self._dir)
            problems = [problem for info in manifest.segments if (problem := verify.check_file(self._dir, info))]
            if problems:
                raise SegmentError("; ".join(problems))
            with self._db:
                for table in _VIEW_TABLES:
                    self._db.execute(f"DELETE FROM {table}")
            self._corpus = None
            total = sum(info.chunk_count for info in manifest.segments)
            done = 0
            embedded: list[SegmentInfo] = []
            for info in manifest.segments:
                sealed = read_segment(self._dir, info)
                if info.vectors is None and self.embedder is not None:
                    sealed = self._with_vectors(sealed)     # sealed before vectors existed: embed it now
                embedded.append(sealed.info)
                self._apply(sealed, None)
                done += info.chunk_count
                if progress:
                    progress(done, total)
            if embedded != manifest.segments:
                save_manifest(self._dir, Manifest(manifest.next_seq, embedded))
            return len(manifest.segments)

    def erase_tenant(self, tenant: str) -> dict[str, int]:
        """Rewrite every segment holding `tenant`'s chunks without them (new file, old removed)."""
        tenant = _tenant(tenant)
        counts = {"segments_rewritten": 0, "segments_removed": 0, "chunks_erased": 0}
        with self._store.writer_lock():
            self._catch_up()
            manifest = load_manifest(self._dir)
            affected = {row[0] for row in self._db.execute(
                "SELECT DISTINCT segment_seq FROM document_chunks WHERE tenant_id = ?", (tenant,))}
            kept: list[SegmentInfo] = []
            replaced: list[tuple[SegmentInfo, Optional[SealedSegment]]] = []
            for info in manifest.segments:
                if info.segment_seq not in affected:
                    kept.append(info)
                    continue
                old = read_segment(self._dir, info)
                keep = [i for i, r in enumerate(old.records) if r.tenant_id != tenant]
                survivors = [old.records[i] for i in keep]
                counts["chunks_erased"] += len(old.records) - len(survivors)
                new = write_segment(self._dir, info.segment_seq, info.sealed_at, survivors) if survivors else None
                if new is not None and info.vectors is not None:
                    new = self._carry_vectors(info, new, keep)
                if new is not None:
                    kept.append(new.info)
                replaced.append((info, new))
            if not replaced:
                return counts
            if self._replica is not None:   # a node meanwhile: nothing changed here; the caller runs it again
                self._replica.push(self._dir, Manifest(manifest.next_seq, kept),
                                   [new.info for _, new in replaced if new is not None], [old for old, _ in replaced])
            save_manifest(self._dir, Manifest(manifest.next_seq, kept))
            for old_info, new in replaced:
                self._drop_from_view(old_info.segment_seq)
                if new is None:
                    counts["segments_removed"] += 1
                else:
                    self._apply(new, None)
                    counts["segments_rewritten"] += 1
                remove_segment_file(self._dir, old_info.file_name)
                if old_info.vectors is not None:
                    remove_segment_file(self._dir, old_info.vectors["file_name"])
                    remove_segment_file(self._dir, old_info.vectors["profile_file_name"])
            self._corpus = None
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return counts

    def _stored_chunk_ids(self, tenant: str, corpus: str, chunk_ids: Sequence[str]) -> set[str]:
        """The subset of `chunk_ids` already stored for (tenant, corpus)."""
        stored: set[str] = set()
        for start in range(0, len(chunk_ids), 500):
            part = chunk_ids[start:start + 500]
            stored.update(row[0] for row in self._db.execute(
                "SELECT chunk_id FROM document_chunks WHERE tenant_id = ? AND corpus_id = ? "
                f"AND chunk_id IN ({','.join('?' * len(part))})", (tenant, corpus, *part)))
        return stored

    def _with_vectors(self, sealed: SealedSegment) -> SealedSegment:
        """Embed the segment's chunks and write its `.ccxv`/`.ccxp` sidecars (none without an embedder)."""
        if self.embedder is None or not sealed.records:
            return sealed
        vectors = self.embedder.embed_batch([r.text for r in sealed.records])
        doc_ids = np.arange(len(sealed.records), dtype=np.uint32)
        return self._write_vectors(sealed, doc_ids, vectors, self.embedder.semantic_profile())

    def _carry_vectors(self, old: SegmentInfo, new: SealedSegment, keep: Sequence[int]) -> SealedSegment:
        """The rewritten segment's sidecars: the surviving chunks' vectors, renumbered, same profile."""
        sidecar = VectorSidecar.from_json(old.vectors or {})
        records = read_ccxv(self._dir / sidecar.file_name)
        by_doc = {int(doc): row for row, doc in enumerate(records["doc_id"])}
        rows = [by_doc.get(i) for i in keep]
        if any(row is None for row in rows):
            return new                      # vectors incomplete: leave this segment out of the dense lane
        profile_json = json.loads((self._dir / sidecar.profile_file_name).read_bytes())
        return self._write_vectors(new, np.arange(len(keep), dtype=np.uint32),
                                   np.asarray(records["vector"][rows]), SemanticProfile.from_json(profile_json))

    def _write_vectors(self, sealed: SealedSegment, doc_ids: np.ndarray, vectors: np.ndarray,
                       profile: SemanticProfile) -> SealedSegment:
        ccxv, ccxp = sidecar_bytes(doc_ids, vectors, profile)
        sidecar = describe_sidecar(sealed.info.file_name, ccxv, ccxp, profile)
        write_sidecar(self._dir, sidecar.file_name, ccxv)
        write_sidecar(self._dir, sidecar.profile_file_name, ccxp)
        return replace(sealed, info=replace(sealed.info, vectors=asdict(sidecar)))

    def _apply(self, sealed: SealedSegment, progress: Progress) -> None:
        """Index one sealed segment into the view in a single transaction."""
        records = sealed.records
        index = index_segment([r.text for r in records], [r.tenant_id for r in records], progress)
        info = sealed.info
        with self._db:
            self._db.execute(
                "INSERT INTO document_segments (segment_seq, segment_id, file_name, blake3, byte_size, chunk_count, "
                "total_tokens, sealed_at, tenants, doc_lengths, doc_tenants) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (info.segment_seq, info.segment_id, info.file_name, info.blake3, info.byte_size, info.chunk_count,
                 index.total_tokens, info.sealed_at, json.dumps(list(index.tenants), ensure_ascii=False),
                 encode_array(index.doc_lengths), encode_array(index.doc_tenants)))
            self._db.executemany(
                "INSERT INTO document_chunks (segment_seq, doc_id, tenant_id, corpus_id, document_id, chunk_id, "
                "frame_offset, doc_length_tokens, ingested_at) VALUES (?,?,?,?,?,?,?,?,?)",
                [(info.segment_seq, doc_id, r.tenant_id, r.corpus_id, r.document_id, r.chunk_id, offset,
                  int(index.doc_lengths[doc_id]), r.ingested_at)
                 for doc_id, (r, offset) in enumerate(zip(records, sealed.offsets))])
            self._db.executemany(
                "INSERT INTO document_postings (term, segment_seq, doc_count, doc_ids, tfs) VALUES (?,?,?,?,?)",
                postings_rows(info.segment_seq, index))
            if info.vectors is not None:
                v = VectorSidecar.from_json(info.vectors)
                self._db.execute(
                    "INSERT INTO document_vectors (segment_seq, file_name, blake3, profile_hash, model, dimensions) "
                    "VALUES (?,?,?,?,?,?)", (info.segment_seq, v.file_name, v.blake3, v.profile_hash, v.model,
                                            v.dimensions))
            self._db.executemany(
                "INSERT OR IGNORE INTO document_links (segment_seq, doc_id, target_document_id) VALUES (?,?,?)",
                [(info.segment_seq, doc_id, target) for doc_id, r in enumerate(records)
                 for target in document_links(r.document_id, r.text)])
        self._corpus = None

    def _drop_from_view(self, segment_seq: int) -> None:
        with self._db:
            for table in _VIEW_TABLES:
                self._db.execute(f"DELETE FROM {table} WHERE segment_seq = ?", (segment_seq,))
        self._corpus = None

    def _view_segments(self) -> list[tuple[int, str]]:
        return list(self._db.execute("SELECT segment_seq, segment_id FROM document_segments ORDER BY segment_seq"))

    def _view_lags_manifest(self) -> bool:
        manifest = load_manifest(self._dir)
        return self._view_segments() != [(i.segment_seq, i.segment_id) for i in manifest.segments]

    def _sync(self) -> None:
        """Make the view list the manifest's segments (caller holds the writer lock).

        A segment that fails its checksum stays out of the view (searches go on without it, as Crux skips
        a segment without a reader); verify() reports it and rebuild() refuses to run until it is repaired.
        """
        manifest = load_manifest(self._dir)
        for path in list(stray_files(self._dir, manifest)):
            remove_segment_file(self._dir, path.name)
        wanted = {info.segment_seq: info for info in manifest.segments}
        present = dict(self._view_segments())
        for seq, segment_id in present.items():
            if seq not in wanted or wanted[seq].segment_id != segment_id:
                self._drop_from_view(seq)
        for seq, info in wanted.items():
            if present.get(seq) != info.segment_id:
                try:
                    sealed = read_segment(self._dir, info)
                except SegmentError:
                    continue
                self._apply(sealed, None)

    # ---- reading -------------------------------------------------------------------------------

    def _snapshot(self, statistics_tenant: Optional[str] = None) -> tuple[Bm25Corpus, list[tuple[int, str]]]:
        """The corpus for the segments the view lists now (cached until they change), with global
        statistics or those of `statistics_tenant`. Call inside a read txn."""
        rows = self._view_segments()
        key = tuple(rows)
        cached = self._corpus if statistics_tenant is None else self._tenant_corpora.get(statistics_tenant)
        if cached is None or cached[0] != key:
            segments = [
                SegmentDocs(seq, decode_array(lengths), tuple(json.loads(tenants)), decode_array(doc_tenants))
                for seq, lengths, tenants, doc_tenants in self._db.execute(
                    "SELECT segment_seq, doc_lengths, tenants, doc_tenants FROM document_segments ORDER BY segment_seq")
            ]
            cached = (key, Bm25Corpus(segments, statistics_tenant=statistics_tenant))
            if statistics_tenant is None:
                self._corpus = cached
            else:
                if len(self._tenant_corpora) >= TENANT_CORPORA:
                    self._tenant_corpora.pop(next(iter(self._tenant_corpora)))
                self._tenant_corpora[statistics_tenant] = cached
        return cached[1], rows

    def _lookup(self, seq_to_index: Mapping[int, int]) -> Callable[[Sequence[str]], QueryPostings]:
        def lookup(terms: Sequence[str]) -> QueryPostings:
            placeholders = ",".join("?" * len(terms))
            cursor = self._db.execute(
                "SELECT term, segment_seq, doc_count, doc_ids, tfs FROM document_postings "
                f"WHERE term IN ({placeholders}) ORDER BY term, segment_seq", tuple(terms))
            rows = [(term, seq_to_index[seq], count, doc_ids, tfs) for term, seq, count, doc_ids, tfs in cursor]
            return QueryPostings.from_rows(rows)
        return lookup

    def search(self, query: str, tenant: Optional[str] = DEFAULT_TENANT, top_k: int = 10,
               min_score: Optional[float] = None, tenant_statistics: bool = False) -> Bm25SearchResult:
        """Crux `bm25_search` over every segment; `tenant=None` searches all tenants (admin).

        `tenant_statistics`: N, avg_dl and df over `tenant`'s documents only (not Crux's global rule),
        for deployments where scores must not reveal other tenants' corpora."""
        if top_k < 0:
            raise InvalidInput(f"limit {top_k} must not be negative")
        tenant = None if tenant is None else _tenant(tenant)
        with self._db:
            corpus, rows = self._snapshot(tenant if tenant_statistics else None)
            lookup = self._lookup({seq: index for index, (seq, _) in enumerate(rows)})
            return corpus.search(query, lookup, top_k, tenant, min_score)

    def _dense_snapshot(self, corpus: Bm25Corpus, rows: Sequence[tuple[int, str]]
                        ) -> tuple[Optional[DenseIndex], tuple[str, ...]]:
        """The dense index of the segments whose vectors the configured embedder can query, and the others."""
        if self.embedder is None:
            return None, ()
        profile = self.embedder.semantic_profile()
        key = (tuple(rows), profile.hash)
        if self._dense is None or self._dense[0] != key:
            index = DenseIndex(corpus.total_docs, profile.dimensions)
            skipped: list[str] = []
            vectors = {seq: (name, profile_hash) for seq, name, profile_hash in self._db.execute(
                "SELECT segment_seq, file_name, profile_hash FROM document_vectors")}
            for position, (seq, _) in enumerate(rows):
                if seq not in vectors:
                    continue
                name, profile_hash = vectors[seq]
                if profile_hash != profile.hash:
                    skipped.append(name)
                    continue
                try:
                    index.add_segment(int(corpus.bases[position]), self._dir / name)
                except (OSError, ValueError):
                    skipped.append(name)        # unreadable: verify() names the problem
            self._dense = (key, index, tuple(skipped))
        _, index, skipped_names = self._dense
        return (None if index.empty else index), skipped_names

    def ranked_search(self, query: str, tenant: str = DEFAULT_TENANT, top_k: int = 10,
                      min_score: Optional[float] = None, dense: bool = True,
                      tenant_statistics: bool = False, rerank_depth: Optional[int] = None
                      ) -> tuple[Bm25SearchResult, Ranking]:
        """BM25 (`search`), then Crux's dense re-rank of the hits when vectors of the configured profile exist.

        Crux re-ranks the `top_k` hits it returns. `rerank_depth` (a cruxsql option) re-ranks the best
        `rerank_depth` BM25 hits instead and keeps the first `top_k`: MiniLM then lifts relevant chunks that
        BM25 ranked just below the cut (SciFact nDCG@10 0.689 at Crux's depth 10, 0.701 at depth 50).
        """
        tenant = _tenant(tenant)
        if top_k < 0:
            raise InvalidInput(f"limit {top_k} must not be negative")
        if rerank_depth is not None and rerank_depth < 1:
            raise InvalidInput(f"re-rank depth {rerank_depth} must be at least 1")
        profile = self.embedder.semantic_profile() if self.embedder is not None else None
        with self._db:
            corpus, rows = self._snapshot(tenant if tenant_statistics else None)
            lookup = self._lookup({seq: index for index, (seq, _) in enumerate(rows)})
            index, skipped = self._dense_snapshot(corpus, rows) if dense else (None, ())
            depth = top_k if index is None or rerank_depth is None else max(top_k, rerank_depth)
            result = corpus.search(query, lookup, depth, tenant, min_score)
        if index is None or self.embedder is None or not result.hits:
            return result, Ranking(profile=profile, segments_skipped=skipped)
        gids = [int(corpus.bases[hit.segment_index]) + hit.doc_id for hit in result.hits]
        reranked = dense_rerank(result.hits, index.scores_of(self.embedder.embed_one(query), gids))[:top_k]
        return (replace(result, hits=reranked),
                Ranking(SCORE_SPACE_DENSE_FUSED, MERGE_WEIGHTED_LINEAR, profile, True, skipped))

    def fused_search(self, query: str, tenant: str = DEFAULT_TENANT, top_k: int = 20, mode: str = "weighted",
                     weights: FusionWeights = FusionWeights(), cold_start_threshold: int = 100,
                     dense: bool = True) -> FusedResult:
        """`fused_retrieve` over the BM25, dense and graph lanes (or RRF with `mode="rrf"`)."""
        tenant = _tenant(tenant)
        if top_k < 0:
            raise InvalidInput(f"limit {top_k} must not be negative")
        if mode not in FUSION_MODES:
            raise InvalidInput(f"unknown fusion {mode!r}: choose one of {', '.join(FUSION_MODES)}")
        pool = top_k * 4
        with self._db:
            corpus, rows = self._snapshot()
            seq_to_index = {seq: index for index, (seq, _) in enumerate(rows)}
            lookup = self._lookup(seq_to_index)
            deep = corpus.search(query, lookup, max(pool, BM25_DEPTH), tenant).hits
            index, _ = self._dense_snapshot(corpus, rows) if dense else (None, ())
            all_scores: Optional[np.ndarray] = None
            dense_ranking: list[tuple[int, int]] = []
            if index is not None and self.embedder is not None:
                all_scores = index.scores(self.embedder.embed_one(query))
                mine = corpus.tenant_mask(tenant) & ~np.isnan(all_scores) & (all_scores > 0)
                gids = np.flatnonzero(mine)
                if len(gids) > pool:
                    gids = gids[np.argpartition(-all_scores[gids], pool - 1)[:pool]]
                best = gids[np.lexsort((gids, -all_scores[gids]))][:pool]
                dense_ranking = [_chunk_key(corpus.bases, int(g)) for g in best]
            seeds = [(h.segment_index, h.doc_id) for h in deep[:10]]
            graph = DocumentGraph(self._db, tenant, seq_to_index, lookup, corpus)
            boosts = graph.boosts(query, seeds)
            keys = set(dense_ranking) | set(boosts) | {(h.segment_index, h.doc_id) for h in deep[:pool]}
            gid_of = {key: int(corpus.bases[key[0]]) + key[1] for key in keys}
            lengths = {key: int(corpus.doc_lengths[gid]) for key, gid in gid_of.items()}
            dense_scores = {} if all_scores is None else {
                key: float(all_scores[gid]) for key, gid in gid_of.items() if not np.isnan(all_scores[gid])}
            node_count = graph.node_count()
        lanes = Lanes(deep, pool, dense_scores, dense_ranking, boosts, lengths, index is not None, corpus.total_docs)
        return fuse(lanes, top_k, weights, mode, node_count, cold_start_threshold)

    def total_docs(self) -> int:
        with self._db:
            return self._snapshot()[0].total_docs

    def fused_query(self, query: str, tenant: str = DEFAULT_TENANT, limit: int = 10, mode: str = "weighted",
                    dense: bool = True) -> Union[dict[str, Any], str]:
        """`search --fused` and MCP `query` with `fused`: the fused payload with its per-hit score breakdown
        and the dense lane's profile; a plain message when the index is empty."""
        if self.total_docs() == 0:
            return EMPTY_INDEX_QUERY
        ranking = self.ranked_search("", tenant, 0, dense=dense)[1]
        return fused_payload(self.fused_search(query, tenant, limit, mode, dense=dense), profile_meta(ranking))

    def query(self, query: str, tenant: str = DEFAULT_TENANT, limit: int = 10, token_budget: Optional[int] = None,
              min_score: Optional[float] = None, contract: Optional[str] = None,
              coverage_style: str = "missing_tokens", tenant_statistics: bool = False,
              shaped: bool = True, dense: bool = True, rerank_depth: Optional[int] = None
              ) -> Union[dict[str, Any], str]:
        """MCP `query`: the CRC-v1 envelope (or legacy payload); a plain message when the index is empty.

        With vectors of the configured embedder's profile (and `dense`), hits are re-ranked 0.7/0.3 (query.rs),
        the first `limit` BM25 hits as Crux does, or the first `rerank_depth` (`ranked_search`).
        """
        tenant = _tenant(tenant)
        _check_budget(token_budget)
        if self.total_docs() == 0:
            return EMPTY_INDEX_QUERY
        result, ranking = self.ranked_search(query, tenant, limit, min_score, dense, tenant_statistics, rerank_depth)
        inner = query_payload(result, token_budget, coverage_style, shaped, ranking)
        if not contract_is_crc_v1(contract):
            return inner
        envelope = wrap_crc_v1(inner, "search")
        if token_budget is None or not shaped:
            return envelope
        best = self.expand([envelope["pointers"][0]["id"]], tenant)[0] if envelope["pointers"] else []
        return budgeted_search(envelope, best[0].text if best else None, token_budget)

    def query_scan(self, query: str, tenant: str = DEFAULT_TENANT, limit: int = 20,
                   token_budget: Optional[int] = None, contract: Optional[str] = None,
                   tenant_statistics: bool = False) -> Union[dict[str, Any], str]:
        """MCP `query_scan`: hits charged at whole-document tokens, stopping at the budget (≥ 1 hit)."""
        tenant = _tenant(tenant)
        _check_budget(token_budget)
        if self.total_docs() == 0:
            return EMPTY_INDEX_SCAN
        inner = scan_payload(self.search(query, tenant, limit, tenant_statistics=tenant_statistics), token_budget)
        return wrap_crc_v1(inner, "search") if contract_is_crc_v1(contract) else inner

    def expand(self, result_ids: Sequence[str], tenant: str = DEFAULT_TENANT
               ) -> tuple[list[ExpandedChunk], list[ExpandError]]:
        """Resolve `"{segment_index}:{doc_id}"` ids to chunks with text, or typed per-id errors."""
        tenant = _tenant(tenant)
        chunks: list[ExpandedChunk] = []
        errors: list[ExpandError] = []
        with self._db:
            rows = self._view_segments()
            files = dict(self._db.execute("SELECT segment_seq, file_name FROM document_segments"))
            for result_id in result_ids:
                parts = result_id.split(":")
                if len(parts) != 2:
                    errors.append(ExpandError(result_id, "invalid result_id format", "invalid_format"))
                    continue
                segment_index, doc_id = (_parse_unsigned(part) for part in parts)
                if segment_index is None or segment_index >= len(rows):
                    errors.append(ExpandError(result_id, "segment not found", "evicted"))
                    continue
                seq = rows[segment_index][0]
                row = None if doc_id is None else self._db.execute(
                    "SELECT tenant_id, frame_offset, doc_length_tokens FROM document_chunks "
                    "WHERE segment_seq = ? AND doc_id = ?", (seq, doc_id)).fetchone()
                if row is None:
                    errors.append(ExpandError(result_id, "doc_id out of range", "evicted"))
                    continue
                owner, offset, length = row
                if owner != tenant:
                    errors.append(ExpandError(result_id, "tenant mismatch", "tenant_mismatch"))
                    continue
                record = read_record(self._dir, files[seq], offset)
                chunks.append(ExpandedChunk(segment_index, seq, doc_id, offset, length, record.tenant_id,
                                            record.corpus_id, record.document_id, record.chunk_id, record.text))
        return chunks, errors

    def query_expand(self, result_ids: Sequence[str], tenant: str = DEFAULT_TENANT,
                     contract: Optional[str] = None) -> dict[str, Any]:
        """MCP `query_expand`, returning each chunk's text with its metadata."""
        inner = expand_payload(*self.expand(result_ids, tenant))
        return wrap_crc_v1(inner, "addressed") if contract_is_crc_v1(contract) else inner

    def segments(self) -> list[SegmentSummary]:
        rows = self._db.execute(
            "SELECT s.segment_seq, s.segment_id, s.file_name, s.chunk_count, s.total_tokens, s.byte_size, s.blake3, "
            "s.sealed_at, (SELECT group_concat(tenant_id, ',') FROM (SELECT DISTINCT tenant_id FROM document_chunks "
            "WHERE segment_seq = s.segment_seq ORDER BY tenant_id)) "
            "FROM document_segments s ORDER BY s.segment_seq")
        return [SegmentSummary(index, *row[:8], row[8] or "") for index, row in enumerate(rows)]

    def verify(self) -> list[str]:
        """Problems between manifest, segment files and view; an empty list means consistent."""
        return verify.lane_problems(self._dir, self._db)


def _chunk_key(bases: np.ndarray, gid: int) -> tuple[int, int]:
    segment_index = int(np.searchsorted(bases, gid, side="right")) - 1
    return segment_index, gid - int(bases[segment_index])


def _parse_unsigned(text: str) -> Optional[int]:
    """Rust's `str::parse::<usize>`: ASCII digits with an optional leading `+`; None on failure."""
    digits = text[1:] if text.startswith("+") else text
    return int(digits) if digits.isascii() and digits.isdigit() else None


def _check_budget(token_budget: Optional[int]) -> None:
    if token_budget is not None and token_budget < 0:
        raise InvalidInput(f"token budget {token_budget} must not be negative")
