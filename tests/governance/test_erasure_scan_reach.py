"""The erasure scan reads every file of the data directory: a value left in any of the places a copy
can hide (the view's WAL and its index, quarantined torn tails and corrupt lines, document segments and
their vector sidecars) is reported, by that file's name."""

from __future__ import annotations

import random
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


@pytest.mark.parametrize("pairs", [1 << 18, 5])
def test_the_tail_check_finds_what_hashing_every_candidate_finds(tmp_path: Path, monkeypatch, pairs: int) -> None:
    """Needles made here carry a `tail` anchor (of their last 8 bytes), checked with numpy before a
    candidate window's BLAKE3; needles read back from a ledger or a report have none, and every window
    whose first 8 bytes match is hashed. Both find the same hits: in a file of near-misses (the same
    first 8 bytes, or the same first and last 8, with other bytes between), with needles of several
    lengths sharing an anchor, a value crossing a scan block's end and one at the file's very end. (pairs
    5: the (window, needle) pairs are checked a few at a time, as many needles sharing an anchor are.)"""
    from cruxsql.governance import erasure_scan

    monkeypatch.setattr(erasure_scan, "_SCAN_BLOCK", 4096)
    monkeypatch.setattr(erasure_scan, "_PAIRS", pairs)
    values = ["europe america cron incident", "europe america", "europe america cron incident bob kernel",
              "x" * 300 + " long value"]
    needles = [n for i, v in enumerate(values) for n in needles_for(f"f_{i}", v)]
    assert all("tail" in n for n in needles)
    rng = random.Random(5)
    parts: list[bytes] = []
    for _ in range(400):
        roll = rng.random()
        if roll < 0.5:
            parts.append(b"europe america " + bytes(rng.choice(b"abcdefgh ") for _ in range(rng.randrange(5, 40))))
        elif roll < 0.6:
            parts.append(b"europe america cXon incident")  # first and last 8 bytes match, the middle not
        else:
            parts.append(rng.choice(values).encode())
        parts.append(b"\0" * rng.randrange(0, 9))
    parts.append(values[0].encode())  # at the very end of the file
    path = tmp_path / "file"
    path.write_bytes(b"".join(parts))
    with_tail = erasure_scan.Scanner(needles).scan_file(path, max_hits=10**6)
    without = erasure_scan.Scanner([{k: v for k, v in n.items() if k != "tail"} for n in needles]).scan_file(
        path, max_hits=10**6)
    data = path.read_bytes()
    expected = sorted((i, n["fact_id"]) for n in needles for i in range(len(data))
                      if erasure_scan.content_digest(data[i:i + n["length"]]) == n["blake3"]
                      and len(data[i:i + n["length"]]) == n["length"])
    found = sorted((h["offset"], h["fact_id"]) for h in with_tail[1])
    assert found == sorted((h["offset"], h["fact_id"]) for h in without[1]) == expected
    assert len(found) > 100 and any(off % 4096 > 4096 - 40 for off, _ in found)  # some cross a block's end


@pytest.mark.parametrize("values,bits", [(1, 16), (700, 18), (40_000, 24)])
def test_the_screen_sized_to_the_needles_lets_every_erased_value_through(tmp_path: Path, values: int,
                                                                         bits: int) -> None:
    """The screen before the exact anchor lookup has ~256 entries an anchor (2^16 to 2^24): with few
    needles and with many, every planted value is found, at its offset, and nothing else."""
    from cruxsql.governance import erasure_scan

    rng = random.Random(values)
    texts = [f"{rng.getrandbits(48):012x} said subject {i}" for i in range(values)]
    needles = [n for i, v in enumerate(texts) for n in needles_for(f"f_{i}", v)]
    scanner = erasure_scan.Scanner(needles)
    assert scanner._bits == bits
    planted = sorted(rng.sample(range(values), min(values, 60)))
    parts, expected, offset = [], [], 0
    for i in planted:
        noise = bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 300)))
        parts += [noise, texts[i].encode()]
        expected.append((offset + len(noise), f"f_{i}"))
        offset += len(noise) + len(texts[i])
    path = tmp_path / "file"
    path.write_bytes(b"".join(parts))
    _, hits = scanner.scan_file(path, max_hits=10**6)
    assert sorted((h["offset"], h["fact_id"]) for h in hits) == expected


@pytest.mark.parametrize("batch_chars", [1, 20, 4 << 20])
def test_a_value_a_retained_text_holds_is_found_as_written_or_lowercased_in_any_batch(batch_chars: int) -> None:
    """`held_by_retained` lowercases a batch of texts joined by NULs at once: each text is lowercased as
    alone (Final_Sigma at a text's end, 'İ' -> 'i̇'), and no value is found across two texts."""
    from cruxsql.governance.erasure_scan import held_by_retained

    texts = ["ΣΟΦΙΑ ΚΑΙ ΝΙΚΟΣ", "ΑΛΛΟ ΚΕΙΜΕΝΟ", "İstanbul Office", "Zeta-Project-X", "unrelated words"]
    values = {"f_sigma": "και νικος", "f_dotted": "i\u0307stanbul office", "f_written": "Zeta-Project",
              "f_no_final": "νικοσαλλο κει", "f_across": "Project-X unrelated", "f_absent": "nowhere at all"}
    needles = [n for fid, value in values.items() for n in needles_for(fid, value)]
    assert held_by_retained(iter(texts), needles, batch_chars) == {"f_sigma", "f_dotted", "f_written"}
