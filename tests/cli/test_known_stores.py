"""This user's list of stores (cli/known_stores.py) under stress: two processes adding at once keep both
entries, a corrupt list or a config dir that cannot be written is one warning line and never blocks the
quick start, and tests never touch the real config dir."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cruxsql.cli import known_stores

CLI = [sys.executable, "-m", "cruxsql"]
WRITERS, EACH = 6, 25


def _add_many(first: int) -> None:
    for i in range(first, first + EACH):
        known_stores.remember(Path(f"/stores/s{i}"))


def test_processes_adding_at_once_lose_no_entry() -> None:
    fork = multiprocessing.get_context("fork")
    writers = [fork.Process(target=_add_many, args=(w * EACH,)) for w in range(WRITERS)]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(60)
    assert [w.exitcode for w in writers] == [0] * WRITERS
    listed = json.loads(known_stores.list_path().read_text())
    assert sorted(listed) == sorted(f"/stores/s{i}" for i in range(WRITERS * EACH))


def store_in(cwd: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(CLI + ["store", *args, "svc", "k", "v"], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=60)


@pytest.mark.slow
def test_a_corrupt_list_is_one_warning_and_the_quick_start_still_works(tmp_path: Path) -> None:
    known_stores.list_path().parent.mkdir(parents=True)
    known_stores.list_path().write_text('["/tmp/a", ')
    quick = store_in(tmp_path, env=dict(os.environ))               # the default ./cruxsql-data
    assert quick.returncode == 0, quick.stderr
    assert quick.stderr.startswith("warning: cannot read this user's list of stores (")
    assert len(quick.stderr.splitlines()) == 1
    elsewhere = store_in(tmp_path, "--data-dir", str(tmp_path / "typo"), env=dict(os.environ))
    assert elsewhere.returncode == 1 and "Traceback" not in elsewhere.stderr
    assert elsewhere.stderr.splitlines()[0].startswith("warning: cannot read this user's list of stores")
    assert elsewhere.stderr.splitlines()[-1].startswith("Error: ")
    assert not (tmp_path / "typo").exists()


@pytest.mark.slow
def test_a_config_dir_that_cannot_be_written_never_fails_a_command(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    env = {**os.environ, "XDG_CONFIG_HOME": str(blocker)}
    done = store_in(tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith("warning: could not record the store ")
    assert "Traceback" not in done.stderr


@pytest.mark.slow
def test_no_home_at_all_never_fails_the_quick_start(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("HOME", "XDG_CONFIG_HOME")}
    script = ("import pathlib, sys; pathlib.Path.home = classmethod(lambda cls: (_ for _ in ()).throw("
              "RuntimeError('Could not determine home directory.'))); sys.argv = ['cruxsql', 'store', 'svc', 'k', 'v']; "
              "from cruxsql.cli import main; main()")
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert "no home directory (set HOME or XDG_CONFIG_HOME)" in done.stderr and "Traceback" not in done.stderr


def test_tests_never_use_the_real_config_dir() -> None:
    assert not str(known_stores.list_path()).startswith(str(Path("~/.config").expanduser()))
