"""A sealed segment's vector sidecars: its chunks' embeddings (`.ccxv`) and semantic profile (`.ccxp`).

Sidecars are written durably before the manifest entry that names them (with their BLAKE3), and a
segment's sidecars hold exactly one vector per chunk, row i for doc_id i. When vectors cannot be had
for every chunk, the segment gets none and stays out of the dense lane rather than half in it.
"""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from ..embeddings import Embedder, SemanticProfile, read_ccxv
from .dense import VectorSidecar, describe_sidecar, sidecar_bytes
from .segments import SealedSegment, SegmentInfo, write_sidecar


def with_vectors(directory: Path, embedder: Optional[Embedder], sealed: SealedSegment) -> SealedSegment:
    """Embed the segment's chunks and write its `.ccxv`/`.ccxp` sidecars (none without an embedder)."""
    if embedder is None or not sealed.records:
        return sealed
    vectors = embedder.embed_batch([r.text for r in sealed.records])
    doc_ids = np.arange(len(sealed.records), dtype=np.uint32)
    return _write_vectors(directory, sealed, doc_ids, vectors, embedder.semantic_profile())


def carry_vectors(directory: Path, old: SegmentInfo, new: SealedSegment, keep: Sequence[int]) -> SealedSegment:
    """The rewritten segment's sidecars: the surviving chunks' vectors, renumbered, same profile."""
    sidecar = VectorSidecar.from_json(old.vectors or {})
    records = read_ccxv(directory / sidecar.file_name)
    by_doc = {int(doc): row for row, doc in enumerate(records["doc_id"])}
    found = [by_doc.get(i) for i in keep]
    rows = [row for row in found if row is not None]
    if len(rows) != len(found):
        return new                      # vectors incomplete: leave this segment out of the dense lane
    profile_json = json.loads((directory / sidecar.profile_file_name).read_bytes())
    return _write_vectors(directory, new, np.arange(len(keep), dtype=np.uint32),
                          np.asarray(records["vector"][rows]), SemanticProfile.from_json(profile_json))


def _write_vectors(directory: Path, sealed: SealedSegment, doc_ids: np.ndarray, vectors: np.ndarray,
                   profile: SemanticProfile) -> SealedSegment:
    ccxv, ccxp = sidecar_bytes(doc_ids, vectors, profile)
    sidecar = describe_sidecar(sealed.info.file_name, ccxv, ccxp, profile)
    write_sidecar(directory, sidecar.file_name, ccxv)
    write_sidecar(directory, sidecar.profile_file_name, ccxp)
    return replace(sealed, info=replace(sealed.info, vectors=asdict(sidecar)))
