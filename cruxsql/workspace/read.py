"""ctx_read: a mode-gated read of one file.

`full` is the file's bytes, never altered (after one header line); `lines:N-M` is verbatim and
partial; `signatures` (every class and def with its span), `map` (imports and the top-level API) and
`sections` (markdown headings) are summaries and say so with `mode=<m> (full ≈ N tok)`.
`if_hash` equal to the file's sha (or its 8-character prefix) returns `unchanged:<sha8>` only.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Optional

import apsw

from ..errors import InvalidInput
from . import markdown
from .budget import estimate_tokens
from .modes import ModeKind, ReadMode, resolve_auto
from .reply import LINE_CAP, Reply, thousands, trim
from .outline import Symbol
from .signature import outline_signature
from .snapshot import IndexedFile, load


def ctx_read(db: apsw.Connection, root: Path, path: str, mode: Optional[str] = None,
             if_hash: Optional[str] = None) -> Reply:
    indexed = load(db, root, path)
    if if_hash and len(if_hash) >= 8 and indexed.sha.startswith(if_hash.lower()):
        return Reply(f"{indexed.path} · unchanged:{indexed.short_sha}",
                     {"path": indexed.path, "unchanged": True, "sha": indexed.sha}, [])
    requested = ReadMode.parse(mode) if mode else ReadMode(ModeKind.AUTO)
    chosen = resolve_auto(indexed.path_class, indexed.lang, indexed.tokens) if requested.kind is ModeKind.AUTO \
        else requested
    head = f"{indexed.path} · {len(indexed.lines)}L · sha {indexed.short_sha}"
    data = {"path": indexed.path, "sha": indexed.sha, "mode": str(chosen), "lines": len(indexed.lines),
            "full_tokens": indexed.tokens}
    if chosen.kind is ModeKind.FULL:
        return Reply(f"{head} · mode=full\n{indexed.text}", data | {"content": indexed.text}, [indexed.path])
    if chosen.kind is ModeKind.LINES:
        if chosen.start > max(1, len(indexed.lines)):
            raise InvalidInput(f"mode {chosen}: {indexed.path} has only {len(indexed.lines)} lines")
        end = min(chosen.end, len(indexed.lines))
        body = "\n".join(indexed.lines[chosen.start - 1:end])
        tail = f"\n→ rest: ctx_read {indexed.path} mode=lines:{end + 1}-{len(indexed.lines)}" \
            if end < len(indexed.lines) else ""
        return Reply(f"{head} · mode=lines:{chosen.start}-{end} of {len(indexed.lines)}\n{body}{tail}",
                     data | {"mode": f"lines:{chosen.start}-{end}", "content": body}, [indexed.path])
    lossy = f"{head} · mode={chosen} (full ≈ {thousands(indexed.tokens)} tok)"
    if chosen.kind is ModeKind.SECTIONS:
        return _sections(indexed, lossy, data)
    return _outline(db, indexed, chosen, lossy, data)


def _outline(db: apsw.Connection, indexed: IndexedFile, mode: ReadMode, head: str, data: dict) -> Reply:
    lines = [head]
    if indexed.approx:
        lines.append(f"({indexed.approx})")
    imports = [] if mode.kind is ModeKind.SIGNATURES else list(dict.fromkeys(
        name for (module,) in db.execute(
            "SELECT module FROM imports WHERE file_id=? ORDER BY line, module", (indexed.file_id,))
        if not module.startswith("__future__") for name in _import_names(module)))
    if imports:
        lines.append("imports: " + ", ".join(imports))
    kinds = {s.qualname: s.kind for s in indexed.symbols}
    # Functions nested in functions are bodies, not API; map keeps the top level only.
    symbols = [s for s in indexed.symbols if kinds.get(s.qualname.rpartition(".")[0]) not in {"function", "method"}
               and (mode.kind is ModeKind.SIGNATURES or s.depth == 0)
               and not (s.kind == "const" and mode.kind is ModeKind.MAP)]
    shortened: list[Symbol] = []
    constants = [s for s in symbols if s.kind == "const"]
    for s in symbols:
        if s.kind == "const":
            if s is constants[0]:
                lines += _constants_lines(constants)
            continue
        exact = _without_self(s)
        compact = outline_signature(exact, indexed.approx)
        if compact != exact:
            shortened.append(s)
        lines.append(f"{'  ' * s.depth}{trim(compact)}  {_span(s)}")
    if not symbols:
        lines.append("(no symbols found)")
    # The footer points at a shortened signature's exact lines, else at the largest body.
    target = shortened[0] if shortened else max((s for s in indexed.symbols if s.kind not in {"class", "const"}),
                                                key=lambda s: s.end - s.start, default=None)
    if target:
        what = "bodies and exact signatures" if shortened else "bodies"
        lines.append(f"→ {what}: ctx_read {indexed.path} mode=lines:{target.start}-{target.end}")
    else:
        lines.append(f"→ full: ctx_read {indexed.path} mode=full")
    return Reply("\n".join(lines), data | {"approx": indexed.approx, "symbols": [
        {"qualname": s.qualname, "kind": s.kind, "signature": s.signature, "start": s.start, "end": s.end}
        for s in symbols]}, [indexed.path])


def _sections(indexed: IndexedFile, head: str, data: dict) -> Reply:
    if indexed.lang != "markdown":
        raise InvalidInput(f"mode sections reads markdown; {indexed.path} is {indexed.lang}")
    found = markdown.sections(indexed.text)
    lines = [head]
    for s in found:
        cost = estimate_tokens("\n".join(indexed.lines[s.start - 1:s.end]))
        lines.append(f"{'  ' * (s.level - 1)}{'#' * s.level} {s.title}  L{s.start}-{s.end} ~{cost} tok")
    lines.append(f"→ one section: ctx_doc {indexed.path} --section PATTERN")
    return Reply("\n".join(lines), data | {"sections": [
        {"level": s.level, "title": s.title, "start": s.start, "end": s.end} for s in found]}, [indexed.path])



def _import_names(label: str) -> list[str]:
    """`os.path` → os.path; `.errors:InvalidInput` → .errors; `.:cochange,ranking` → .cochange, .ranking."""
    module, _, names = label.partition(":")
    return [module] if module.strip(".") else [module + name for name in names.split(",")]


def _span(symbol: Symbol) -> str:
    return f"L{symbol.start}" if symbol.start == symbol.end else f"L{symbol.start}-{symbol.end}"


def _constants_lines(constants: list[Symbol]) -> list[str]:
    """Module-level constants as names and spans, several to a line (`constants: A L6, B L8-12`)."""
    lines: list[str] = []
    for item in (f"{s.name} {_span(s)}" for s in constants):
        if lines and len(lines[-1]) + 2 + len(item) <= LINE_CAP:
            lines[-1] += f", {item}"
        else:
            lines.append(f"constants: {item}")
    return lines


def _without_self(symbol: Symbol) -> str:
    """A method's signature without its `self`/`cls` parameter (the class line above already says whose)."""
    if symbol.kind != "method":
        return symbol.signature
    return re.sub(r"\((self|cls)(, |\))", lambda m: "(" if m.group(2) == ", " else "()", symbol.signature, count=1)
