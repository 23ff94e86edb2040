"""The planted-break list of `tools/mutants/` still applies to the code (fast: no break is run here), so a
change that moves an anchor fails in CI, naming the break, instead of leaving `run.py` to plant nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools" / "mutants"))

import breaks  # noqa: E402


def test_every_break_applies_once_compiles_and_names_existing_tests() -> None:
    assert breaks.check(ROOT) == []
    assert len(breaks.BREAKS) >= 18


def test_a_break_whose_anchor_is_gone_fails_by_name() -> None:
    brk = breaks.BREAKS[0]
    try:
        brk.plant("nothing of the anchor here")
    except ValueError as exc:
        assert str(exc).startswith(f"{brk.name}: the anchor occurs 0 times in {brk.path}")
    else:
        raise AssertionError("planting into text without the anchor did not fail")


def test_the_runner_checks_from_the_command_line() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "mutants" / "run.py"), "--check"],
                          capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (0, f"{len(breaks.BREAKS)} breaks apply\n"), done.stderr
