"""Quarantine files rewritten without erased content: torn tails (`facts.jsonl.torn.*`) and corrupt lines
(`facts.jsonl.corrupt.*`) keep every other byte, in order, for the operator who inspects them.

A whole erased value found in the file is cut out; a torn fragment (its first 16 bytes, the value cut
off by the tear) is cut out to the end of its line. A file left empty is removed.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional

from ..facts.files import fsync_dir, write_file_durably
from .erasure_scan import Scanner


def _ranges(data: bytes, scanner: Scanner) -> list[tuple[int, int]]:
    spans = []
    hits = scanner.scan_bytes(data)
    whole = {pos for pos, needle in hits if not needle["form"].endswith("-prefix16")}
    for pos, needle in hits:
        if needle["form"].endswith("-prefix16"):
            if pos in whole:  # the whole value is there: cut only it
                continue
            end = data.find(b"\n", pos)
            spans.append((pos, len(data) if end < 0 else end))
        else:
            spans.append((pos, pos + needle["length"]))
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def rewrite_without(path: Path, scanner: Scanner) -> Optional[dict[str, Any]]:
    """Rewrite `path` without the content `scanner` finds (None when it holds none): what was cut."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    ranges = _ranges(data, scanner)
    if not ranges:
        return None
    kept, last = [], 0
    for start, end in ranges:
        kept.append(data[last:start])
        last = end
    kept.append(data[last:])
    rest = b"".join(kept)
    if rest:
        write_file_durably(path, rest, mode=0o600)
    else:
        os.unlink(path)
        fsync_dir(path.parent)
    return {"file": path.name, "bytes_before": len(data), "bytes_after": len(rest),
            "ranges_removed": [[start, end - start] for start, end in ranges]}
