"""ctx_search: ranked lexical search over the workspace, grouped per file, paginated over files.

Candidates and base scores come from the document lane's BM25 (`Bm25Corpus`) over per-file postings;
the ranking stack of `ranking.py` reorders them. Modes: `content` (grouped `line: text ∈ symbol`
lines), `paths` (one line per file), `count`. `exhaustive=True` skips ranking and caps and lists
every matching line in path order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import apsw
import numpy as np

from ..documents.analyzer import analyze, normalize, surface_words
from ..documents.bm25 import Bm25Corpus, SegmentDocs
from ..documents.postings import QueryPostings, decode_tfs
from ..errors import InvalidInput
from . import cochange, ranking
from .outline import Symbol, enclosing
from .ranking import RankingConfig
from .reply import Reply, trim
from .snapshot import load

SEARCH_MODES = ("content", "paths", "count")
_IMPORT_LINE = re.compile(r"^\s*(import\s|from\s+\S+\s+import\s|#\s*include\b|use\s|require\(|.*=\s*require\()")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass
class RankedFile:
    path: str
    path_class: str
    score: float
    tier: int
    occurrences: int
    matched_terms: int
    defines: list[str] = field(default_factory=list)
    why: dict[str, float] = field(default_factory=dict)

    @property
    def weak(self) -> bool:
        return self.tier > 0 and self.why.get("coverage", 1.0) < 1.0


@dataclass
class Ranking:
    terms: list[str]
    files: list[RankedFile]
    missing: list[str]


class WorkspaceBm25:
    """The document lane's BM25 over the workspace: every file is a one-document segment."""

    def __init__(self, db: apsw.Connection) -> None:
        self.db = db
        rows = list(db.execute("SELECT file_id, path, path_class, length, lines FROM files ORDER BY file_id"))
        self.file_ids = [row[0] for row in rows]
        self.index_of = {fid: i for i, fid in enumerate(self.file_ids)}
        self.rows = rows
        one = np.zeros(1, dtype=np.uint32)
        self.corpus = Bm25Corpus([SegmentDocs(fid, np.array([length], dtype=np.uint32), ("",), one)
                                  for fid, _, _, length, _ in rows])

    def postings(self, terms: list[str]) -> list[tuple[str, int, int, bytes, bytes]]:
        marks = ",".join("?" * len(terms))
        return [(term, self.index_of[fid], count, ids, tfs) for term, fid, count, ids, tfs in self.db.execute(
            f"SELECT term, file_id, doc_count, doc_ids, tfs FROM postings WHERE term IN ({marks}) "
            "ORDER BY term, file_id", tuple(terms))]

    def rank(self, query: str, config: RankingConfig) -> Ranking:
        tokens = analyze(query)
        terms = list(dict.fromkeys(tokens))
        if not terms:
            return Ranking([], [], [])
        rows = self.postings(terms)
        result = self.corpus.search(query, lambda ts: QueryPostings.from_rows([r for r in rows if r[0] in ts]),
                                    top_k=len(self.file_ids))
        per_file: dict[int, dict[str, int]] = {}
        for term, index, count, _, encoded_tfs in rows:
            per_file.setdefault(index, {})[term] = int(decode_tfs(encoded_tfs, count)[0])
        defines = defining_files(self.db, query)
        hops: dict[str, int] = {}
        if defines and config.graph_distance:
            hops = ranking.graph_hops(set(defines), import_edges(self.db))
        shared = cochange.shared_with(self.db, set(defines)) if config.cochange else {}
        average = (sum(row[4] for row in self.rows) / len(self.rows)) if self.rows else 0.0
        counts = [sum(tfs.values()) for tfs in per_file.values()]
        low, high = (min(counts), max(counts)) if counts else (0, 0)
        single = len(terms) == 1
        files = []
        for hit in result.hits:
            fid, path, cls, _, lines = self.rows[hit.segment_index]
            tfs = per_file.get(hit.segment_index, {})
            occurrences = sum(tfs.values())
            why = {"bm25": round(hit.score, 4), "coverage": round(len(tfs) / len(terms), 4),
                   "eponymy": ranking.eponymy(path, terms, config),
                   "defines": config.defines_boost if path in defines else 1.0,
                   "prior": ranking.path_prior(path, cls, config),
                   "saturation": ranking.saturation(occurrences, low, high, config) if single else 1.0,
                   "graph": ranking.graph_factor(hops.get(path), config),
                   "cochange": ranking.cochange_factor(shared.get(path, 0), config),
                   "size": ranking.size_factor(lines, average, cls, config)}
            score = hit.score
            for name in ("eponymy", "defines", "prior", "saturation", "graph", "cochange", "size"):
                score *= why[name]
            tier = 0 if (config.defines_first and path in defines) else 1
            files.append(RankedFile(path, cls, score, tier, occurrences, len(tfs), defines.get(path, []), why))
        files.sort(key=lambda f: (f.tier, -f.score, f.path))
        return Ranking(terms, files, result.coverage.missing_tokens)


def defining_files(db: apsw.Connection, query: str) -> dict[str, list[str]]:
    """Files defining a symbol the query names (exact name, else case-insensitive), with the names."""
    found: dict[str, list[str]] = {}
    for word in dict.fromkeys(_IDENTIFIER.findall(query)):
        if len(word) < 3:
            continue
        rows = list(db.execute("SELECT DISTINCT f.path, s.name FROM symbols s JOIN files f USING(file_id) "
                               "WHERE s.name=? ORDER BY f.path", (word,)))
        if not rows:
            rows = list(db.execute("SELECT DISTINCT f.path, s.name FROM symbols s JOIN files f USING(file_id) "
                                   "WHERE lower(s.name)=lower(?) ORDER BY f.path", (word,)))
        for path, name in rows:
            if name not in found.setdefault(path, []):
                found[path].append(name)
    return found


def import_edges(db: apsw.Connection) -> dict[str, set[str]]:
    """The undirected import graph between workspace files."""
    edges: dict[str, set[str]] = {}
    for source, target in db.execute(
            "SELECT f.path, i.resolved FROM imports i JOIN files f USING(file_id) WHERE i.resolved IS NOT NULL"):
        if source != target:
            edges.setdefault(source, set()).add(target)
            edges.setdefault(target, set()).add(source)
    return edges


# ---- line hits ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class LineHit:
    line: int
    text: str
    symbol: Optional[Symbol]
    is_import: bool
    is_definition: bool


def line_hits(text: str, query: str, terms: list[str], symbols: list[Symbol]) -> list[LineHit]:
    """Lines holding the query: a lone identifier by case-insensitive word match, else lines holding
    every term (or, when no line holds them all, any term). Definitions first, imports last."""
    lines = text.splitlines()
    words = surface_words(query)
    lone = len(words) == 1 or bool(re.fullmatch(r"[A-Za-z_][\w.]*", query.strip()))
    pattern = re.compile(r"(?<![\w])" + re.escape(query.strip()) + r"(?![\w])", re.IGNORECASE) if lone else None
    wanted = set(terms)
    matched: list[int] = []
    partial: list[int] = []
    for number, line in enumerate(lines, start=1):
        if pattern is not None:
            if pattern.search(line):
                matched.append(number)
            continue
        present = wanted & {normalize(w) for w in surface_words(line)}
        if present == wanted:
            matched.append(number)
        elif present:
            partial.append(number)
    chosen = matched or ([] if pattern is not None else partial)
    starts = {s.start for s in symbols} | {s.start + 1 for s in symbols if s.signature.startswith("@")}
    hits = [LineHit(n, lines[n - 1], enclosing(symbols, n), bool(_IMPORT_LINE.match(lines[n - 1])),
                    n in starts or bool(re.match(r"\s*(async\s+def|def|class)\s", lines[n - 1])))
            for n in chosen]
    hits.sort(key=lambda h: (h.is_import, not h.is_definition, h.line))
    return hits


def _focus(line: str, query: str) -> int:
    lowered = line.lower()
    for word in surface_words(query):
        at = lowered.find(word.lower())
        if at >= 0:
            return at
    return 0


def _render_hit(hit: LineHit, query: str, width: int) -> str:
    where = f"  ∈ {hit.symbol.qualname}" if hit.symbol and not hit.is_definition else ""
    return f"  {hit.line:>{width}}: {trim(hit.text, _focus(hit.text, query))}{where}"


def _file_label(f: RankedFile, count: Optional[int] = None) -> str:
    n = f" ({count})" if count is not None else f" ({f.occurrences})"
    cls = f" [{f.path_class}]" if f.path_class != "code" else ""
    defines = f" defines {', '.join(f.defines)}" if f.defines else ""
    weak = " [weak: not every term]" if f.weak else ""
    return f"{f.path}{n}{cls}{defines}{weak}"


def ctx_search(db: apsw.Connection, root: Path, query: str, mode: str = "content", offset: int = 0,
               limit: int = 0, per_file: int = 5, exhaustive: bool = False,
               config: RankingConfig = RankingConfig(), bm25: Optional[WorkspaceBm25] = None) -> Reply:
    if not query.strip():
        raise InvalidInput("query is empty")
    if mode not in SEARCH_MODES:
        raise InvalidInput(f"search mode {mode!r} is unknown: expected one of {', '.join(SEARCH_MODES)}")
    if offset < 0 or limit < 0 or per_file < 1:
        raise InvalidInput("offset and limit must be >= 0 and per_file >= 1")
    limit = limit or (20 if mode == "paths" else 5)
    ranked = (bm25 or WorkspaceBm25(db)).rank(query, config)
    files = sorted(ranked.files, key=lambda f: f.path) if exhaustive else ranked.files
    total_occ = sum(f.occurrences for f in files)
    weak_note = f" · weak: no file holds {', '.join(repr(w) for w in ranked.missing)}" if ranked.missing else ""
    order = "exhaustive (path order)" if exhaustive else "ranked"
    data: dict = {"query": query, "mode": mode, "files_total": len(files), "occurrences_total": total_occ,
                  "ranked": not exhaustive, "missing_terms": ranked.missing, "offset": offset}
    if not files:
        return Reply(f'ctx_search "{query}" · 0 files{weak_note}', data | {"files": []})
    if mode == "count":
        classes: dict[str, int] = {}
        for f in files:
            classes[f.path_class] = classes.get(f.path_class, 0) + 1
        split = ", ".join(f"{n} {c}" for c, n in sorted(classes.items()))
        text = (f'ctx_search "{query}" · {len(files)} files · {total_occ} occurrences ({split}){weak_note}\n'
                f'→ ctx_search "{query}" mode=paths lists them')
        return Reply(text, data | {"classes": classes})
    page = files if exhaustive else files[offset:offset + limit]
    first = 1 if exhaustive else offset + 1
    lines = [f'ctx_search "{query}" · {len(files)} files / ~{total_occ} occurrences · {order} · '
             f'files {first}-{first + len(page) - 1}{weak_note}']
    shown = []
    for f in page:
        if mode == "paths":
            lines.append(_file_label(f))
            shown.append({"path": f.path, "class": f.path_class, "occurrences": f.occurrences, "tier": f.tier,
                          "defines": f.defines, "weak": f.weak, "score": round(f.score, 4), "why": f.why})
            continue
        indexed = load(db, root, f.path)
        hits = line_hits(indexed.text, query, ranked.terms, indexed.symbols)
        plain = [h for h in hits if not h.is_import]
        imports = [h for h in hits if h.is_import]
        cap = len(plain) if exhaustive else per_file
        width = len(str(max((h.line for h in hits), default=1)))
        lines.append(_file_label(f, len(hits)) + ("" if hits or f.weak else " [weak: terms apart, no line holds the query]"))
        lines += [_render_hit(h, query, width) for h in plain[:cap]]
        if imports:
            lines.append(f"  imports: L{', L'.join(str(h.line) for h in imports[:8])}"
                         + (f" +{len(imports) - 8}" if len(imports) > 8 else ""))
        if len(plain) > cap:
            lines.append(f"  +{len(plain) - cap} more in file — ctx_search \"{query}\" exhaustive=true")
        shown.append({"path": f.path, "class": f.path_class, "tier": f.tier, "defines": f.defines, "weak": f.weak,
                      "score": round(f.score, 4), "why": f.why,
                      "hits": [{"line": h.line, "text": h.text.strip(), "symbol": h.symbol.qualname if h.symbol else None,
                                "import": h.is_import} for h in hits]})
    rest = files[offset + len(page):] if not exhaustive else []
    if rest:
        lines.append(f"more: {len(rest)} files (~{sum(f.occurrences for f in rest)} occurrences) — "
                     f'ctx_search "{query}" offset={offset + len(page)} · exhaustive=true lists all')
    lines.append(f"→ ctx_read {page[0].path}")
    return Reply("\n".join(lines), data | {"files": shown, "next_offset": offset + len(page) if rest else None},
                 [f.path for f in page])
