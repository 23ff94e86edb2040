"""Git co-change: files that historically change together, a ranking signal of ctx_search and ctx_context.

From `git log --name-only` over the last 500 commits (commits touching more than 32 files skipped),
each file keeps its 8 most frequent partners with the number of shared commits. The table is rebuilt
when HEAD moves; a folder that is not a git work tree (or has no git) simply has no co-change rows.
"""

from __future__ import annotations

import subprocess
from collections import Counter
from itertools import combinations
from pathlib import Path
from typing import Optional

import apsw

from .schema import meta, set_meta

COMMITS = 500
MAX_FILES_PER_COMMIT = 32
PARTNERS = 8


def _git(root: Path, *args: str) -> Optional[str]:
    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def pairs(log: str) -> dict[str, list[tuple[str, int]]]:
    """Top partners per file from `git log --name-only --pretty=format:%x00%H` output."""
    counts: Counter[tuple[str, str]] = Counter()
    for commit in log.split("\0")[1:]:
        files = sorted({line for line in commit.splitlines()[1:] if line.strip()})
        if len(files) > MAX_FILES_PER_COMMIT:
            continue
        for a, b in combinations(files, 2):
            counts[(a, b)] += 1
            counts[(b, a)] += 1
    partners: dict[str, list[tuple[str, int]]] = {}
    for (a, b), shared in counts.items():
        partners.setdefault(a, []).append((b, shared))
    return {a: sorted(found, key=lambda p: (-p[1], p[0]))[:PARTNERS] for a, found in partners.items()}


def refresh(db: apsw.Connection, root: Path) -> None:
    """Rebuild the `cochange` rows when HEAD differs from the one they were built at. Call inside a txn."""
    head = (_git(root, "rev-parse", "HEAD") or "").strip()
    if head == meta(db, "cochange_head"):
        return
    db.execute("DELETE FROM cochange")
    log = _git(root, "log", "--name-only", "--relative", "--no-renames", "--pretty=format:%x00%H", "-n", str(COMMITS)) \
        if head else None
    if log:
        db.executemany("INSERT INTO cochange(path, partner, shared) VALUES (?, ?, ?)",
                       [(a, b, shared) for a, found in pairs(log).items() for b, shared in found])
    set_meta(db, "cochange_head", head)


def shared_with(db: apsw.Connection, sources: set[str]) -> dict[str, int]:
    """For every partner of the given files, the most commits it shared with any of them."""
    if not sources:
        return {}
    marks = ",".join("?" * len(sources))
    return dict(db.execute(f"SELECT partner, max(shared) FROM cochange WHERE path IN ({marks}) GROUP BY partner",
                           tuple(sorted(sources))))
