"""The erasure scan reads every file of the data directory: a value left in any of the places a copy
can hide (the view's WAL and its index, quarantined torn tails and corrupt lines, document segments and
their vector sidecars) is reported, by that file's name."""

from __future__ import annotations

from pathlib import Path

import pytest

from cruxsql.governance.erasure_scan import needles_for, scan_directory

VALUE = "erased-value-4f1c9a2b7d"
PLACES = [
    "cruxsql.db-wal",
    "cruxsql.db-shm",
    "facts.jsonl.torn.0a1b2c3d4e5f60718293a4b5c6d7e8f9",
    "facts.jsonl.corrupt.0a1b2c3d4e5f60718293a4b5c6d7e8f9",
    "segments/seg-00000000000000000001-0a1b2c3d.jsonl",
    "segments/seg-00000000000000000001-0a1b2c3d.ccxv",
    "segments/seg-00000000000000000001-0a1b2c3d.ccxp",
]


@pytest.mark.parametrize("place", PLACES)
def test_a_value_left_in_the_file_is_found_there(tmp_path: Path, place: str) -> None:
    data_dir = tmp_path / "data"
    (data_dir / "segments").mkdir(parents=True)
    (data_dir / "facts.jsonl").write_bytes(b'{"op":"delete","fact_id":"f_1"}\n')
    (data_dir / "cruxsql.db").write_bytes(b"\0" * 4096)
    (data_dir / place).write_bytes(b"\0" * 100 + VALUE.encode() + b"\0" * 37)
    result = scan_directory(data_dir, needles_for("f_1", VALUE))
    assert [(h["file"], h["offset"], h["fact_id"]) for h in result.hits] == [(place, 100, "f_1")]
    assert result.files_scanned == 3 and not result.ok


def test_a_clean_directory_scans_clean(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    (data_dir / "segments").mkdir(parents=True)
    for place in PLACES:
        (data_dir / place).write_bytes(b"\0" * 100 + b"some other value entirely" + b"\0" * 37)
    result = scan_directory(data_dir, needles_for("f_1", VALUE))
    assert result.ok and result.files_scanned == len(PLACES)
