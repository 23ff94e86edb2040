"""CLI commands of the document (segment) lane: ingest, search, scan, expand, segments, documents erase."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path
from typing import Any, Callable, Iterator, Optional, Union

import click

from ..documents import DocumentInput, DocumentLane
from ..documents.lane import DEFAULT_CORPUS, DEFAULT_TENANT
from ..documents.bm25 import result_id
from ..documents.fusion import FUSION_MODES
from ..documents.response_shapes import COVERAGE_STYLES
from ..documents.sources import SkippedFile, batches, list_files, read_file, read_jsonl
from ..errors import InvalidInput
from .empty_answers import document_tenants, explain_empty
from .options import (
    contract_option,
    data_dir_option,
    json_flag,
    limit_option,
    output_options,
    tenant_option,
    token_budget_option,
)
from .common import COUNT, echo_json, echo_rows, fails_cleanly, open_store, progress_callback, reject_empty

_tenant_option = tenant_option("Tenant id.", default=DEFAULT_TENANT)
_json_option = json_flag("Print JSON.")
_hit_formats = output_options(text="Ranked hits with snippets and a coverage line (default).",
                              json_help="The Crux response (the --contract envelope) as JSON.", records="hits")


def _snippet(text: str, width: int = 160) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 3] + "..."


def _documents(paths: tuple[str, ...], on_file: Optional[Callable[[int, int], None]],
               skipped: list[SkippedFile]) -> Iterator[DocumentInput]:
    if "-" in paths:
        if len(paths) > 1:
            raise click.UsageError("'-' (JSONL on stdin) cannot be combined with paths")
        yield from read_jsonl(sys.stdin.buffer)
        return
    files = list_files([Path(p) for p in paths])
    for done, (path, doc_id) in enumerate(files, start=1):
        read = read_file(path, doc_id)
        if isinstance(read, SkippedFile):
            click.echo(f"Warning: skipped {read.path}: {read.reason}", err=True)
            skipped.append(read)
        else:
            yield read
        if on_file:
            on_file(done, len(files))


def _chunks_of(lane: DocumentLane, hits: list[dict[str, Any]], tenant: str) -> dict[str, Any]:
    chunks, _ = lane.expand([hit["result_id"] for hit in hits], tenant)
    return {result_id(c.segment_index, c.doc_id): c for c in chunks}


def _echo_hit_records(lane: DocumentLane, hits: list[dict[str, Any]], tenant: str, fmt: str) -> None:
    """--table / --nl / --csv of search and scan: one record per hit, with its document and text."""
    by_id = _chunks_of(lane, hits, tenant)
    columns = ["rank", "result_id", "score", "doc_length_tokens", "document_id", "corpus_id", "text"]
    echo_rows(columns, [[hit["rank"], hit["result_id"], hit["score"], hit.get("doc_length_tokens"),
                         *((chunk.document_id, chunk.corpus_id, chunk.text) if chunk else (None, None, None))]
                        for hit in hits for chunk in [by_id.get(hit["result_id"])]], fmt)


def _print_hits(lane: DocumentLane, hits: list[dict[str, Any]], tenant: str) -> None:
    by_id = _chunks_of(lane, hits, tenant)
    for hit in hits:
        chunk = by_id.get(hit["result_id"])
        source = f"{chunk.document_id} ({chunk.corpus_id})" if chunk else ""
        click.echo(f"{hit['rank']:>3}. {hit['result_id']:<10} score {hit['score']:.4f}  "
                   f"{hit['doc_length_tokens']} tokens  {source}")
        if chunk:
            click.echo(f"     {_snippet(chunk.text)}")


def _hits(payload: dict[str, Any], legacy_key: str) -> list[Any]:
    """The hits of a search or scan payload, legacy (`results` / `scan`) or the crc-v1 envelope (`pointers`)."""
    return payload.get(legacy_key, payload.get("pointers", []))


def _echo_hits(store: Any, lane: DocumentLane, payload: Union[dict[str, Any], str], hits_key: str, query: str,
               tenant: str, fmt: str) -> Optional[dict[str, Any]]:
    """Print a search or scan payload in `fmt` (and the operator's note when it has no hits); None when that
    is all, the payload when the text footer follows the hits."""
    if isinstance(payload, str) or not _hits(payload, hits_key):
        _explain_no_hits(store, lane, query, tenant)
    if isinstance(payload, str) or fmt == "json":
        echo_json(payload) if fmt == "json" else click.echo(payload)
        return None
    if fmt != "text":
        _echo_hit_records(lane, payload[hits_key], tenant, fmt)
        return None
    _print_hits(lane, payload[hits_key], tenant)
    return payload


def _explain_no_hits(store: Any, lane: DocumentLane, query: str, tenant: str) -> None:
    """Operator's note (stderr): how many documents of other tenants match QUERY (plain BM25, counts only)."""
    def candidates(other: str) -> int:
        payload = lane.query(query, other, 1, None, None, "legacy", dense=False)
        return 0 if isinstance(payload, str) else payload["total_candidates"]

    explain_empty("matching document", tenant, document_tenants(store), candidates)


def _expand_error(error: Any) -> str:
    """One line for a result id expand could not resolve, saying what happened."""
    if error.error_kind == "evicted":
        segment, _, doc = error.result_id.partition(":")
        what = f"no segment {segment}" if error.error == "segment not found" else \
            f"no document {doc} in segment {segment}"
        return f"{error.result_id}: {what}"
    return f"{error.result_id}: {error.error}"


@click.command()
@click.argument("paths", nargs=-1, required=True)
@_tenant_option
@click.option("--corpus", default=DEFAULT_CORPUS, show_default=True, callback=reject_empty,
              help="Corpus id (Crux stream_type).")
@_json_option
@data_dir_option
@fails_cleanly
def ingest(paths: tuple[str, ...], tenant: str, corpus: str, as_json: bool, data_dir: Path) -> None:
    """Chunk and index markdown/text/JSON files and folders (or JSONL requests on stdin with `-`).

    Folders are walked like `corecruxctl ingest`: .md .markdown .txt .json files (and .mdown .mkd
    .text), never into hidden directories, node_modules/ or target/, never through symlinks. A .json
    file contributes its string values; a leading BOM is dropped; a file that is not UTF-8 text (or
    holds a NUL byte) is skipped with a warning on stderr.

    Each ingest seals one segment (large inputs: one per 4096 documents or 65,536 chunks). JSONL lines
    are {"doc_id", "chunks": [{"chunk_id", "text"}]} or {"doc_id", "text"}. Chunks already stored
    for the tenant and corpus are skipped. Input with no documents is an error and stores nothing.
    """
    skipped: list[SkippedFile] = []
    inputs = _documents(paths, progress_callback("reading files"), skipped)
    first = next(inputs, None)
    if first is None:
        raise InvalidInput("no documents in the input")
    totals = {"documents": 0, "ingested": 0, "duplicates": 0, "segments_sealed": 0}
    segments = []
    with open_store(data_dir, "start") as store:
        lane = DocumentLane(store)
        for batch in batches(itertools.chain([first], inputs)):
            report = lane.ingest(batch, tenant=tenant, corpus=corpus, progress=progress_callback("indexing"))
            totals["documents"] += report.documents
            totals["ingested"] += report.ingested
            totals["duplicates"] += report.duplicates
            if report.sealed:
                totals["segments_sealed"] += 1
                segments.append(report.to_json())
    if as_json:
        echo_json({**totals, "segments": segments,
                   "skipped_files": [{"path": str(s.path), "reason": s.reason} for s in skipped]})
        return
    click.echo(f"{totals['ingested']} chunks from {totals['documents']} documents ingested into "
               f"{totals['segments_sealed']} new segment(s); {totals['duplicates']} already stored")
    for segment in segments:
        click.echo(f"  sealed {segment['file_name']} ({segment['ingested']} chunks)")


def _fused_search(store: Any, lane: DocumentLane, query: str, tenant: str, limit: int, fusion: str, dense: bool,
                  fmt: str) -> None:
    payload = lane.fused_query(query, tenant, limit, fusion, dense)
    if isinstance(payload, str) or not payload["results"]:
        _explain_no_hits(store, lane, query, tenant)
    if isinstance(payload, str):
        click.echo(payload)
        return
    if fmt == "json":
        echo_json(payload)
        return
    if fmt != "text":
        _echo_hit_records(lane, payload["results"], tenant, fmt)
        return
    by_id = _chunks_of(lane, payload["results"], tenant)
    for hit in payload["results"]:
        parts = " ".join(f"{lane_name} {value:.3f}" for lane_name, value in hit["score_breakdown"].items()
                         if lane_name != "sparse")
        chunk = by_id.get(hit["result_id"])
        click.echo(f"{hit['rank']:>3}. {hit['result_id']:<10} score {hit['score']:.4f}  ({parts})  "
                   f"{chunk.document_id if chunk else ''}")
        if chunk:
            click.echo(f"     {_snippet(chunk.text)}")
    stats = payload["stats"]
    weights = payload["fusion"]["weights"]
    how = "rrf k=60" if weights is None else "weights " + "/".join(f"{weights[k]:g}" for k in ("bm25", "graph", "dense"))
    click.echo(f"fused ({how}) · {stats['candidates']} candidate(s) · graph nodes {stats['graph_node_count']}"
               f"{' (cold start)' if stats['graph_cold_start'] else ''} · dense lane "
               f"{'on' if stats['dense_lane_active'] else 'off'}")


@click.command()
@click.argument("query")
@_tenant_option
@limit_option("Maximum hits.", default=10)
@token_budget_option("Keep max(1, BUDGET // 40) hits: pointers cost 40 tokens each.")
@click.option("--min-score", type=float, default=None,
              help="Drop hits scoring below this (counted as below_floor).")
@click.option("--coverage-style", type=click.Choice(COVERAGE_STYLES), default="missing_tokens",
              show_default=True, help="MCP missing_tokens or HTTP gaps[] (in the text output too).")
@click.option("--tenant-statistics", is_flag=True,
              help="Score with N, avgdl and df of this tenant's documents only (Crux: global over all "
                   "tenants, which lets scores hint at other tenants' corpora).")
@click.option("--no-dense", "no_dense", is_flag=True,
              help="Plain BM25: skip the 0.7·BM25 + 0.3·cosine re-rank that runs when vectors exist.")
@click.option("--rerank-depth", type=click.IntRange(1, COUNT.max), default=None,
              help="cruxsql option: re-rank the best N BM25 hits 0.7/0.3, then keep --limit (Crux re-ranks "
                   "only the --limit hits it returns; with MiniLM on SciFact, N = 50 lifts nDCG@10 0.689 -> 0.701).")
@click.option("--fused", is_flag=True,
              help="Fused retrieval over BM25, dense and graph lanes, with a score breakdown per hit.")
@click.option("--fusion", type=click.Choice(FUSION_MODES), default="weighted", show_default=True,
              help="With --fused: Crux's weighted fusion (0.5/0.3/0.2) or reciprocal rank fusion (k=60).")
@contract_option
@_hit_formats
@data_dir_option
@fails_cleanly
def search(query: str, tenant: str, limit: int, token_budget: Optional[int], min_score: Optional[float],
           coverage_style: str, tenant_statistics: bool, no_dense: bool, rerank_depth: Optional[int], fused: bool,
           fusion: str, contract: str, fmt: str, data_dir: Path) -> None:
    """Search ingested documents (Crux `query`): BM25, dense re-ranked when the segments have vectors.

    Coverage (which query words no document holds) looks at TENANT's documents only.
    The embedder is CRUXSQL_EMBEDDER (hash by default, minilm with the [semantic] extra, none).
    `meta.score_space` says what ran: bm25_lexical or bm25_dense_fused. --fused ranks with all lanes.
    """
    if rerank_depth is not None and (fused or no_dense):
        raise click.UsageError(f"--rerank-depth re-ranks BM25 hits with the dense lane; it does not go with "
                               f"{'--fused' if fused else '--no-dense'}")
    with open_store(data_dir, "read") as store:
        # --no-dense needs no embedder: a configured one that cannot load (minilm without the extra) is not loaded
        lane = DocumentLane(store, embedder=None) if no_dense else DocumentLane(store)
        if fused:
            _fused_search(store, lane, query, tenant, limit, fusion, not no_dense, fmt)
            return
        payload = lane.query(query, tenant, limit, token_budget, min_score,
                             contract if fmt == "json" else "legacy", coverage_style, tenant_statistics,
                             dense=not no_dense, rerank_depth=rerank_depth)
        footer = _echo_hits(store, lane, payload, "results", query, tenant, fmt)
        if footer is None:
            return
    if footer["meta"]["score_space"] != "bm25_lexical":
        click.echo(f"ranked by {footer['meta']['score_space']} "
                   f"({footer['meta']['local_semantic_profile']['model']})")
    coverage = footer["coverage"]
    line = f"coverage {coverage['score']:.2f}"
    if "gaps" in coverage:
        for gap in coverage["gaps"]:
            line += f" · gap: {' '.join(gap['query_terms'])}"
    elif coverage["missing_tokens"]:
        line += f" · no document of tenant {tenant!r} contains: " + ", ".join(coverage["missing_tokens"])
    if coverage["below_floor"]:
        line += f" · {coverage['below_floor']} below --min-score"
    click.echo(f"{line} · {footer['total_candidates']} candidate(s)")


@click.command()
@click.argument("query")
@_tenant_option
@limit_option("Maximum hits.", default=20)
@token_budget_option("Stop before the hits' whole-document tokens exceed BUDGET (always at least one hit).")
@click.option("--tenant-statistics", is_flag=True,
              help="Score with N, avgdl and df of this tenant's documents only (Crux: global over all "
                   "tenants, which lets scores hint at other tenants' corpora).")
@contract_option
@_hit_formats
@data_dir_option
@fails_cleanly
def scan(query: str, tenant: str, limit: int, token_budget: Optional[int], tenant_statistics: bool,
         contract: str, fmt: str, data_dir: Path) -> None:
    """BM25 scan (Crux `query_scan`): hits charged at whole-document tokens against the budget."""
    with open_store(data_dir, "read") as store:
        lane = DocumentLane(store)
        payload = lane.query_scan(query, tenant, limit, token_budget, contract if fmt == "json" else "legacy",
                                  tenant_statistics)
        footer = _echo_hits(store, lane, payload, "scan", query, tenant, fmt)
        if footer is None:
            return
    truncated = " · truncated by the budget" if footer["budget_truncated"] else ""
    click.echo(f"{footer['tokens_returned']} tokens in {len(footer['scan'])} hit(s) of "
               f"{footer['total_candidates']} candidate(s){truncated}")


@click.command()
@click.argument("result_ids", nargs=-1, required=True)
@_tenant_option
@contract_option
@_json_option
@data_dir_option
@fails_cleanly
def expand(result_ids: tuple[str, ...], tenant: str, contract: str, as_json: bool, data_dir: Path) -> None:
    """Print the chunks behind result ids "SEGMENT_INDEX:DOC_ID" (from search or scan).

    Ids that resolve to nothing are named on stderr (`Error: ...`) and the exit status is 1.
    """
    with open_store(data_dir, "read") as store:
        lane = DocumentLane(store)
        if as_json:
            echo_json(lane.query_expand(list(result_ids), tenant, contract))
            return
        chunks, errors = lane.expand(list(result_ids), tenant)
    for chunk in chunks:
        click.echo(f"== {chunk.segment_index}:{chunk.doc_id}  {chunk.document_id} ({chunk.corpus_id}, "
                   f"chunk {chunk.chunk_id}, {chunk.token_count} tokens)")
        click.echo(chunk.text)
    for error in errors:
        click.echo(f"Error: {_expand_error(error)}", err=True)
    if errors:
        sys.exit(1)


@click.group()
def segments() -> None:
    """Sealed document segments."""


@segments.command("list")
@output_options()
@data_dir_option
@fails_cleanly
def segments_list(fmt: str, data_dir: Path) -> None:
    """List live segments in segment_index order."""
    with open_store(data_dir, "read") as store:
        rows = DocumentLane(store).segments()
    columns = ["segment_index", "segment_seq", "tenants", "chunk_count", "total_tokens", "byte_size", "sealed_at",
               "file_name", "blake3"]
    echo_rows(columns, [[getattr(row, c) for c in columns] for row in rows], fmt)


@click.group()
def documents() -> None:
    """Maintenance of the document lane."""


@documents.command("erase")
@tenant_option("Tenant whose document chunks are erased.", required=True)
@_json_option
@data_dir_option
@fails_cleanly
def documents_erase(tenant: str, as_json: bool, data_dir: Path) -> None:
    """Rewrite every segment holding TENANT's chunks without them (files, manifest and view)."""
    with open_store(data_dir, "write") as store:
        counts = DocumentLane(store).erase_tenant(tenant)
    if as_json:
        echo_json(counts)
        return
    click.echo(f"erased {counts['chunks_erased']} chunk(s) of tenant {tenant!r}: "
               f"{counts['segments_rewritten']} segment(s) rewritten, {counts['segments_removed']} removed")


COMMANDS = (ingest, search, scan, expand, segments, documents)
