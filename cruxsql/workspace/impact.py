"""ctx_impact: the blast radius of a file or symbol — deps, dependents, transitive dependents, tests.

Approximate and labelled so: the graph is static imports resolved to workspace files plus name
matches; dynamic imports, `getattr` and monkeypatching are invisible.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

import apsw

from ..errors import InvalidInput, NotFound
from .paths import is_test_path, resolve_inside
from .reply import Reply, trim
from .snapshot import load

MAX_DEPTH = 6
SHOWN = 10


def _bounded(paths: list[str]) -> str:
    more = f", +{len(paths) - SHOWN} more" if len(paths) > SHOWN else ""
    return ", ".join(paths[:SHOWN]) + more


def ctx_impact(db: apsw.Connection, root: Path, target: str, depth: int = 3) -> Reply:
    if not 1 <= depth <= MAX_DEPTH:
        raise InvalidInput(f"depth {depth} is out of range 1..{MAX_DEPTH}")
    symbol = None
    row = None
    if "/" in target or "." in PurePosixPath(target).name:
        try:
            _, rel = resolve_inside(root, target)
            row = db.execute("SELECT path FROM files WHERE path=?", (rel,)).fetchone()
        except InvalidInput:
            if "/" in target:
                raise
    if row:
        targets = [row[0]]
    else:
        symbol = target
        targets = [p for (p,) in db.execute("SELECT DISTINCT f.path FROM symbols s JOIN files f USING(file_id) "
                                            "WHERE s.name=? OR s.qualname=? ORDER BY f.path", (target, target))]
        if not targets:
            raise NotFound(f"target {target!r} is neither an indexed file nor a defined symbol")
    forward: dict[str, set[str]] = {}
    reverse: dict[str, set[str]] = {}
    external: dict[str, set[str]] = {}
    for source, module, resolved in db.execute(
            "SELECT f.path, i.module, i.resolved FROM imports i JOIN files f USING(file_id)"):
        if resolved is None:
            external.setdefault(source, set()).add(module.split(":")[0])
        elif resolved != source:
            forward.setdefault(source, set()).add(resolved)
            reverse.setdefault(resolved, set()).add(source)
    deps = sorted(set().union(*(forward.get(t, set()) for t in targets)) - set(targets))
    outside = sorted(set().union(*(external.get(t, set()) for t in targets)))
    levels: dict[str, int] = {}
    frontier = list(targets)
    for level in range(1, depth + 1):
        following = []
        for node in frontier:
            for dependent in sorted(reverse.get(node, ())):
                if dependent not in levels and dependent not in targets:
                    levels[dependent] = level
                    following.append(dependent)
        frontier = following
    direct = sorted(p for p, lv in levels.items() if lv == 1)
    transitive = sorted((p for p, lv in levels.items() if lv > 1), key=lambda p: (levels[p], p))
    stems = {PurePosixPath(t).stem for t in targets}
    tests = sorted({p for p in levels if is_test_path(p)} | {
        p for (p,) in db.execute("SELECT path FROM files WHERE path_class='test'")
        if any(PurePosixPath(p).stem in {f"test_{s}", f"{s}_test", f"{s}_tests"} for s in stems)})
    label = symbol if symbol else targets[0]
    lines = [f"ctx_impact {label} · approximate: static imports + name matches · depth≤{depth}"]
    if symbol:
        lines.append(f"defined in ({len(targets)}): {_bounded(targets)}")
    lines.append(f"deps ({len(deps)}): {_bounded(deps) or '-'}"
                 + (f"  (+{len(outside)} outside the workspace: {', '.join(outside[:6])}"
                    + (" …" if len(outside) > 6 else "") + ")" if outside else ""))
    lines.append(f"dependents ({len(direct)}): {_bounded(direct) or '-'}")
    lines.append(f"transitive dependents ({len(transitive)}): {_bounded(transitive) or '-'}")
    non_test = [p for p in levels if not is_test_path(p)]
    lines.append(f"tests: covered by {len(tests)} tests" + (f" — {_bounded(tests)}" if tests else "")
                 + f" · {len(non_test)} non-test files affected")
    callers: list[dict] = []
    if symbol:
        leaf = symbol.rpartition(".")[2]
        pattern = re.compile(rf"(?<![\w]){re.escape(leaf)}(?![\w])")
        for path in sorted(set(targets) | set(direct)):
            indexed = load(db, root, path)
            starts = {s.start for s in indexed.symbols if s.name == leaf}
            for number, text in enumerate(indexed.lines, start=1):
                if number not in starts and pattern.search(text) and not re.match(r"\s*(from|import)\s", text):
                    callers.append({"path": path, "line": number, "text": text.strip()})
        lines.append(f"uses of {symbol} ({len(callers)} lines in {len({c['path'] for c in callers})} files):")
        lines += [f"  {c['path']}:{c['line']}: {trim(c['text'])}" for c in callers[:SHOWN]]
        if len(callers) > SHOWN:
            lines.append(f"  +{len(callers) - SHOWN} more — ctx_search \"{symbol}\" exhaustive=true")
    nxt = direct[0] if direct else (deps[0] if deps else targets[0])
    lines.append(f"→ ctx_read {nxt}")
    data = {"target": target, "approximate": True, "defined_in": targets, "deps": deps, "external": outside,
            "dependents": direct, "transitive": transitive, "tests": tests, "uses": callers, "depth": depth}
    return Reply("\n".join(lines), data, sorted(set(targets) | set(direct)))
