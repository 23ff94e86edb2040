"""`recall`'s dense lane: candidates only the model finds, and fact vectors kept current in the background."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cruxsql.embeddings import SemanticProfile
from cruxsql.facts.store import Store
from cruxsql.recall import Recall, relevance

F32 = np.float32


class PlantedEmbedder:
    """A real model stand-in (not the hash embedder, so `auto` fuses): each text maps to a vector the test
    chooses, by the first word it holds from `directions`; counts what it embeds."""

    def __init__(self, directions: dict[str, list[float]]) -> None:
        self.directions = {word: np.asarray(v, dtype=F32) for word, v in directions.items()}
        self.embedded: list[str] = []

    def embed_batch(self, texts):
        self.embedded += list(texts)
        return np.stack([self._vector(text) for text in texts]) if texts else np.zeros((0, 2), F32)

    def _vector(self, text: str) -> np.ndarray:
        for word in text.lower().split():
            if word in self.directions:
                return self.directions[word]
        return np.asarray([0.0, 0.0], dtype=F32)

    def embed_one(self, text):
        return self.embed_batch([text])[0]

    def dimensions(self):
        return 2

    def model(self):
        return "planted"

    def semantic_profile(self):
        return SemanticProfile("planted", 2, "none", "none", "l2")

    def runs_locally(self):
        return True


PLANTED = {"automobile": [0.95, 0.05], "car": [1.0, 0.0], "weather": [0.0, 1.0]}


@pytest.fixture
def store(tmp_path: Path):
    with Store(tmp_path / "data") as s:
        s.store("car", "colour", "red")
        s.store("weather", "today", "sunny")
        yield s


def test_a_question_bm25_finds_nothing_for_is_answered_by_the_dense_lane(store: Store) -> None:
    """The dense lane's candidates alone (BM25 scored none): once an IndexError in `_rank`."""
    result = Recall(store).search("automobile hue?", embedder=PlantedEmbedder(PLANTED), explain=True)
    assert result.fusion == "weighted"
    assert [(h.entity, h.key) for h in result.hits] == [("car", "colour")]
    assert result.explain is not None and result.explain["hits"][0]["rank_bm25"] is None
    assert result.hits[0].score == pytest.approx(relevance.WEIGHTED[1] * 0.95 / np.hypot(0.95, 0.05), abs=1e-6)
