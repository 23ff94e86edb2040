"""Cosine similarity (corecrux-retrieval/src/dense.rs) and Crux's `.ccxv` vector file (corecruxd's local_ingest.rs).

`.ccxv`, little-endian: u32 magic 0x56435843 ("CXCV"), u16 version 1, u32 dim, u32 count (14 bytes), then
`count` records of u32 doc_id followed by `dim` f32. Records are fixed-size, so a file is memory-mapped
as one numpy structured array.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Union

import numpy as np

from ..errors import CruxsqlError

CCXV_MAGIC = 0x56435843
CCXV_VERSION = 1
_HEADER = struct.Struct("<IHII")
HEADER_BYTES = _HEADER.size


class VectorFileError(CruxsqlError, ValueError):
    """A `.ccxv` file whose header or length is not what the format says."""


def cosine_similarity(a: np.ndarray, b: np.ndarray) -> float:
    """Crux's cosine in f32: 0.0 for different lengths, empty vectors or a denominator below 1e-12."""
    if len(a) != len(b) or len(a) == 0:
        return 0.0
    a32, b32 = np.asarray(a, dtype=np.float32), np.asarray(b, dtype=np.float32)
    denominator = np.sqrt(np.dot(a32, a32), dtype=np.float32) * np.sqrt(np.dot(b32, b32), dtype=np.float32)
    if denominator < np.float32(1e-12):
        return 0.0
    return float(np.dot(a32, b32) / denominator)


def record_dtype(dim: int) -> np.dtype:
    return np.dtype([("doc_id", "<u4"), ("vector", "<f4", (dim,))])


def encode_ccxv(doc_ids: np.ndarray, vectors: np.ndarray) -> bytes:
    """The bytes of a `.ccxv` file holding `vectors[i]` for `doc_ids[i]`."""
    count, dim = vectors.shape
    records = np.zeros(count, dtype=record_dtype(dim))
    records["doc_id"] = doc_ids
    records["vector"] = vectors
    return _HEADER.pack(CCXV_MAGIC, CCXV_VERSION, dim, count) + records.tobytes()


def write_ccxv(path: Path, doc_ids: np.ndarray, vectors: np.ndarray) -> None:
    path.write_bytes(encode_ccxv(doc_ids, vectors))


def read_ccxv(source: Union[Path, bytes], mmap: bool = False) -> np.ndarray:
    """The records (fields `doc_id`, `vector`) of a `.ccxv` file or its bytes; memory-mapped on request."""
    head = source[:HEADER_BYTES] if isinstance(source, bytes) else _read_head(source)
    if len(head) < HEADER_BYTES:
        raise VectorFileError("vector file is shorter than its 14-byte header")
    magic, version, dim, count = _HEADER.unpack(head)
    if magic != CCXV_MAGIC or version != CCXV_VERSION:
        raise VectorFileError(f"not a .ccxv v1 file (magic {magic:#x}, version {version})")
    dtype = record_dtype(dim)
    size = len(source) if isinstance(source, bytes) else Path(source).stat().st_size
    if size != HEADER_BYTES + count * dtype.itemsize:
        raise VectorFileError(f"vector file holds {size} bytes; {count} vectors of {dim} dims need "
                              f"{HEADER_BYTES + count * dtype.itemsize}")
    if isinstance(source, bytes):
        return np.frombuffer(source, dtype=dtype, count=count, offset=HEADER_BYTES)
    if mmap and count:
        return np.memmap(source, dtype=dtype, mode="r", offset=HEADER_BYTES, shape=(count,))
    return np.fromfile(source, dtype=dtype, count=count, offset=HEADER_BYTES)


def _read_head(path: Path) -> bytes:
    with open(path, "rb") as handle:
        return handle.read(HEADER_BYTES)
