"""Relevance-ranked recall (`recall`): which stored facts answer a question, best first, each on one line.

`query_facts` is Crux's contract (any query word as a substring, ranked by confidence and recency); this
is cruxsql's search engine beside it, over the same visibility pipeline (`VisibleFacts.visibility_plan` and
`VisibleFacts.visible_sql`: tenant, agent scope, entity filters, deleted, `as_of` valid time, superseded,
`known_at` transaction time).

Ranking, for a query's *concepts* (query_concepts.py: its words minus stopwords; consecutive words
naming a unit the index holds, such as `payments-api` or `Maria Okafor`, count as one concept, held only
by facts holding the unit; a quoted phrase is one required concept whose words must be adjacent; `-word`
excludes facts holding it):

1. candidates: the facts whose postings (`fact_terms`) hold any concept's term;
2. BM25F per fact: field term frequencies weighted (entity 3, key 2, value 1) and length-normalised per
   field, then `idf·tf·(k1+1)/(tf+k1)` summed over the query's terms (k1 1.2), idf over the caller's scopes;
3. coverage: the score is multiplied by the share of the query's idf mass held by the concepts the fact
   holds (concepts no visible fact holds weigh nothing); no floor: every fact holding a concept ranks (a
   floor dropped from the top 10 facts SQLite FTS5 returns), and a query nothing matches returns nothing;
4. tiers: facts holding every concept rank above those holding some;
5. prior: the score times `1 + PRIOR·(effective_confidence − 1)` (confidence, halved when stale); equal
   scores go newest first;
6. fusion (optional, `fusion=`; `auto` turns it on, `weighted`, when a real embedding model is given):
   the fact embeddings' cosine fused with BM25 by `0.5·bm25/max + 0.5·cosine` for a plain fact and
   `0.65·bm25/max + 0.35·cosine` for a conversation turn, whose BM25 holds the turn before's context
   (`weighted`), or by reciprocal rank (`rrf`); the dense lane's own candidates need cosine ≥
   DENSE_FLOOR. Weighted was measured ahead of RRF on paraphrases (tools/bench/bench_fact_recall.py: MRR
   0.90 vs 0.52 dev, 0.88 vs 0.67 held-out, MiniLM, 1k facts), hence the default.

Results are paged (`offset`, `top_k`, `total`, `has_more`) and cut to `token_budget` counting what the
agent receives: one line per fact (fact_lines.py: `entity · key: value`, then ` · age` when a day old or
more, `stale` past its freshness horizon; with `ids`, ` · age · id` always), a `+N more (offset=K)` line
when cut, the explain line when asked for, and `reserve` tokens for what the surface wraps around it.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Optional

import apsw
import numpy as np

from ..embeddings import EMBEDDER_ENV, Embedder, configured_embedder, embedder_named
from ..errors import InvalidInput
from ..facts import timestamps
from . import scope, time_cues, turn_context
from .fact_embeddings import fact_vectors
from .fact_analyzer import unit_term, words
from .fact_terms import FactTerms
from .freshness import STALE_DEMOTION_FACTOR
from .query_concepts import QUOTED, ParsedQuery, parse_query, phrase_holds, unit_candidates
from .arguments import TimeArg, count_arg, time_arg
from .fact_lines import fact_line, shared
from .turns import ENTITY_PREFIX as TURN_ENTITY_PREFIX, KEY_GLOB as TURN_KEY_GLOB, Turn, parse_turn, turn_line
from .visibility import VisibleFacts
from .tokens import compact_json, estimate_tokens

F32 = np.float32
K1 = 0.9
FIELD_WEIGHTS = np.array([3.0, 2.0, 1.0], dtype=F32)   # entity, key, value
FIELD_B = np.array([0.3, 0.3, 0.3], dtype=F32)
PRIOR = 0.1
DENSE_FLOOR = 0.3
DENSE_POOL = 50
LAZY_EMBED = 32            # facts lacking a vector a query embeds itself at most (BM25's best first)
LAZY_CHUNK = 4             # ... while a background indexer runs: this many at a time (MiniLM: ~15 ms)
LAZY_BUDGET_S = 0.01       # ... and the next chunk only this long after the first began
ABSORB_CHUNK = 1024        # facts lacking a vector a query looks up in the view at a time (`_DenseIndex.absorb`)
TIME_CUE_POOL = 200        # the best candidates a "when" question looks at for times (turn_context.py)
PREFIX_FROM = 256          # candidates above which BM25 alone ranks a prefix of them (`_rank_prefix`)
RRF_K = 60
WEIGHTED = (0.65, 0.35)    # a conversation turn's (bm25, cosine) shares; its BM25 holds the turn before's context
FACT_WEIGHTED = (0.5, 0.5)  # a plain fact's: its words alone, so the model's reading of it counts for more
DEFAULT_TOP_K = 10
DEFAULT_BUDGET = 400
MAX_TOP_K = 200
FUSIONS = ("auto", "bm25", "rrf", "weighted")
HASH_MODEL = "crux-local-hash-v1"
DAY_NS = 86400 * 1_000_000_000
# what `_rank` reads of each visible candidate: seq, eff, stored_at_ns, fact_id, and whether it is a turn
_RANKED_COLUMNS = (f"seq, eff, stored_at_ns, fact_id, key GLOB '{TURN_KEY_GLOB}' AND (entity GLOB "
                   f"'{TURN_ENTITY_PREFIX}*' OR entity GLOB '__agent::*::{TURN_ENTITY_PREFIX}*')")
_EMBEDDER_LOAD = threading.Lock()       # the fact indexer's thread and the calls' may load the model at once


# --- results --------------------------------------------------------------------------------------

def age_text(anchor_ns: int, now_ns: int) -> str:
    """A compact age: `now`, `5m`, `3h`, `2d`, `4mo`, `1y`."""
    seconds = max(0, (now_ns - anchor_ns) // 1_000_000_000)
    for unit, size in (("y", 365 * 86400), ("mo", 30 * 86400), ("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return "now"


@dataclass
class RecallHit:
    fact_id: str
    entity: str
    key: str
    value: str
    age: str
    confidence: float
    effective_confidence: float
    score: float
    all_terms: bool
    why: dict[str, Any] = field(default_factory=dict)
    age_ns: int = 0
    turn: Optional[Turn] = None         # the conversation turn the fact encodes (turns.py), if it is one

    def line(self, value: Optional[str] = None, ids: bool = False) -> str:
        """`entity · key: value`, then its age when a day old or more (`stale` past its freshness horizon);
        with `ids`, the age always and the fact id after it. A turn: `[conversation #position, time]
        speaker: text`, with `ids` the fact id and the caller's turn id."""
        if self.turn is not None:
            return turn_line(self.turn, value, *((self.fact_id, _turn_id(self.turn)) if ids else ()))
        stale = "stale" if self.effective_confidence < self.confidence else ""
        age = " ".join(a for a in (self.age if ids or self.age_ns >= DAY_NS else "", stale) if a)
        return fact_line(self.entity, self.key, self.value if value is None else value, age,
                         self.fact_id if ids else "")


@dataclass
class RecallResult:
    """One page of ranked facts within the budget; `total` counts every relevant visible fact."""

    query: str
    hits: list[RecallHit]
    total: int
    offset: int
    top_k: int
    token_budget: int
    fusion: str
    lines: list[str]
    explain: Optional[dict[str, Any]] = None
    ids: bool = True                    # each line ends with its age and fact id
    reserve: int = 0                    # tokens of the budget kept for what the surface wraps around the text
    unembedded: int = 0                 # facts of the caller's scopes the dense lane had no vector for

    @property
    def next_offset(self) -> Optional[int]:
        end = self.offset + len(self.hits)
        return end if end < self.total else None

    @property
    def has_more(self) -> bool:
        return self.next_offset is not None

    def text(self) -> str:
        if not self.lines:
            return "no relevant facts" if self.offset == 0 or self.total == 0 else \
                f"no relevant facts past offset {self.offset} ({self.total} in all)"
        return "\n".join(self.lines)

    def structured(self) -> dict[str, Any]:
        """The ids in the text's order and the paging counts, for Python callers (the MCP tool sends the
        text alone: its lines and `+N more (offset=K)` say the same)."""
        out: dict[str, Any] = {"ids": [h.fact_id for h in self.hits], "total": self.total, "offset": self.offset,
                               "returned": len(self.hits), "has_more": self.has_more,
                               "next_offset": self.next_offset}
        if self.explain is not None:
            out["explain"] = self.explain
        return out

    def answer(self) -> str:
        """What an agent receives: the text, then the explain line when asked for (one JSON object)."""
        if self.explain is None:
            return self.text()
        return f"{self.text()}\nexplain: {compact_json(self.explain)}"

    def to_dict(self) -> dict[str, Any]:
        """Everything, for `--json` and Python callers (not budgeted: the rows are whole)."""
        return {"query": self.query, "facts": [
            {"fact_id": h.fact_id, "entity": h.entity, "key": h.key, "value": h.value, "age": h.age,
             "confidence": h.confidence, "effective_confidence": h.effective_confidence, "score": h.score,
             "all_terms": h.all_terms, **({"turn": asdict(h.turn)} if h.turn is not None else {})}
            for h in self.hits],
            "total": self.total, "offset": self.offset, "returned": len(self.hits), "has_more": self.has_more,
            "next_offset": self.next_offset, "top_k": self.top_k, "token_budget": self.token_budget,
            "fusion": self.fusion, **({"explain": self.explain} if self.explain is not None else {})}


def _turn_id(turn: Turn) -> str:
    return f"id={turn.turn_id}" if turn.turn_id is not None else ""


# --- scoring --------------------------------------------------------------------------------------

@dataclass
class _Scored:
    seqs: np.ndarray          # candidates (holding a concept)
    bm25: np.ndarray
    all_terms: np.ndarray     # bool
    matched: np.ndarray       # concepts held (bool, candidates x concepts)


def _bm25(terms: FactTerms, tenant: str, agent: Optional[str], parsed: ParsedQuery) -> _Scored:
    """BM25F scores, tiers and exclusions over the candidates of the caller's scopes.

    Sparse: the candidates are the facts holding a concept (a name's unit, not each of its words), and only
    they are scored, each term's postings looked up at them: a common word of a name (`api`, `worker`)
    is read but not scored over the tens of thousands of facts holding it. Scores are the same float32
    sums, term after term, as over every fact holding any term."""
    concept_terms = [t for c in parsed.concepts for t in ([c.unit] if c.unit else []) + c.parts]
    wanted = list(dict.fromkeys(concept_terms + parsed.excluded))
    postings = terms.postings(tenant, agent, wanted)
    empty = _Scored(np.empty(0, np.int64), np.empty(0, F32), np.empty(0, bool), np.empty((0, 0), bool))
    query_terms = list(dict.fromkeys(concept_terms))
    if not any(t in postings for t in query_terms):
        return empty
    stats = terms.stats(tenant, agent)
    n = F32(max(stats.facts, 1))
    idf: dict[str, F32] = {}
    for term in query_terms:
        df = F32(len(postings[term].seqs) if term in postings else 0)
        idf[term] = F32(np.log((n - df + F32(0.5)) / (df + F32(0.5)) + F32(1.0)))
    nothing = np.empty(0, np.int64)

    def held(term: str) -> np.ndarray:
        return postings[term].seqs if term in postings else nothing

    holders = []
    weights = np.zeros(len(parsed.concepts), dtype=F32)
    for j, c in enumerate(parsed.concepts):
        parts = held(c.parts[0]) if c.parts else nothing
        for t in c.parts[1:]:
            parts = np.intersect1d(parts, held(t), assume_unique=True)
        # a name the index holds as a unit is held by the unit only (its words apart are another matter)
        holders.append(held(c.unit) if c.unit and c.phrase is None else
                       np.union1d(parts, held(c.unit)) if c.unit else parts)
        # a concept no fact of the caller's scopes holds weighs nothing: it cannot tell facts apart
        weights[j] = max(idf[c.unit] if c.unit else F32(0), F32(sum(idf[t] for t in c.parts if t in postings)))
    # the concepts each fact holds, marked over the seq range (no sort of the holders' union)
    size = max((int(h[-1]) + 1 for h in holders if len(h)), default=0)
    mask = np.zeros(size, dtype=bool)
    for h in holders:
        mask[h] = True
    union = np.flatnonzero(mask)
    matched = np.zeros((len(union), len(holders)), dtype=bool)
    for j, h in enumerate(holders):
        mask[:] = False
        mask[h] = True
        matched[:, j] = mask[union]
    share = (matched * weights).sum(axis=1) / max(F32(weights.sum()), F32(1e-9))
    keep = np.ones(len(union), dtype=bool)
    for j, c in enumerate(parsed.concepts):
        if c.phrase is not None:
            keep &= matched[:, j]
    for term in parsed.excluded:
        if term in postings:
            keep &= ~_lookup(postings[term].seqs, union)[0]
    seqs, share, matched = union[keep], share[keep], matched[keep]
    score = np.zeros(len(seqs), dtype=F32)
    for term in query_terms:
        if term not in postings:
            continue
        p = postings[term]
        found, at = _lookup(p.seqs, seqs)
        at = at[found]
        norm = F32(1.0) - FIELD_B + FIELD_B * p.lengths[at].astype(F32) / stats.avg_lengths
        tf = (p.tf[at].astype(F32) * FIELD_WEIGHTS / norm).sum(axis=1)
        score[found] += idf[term] * tf * F32(K1 + 1) / (tf + F32(K1))
    score *= share                     # a fact missing a concept loses that concept's share of the score
    return _Scored(seqs, score, np.asarray(matched.all(axis=1), dtype=bool), matched)


def _in_context(db: apsw.Connection, scored: _Scored, question: str) -> _Scored:
    """`scored` with each turn's best neighbouring turn added to its score (the neighbours of the best
    turns become candidates), and, for a question asking when, the best candidates that say when
    preferred (turn_context.py)."""
    seqs, scores = turn_context.with_neighbours(db, scored.seqs, scored.bm25)
    if turn_context.asks_when(question) and len(seqs):
        best = np.sort(seqs[np.argsort(-scores, kind="stable")[:TIME_CUE_POOL]])
        values = dict(db.execute("SELECT seq, value FROM facts WHERE seq IN carray(?)", (apsw.carray(best),)))
        scores = scores.copy()
        at = np.searchsorted(seqs, best)
        scores[at] *= turn_context.time_factors([values.get(int(s), "") for s in best.tolist()])
    window = _question_window(db, seqs, scores, question)
    if window is not None:
        best = np.sort(seqs[np.argsort(-scores, kind="stable")[:TIME_CUE_POOL]])
        times = _turn_times(db, best)
        inside = np.array([t is not None and window[0] <= t < window[1] for t in times], dtype=bool)
        scores = scores.copy()
        scores[np.searchsorted(seqs, best[inside])] *= F32(1.0 + time_cues.WINDOW_BOOST)
    if len(seqs) == len(scored.seqs):
        return _Scored(seqs, scores, scored.all_terms, scored.matched)
    held = np.isin(seqs, scored.seqs, assume_unique=True)
    all_terms = np.zeros(len(seqs), dtype=bool)
    all_terms[held] = scored.all_terms
    matched = np.zeros((len(seqs), scored.matched.shape[1]), dtype=bool)
    matched[held] = scored.matched
    return _Scored(seqs, scores, all_terms, matched)


def _turn_times(db: apsw.Connection, seqs: np.ndarray) -> list[Optional[int]]:
    """Per fact of `seqs`, its turn's time in ns (None: not a turn, or a turn without time)."""
    rows = {r[0]: r[1:] for r in db.execute(
        "SELECT seq, entity, key, value, source_receipt FROM facts WHERE seq IN carray(?)",
        (apsw.carray(np.ascontiguousarray(seqs, dtype=np.int64)),))}
    turns = [parse_turn(*rows[s]) if s in rows else None for s in seqs.tolist()]
    return [timestamps.parse_ns(t.time) if t is not None and t.time else None for t in turns]


def _question_window(db: apsw.Connection, seqs: np.ndarray, scores: np.ndarray, question: str
                     ) -> Optional[tuple[int, int]]:
    """The time window the question names (time_cues.py); a relative one read at the latest turn time of
    the conversation of the best-scoring turn."""
    named = time_cues.named_window(question)
    phrase = time_cues.relative_phrase(question)
    if named is not None or phrase is None or not len(seqs):
        return named
    best = int(seqs[int(np.argmax(scores))])
    last = db.execute(
        "SELECT l.entity, l.key, l.value, l.source_receipt FROM facts b JOIN facts l ON l.seq = (SELECT seq FROM "
        "facts WHERE tenant_hash = b.tenant_hash AND entity = b.entity AND key GLOB ? AND deleted = 0 "
        "ORDER BY key DESC LIMIT 1) WHERE b.seq = ?", (TURN_KEY_GLOB, best)).fetchone()
    turn = parse_turn(*last) if last is not None else None
    if turn is None or not turn.time:
        return None
    return time_cues.relative_window(phrase, timestamps.parse_ns(turn.time))


def default_embedder() -> Optional[Embedder]:
    """The dense lane's model: the one `CRUXSQL_EMBEDDER` names when it is set, else all-MiniLM-L6-v2 when
    the `[semantic]` extra is installed, else none (BM25 alone: the hash embedder's cosine adds nothing
    BM25 has not, measured in tools/bench/bench_fact_recall.py)."""
    if os.environ.get(EMBEDDER_ENV):
        return configured_embedder()
    try:
        return embedder_named("minilm")
    except InvalidInput:
        return None


def shared_embedder(recall: VisibleFacts) -> Optional[Embedder]:
    """`default_embedder()`, loaded once per `Recall` (a server's calls and its fact indexer share it)."""
    with _EMBEDDER_LOAD:
        if "embedder" not in recall.search_cache:
            recall.search_cache["embedder"] = default_embedder()
    return recall.search_cache["embedder"]


def _embedder_is_real(embedder: Optional[Embedder]) -> bool:
    return embedder is not None and embedder.model() != HASH_MODEL


@dataclass
class _DenseIndex:
    """The caller's scopes' facts in seq order, their unit vectors (a zero row where a fact has none yet)
    and which have one; kept on the `Recall` until the index moves, filled in place as vectors arrive."""

    seqs: np.ndarray
    ids: list[str]
    matrix: np.ndarray
    has: np.ndarray

    def put(self, at: np.ndarray, vectors: np.ndarray) -> None:
        norms = np.linalg.norm(vectors, axis=1)
        self.matrix[at] = vectors / np.where(norms > 0, norms, 1)[:, None]
        self.has[at] = True

    def absorb(self, db: apsw.Connection, profile: str) -> None:
        """Take the vectors kept in the view (by the indexer or another process) for facts that had none,
        oldest first as the indexer goes: ABSORB_CHUNK of them at a time, the next chunk only while the last
        one was filled to its end (so a query reads what arrived since the last one, not every missing fact)."""
        missing = np.flatnonzero(~self.has)
        for start in range(0, len(missing), ABSORB_CHUNK):
            at = missing[start:start + ABSORB_CHUNK]
            found: list[tuple[int, bytes]] = db.execute(  # type: ignore[assignment]
                "SELECT f.seq, e.vector FROM facts f JOIN fact_embeddings e ON e.fact_id = f.fact_id "
                "AND e.profile_hash = ? WHERE f.seq IN carray(?)",
                (profile, apsw.carray(np.ascontiguousarray(self.seqs[at])))).fetchall()
            if found:
                self.put(np.searchsorted(self.seqs, np.array([seq for seq, _ in found], dtype=np.int64)),
                         np.stack([np.frombuffer(blob, dtype="<f4") for _, blob in found]).astype(F32))
            if not self.has[at[-1]]:
                return


def _dense_index(recall: VisibleFacts, embedder: Embedder, tenant: str, agent: Optional[str]) -> _DenseIndex:
    """The dense index of the caller's scopes, read from the view's kept vectors (none embedded here)."""
    db = recall.db
    profile = embedder.semantic_profile().hash
    # the index's state, and the newest text row: the unindexed tail's facts are in the matrix too
    state = db.execute("SELECT generation, last_seq, (SELECT max(seq) FROM recall_text) FROM recall_index_state "
                       "WHERE id = 1").fetchone()
    key = (profile, tenant, agent, state)
    cache = recall.search_cache.get("dense")
    if cache is not None and cache[0] == key:
        index: _DenseIndex = cache[1]
        missing = np.flatnonzero(~index.has)
        if len(missing) and db.execute("SELECT 1 FROM fact_embeddings WHERE fact_id = ? AND profile_hash = ?",
                                       (index.ids[int(missing[0])], profile)).fetchone():
            index.absorb(db, profile)   # the indexer (oldest first) has moved since: take what it kept
        return index
    rows = db.execute(
        "SELECT f.seq, f.fact_id, e.vector FROM facts f JOIN recall_text t ON t.seq = f.seq "
        "LEFT JOIN fact_embeddings e ON e.fact_id = f.fact_id AND e.profile_hash = ? "
        "WHERE f.tenant_hash = ? AND f.deleted = 0 AND ((t.owner IS NULL AND f.private = 0) OR t.owner = ?) "
        "ORDER BY f.seq", (profile, tenant, agent)).fetchall()
    index = _DenseIndex(np.array([r[0] for r in rows], dtype=np.int64), [str(r[1]) for r in rows],
                        np.zeros((len(rows), embedder.dimensions()), F32), np.zeros(len(rows), bool))
    kept = np.array([i for i, r in enumerate(rows) if r[2] is not None], dtype=np.int64)
    if len(kept):
        index.put(kept, np.stack([np.frombuffer(bytes(rows[i][2]), dtype="<f4") for i in kept.tolist()]).astype(F32))
    recall.search_cache["dense"] = (key, index)
    return index


def _embed_best(recall: VisibleFacts, embedder: Embedder, index: _DenseIndex, scored: _Scored) -> None:
    """Embed (and keep) up to LAZY_EMBED facts that have no vector yet: BM25's best candidates first, then
    the oldest (as the indexer goes), so a small store is whole after its first query. Where a background
    indexer is running (`fact_indexer.FactIndexer.for_recall`), LAZY_CHUNK at a time and the next chunk
    only within LAZY_BUDGET_S of the first: a query arriving while it fills a large store spends a bounded
    time on the model and leaves the rest to it."""
    found, at = _lookup(index.seqs, scored.seqs[np.lexsort((-scored.bm25, ~scored.all_terms))])
    best = at[found][~index.has[at[found]]][:LAZY_EMBED]
    oldest = np.flatnonzero(~index.has)[:LAZY_EMBED]
    wanted = np.concatenate([best, oldest[~np.isin(oldest, best)]])[:LAZY_EMBED]
    bounded = getattr(recall.search_cache.get("indexer"), "running", False)
    chunk_size = LAZY_CHUNK if bounded else LAZY_EMBED
    started = time.perf_counter()
    for start in range(0, len(wanted), chunk_size):
        if start and time.perf_counter() - started > LAZY_BUDGET_S:
            return
        chunk = np.sort(wanted[start:start + chunk_size])
        rows = recall.db.execute(
            "SELECT f.fact_id, coalesce(t.visible_entity, f.entity), f.key, f.value FROM facts f JOIN recall_text t "
            "ON t.seq = f.seq WHERE f.seq IN carray(?)", (apsw.carray(np.ascontiguousarray(index.seqs[chunk])),))
        vectors = fact_vectors(recall.db, embedder, [(str(r[0]), str(r[1]), str(r[2]), str(r[3])) for r in rows])
        index.put(chunk, np.stack([vectors[index.ids[i]] for i in chunk.tolist()]).astype(F32))


def _dense(recall: VisibleFacts, embedder: Embedder, tenant: str, agent: Optional[str], text: str, scored: _Scored
           ) -> tuple[np.ndarray, np.ndarray, int]:
    """(seqs, cosines) of the facts of the caller's scopes that have a vector, best first, and how many
    have none. A query embeds at most LAZY_EMBED facts itself, BM25's best candidates lacking a vector
    (kept in `fact_embeddings`); the rest wait for the indexer or `cruxsql embed --facts`, ranked by BM25
    alone meanwhile."""
    index = _dense_index(recall, embedder, tenant, agent)
    _embed_best(recall, embedder, index, scored)
    q = np.asarray(embedder.embed_one(text), dtype=F32)
    q /= max(F32(np.linalg.norm(q)), F32(1e-12))
    cos = index.matrix @ q
    cos[~index.has] = F32(-1.0)
    pool = min(DENSE_POOL * 4, len(cos))
    top = np.argpartition(-cos, pool - 1)[:pool] if pool < len(cos) else np.arange(len(cos))
    top = top[np.lexsort((top, -cos[top]))]         # best first, ties by position (seq)
    top = top[index.has[top]]
    return index.seqs[top], cos[top], int(len(index.has) - index.has.sum())


# --- search ---------------------------------------------------------------------------------------

@dataclass
class _Ranked:
    seq: int
    fact_id: str
    stored_at_ns: int
    score: float
    all_terms: bool
    why: dict[str, Any]


def _time_filters(plan: Any, times: dict[str, Optional[int]], key: Optional[str], actor: Optional[str]) -> list[str]:
    """Conditions on the visible rows' columns for the key, actor, stored and valid time filters."""
    conditions = {"key": "key = :r_key", "actor": "actor = :r_actor", "stored_after": "stored_at_ns >= :r_stored_after",
                  "stored_before": "stored_at_ns < :r_stored_before",
                  "valid_after": "(valid_to IS NULL OR valid_to > :r_valid_after)",
                  "valid_before": "(valid_from IS NULL OR valid_from < :r_valid_before)"}
    out = []
    for name, value in {"key": key, "actor": actor, **times}.items():
        if value is not None:
            plan.params[f"r_{name}"] = value
            out.append(conditions[name])
    return out


def _with_phrases(db: apsw.Connection, visible: list[tuple], phrases: list[tuple[int, list[str]]]) -> list[tuple]:
    """The visible rows whose entity, key or value holds every quoted phrase's words adjacently."""
    seqs = np.array([r[0] for r in visible], dtype=np.int64)
    texts = {seq: rest for seq, *rest in db.execute(
        "SELECT f.seq, coalesce(t.visible_entity, f.entity), f.key, f.value FROM facts f JOIN recall_text t "
        "ON t.seq = f.seq WHERE f.seq IN carray(?)", (apsw.carray(seqs),))}
    return [r for r in visible if all(phrase_holds(phrase, tuple(texts[r[0]])) for _, phrase in phrases)]


def _lookup(keys: np.ndarray, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(found, position) of each `wanted` seq in the ascending `keys` (position valid where found)."""
    if not len(keys):
        return np.zeros(len(wanted), bool), np.zeros(len(wanted), np.int64)
    at = np.minimum(np.searchsorted(keys, wanted), len(keys) - 1)
    return keys[at] == wanted, at


def _rank(visible: list[tuple], scored: _Scored, parsed: ParsedQuery, dense_seqs: np.ndarray,
          dense_cos: np.ndarray, used: str, start: int, stop: int) -> tuple[int, list[_Ranked]]:
    """(how many visible candidates rank, those ranked start..stop) in ranking order: tier (all concepts
    held) first, then the BM25 score with the confidence prior, or its fusion with the dense ranking
    (`rrf`, `weighted`); equal scores newest first, then by seq."""
    seqs = np.array([r[0] for r in visible], dtype=np.int64)
    eff = np.array([r[1] for r in visible], dtype=np.float64)
    stored = np.array([r[2] for r in visible], dtype=np.int64)
    lexical, at = _lookup(scored.seqs, seqs)
    bm25 = (np.where(lexical, scored.bm25[at].astype(np.float64) * (1.0 + PRIOR * (eff - 1.0)), 0.0)
            if len(scored.seqs) else np.zeros(len(seqs)))   # BM25 scored none: the dense lane's candidates alone
    tier = lexical & scored.all_terms[at] if len(scored.seqs) else np.zeros(len(seqs), bool)
    dense_order = np.argsort(dense_seqs, kind="stable")
    has_cos, dat = _lookup(dense_seqs[dense_order], seqs)
    cos = np.where(has_cos, dense_cos[dense_order][dat] if len(dense_seqs) else 0.0, -1.0)

    def ranks(eligible: np.ndarray, order: np.ndarray) -> np.ndarray:
        out = np.zeros(len(seqs), dtype=np.int64)
        picked = order[eligible[order]]
        out[picked] = np.arange(1, len(picked) + 1)
        return out

    bm25_rank = ranks(lexical, np.lexsort((-seqs, -stored, -bm25, ~tier)))
    dense_rank = ranks(cos >= DENSE_FLOOR, np.lexsort((seqs, -cos))) if used != "bm25" else np.zeros(len(seqs), np.int64)
    if used == "rrf":
        score = np.where(bm25_rank > 0, 1.0 / (RRF_K + bm25_rank), 0.0) + np.where(
            dense_rank > 0, 1.0 / (RRF_K + dense_rank), 0.0)
    elif used == "weighted":
        top = bm25.max(initial=0.0) or 1.0
        turn = np.array([bool(r[4]) for r in visible], dtype=bool)
        lexical_share = np.where(turn, WEIGHTED[0], FACT_WEIGHTED[0])
        dense_share = np.where(turn, WEIGHTED[1], FACT_WEIGHTED[1])
        score = lexical_share * bm25 / top + dense_share * np.maximum(np.where(dense_rank > 0, cos, 0.0), 0.0)
    else:
        score = bm25
    keep = (bm25_rank > 0) | (dense_rank > 0)
    order = np.lexsort((-seqs, -stored, -score, ~tier))
    order = order[keep[order]]
    page = []
    for i in order[start:stop].tolist():
        why: dict[str, Any] = {"bm25": round(float(bm25[i]), 4), "effective_confidence": float(eff[i])}
        if lexical[i]:
            held = scored.matched[at[i]]
            why["matched"] = [c.text for c, h in zip(parsed.concepts, held) if h]
            why["missing"] = [c.text for c, h in zip(parsed.concepts, held) if not h]
        if used != "bm25":
            why.update({"dense": round(float(cos[i]), 4) if has_cos[i] else None,
                        "rank_bm25": int(bm25_rank[i]) or None, "rank_dense": int(dense_rank[i]) or None})
        page.append(_Ranked(int(seqs[i]), visible[i][3], int(stored[i]), float(score[i]), bool(tier[i]), why))
    return len(order), page


def _rank_prefix(select: Callable[[np.ndarray, str], list[tuple]], scored: _Scored, parsed: ParsedQuery,
                 start: int, stop: int) -> Optional[tuple[int, list[_Ranked]]]:
    """`_rank` of BM25 alone over many candidates, reading the ranking columns of a prefix only: the
    visible candidates are counted, then the best by (tier, BM25) are ranked, more of them until no other
    can come before the `stop`-th. The prior multiplies a score by at most `1 + PRIOR·(e − 1)`, e the
    largest effective confidence a visible candidate can have, so a candidate of the `stop`-th's tier
    whose BM25 times that is below the `stop`-th's score ranks after it, as does any of a lower tier.
    None when the prior could be negative (the bound fails): rank them all."""
    ((count, top_confidence),) = select(scored.seqs, "count(*), max(confidence)")
    if not count or stop == 0:
        return count, []
    most = 1.0 + PRIOR * (max(top_confidence, top_confidence * STALE_DEMOTION_FACTOR) - 1.0)
    if most < 0:
        return None
    order = np.lexsort((-scored.bm25, ~scored.all_terms))
    size = max(4 * stop, 64)
    while True:
        size = min(size, len(order))
        prefix = np.sort(scored.seqs[order[:size]])
        _, page = _rank(select(prefix, _RANKED_COLUMNS), scored, parsed, np.empty(0, np.int64),
                        np.empty(0, F32), "bm25", 0, stop)
        if size == len(order):
            return count, page[start:]
        if len(page) == stop:
            last, following = page[-1], order[size]
            tier = bool(scored.all_terms[following])
            if tier < last.all_terms or (tier == last.all_terms and float(scored.bm25[following]) * most < last.score):
                return count, page[start:]
        size *= 8


def _count(value: Optional[int], name: str, default: int) -> int:
    checked = count_arg(value, name)
    return default if checked is None else checked


def search(recall: VisibleFacts, text: str, *, entity: Optional[str] = None, entity_prefix: Optional[str] = None,
           key: Optional[str] = None, actor: Optional[str] = None, tenant: Optional[str] = None,
           agent: Optional[str] = None, stored_after: TimeArg = None, stored_before: TimeArg = None,
           valid_after: TimeArg = None, valid_before: TimeArg = None, as_of: TimeArg = None,
           known_at: TimeArg = None, include_superseded: bool = False, top_k: Optional[int] = DEFAULT_TOP_K,
           offset: Optional[int] = 0, token_budget: Optional[int] = None, fusion: Optional[str] = "auto",
           embedder: Optional[Embedder] = None, explain: bool = False, ids: bool = True, reserve: int = 0,
           now: TimeArg = None) -> RecallResult:
    """The facts most relevant to `text` visible to `agent` in `tenant`, best first (see the module
    docstring). Filters: `entity` (stored or the caller's logical entity), `entity_prefix`, `key`,
    `actor`, stored time in [`stored_after`, `stored_before`), valid time overlapping [`valid_after`,
    `valid_before`), `as_of` (valid at), `known_at` (as the store believed then). `embedder`: the dense
    lane's model (`fusion='auto'` uses it when it is a real model, not the hash embedder). `ids`: each line
    ends with its age and fact id; `reserve`: tokens of the budget kept for what carries the text."""
    if not isinstance(text, str):
        raise InvalidInput(f"query must be a string, got {text!r}")
    top_k = _count(top_k, "top_k", DEFAULT_TOP_K)
    if top_k > MAX_TOP_K:
        raise InvalidInput(f"top_k must be at most {MAX_TOP_K}, got {top_k}")
    offset = _count(offset, "offset", 0)
    budget = _count(token_budget, "token_budget", DEFAULT_BUDGET)
    fusion = "auto" if fusion is None else fusion
    if fusion not in FUSIONS:
        raise InvalidInput(f"fusion must be one of {', '.join(FUSIONS)}, got {fusion!r}")
    if fusion in ("rrf", "weighted") and embedder is None:
        raise InvalidInput(f"fusion {fusion!r} needs an embedder (CRUXSQL_EMBEDDER=hash or minilm)")
    times = {name: time_arg(value, name) for name, value in (
        ("stored_after", stored_after), ("stored_before", stored_before), ("valid_after", valid_after),
        ("valid_before", valid_before))}
    as_of_ns, known_ns, now_ns = time_arg(as_of, "as_of"), time_arg(known_at, "known_at"), time_arg(now, "now")
    if now_ns is None:
        now_ns = timestamps.now_ns() if known_ns is None else min(timestamps.now_ns(), known_ns)
    used = fusion if fusion != "auto" else ("weighted" if _embedder_is_real(embedder) else "bm25")
    agent = scope.normalize_agent(agent)
    tenant_name = scope.normalize_tenant(tenant)
    recall.prepare(known_ns)
    terms = recall.index.terms
    phrase_texts = QUOTED.findall(text)
    spans = unit_candidates(QUOTED.sub(" ", text)) + [unit_term(words(p)) for p in phrase_texts if len(words(p)) > 1]
    known_units = set(terms.postings(tenant_name, agent, spans)) if spans else set()
    parsed = parse_query(text, known_units)
    result = RecallResult(text, [], 0, offset, top_k, budget, used, [], ids=ids, reserve=reserve)
    if not parsed.concepts:
        return _finish(result, [], parsed, explain, embedder)
    scored = _in_context(recall.db, _bm25(terms, tenant_name, agent, parsed), text)
    dense_seqs, dense_cos = np.empty(0, np.int64), np.empty(0, F32)
    if used != "bm25" and embedder is not None:
        dense_seqs, dense_cos, result.unembedded = _dense(recall, embedder, tenant_name, agent, text, scored)
    phrases = [(j, c.phrase) for j, c in enumerate(parsed.concepts) if c.phrase is not None]
    dense_pool = dense_seqs[dense_cos >= F32(DENSE_FLOOR)][:DENSE_POOL]
    if parsed.excluded and len(dense_pool):
        held = [p.seqs for p in terms.postings(tenant_name, agent, parsed.excluded).values()]
        if held:
            dense_pool = dense_pool[~np.isin(dense_pool, np.concatenate(held))]
    pool = np.union1d(scored.seqs, dense_pool) if len(dense_pool) else scored.seqs
    plan = recall.visibility_plan(tenant_name, agent, now_ns, entity, entity_prefix)
    visible_sql = recall.visible_sql(plan, recall.decay(), known_ns, as_of_ns, include_superseded)
    extra = _time_filters(plan, times, key, actor)

    def select(seqs: np.ndarray, columns: str) -> list[tuple]:
        """`columns` of the visible rows among the facts `seqs`, the filters applied."""
        plan.params["cand"] = apsw.carray(np.ascontiguousarray(seqs, dtype=np.int64))
        return recall.db.execute(
            f"SELECT {columns} FROM ({visible_sql(plan.where + ['f.seq IN carray(:cand)'])})"
            + (" WHERE " + " AND ".join(extra) if extra else ""), plan.params).fetchall()

    ranked = None
    if used == "bm25" and not phrases and len(pool) > PREFIX_FROM:
        ranked = _rank_prefix(select, scored, parsed, offset, offset + top_k)
    if ranked is None:
        visible = select(pool, _RANKED_COLUMNS) if len(pool) else []
        if phrases and visible:
            visible = _with_phrases(recall.db, visible, phrases)
        ranked = _rank(visible, scored, parsed, dense_seqs, dense_cos, used, offset, offset + top_k)
    result.total, page = ranked
    hits: list[RecallHit] = []
    if page:
        plan.params["page"] = apsw.carray(np.array([r.seq for r in page], dtype=np.int64))
        rows = {r[0]: r for r in recall.db.execute(
            f"SELECT seq, fact_id, CASE WHEN owner IS NOT NULL THEN visible_entity ELSE entity END, key, value, "
            f"confidence, eff, stored_at_ns, source_receipt "
            f"FROM ({visible_sql(plan.where + ['f.seq IN carray(:page)'])})", plan.params)}
        hits = [RecallHit(r.fact_id, row[2], row[3], row[4], age_text(row[7], now_ns), row[5], row[6], r.score,
                          r.all_terms, r.why, now_ns - row[7], parse_turn(row[2], row[3], row[4], row[8]))
                for r in page for row in [rows[r.seq]]]
    return _finish(result, hits, parsed, explain, embedder)


def _finish(result: RecallResult, hits: list[RecallHit], parsed: ParsedQuery, explain: bool,
            embedder: Optional[Embedder]) -> RecallResult:
    """Keep the hits whose lines, the `+N more` line and the explain line fit the budget as the agent
    receives them (a JSON string, `reserve` counted): the first always, its value cut if alone it does not."""
    why = [{"id": h.fact_id, "all_terms": h.all_terms, **h.why} for h in hits]
    if explain:
        result.explain = {"fusion": result.fusion, "embedder": embedder.model() if embedder is not None else None,
                          "concepts": [c.text for c in parsed.concepts], "excluded": parsed.excluded,
                          "prior": PRIOR, "hits": []}
        if result.fusion != "bm25":
            result.explain["unembedded"] = result.unembedded

    def shaped(lines: list[str]) -> RecallResult:
        result.hits, result.lines = hits[:len(lines)], list(lines)
        if result.explain is not None:
            result.explain["hits"] = why[:len(lines)]
        more = result.total - result.offset - len(lines)
        if more > 0 and lines:
            result.lines.append(f"+{more} more (offset={result.offset + len(lines)})")
        return result

    lines = shared(len(hits), lambda i, value: hits[i].line(value, result.ids), lambda i: hits[i].value,
                   lambda lines: estimate_tokens(shaped(lines).answer()) + result.reserve, result.token_budget)
    return shaped(lines)
