"""Reading a data directory's journal (`facts.jsonl`) as the tests check it: its bytes, its text, its lines
parsed. A test expecting a journal fails when there is none; `missing_ok` reads a journal not yet
written as empty."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

JOURNAL = "facts.jsonl"


def journal_bytes(data_dir: Path, *, missing_ok: bool = False) -> bytes:
    path = Path(data_dir) / JOURNAL
    if missing_ok and not path.exists():
        return b""
    return path.read_bytes()


def journal_text(data_dir: Path) -> str:
    return (Path(data_dir) / JOURNAL).read_text(encoding="utf-8")


def journal_lines(data_dir: Path) -> list[dict[str, Any]]:
    """Every line, parsed (a line that is not JSON fails the test)."""
    return [json.loads(line) for line in journal_text(data_dir).splitlines()]
