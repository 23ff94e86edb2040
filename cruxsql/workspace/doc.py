"""ctx_doc: markdown verbs — outline, one section, fenced code, links, skeleton.

Files under ~2 KB come back whole: a two-step outline-then-section retrieval only pays above that.
A section's text is verbatim; outlines and skeletons are marked as summaries.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath
from typing import Optional

import apsw

from ..errors import InvalidInput, NotFound
from . import markdown
from .budget import estimate_tokens
from .reply import Reply, thousands
from .snapshot import load

WHOLE_BELOW_BYTES = 2048
DOC_VIEWS = ("outline", "section", "code", "links", "skeleton")


def ctx_doc(db: apsw.Connection, root: Path, path: str, view: str = "outline", pattern: Optional[str] = None,
            whole_below: int = WHOLE_BELOW_BYTES) -> Reply:
    if view not in DOC_VIEWS:
        raise InvalidInput(f"doc view {view!r} is unknown: expected one of {', '.join(DOC_VIEWS)}")
    if view == "section" and not pattern:
        raise InvalidInput("--section needs a PATTERN (a heading title, slug or part of one)")
    indexed = load(db, root, path)
    if indexed.lang != "markdown":
        raise InvalidInput(f"ctx_doc reads markdown; {indexed.path} is {indexed.lang} (use ctx_read)")
    lines = indexed.lines
    size = len(indexed.text.encode("utf-8"))
    head = f"{indexed.path} · {len(lines)}L · sha {indexed.short_sha}"
    data = {"path": indexed.path, "sha": indexed.sha, "view": view, "full_tokens": indexed.tokens}
    if size < whole_below:
        return Reply(f"{head} · whole file (under {whole_below} bytes)\n{indexed.text}",
                     data | {"whole": True, "content": indexed.text}, [indexed.path])
    found = markdown.sections(indexed.text)
    lossy = f"{head} · mode={view} (full ≈ {thousands(indexed.tokens)} tok)"
    if view == "outline":
        out = [lossy]
        for s in found:
            cost = estimate_tokens("\n".join(lines[s.start - 1:s.end]))
            out.append(f"{'  ' * (s.level - 1)}L{s.start} {'#' * s.level} {s.title} (~{cost} tok)")
        out.append(f"→ ctx_doc {indexed.path} --section PATTERN")
        return Reply("\n".join(out), data | {"sections": [
            {"level": s.level, "title": s.title, "slug": s.slug, "start": s.start, "end": s.end} for s in found]},
            [indexed.path])
    if view == "section":
        return _section(indexed.path, lines, found, pattern or "", head, data)
    if view == "code":
        blocks = [b for b in markdown.code_blocks(indexed.text) if not pattern or b.lang.lower() == pattern.lower()]
        out = [f"{lossy} · {len(blocks)} code blocks" + (f" ({pattern})" if pattern else "")]
        for b in blocks:
            out += [f"L{b.start}-{b.end} ```{b.lang}", b.text, "```"]
        return Reply("\n".join(out), data | {"blocks": [
            {"lang": b.lang, "start": b.start, "end": b.end, "text": b.text} for b in blocks]}, [indexed.path])
    if view == "links":
        found_links = markdown.links(indexed.text)
        out = [f"{lossy} · {len(found_links)} links"]
        rows = []
        for link in found_links:
            status = _link_status(root, indexed.path, link.target)
            out.append(f"L{link.line} [{link.text}] → {link.target}{status}")
            rows.append({"line": link.line, "text": link.text, "target": link.target, "status": status.strip(" ()")})
        return Reply("\n".join(out), data | {"links": rows}, [indexed.path])
    hidden = markdown.hidden_lines(indexed.text)
    out = [lossy]
    for s in found:
        sentence = markdown.first_sentence(markdown.body_text(lines, s, hidden))
        out.append(f"{'#' * s.level} {s.title}  L{s.start}" + (f"\n  {sentence}" if sentence else ""))
    for b in markdown.code_blocks(indexed.text):
        out.append(f"code L{b.start}-{b.end} {b.lang or '(no lang)'} · {len(b.text.splitlines())} lines")
    out.append(f"→ ctx_doc {indexed.path} --section PATTERN")
    return Reply("\n".join(out), data, [indexed.path])


def _section(path: str, lines: list[str], found: list[markdown.Section], pattern: str, head: str,
             data: dict) -> Reply:
    wanted = pattern.lower().lstrip("#").strip()
    at_line = re.fullmatch(r"l(\d+)", wanted)
    exact = [s for s in found if (at_line and s.start == int(at_line.group(1)))
             or s.title.lower() == wanted or s.slug == markdown.slugify(wanted)]
    matches = exact or [s for s in found if wanted in s.title.lower() or wanted in s.slug]
    if not matches:
        raise NotFound(f"no section of {path} matches {pattern!r} (ctx_doc {path} --outline lists them)")
    chosen = matches[0]
    start, end = markdown.section_span(found, chosen, len(lines))
    body = "\n".join(lines[start - 1:end])
    out = [f"{head} · section {chosen.title!r} L{start}-{end} (~{estimate_tokens(body)} tok)", body]
    if len(matches) > 1:
        others = ", ".join(f"{s.title!r} L{s.start}" for s in matches[1:6])
        out.append(f"also matching: {others}" + (f" +{len(matches) - 6} more" if len(matches) > 6 else ""))
    return Reply("\n".join(out), data | {"section": chosen.title, "start": start, "end": end, "content": body},
                 [path])


def _link_status(root: Path, path: str, target: str) -> str:
    if "://" in target or target.startswith(("mailto:", "#")):
        return ""
    local = target.split("#")[0]
    if not local:
        return ""
    resolved = (root / PurePosixPath(path).parent / local).resolve()
    if not resolved.is_relative_to(root.resolve()):
        return " (outside workspace)"
    return "" if resolved.exists() else " (missing)"
