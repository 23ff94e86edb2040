"""Another commit's code, to run beside this checkout's in a subprocess (its PYTHONPATH), for the benchmarks
that measure this code against an older one in the same run (bench_facts.py --compare, bench_mcp.py
--compare)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parents[2]


def code_of_commit(commit: str, work: Path) -> Path:
    """A tree of `commit` of this repository to run in a subprocess (PYTHONPATH), extracted once with
    `git archive` into `work` (no worktree registered, nothing checked out here)."""
    sha = subprocess.run(["git", "-C", str(HERE), "rev-parse", "--verify", f"{commit}^{{commit}}"],
                         capture_output=True, text=True, check=True).stdout.strip()
    tree = work / f"code-{sha[:12]}"
    if not (tree / "cruxsql" / "__init__.py").is_file():
        partial = work / f"code-{sha[:12]}.partial"
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        archive = subprocess.run(["git", "-C", str(HERE), "archive", sha], capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(partial)], input=archive, check=True)
        shutil.rmtree(tree, ignore_errors=True)
        partial.rename(tree)
    return tree
