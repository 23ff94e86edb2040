"""Plant each break of `breaks.py` in a scratch copy of the repository, run the tests named for it, and say
which test caught it.

    python tools/mutants/run.py                 # every break; exit 1 if any survives, 2 if one no longer applies
    python tools/mutants/run.py --check         # only check that every break still applies (no test run)
    python tools/mutants/run.py --only bm25-idf --only sql-attach
    python tools/mutants/run.py --list
    python tools/mutants/run.py --verbose       # and say why each catching test failed

The working tree is never changed: the copy (cruxsql/, tests/, migrations/, pyproject.toml, tools/bench/ for
the tests that import a benchmark's metrics) lives in a
temporary directory, one break is planted at a time and undone after its run. The tests of every break are
first run once unplanted (the baseline): a test that fails without any break catches nothing.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from breaks import BREAKS, Break, check  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
COPIED = ("cruxsql", "tests", "migrations", "pyproject.toml", "tools/bench")
FAILED = re.compile(r"^(?:FAILED|ERROR) (.+?)(?: - (.*))?$", re.M)


def copy_tree(scratch: Path) -> None:
    for name in COPIED:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, scratch / name, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
        else:
            shutil.copy2(src, scratch / name)


def run_tests(scratch: Path, tests: tuple[str, ...], timeout: float) -> tuple[int, str]:
    env = {**os.environ, "PYTHONPATH": str(scratch), "COLUMNS": "400"}  # room for the failure reason
    # pyproject's addopts are cleared, but not its import mode: test modules in different folders share names
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
           "--import-mode=importlib", f"--basetemp={scratch / '.pytest-tmp'}", *tests]
    try:
        done = subprocess.run(cmd, cwd=scratch, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return -1, f"timed out after {timeout:.0f} s"
    return done.returncode, done.stdout + done.stderr


def write(path: Path, text: str, stamp: list[int]) -> None:
    """Write and give the file a new mtime, so no bytecode cached for another version is reused."""
    path.write_text(text, encoding="utf-8")
    stamp[0] += 10
    os.utime(path, (stamp[0], stamp[0]))


def try_break(scratch: Path, brk: Break, timeout: float, stamp: list[int], verbose: bool) -> tuple[bool, str]:
    """(caught, what to print)."""
    path = scratch / brk.path
    original = path.read_text(encoding="utf-8")
    write(path, brk.plant(original), stamp)
    try:
        code, output = run_tests(scratch, brk.tests, timeout)
    finally:
        write(path, original, stamp)
    if code == 1:
        failed = FAILED.findall(output)
        if not failed:
            return True, f"caught by {' '.join(brk.tests)}"
        test, reason = failed[0]
        return True, f"caught by {test}" + (f"\n    ({reason[:160]})" if verbose and reason else "")
    if code == 0:
        return False, "SURVIVED"
    last = output.strip().splitlines()[-1] if output.strip() else ""
    return False, f"NOT JUDGED (pytest exit {code}: {last})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only check that every break still applies")
    parser.add_argument("--list", action="store_true", help="list the breaks and their tests")
    parser.add_argument("--only", action="append", metavar="NAME", help="run this break (repeatable)")
    parser.add_argument("--no-baseline", action="store_true", help="skip the unplanted run of the tests")
    parser.add_argument("--verbose", action="store_true", help="say why the catching test failed")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per test run (default 600)")
    args = parser.parse_args()

    chosen = [b for b in BREAKS if not args.only or b.name in args.only]
    unknown = sorted(set(args.only or ()) - {b.name for b in BREAKS})
    if unknown:
        print(f"unknown break(s): {', '.join(unknown)}; see --list", file=sys.stderr)
        return 2
    if args.list:
        for b in chosen:
            print(f"{b.name}: {b.what}\n    {b.path}; tests: {' '.join(b.tests)}")
        return 0
    problems = check(ROOT)
    if problems:
        for p in problems:
            print(f"BREAK DOES NOT APPLY: {p}", file=sys.stderr)
        return 2
    if args.check:
        print(f"{len(BREAKS)} breaks apply")
        return 0

    with tempfile.TemporaryDirectory(prefix="cruxsql-mutants-") as tmp:
        scratch = Path(tmp)
        copy_tree(scratch)
        stamp = [int(time.time()) + 1000]
        if not args.no_baseline:
            tests = tuple(dict.fromkeys(t for b in chosen for t in b.tests))
            code, output = run_tests(scratch, tests, args.timeout * 2)
            if code != 0:
                print(f"the baseline fails without any break (pytest exit {code}):\n{output[-3000:]}",
                      file=sys.stderr)
                return 2
            print(f"baseline: {len(tests)} test targets pass unplanted")
        survived = 0
        for brk in chosen:
            started = time.perf_counter()
            caught, verdict = try_break(scratch, brk, args.timeout, stamp, args.verbose)
            survived += not caught
            first, _, why = verdict.partition("\n")
            print(f"{brk.name} → {first}  ({time.perf_counter() - started:.0f} s)" + (f"\n{why}" if why else ""),
                  flush=True)
    print(f"{len(chosen) - survived} of {len(chosen)} breaks caught")
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main())
