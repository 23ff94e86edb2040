"""The real CLI as a separate process: `sys.executable -m cruxsql ...` (which honours PYTHONPATH).

Tests reach it through the `run_cli` fixture (conftest.py, bound to the test's `data_dir`) or, for a test
that drives several data directories, by calling `run_cruxsql` with each.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Optional

CLI_COMMAND = [sys.executable, "-m", "cruxsql"]


def run_cruxsql(data_dir: Optional[Path], *args: str, input: Optional[str] = None,
                env: Optional[dict[str, str]] = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run `cruxsql *args` with CRUXSQL_DATA_DIR=data_dir (unless None) plus `env`; text output captured."""
    full_env = {**os.environ, **({"CRUXSQL_DATA_DIR": str(data_dir)} if data_dir is not None else {}), **(env or {})}
    return subprocess.run(CLI_COMMAND + list(args), input=input, capture_output=True, text=True, timeout=timeout,
                          env=full_env)
