"""ctx_doc: markdown verbs — outline, one section, fenced code, links, skeleton.

Files under ~2 KB come back whole: a two-step outline-then-section retrieval only pays above that.
A section's text is verbatim. The same gate applies inside a file: a section whose subsections take it
past ~2 KB comes back as its own text with one line per subsection (title, span, size) and the exact
commands that read all of it or one subsection; a line after it says where the section sits (its parent,
the previous and next sibling). Outlines and skeletons are marked as summaries. An outline lists at most
MAX_SIBLINGS headings under one parent; the rest of them are one `+N more` line with their span and
size (a changelog with a hundred version headings costs a few lines, not a hundred).
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
MAX_SIBLINGS = 8
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
        return _outline(indexed.path, lines, found, lossy, data)
    if view == "section":
        return _section(indexed.path, lines, found, pattern or "", head, data, whole_below)
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


def _outline(path: str, lines: list[str], found: list[markdown.Section], head: str, data: dict) -> Reply:
    """One line per heading, at most MAX_SIBLINGS under one parent; the others folded into `+N more`."""
    entries: list[dict] = []                     # a shown heading, or a fold of its later siblings
    folds: dict[tuple, dict] = {}
    siblings: dict[tuple, int] = {}
    stack: list[tuple[int, int, bool]] = []      # (level, index in found, folded away)
    for i, s in enumerate(found):
        while stack and stack[-1][0] >= s.level:
            stack.pop()
        if stack and stack[-1][2]:               # under a folded heading: inside the fold's span
            stack.append((s.level, i, True))
            continue
        key = (stack[-1][1] if stack else None, s.level)
        siblings[key] = siblings.get(key, 0) + 1
        cost = estimate_tokens("\n".join(lines[s.start - 1:s.end]))
        if siblings[key] <= MAX_SIBLINGS:
            entries.append({"level": s.level, "title": s.title, "slug": s.slug, "start": s.start, "end": s.end,
                            "tokens": cost})
            stack.append((s.level, i, False))
            continue
        if key not in folds:
            folds[key] = {"level": s.level, "more": 0, "start": s.start, "end": s.end, "tokens": 0}
            entries.append(folds[key])
        fold = folds[key]
        fold["more"] += 1
        fold["end"] = max(fold["end"], s.end)
        fold["tokens"] += cost
        stack.append((s.level, i, True))
    out = [head]
    for e in entries:
        indent = "  " * (e["level"] - 1)
        if "more" in e:
            out.append(f"{indent}+{e['more']} more {'#' * e['level']} headings, L{e['start']}-{e['end']} "
                       f"(~{thousands(e['tokens'])} tok)")
        else:
            out.append(f"{indent}L{e['start']} {'#' * e['level']} {e['title']} (~{e['tokens']} tok)")
    out.append(f"→ ctx_doc {path} --section PATTERN")
    return Reply("\n".join(out), data | {"sections": [{k: v for k, v in e.items() if k != "tokens"}
                                                      for e in entries]}, [path])


def _section(path: str, lines: list[str], found: list[markdown.Section], pattern: str, head: str, data: dict,
             whole_below: int) -> Reply:
    """The matched section verbatim; when it and its subsections pass the size gate, its own text only,
    each subsection as one line, and the command that reads them all."""
    wanted = pattern.lower().lstrip("#").strip()
    at_line = re.fullmatch(r"l(\d+)", wanted)
    exact = [s for s in found if (at_line and s.start == int(at_line.group(1)))
             or s.title.lower() == wanted or s.slug == markdown.slugify(wanted)]
    matches = exact or [s for s in found if wanted in s.title.lower() or wanted in s.slug]
    if not matches:
        raise NotFound(f"no section of {path} matches {pattern!r} (ctx_doc {path} --outline lists them)")
    chosen = matches[0]
    start, end = markdown.section_span(found, chosen, len(lines))
    subtree = "\n".join(lines[start - 1:end])
    children = markdown.subsections(found, chosen, end)
    if not children or len(subtree.encode("utf-8")) < whole_below:
        body, shown_end = subtree, end
        out = [f"{head} · section {chosen.title!r} L{start}-{end} (~{estimate_tokens(body)} tok)", body]
    else:
        shown_end = chosen.end
        body = "\n".join(lines[start - 1:shown_end])
        out = [f"{head} · section {chosen.title!r} L{start}-{shown_end} (~{estimate_tokens(body)} tok) · "
               f"its subsections L{shown_end + 1}-{end} one line each", body]
        for child in children:
            child_start, child_end = markdown.section_span(found, child, len(lines))
            cost = estimate_tokens("\n".join(lines[child_start - 1:child_end]))
            out.append(f"  {'#' * child.level} {child.title}  L{child_start}-{child_end} ~{cost} tok")
        out.append(f"→ all of it: ctx_read {path} mode=lines:{start}-{end} · "
                   f"one: ctx_doc {path} --section L{children[0].start}")
    beside = markdown.neighbours(found, chosen)
    if beside:
        out.append(" · ".join(f"{role} {s.title!r} L{s.start}" for role, s in beside))
    if len(matches) > 1:
        others = ", ".join(f"{s.title!r} L{s.start}" for s in matches[1:6])
        out.append(f"also matching: {others}" + (f" +{len(matches) - 6} more" if len(matches) > 6 else ""))
    return Reply("\n".join(out), data | {"section": chosen.title, "start": start, "end": shown_end, "content": body,
                                         "subsections": [{"level": c.level, "title": c.title, "start": c.start}
                                                         for c in (children if shown_end < end else [])]},
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
