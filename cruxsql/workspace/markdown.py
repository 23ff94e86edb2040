"""Markdown structure from a fence-aware line scanner: sections, fenced code blocks, links, skeleton.

ATX (`## x`) and setext (`x` over `===`/`---`) headings, ``` and ~~~ fences and YAML front matter
are recognised; a full CommonMark parser is not needed for outlines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_ATX = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t#]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})\s*([\w+#.-]*)")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)\s*$")
_LINK = re.compile(r"(?<!!)\[([^\]]+)\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)|\[\[([^\]]+)\]\]|^\s*\[([^\]]+)\]:\s*(\S+)")
_SENTENCE = re.compile(r"^(.+?[.!?])(\s|$)")


@dataclass(frozen=True)
class Section:
    level: int
    title: str
    slug: str
    start: int      # heading line (1-based)
    end: int        # last line of the section, before the next heading of any level


@dataclass(frozen=True)
class CodeBlock:
    lang: str
    start: int      # opening fence line
    end: int        # closing fence line
    text: str


@dataclass(frozen=True)
class Link:
    line: int
    text: str
    target: str


def slugify(title: str) -> str:
    return re.sub(r"[^\w\- ]", "", title.lower()).strip().replace(" ", "-")


def _scan(lines: list[str]) -> tuple[list[tuple[int, int, str]], list[CodeBlock], set[int]]:
    """(headings as (line, level, title), code blocks, lines inside code or front matter)."""
    headings: list[tuple[int, int, str]] = []
    blocks: list[CodeBlock] = []
    hidden: set[int] = set()
    i = 0
    if lines and lines[0].strip() == "---":
        for j in range(1, len(lines)):
            if lines[j].strip() in {"---", "..."}:
                hidden.update(range(1, j + 2))
                i = j + 1
                break
    while i < len(lines):
        line = lines[i]
        fence = _FENCE.match(line)
        if fence:
            marker, lang = fence.group(1), fence.group(2)
            j = i + 1
            while j < len(lines) and not lines[j].strip().startswith(marker[0] * len(marker)):
                j += 1
            blocks.append(CodeBlock(lang, i + 1, min(j, len(lines) - 1) + 1, "\n".join(lines[i + 1:j])))
            hidden.update(range(i + 1, j + 2))
            i = j + 1
            continue
        atx = _ATX.match(line)
        if atx:
            headings.append((i + 1, len(atx.group(1)), atx.group(2).strip()))
        elif (i + 1 < len(lines) and line.strip() and _SETEXT.match(lines[i + 1])
              and not (headings and headings[-1][0] == i)):
            if not lines[i + 1].strip().startswith("-") or len(lines[i + 1].strip()) >= 2:
                headings.append((i + 1, 1 if lines[i + 1].strip()[0] == "=" else 2, line.strip()))
                i += 2
                continue
        i += 1
    return headings, blocks, hidden


def sections(text: str) -> list[Section]:
    lines = text.splitlines()
    headings, _, _ = _scan(lines)
    result = []
    for index, (line, level, title) in enumerate(headings):
        end = headings[index + 1][0] - 1 if index + 1 < len(headings) else len(lines)
        result.append(Section(level, title, slugify(title), line, end))
    return result


def section_span(all_sections: list[Section], section: Section, total_lines: int) -> tuple[int, int]:
    """The lines of a section including its subsections (up to the next heading of its level or above)."""
    for later in all_sections:
        if later.start > section.start and later.level <= section.level:
            return section.start, later.start - 1
    return section.start, total_lines


def subsections(all_sections: list[Section], section: Section, span_end: int) -> list[Section]:
    """The sections one level down inside `section` (whose span ends at `span_end`); a heading that skips
    a level (`####` right under `##`) counts as one level down."""
    found: list[Section] = []
    for s in all_sections:
        if section.start < s.start <= span_end and (not found or s.level <= min(f.level for f in found)):
            found.append(s)
    return found


def neighbours(all_sections: list[Section], section: Section) -> list[tuple[str, Section]]:
    """Where a section sits: ("in", its parent), ("prev", …) and ("next", …) siblings under that parent."""
    index = all_sections.index(section)
    parent = next((s for s in reversed(all_sections[:index]) if s.level < section.level), None)
    prev = next((s for s in reversed(all_sections[:index]) if s.level <= section.level), None)
    following = next((s for s in all_sections[index + 1:] if s.level <= section.level), None)
    found = [("in", parent)] if parent else []
    if prev and prev.level == section.level:
        found.append(("prev", prev))
    if following and following.level == section.level:
        found.append(("next", following))
    return found


def code_blocks(text: str) -> list[CodeBlock]:
    return _scan(text.splitlines())[1]


def links(text: str) -> list[Link]:
    lines = text.splitlines()
    _, _, hidden = _scan(lines)
    found = []
    for number, line in enumerate(lines, start=1):
        if number in hidden:
            continue
        for match in _LINK.finditer(line):
            if match.group(1) is not None:
                found.append(Link(number, match.group(1), match.group(2)))
            elif match.group(3) is not None:
                found.append(Link(number, match.group(3), match.group(3)))
            else:
                found.append(Link(number, match.group(4), match.group(5)))
    return found


def first_sentence(text: str, limit: int = 160) -> str:
    flat = " ".join(text.split())
    match = _SENTENCE.match(flat)
    sentence = match.group(1) if match else flat
    return sentence if len(sentence) <= limit else sentence[: limit - 1] + "…"


def body_text(lines: list[str], section: Section, hidden: set[int]) -> str:
    """The prose of a section's own lines (no heading, no code)."""
    return "\n".join(lines[n - 1] for n in range(section.start + 1, section.end + 1)
                     if n not in hidden and not _SETEXT.match(lines[n - 1]))


def hidden_lines(text: str) -> set[int]:
    return _scan(text.splitlines())[2]
