"""Finding erased content in files without knowing it: scan needles and the byte scanner.

For each form a value can take on disk (raw UTF-8, JSON-escaped, lowercased, CSV-quoted, and 256-byte
chunks of long values, which SQLite may split across overflow pages) a needle keeps its length, a 32-bit
anchor (a multiplicative hash) of its first 8 bytes, and its BLAKE3. The scanner slides an 8-byte window
over every file (vectorised with numpy), looks anchors up, and confirms a candidate with BLAKE3. Values
shorter than 8 bytes cannot be proven absent.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

import blake3
import numpy as np

from ..recall.scope import rust_lower

MIN_NEEDLE_BYTES = 8
CHUNK_BYTES = 256
CHUNK_FROM_BYTES = 2048
MAX_CHUNKS_PER_VALUE = 4096
SCAN_SCHEME = "anchor8-mulhash-hi32+blake3-128"
_SCAN_BLOCK = 1 << 23
_PAIRS = 1 << 18  # (window, needle) pairs checked at a time: ~30 MB of arrays
_M64 = (1 << 64) - 1
_SALT = 0x5EED_C0FF_EE15_A11D
_MULT = 0x9E3779B97F4A7C15  # 2^64 / golden ratio (odd): multiplicative hashing


# --- needles ---------------------------------------------------------------------------------------


def _mix_int(x: int) -> int:
    """Anchor of an 8-byte little-endian word: the top 32 bits of (word ^ salt) * odd constant mod 2^64."""
    return (((x ^ _SALT) * _MULT) & _M64) >> 32


def _mix_product(x: np.ndarray) -> np.ndarray:
    """(word ^ salt) * odd constant mod 2^64 of each word, in one new array: its top 32 bits are the
    anchor (`_mix_array`), its top bits the scanner's screen index."""
    h = np.bitwise_xor(x, np.uint64(_SALT))
    with np.errstate(over="ignore"):
        np.multiply(h, np.uint64(_MULT), out=h)
    return h


def _mix_array(x: np.ndarray) -> np.ndarray:
    return _mix_product(x) >> np.uint64(32)


def content_digest(data: bytes) -> str:
    return blake3.blake3(data).hexdigest()[:32]


def value_forms(value: str) -> dict[str, bytes]:
    """The byte forms an erased value can take in the data directory's files."""
    raw = value.encode("utf-8")
    forms = {"utf8": raw}
    escaped = json.dumps(value, ensure_ascii=False)[1:-1].encode("utf-8")
    if escaped != raw:
        forms["json"] = escaped
    lowered = rust_lower(value).encode("utf-8")
    if lowered != raw:
        forms["lower"] = lowered
    if '"' in value:
        forms["csv"] = value.replace('"', '""').encode("utf-8")
    return forms


def needles_for(fact_id: str, value: str) -> list[dict[str, Any]]:
    """Scan needles for one value (empty when it is shorter than MIN_NEEDLE_BYTES)."""
    out = []
    for form, data in value_forms(value).items():
        if len(data) < MIN_NEEDLE_BYTES:
            continue
        pieces = [(form, data)]
        if form == "utf8" and len(data) > CHUNK_FROM_BYTES:
            n = len(data) // CHUNK_BYTES
            step = max(1, -(-n // MAX_CHUNKS_PER_VALUE))
            pieces += [(f"chunk{i}", data[i * CHUNK_BYTES:(i + 1) * CHUNK_BYTES]) for i in range(0, n, step)]
        seen = set()
        for name, piece in pieces:
            key = (len(piece), content_digest(piece))
            if key in seen:
                continue
            seen.add(key)
            out.append({"fact_id": fact_id, "form": name, "length": len(piece),
                        "anchor": _mix_int(int.from_bytes(piece[:8], "little")), "blake3": key[1],
                        "tail": _mix_int(int.from_bytes(piece[-8:], "little"))})
    return out


# --- scanning --------------------------------------------------------------------------------------


@dataclass
class ScanResult:
    files_scanned: int = 0
    bytes_scanned: int = 0
    needles: int = 0
    hits: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.hits

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "files_scanned": self.files_scanned, "bytes_scanned": self.bytes_scanned,
                "needles": self.needles, "hits": self.hits}


class Scanner:
    """Finds needles (length, anchor, BLAKE3) in files without knowing the values."""

    def __init__(self, needles: Iterable[dict[str, Any]]) -> None:
        self.by_anchor: dict[int, list[dict[str, Any]]] = {}
        count = 0
        for n in needles:
            self.by_anchor.setdefault(int(n["anchor"]), []).append(n)
            count += 1
        self.count = count
        self.anchors = np.array(sorted(self.by_anchor), dtype=np.uint64)
        # A presence table on the anchors' top bits screens windows before the exact lookup. It is sized
        # to the needles (~256 entries an anchor, 2^16 to 2^24) rather than always 2^24: a 16 MiB table
        # missed the CPU's caches on nearly every window, most of the scan's time (84 against 280 MiB/s).
        self._bits = min(24, max(16, (len(self.anchors) - 1).bit_length() + 8))
        self.screen = np.zeros(1 << self._bits, dtype=bool)
        self.screen[(self.anchors >> np.uint64(32 - self._bits)).astype(np.int64)] = True
        # the needles flat, anchor after anchor in `anchors`' order, with each anchor's first and count,
        # and each needle's length and tail anchor (-1: none), for the vectorised tail check
        self._flat = [n for a in self.anchors.tolist() for n in self.by_anchor[a]]
        counts = np.array([len(self.by_anchor[a]) for a in self.anchors.tolist()], dtype=np.int64)
        self._per_anchor = counts
        self._first = np.cumsum(counts) - counts
        self._length = np.array([n["length"] for n in self._flat], dtype=np.int64)
        self._tail = np.array([n.get("tail", -1) for n in self._flat], dtype=np.int64)

    def scan_file(self, path: Path, max_hits: int = 100) -> tuple[int, list[dict[str, Any]]]:
        hits: list[dict[str, Any]] = []
        try:
            fh = open(path, "rb")
        except OSError:
            return 0, hits
        with fh:
            size = os.fstat(fh.fileno()).st_size
            if not self.count or size < MIN_NEEDLE_BYTES:
                return size, hits
            base = 0
            while base < size and len(hits) < max_hits:
                fh.seek(base)
                block = fh.read(_SCAN_BLOCK + 7)
                if len(block) < 8:
                    break
                limit = min(len(block) - 7, _SCAN_BLOCK)  # window starts owned by this block
                for pos, needle in self._matches(block, limit):
                    start = base + pos
                    end = pos + needle["length"]
                    if end <= len(block):
                        data = block[pos:end]
                    else:  # (a needle running past the block: read from the file)
                        fh.seek(start)
                        data = fh.read(needle["length"])
                    if len(data) == needle["length"] and _tail_matches(data, needle) \
                            and content_digest(data) == needle["blake3"]:
                        hits.append({"file": str(path), "offset": start, "fact_id": needle["fact_id"],
                                     "form": needle["form"], "blake3": needle["blake3"],
                                     "request_id": needle.get("request_id")})
                base += _SCAN_BLOCK
            return size, hits

    def scan_bytes(self, data: bytes) -> list[tuple[int, dict[str, Any]]]:
        """(offset, needle) for every needle found in `data`, held in memory (a message, a small file)."""
        found: list[tuple[int, dict[str, Any]]] = []
        if not self.count or len(data) < MIN_NEEDLE_BYTES:
            return found
        for pos, needle in self._matches(data, len(data) - 7):
            piece = data[pos:pos + needle["length"]]
            if len(piece) == needle["length"] and _tail_matches(piece, needle) \
                    and content_digest(piece) == needle["blake3"]:
                found.append((pos, needle))
        return found

    def _matches(self, block: bytes, limit: int) -> Iterator[tuple[int, dict[str, Any]]]:
        """(position, needle), in position order, for every window of `block` starting before `limit`
        whose first 8 bytes have a needle's anchor and whose last 8 bytes its tail anchor (checked here
        with numpy for the windows inside the block; the others, and needles without one, are left to
        the caller): the candidates whose bytes are then hashed. Many needles can share an anchor (values
        that start alike), so the (window, needle) pairs are checked _PAIRS at a time."""
        positions, anchors = self._candidates(block, limit)
        if not len(positions):
            return
        of_anchor = np.searchsorted(self.anchors, anchors)
        reps = self._per_anchor[of_anchor]
        cuts = np.searchsorted(np.cumsum(reps), np.arange(_PAIRS, int(reps.sum()), _PAIRS), side="right")
        for lo, hi in zip([0, *cuts.tolist()], [*cuts.tolist(), len(positions)]):
            if hi > lo:
                yield from self._pairs(block, positions[lo:hi], of_anchor[lo:hi], reps[lo:hi])

    def _pairs(self, block: bytes, positions: np.ndarray, of_anchor: np.ndarray,
               reps: np.ndarray) -> Iterator[tuple[int, dict[str, Any]]]:
        pos = np.repeat(positions, reps)
        runs = np.cumsum(reps) - reps
        needle = np.repeat(self._first[of_anchor], reps) + np.arange(len(pos)) - np.repeat(runs, reps)
        end = pos + self._length[needle]
        tails = self._tail[needle]
        check = (end <= len(block)) & (tails >= 0)
        keep = ~check
        if check.any():
            at = end[check] - 8
            last = np.frombuffer(block, dtype=np.uint8)[at[:, None] + np.arange(8)]
            words = np.ascontiguousarray(last).view("<u8").reshape(-1)
            keep[check] = _mix_array(words).astype(np.int64) == tails[check]
        flat = self._flat
        for p, n in zip(pos[keep].tolist(), needle[keep].tolist()):
            yield p, flat[n]

    def _candidates(self, block: bytes, limit: int) -> tuple[np.ndarray, np.ndarray]:
        """(positions, anchors) of the windows of `block` starting before `limit` whose anchor is a
        needle's, in position order."""
        positions: list[np.ndarray] = []
        matched: list[np.ndarray] = []
        anchors = self.anchors
        screen_shift = np.uint64(64 - self._bits)
        for k in range(8):
            n = (len(block) - k) // 8
            if n <= 0:
                continue
            words = np.frombuffer(block, dtype="<u8", count=n, offset=k)
            h = _mix_product(words)  # (shifted to anchors only for the few windows the screen lets through)
            maybe = np.flatnonzero(self.screen[(h >> screen_shift).view(np.int64)])
            if not maybe.size:
                continue
            hm = h[maybe] >> np.uint64(32)
            idx = np.searchsorted(anchors, hm)
            idx[idx >= len(anchors)] = len(anchors) - 1
            hit = anchors[idx] == hm
            pos = k + 8 * maybe[hit]
            within = pos < limit
            positions.append(pos[within])
            matched.append(hm[hit][within])
        if not positions:
            return np.empty(0, np.int64), np.empty(0, np.uint64)
        pos = np.concatenate(positions)
        order = np.argsort(pos, kind="stable")
        return pos[order], np.concatenate(matched)[order]


def _tail_matches(data: bytes, needle: dict[str, Any]) -> bool:
    """Whether `data`'s last 8 bytes have the needle's `tail` anchor (True when it has none: a needle read
    back from a ledger or a report). A window that starts like an erased value but ends otherwise is
    rejected before its BLAKE3 is computed: with values made of common words, most windows whose first
    8 bytes match are such (4.4M of them in a 100k-fact store's files, each a digest)."""
    tail = needle.get("tail")
    return tail is None or _mix_int(int.from_bytes(data[-8:], "little")) == tail


def scan_directory(data_dir: Path, needles: list[dict[str, Any]]) -> ScanResult:
    """Scan every regular file under `data_dir` for the needles."""
    scanner = Scanner(needles)
    result = ScanResult(needles=scanner.count)
    for path in sorted(Path(data_dir).rglob("*")):
        if not path.is_file() or path.is_symlink():
            continue
        size, hits = scanner.scan_file(path)
        result.files_scanned += 1
        result.bytes_scanned += size
        for hit in hits:
            hit["file"] = str(path.relative_to(data_dir))
        result.hits.extend(hits)
    return result


def held_by_retained(texts: Iterable[str], needles: list[dict[str, Any]], batch_chars: int = 4 << 20) -> set[str]:
    """The fact ids among `needles` whose bytes occur inside `texts` (the retained facts' entities, keys
    and values), as written or lowercased: those bytes stay in the store by right, so no scan can prove
    the erased value gone. Scanned in batches of about `batch_chars`, each joined by NULs and lowercased
    whole: a NUL is neither cased nor case-ignorable, so Final_Sigma sees each text's own ends, and one
    call per batch does what one per text did (0.5 s of an erasure's locked phase at 100k facts)."""
    scanner = Scanner(needles)
    found: set[str] = set()
    if not scanner.count:
        return found

    def scan(batch: list[str]) -> None:
        joined = "\x00".join(batch)
        lowered = rust_lower(joined)
        data = joined if lowered == joined else joined + "\x00" + lowered
        found.update(needle["fact_id"] for _, needle in scanner.scan_bytes(data.encode("utf-8")))

    batch: list[str] = []
    size = 0
    for text in texts:
        batch.append(text)
        size += len(text) + 1
        if size >= batch_chars:
            scan(batch)
            batch, size = [], 0
    if batch:
        scan(batch)
    return found


def prefix_needles(fact_id: str, value: str) -> list[dict[str, Any]]:
    """Needles for the first 16 bytes of a value's forms: used only to find torn fragments to remove."""
    out = []
    for form, data in value_forms(value).items():
        if len(data) >= 16:
            piece = data[:16]
            out.append({"fact_id": fact_id, "form": form + "-prefix16", "length": 16,
                        "anchor": _mix_int(int.from_bytes(piece[:8], "little")), "blake3": content_digest(piece),
                        "tail": _mix_int(int.from_bytes(piece[8:], "little"))})
    return out
