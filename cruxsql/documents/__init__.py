"""The document (segment) lane: chunking, analyzer, sealed segments, postings, BM25, query/scan/expand."""

from .lane import ChunkInput, DocumentInput, DocumentLane, IngestReport, SegmentSummary

__all__ = ["ChunkInput", "DocumentInput", "DocumentLane", "IngestReport", "SegmentSummary"]
