"""`DocumentLane`: the segment lane's API over a Store (ingest, search, expand, rebuild, verify, erase).

Files are the truth: a sealed segment file is written and listed in MANIFEST.json before the view sees
it, and the view's document tables can always be rebuilt from the manifest. Opening a lane brings the
view up to date with the manifest (after a crash, or after cruxsql.db was deleted).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence, Union

import apsw

from ..errors import InvalidInput
from ..facts import timestamps
from .bm25 import Bm25Corpus, Bm25SearchResult, SegmentDocs
from .postings import QueryPostings, decode_array, encode_array, index_segment, postings_rows
from .search import (
    EMPTY_INDEX_QUERY,
    EMPTY_INDEX_SCAN,
    ExpandedChunk,
    ExpandError,
    contract_is_crc_v1,
    expand_payload,
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
    file_checksum,
    load_manifest,
    read_record,
    read_segment,
    remove_segment_file,
    save_manifest,
    segments_dir,
    stray_files,
    write_segment,
)

Progress = Optional[Callable[[int, int], None]]

DEFAULT_TENANT = "default"
DEFAULT_CORPUS = "default"
MAX_DOCUMENTS = 4096
MAX_CHUNKS = 65_536
MAX_TEXT_BYTES = 4 * 1024 * 1024
TENANT_CORPORA = 8  # tenant-statistics corpora kept at once


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

    def __init__(self, store: Any) -> None:
        self._store = store
        self._db: apsw.Connection = store.db
        self._dir: Path = segments_dir(Path(store.data_dir))
        self._corpus: Optional[tuple[tuple, Bm25Corpus]] = None
        self._tenant_corpora: dict[str, tuple[tuple, Bm25Corpus]] = {}  # --tenant-statistics, per tenant
        try:
            lagging = self._view_lags_manifest()
        except SegmentError:
            lagging = False     # an unreadable manifest: searches use the view as it is; verify() reports it
        if lagging:
            with store.writer_lock():
                self._sync()

    # ---- writing -------------------------------------------------------------------------------

    def ingest(self, documents: Sequence[DocumentInput], tenant: str = DEFAULT_TENANT,
               corpus: str = DEFAULT_CORPUS, progress: Progress = None) -> IngestReport:
        """Seal the chunks not stored yet into one new segment; re-sent chunk ids are no-ops."""
        tenant = _tenant(tenant)
        _validate(documents, corpus)
        corpus = corpus.strip()
        with self._store.writer_lock():
            self._sync()
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
            sealed = write_segment(self._dir, manifest.next_seq, now, records)
            save_manifest(self._dir, Manifest(manifest.next_seq + 1, [*manifest.segments, sealed.info]))
            self._apply(sealed, progress)
        info = sealed.info
        return IngestReport(len(records), duplicates, len(documents), True, info.segment_seq, info.segment_id,
                            info.file_name, info.blake3)

    def rebuild(self, progress: Progress = None) -> int:
        """Recreate the document tables from the segment files; returns the number of segments indexed."""
        with self._store.writer_lock():
            manifest = load_manifest(self._dir)
            problems = [problem for problem in map(self._check_file, manifest.segments) if problem]
            if problems:
                raise SegmentError("; ".join(problems))
            with self._db:
                for table in ("document_postings", "document_chunks", "document_segments"):
                    self._db.execute(f"DELETE FROM {table}")
            self._corpus = None
            total = sum(info.chunk_count for info in manifest.segments)
            done = 0
            for info in manifest.segments:
                sealed = read_segment(self._dir, info)
                self._apply(sealed, None)
                done += info.chunk_count
                if progress:
                    progress(done, total)
            return len(manifest.segments)

    def erase_tenant(self, tenant: str) -> dict[str, int]:
        """Rewrite every segment holding `tenant`'s chunks without them (new file, old removed)."""
        tenant = _tenant(tenant)
        counts = {"segments_rewritten": 0, "segments_removed": 0, "chunks_erased": 0}
        with self._store.writer_lock():
            self._sync()
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
                survivors = [r for r in old.records if r.tenant_id != tenant]
                counts["chunks_erased"] += len(old.records) - len(survivors)
                new = write_segment(self._dir, info.segment_seq, info.sealed_at, survivors) if survivors else None
                if new is not None:
                    kept.append(new.info)
                replaced.append((info, new))
            if not replaced:
                return counts
            save_manifest(self._dir, Manifest(manifest.next_seq, kept))
            for old_info, new in replaced:
                self._drop_from_view(old_info.segment_seq)
                if new is None:
                    counts["segments_removed"] += 1
                else:
                    self._apply(new, None)
                    counts["segments_rewritten"] += 1
                remove_segment_file(self._dir, old_info.file_name)
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
        self._corpus = None

    def _drop_from_view(self, segment_seq: int) -> None:
        with self._db:
            for table in ("document_postings", "document_chunks", "document_segments"):
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

    def total_docs(self) -> int:
        with self._db:
            return self._snapshot()[0].total_docs

    def query(self, query: str, tenant: str = DEFAULT_TENANT, limit: int = 10, token_budget: Optional[int] = None,
              min_score: Optional[float] = None, contract: Optional[str] = None,
              coverage_style: str = "missing_tokens", tenant_statistics: bool = False,
              shaped: bool = True) -> Union[dict[str, Any], str]:
        """MCP `query`: the CRC-v1 envelope (or legacy payload); a plain message when the index is empty."""
        tenant = _tenant(tenant)
        _check_budget(token_budget)
        if self.total_docs() == 0:
            return EMPTY_INDEX_QUERY
        result = self.search(query, tenant, limit, min_score, tenant_statistics)
        inner = query_payload(result, token_budget, coverage_style, shaped)
        return wrap_crc_v1(inner, "search") if contract_is_crc_v1(contract) else inner

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

    def _check_file(self, info: SegmentInfo) -> Optional[str]:
        """The problem with one manifest entry's file (missing, or a checksum mismatch), or None."""
        path = self._dir / info.file_name
        if not path.exists():
            return f"segment {info.file_name} is listed in the manifest but missing"
        digest = file_checksum(path)
        if digest != info.blake3:
            return f"segment {info.file_name}: BLAKE3 {digest} does not match the manifest ({info.blake3})"
        return None

    def verify(self) -> list[str]:
        """Problems between manifest, segment files and view; an empty list means consistent."""
        problems: list[str] = []
        try:
            manifest = load_manifest(self._dir)
        except SegmentError as exc:
            return [str(exc)]
        problems.extend(problem for problem in map(self._check_file, manifest.segments) if problem)
        for path in stray_files(self._dir, manifest):
            problems.append(f"segment file {path.name} is not in the manifest")
        view = {seq: (segment_id, chunks, digest) for seq, segment_id, chunks, digest in self._db.execute(
            "SELECT segment_seq, segment_id, chunk_count, blake3 FROM document_segments")}
        for info in manifest.segments:
            if view.get(info.segment_seq) != (info.segment_id, info.chunk_count, info.blake3):
                problems.append(f"view does not match segment {info.file_name} (run rebuild)")
        for seq in sorted(set(view) - {info.segment_seq for info in manifest.segments}):
            problems.append(f"view lists segment_seq {seq}, which the manifest does not (run rebuild)")
        for seq, expected, actual in self._db.execute(
                "SELECT s.segment_seq, s.chunk_count, COUNT(c.doc_id) FROM document_segments s "
                "LEFT JOIN document_chunks c USING (segment_seq) GROUP BY s.segment_seq"):
            if expected != actual:
                problems.append(f"view has {actual} chunks for segment_seq {seq}, expected {expected} (run rebuild)")
        return problems


def _parse_unsigned(text: str) -> Optional[int]:
    """Rust's `str::parse::<usize>`: ASCII digits with an optional leading `+`; None on failure."""
    digits = text[1:] if text.startswith("+") else text
    return int(digits) if digits.isascii() and digits.isdigit() else None


def _check_budget(token_budget: Optional[int]) -> None:
    if token_budget is not None and token_budget < 0:
        raise InvalidInput(f"token budget {token_budget} must not be negative")
