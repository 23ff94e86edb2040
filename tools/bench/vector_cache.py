"""Embedded vectors kept between benchmark runs: a corpus is embedded once, reruns read the vectors back.

    cache = VectorCache(embedder, Path("/work/scratch/semantic-bench/minilm"))
    cache.fill(texts, progress=print)     # embeds what is missing, in slices, saving after each (resumable)
    lane = DocumentLane(store, embedder=cache)   # seals with the cached vectors, queries embed for real

The cache is keyed by the SHA-256 of each text and by the embedder's profile id, and it records the seconds
the real embedder spent, so a benchmark that seals from the cache still reports the measured embedding cost.
Queries (`embed_one`) always go to the real embedder.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

SLICE = 256


def text_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class VectorCache:
    """An embedder whose `embed_batch` answers from vectors saved under `stem` (.npy + .json)."""

    def __init__(self, embedder: Any, stem: Path) -> None:
        self.embedder = embedder
        profile = embedder.semantic_profile().profile_id
        self._vectors_path = stem.with_name(f"{stem.name}-{profile}.npy")
        self._meta_path = stem.with_name(f"{stem.name}-{profile}.json")
        self._keys: dict[str, int] = {}
        self._rows: list[np.ndarray] = []
        self.embed_seconds = 0.0     # real embedding time of every cached vector, summed over the runs that made them
        if self._meta_path.exists() and self._vectors_path.exists():
            meta = json.loads(self._meta_path.read_text())
            vectors = np.load(self._vectors_path)
            self._keys = {key: i for i, key in enumerate(meta["keys"])}
            self._rows = list(vectors)
            self.embed_seconds = meta["embed_seconds"]

    def __len__(self) -> int:
        return len(self._keys)

    def missing(self, texts: Sequence[str]) -> list[str]:
        seen: set[str] = set()
        out = []
        for text in texts:
            key = text_key(text)
            if key not in self._keys and key not in seen:
                seen.add(key)
                out.append(text)
        return out

    def fill(self, texts: Sequence[str], progress: Callable[[str], None] = lambda line: None) -> None:
        """Embed the texts not cached yet, SLICE at a time, saving after each slice."""
        todo = self.missing(texts)
        for start in range(0, len(todo), SLICE):
            part = todo[start:start + SLICE]
            began = time.perf_counter()
            vectors = self.embedder.embed_batch(part)
            self.embed_seconds += time.perf_counter() - began
            for text, vector in zip(part, vectors):
                self._keys[text_key(text)] = len(self._rows)
                self._rows.append(np.asarray(vector, dtype=np.float32))
            self._save()
            progress(f"embedded {start + len(part):,}/{len(todo):,} texts "
                     f"({len(self._rows) / self.embed_seconds:.1f}/s over the cache)")

    def chunks_per_second(self) -> float:
        return len(self._rows) / self.embed_seconds if self.embed_seconds else float("nan")

    def _save(self) -> None:
        np.save(self._vectors_path, np.stack(self._rows))
        self._meta_path.write_text(json.dumps({"model": self.embedder.model(), "embed_seconds": self.embed_seconds,
                                               "keys": list(self._keys)}))

    # ---- the Embedder interface, vectors from the cache ------------------------------------------------

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        self.fill(texts)
        return np.stack([self._rows[self._keys[text_key(text)]] for text in texts]) if texts \
            else np.zeros((0, self.dimensions()), dtype=np.float32)

    def embed_one(self, text: str) -> np.ndarray:
        return self.embedder.embed_one(text)

    def dimensions(self) -> int:
        return self.embedder.dimensions()

    def model(self) -> str:
        return self.embedder.model()

    def semantic_profile(self) -> Any:
        return self.embedder.semantic_profile()

    def runs_locally(self) -> bool:
        return self.embedder.runs_locally()
