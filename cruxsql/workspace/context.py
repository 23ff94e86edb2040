"""ctx_context: a natural-language task → identifiers → one block packed by value under a token budget.

Sections (rendered separately, admitted by value, emitted in document order): terms, definitions
(rich: signature + a few body lines; lean: signature), callers, ranked files, snippets. Each dropped
or downgraded section leaves one `[omitted: … ~N tok → ctx_expand @h:…]` line; the block never
exceeds the budget and is never empty for a resolvable task.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Optional

import apsw

from ..errors import InvalidInput
from .budget import Part, estimate_tokens, pack
from .handles import content_handle, symbolic_handle
from .ranking import RankingConfig
from .reply import LINE_CAP, Reply, trim
from .search import WorkspaceBm25, line_hits
from .signature import outline_signature
from .snapshot import load

MIN_BUDGET = 100
MAX_TERMS = 6
BODY_LINES = 6
_QUOTED = re.compile(r"`([^`]+)`|\"([^\"]+)\"|'([^']+)'")
_TOKEN = re.compile(r"[A-Za-z_][\w./-]*[\w]|[A-Za-z_]")
STOPWORDS = frozenset("""a an and are as at be but by do does for from how i in into is it its make makes
not of on or so that the their then there these this to was what when where which while who why will with
would should could fix bug add adds update change changes code file files function functions method class
does doesnt dont use used using work works wrong error issue need needs help about after before also
just like more most some such than them they very""".split())


def extract_terms(task: str, symbol_names: set[str]) -> list[str]:
    """Identifier-shaped words in task order (quoted, snake_case, camelCase/PascalCase, ALL-CAPS 3–8, dotted,
    paths) and plain words naming an indexed symbol; then plain words of ≥4 letters without stopwords,
    longest first (so an all-lowercase task still yields terms)."""
    identifiers: list[str] = [next(g for g in m.groups() if g) for m in _QUOTED.finditer(task)]
    plain: list[str] = []
    for word in _TOKEN.findall(task):
        word = word.rstrip(".")
        shaped = ("_" in word.strip("_") or re.search(r"[a-z][A-Z]|[A-Z]{2,}[a-z]", word)
                  or re.fullmatch(r"[A-Z][A-Z0-9]{2,7}", word) or "." in word or "/" in word)
        if shaped or (word in symbol_names and word.lower() not in STOPWORDS):
            identifiers.append(word)
        elif word.isalpha() and len(word) >= 4 and word.lower() not in STOPWORDS:
            plain.append(word.lower())
    ordered = identifiers + sorted(dict.fromkeys(plain), key=lambda w: (-len(w), w))
    return list(dict.fromkeys(ordered))[:MAX_TERMS]


def ctx_context(db: apsw.Connection, root: Path, task: str, token_budget: int = 1500,
                config: RankingConfig = RankingConfig(), bm25: Optional[WorkspaceBm25] = None) -> Reply:
    if not task.strip():
        raise InvalidInput("task is empty")
    if token_budget < MIN_BUDGET:
        raise InvalidInput(f"token budget {token_budget} is below the minimum {MIN_BUDGET}")
    names = {name for (name,) in db.execute("SELECT DISTINCT name FROM symbols")}
    terms = extract_terms(task, names)
    about_tests = bool(re.search(r"\btests?\b", task, re.IGNORECASE))
    definitions = []
    for term in terms:
        leaf = term.split(".")[-1]
        if leaf not in names:
            continue
        rows = list(db.execute(
            "SELECT f.path, s.qualname, s.start, s.end, s.signature FROM symbols s JOIN files f USING(file_id) "
            "WHERE s.name=? ORDER BY f.path_class != 'code', f.path, s.start LIMIT 4", (leaf,)))
        definitions += rows
    definitions = list(dict.fromkeys(definitions))[:6]
    ranked = (bm25 or WorkspaceBm25(db)).rank(" ".join(terms), config) if terms else None
    files = ranked.files if ranked else []
    listed = [f for f in files if about_tests or f.path_class != "test"][:5]
    hidden_tests = 0 if about_tests else sum(1 for f in files if f.path_class == "test")

    parts: list[Part] = []
    parts.append(Part("terms", 0, 0, "terms: " + (", ".join(terms) if terms else "(none found)")))
    if definitions:
        rich, lean = ["definitions:"], ["definitions:"]
        for path, qualname, start, end, signature in definitions:
            indexed = load(db, root, path)
            body_lines = indexed.lines[start:min(end, start + BODY_LINES)]
            line = f"{path}:{start} {trim(outline_signature(signature, indexed.approx))}  L{start}-{end}"
            rich.append(f"{line}  {symbolic_handle(path, qualname, start)}")
            rich += [f"    {line.rstrip()[:LINE_CAP]}" for line in body_lines if line.strip()]
            if end > start + BODY_LINES:
                rich.append(f"    … +{end - start - BODY_LINES} lines")
            lean.append(line)
        text = "\n".join(rich)
        parts.append(Part("definitions", 2, 1, text, "\n".join(lean), content_handle(db, text)))
    callers = _callers(db, root, definitions)
    if callers:
        text = "callers:\n" + "\n".join(callers)
        parts.append(Part(f"callers ({len(callers)} lines)", 3, 2, text, "", content_handle(db, text)))
    if listed:
        rows = [f"{f.path} [{f.path_class}]" + (f" defines {', '.join(f.defines)}" if f.defines else "")
                for f in listed]
        more = len(files) - len(listed) - hidden_tests
        if hidden_tests:
            rows.append(f"+{hidden_tests} test files (counted, not listed)")
        if more > 0:
            rows.append(f"+{more} more files — ctx_search \"{' '.join(terms)}\" offset=5")
        text = "files:\n" + "\n".join(rows)
        parts.append(Part("files", 1, 3, text, "", content_handle(db, text)))
    if ranked is not None and listed and not 1 <= len(definitions) <= 3:
        snippets = []
        for f in listed[:3]:
            indexed = load(db, root, f.path)
            hits = [h for h in line_hits(indexed.text, " ".join(terms), ranked.terms, indexed.symbols)
                    if not h.is_import][:3]
            snippets += [f"{f.path}:{h.line}: {trim(h.text)}" for h in hits]
        if snippets:
            text = "snippets:\n" + "\n".join(snippets)
            parts.append(Part("snippets", 4, 4, text, "", content_handle(db, text)))

    header = f'ctx_context "{trim(task, cap=80)}" · budget {token_budget} tok'
    allowance = token_budget - estimate_tokens(header) - 8
    for _ in range(4):       # pack() charges every part, so this converges at once; the cap keeps it finite
        body, omitted = pack(parts, allowance)
        text = f"{header} · used ~{estimate_tokens(body)} tok\n{body}"
        overflow = estimate_tokens(text) - token_budget
        if overflow <= 0:
            break
        allowance -= overflow
    else:
        body, omitted = parts[0].rich, [part.name for part in parts[1:]]
        text = f"{header}\n{body}\n[omitted: every section — ctx_search \"{' '.join(terms)}\"]"
    data = {"task": task, "terms": terms, "budget": token_budget, "used_tokens": estimate_tokens(text),
            "definitions": [{"path": p, "qualname": q, "start": s, "end": e} for p, q, s, e, _ in definitions],
            "files": [f.path for f in listed], "omitted": omitted}
    touched = sorted({d[0] for d in definitions} | {f.path for f in listed})
    return Reply(text, data, touched)


def _callers(db: apsw.Connection, root: Path, definitions: list[tuple]) -> list[str]:
    """Lines using a defined name in the files importing its defining file (up to 3 per file, 8 in all)."""
    out: list[str] = []
    for path, qualname, _, _, _ in definitions[:3]:
        name = qualname.split(".")[-1]
        pattern = re.compile(rf"(?<![\w]){re.escape(name)}(?![\w])")
        importers = [p for (p,) in db.execute(
            "SELECT DISTINCT f.path FROM imports i JOIN files f USING(file_id) WHERE i.resolved=? ORDER BY f.path",
            (path,))]
        for importer in importers:
            indexed = load(db, root, importer)
            uses = [(n, line) for n, line in enumerate(indexed.lines, start=1)
                    if pattern.search(line) and not re.match(r"\s*(from|import)\s", line)][:3]
            out += [f"{importer}:{n}: {trim(line)}" for n, line in uses]
            out = list(dict.fromkeys(out))
            if len(out) >= 8:
                return out[:8]
    return out
