"""LocalHashEmbedder bit-exact with Crux (corecrux-memory embeddings.rs), profiles (semantic.rs), cosine, `.ccxv`."""

import numpy as np
import pytest

from cruxsql.embeddings import LocalHashEmbedder, SemanticProfile, cosine_similarity, read_ccxv
from cruxsql.embeddings.hash_embedder import features, hash_tokens
from cruxsql.embeddings.vectors import VectorFileError, encode_ccxv
from cruxsql.errors import InvalidInput

INV_SQRT3 = np.float32(1.0) / np.sqrt(np.float32(3.0))


def nonzero(vector):
    return {int(i): float(vector[i]) for i in np.flatnonzero(vector)}


def test_hello_world_golden_vector():
    vector = LocalHashEmbedder().embed_one("hello world")
    assert vector.dtype == np.float32 and vector.shape == (256,)
    assert nonzero(vector) == {152: float(INV_SQRT3), 215: -float(INV_SQRT3), 234: -float(INV_SQRT3)}
    assert float(INV_SQRT3) == pytest.approx(0.57735026, abs=1e-8)
    assert np.array_equal(LocalHashEmbedder().embed_one("Hello, World!"), vector)


def test_features_are_unigram_then_bigram_in_order():
    assert features(["hello", "world"]) == ["hello", "hello_world", "world"]
    assert features([]) == [] and features(["one"]) == ["one"]


def test_tokens_split_apostrophes_digits_and_fold_unicode_case():
    assert hash_tokens("Don't STOP at 42nd-street") == ["don", "t", "stop", "at", "42nd", "street"]
    # Full Unicode lowercasing (Rust to_lowercase): Greek, Cyrillic, Latin-1, and the dotted capital I.
    assert hash_tokens("ΣΟΦΊΑ Москва ÉTÉ") == ["σοφία", "москва", "été"]
    assert hash_tokens("İstanbul") == ["i̇stanbul"]
    # A vowel sign is alphabetic (Other_Alphabetic, unlike str.isalnum); the virama is not and splits.
    assert hash_tokens("नमस्ते") == ["नमस", "ते"]
    # Superscript and fraction digits are numeric (No).
    assert hash_tokens("x²+½") == ["x²", "½"]


def test_unicode_case_variants_embed_identically():
    embedder = LocalHashEmbedder()
    assert np.array_equal(embedder.embed_one("ÉCOLE Straße"), embedder.embed_one("école straße"))
    assert not np.array_equal(embedder.embed_one("don't"), embedder.embed_one("dont"))
    assert np.array_equal(embedder.embed_one("don't"), embedder.embed_one("don t"))


def test_digit_features_hash_like_words():
    vector = LocalHashEmbedder().embed_one("2026")
    # BLAKE3("2026") decides one bucket; a single feature normalises to exactly ±1.
    assert len(nonzero(vector)) == 1 and abs(next(iter(nonzero(vector).values()))) == 1.0


def test_empty_text_is_the_zero_vector_and_dims_clamp():
    assert not LocalHashEmbedder().embed_one("  ,;  ").any()
    tiny = LocalHashEmbedder(0)
    assert tiny.dimensions() == 1 and tiny.embed_one("a b c").tolist() in ([1.0], [-1.0])


def test_cosine_examples_of_the_spec():
    embedder = LocalHashEmbedder()
    cat = embedder.embed_one("the cat sat on the mat")
    assert cosine_similarity(cat, embedder.embed_one("a cat sat on a mat")) == pytest.approx(0.4615385, abs=1e-6)
    assert cosine_similarity(cat, embedder.embed_one("quantum chromodynamics lecture notes")) == 0.0
    assert cosine_similarity(cat, cat[:10]) == 0.0 and cosine_similarity(cat[:0], cat[:0]) == 0.0
    assert cosine_similarity(cat, np.zeros(256, dtype=np.float32)) == 0.0


def test_local_profile_hash_and_json():
    profile = LocalHashEmbedder().semantic_profile()
    assert profile.hash == "dfc013b8d9c10717de1845f8f6f1a741862893220ef944ce5a268e90d5092d17"
    assert profile.fingerprint_id == "efp_dfc013b8d9c10717de1845f8"
    assert profile.profile_id == "sp_dfc013b8d9c10717de1845f8"
    raw = profile.to_json()
    assert list(raw) == ["schema", "profile_id", "model", "dimensions", "tokenizer", "prompt_template_version",
                         "normalisation", "embedding_fingerprint"]
    assert raw["embedding_fingerprint"] == {
        "schema": "cuecrux.embedding_fingerprint.v1", "fingerprint_id": "efp_dfc013b8d9c10717de1845f8",
        "model": "crux-local-hash-v1", "dimensions": 256, "tokenizer": "whitespace_ngram_v1",
        "prompt_template_version": "none", "normalisation": "l2",
        "hash": "dfc013b8d9c10717de1845f8f6f1a741862893220ef944ce5a268e90d5092d17"}
    assert SemanticProfile.from_json(raw) == profile
    assert LocalHashEmbedder(128).semantic_profile().hash != profile.hash


def test_ccxv_round_trip_and_layout(tmp_path):
    vectors = LocalHashEmbedder(8).embed_batch(["alpha beta", "gamma", "delta epsilon zeta"])
    data = encode_ccxv(np.array([0, 1, 2], dtype=np.uint32), vectors)
    assert data[:14] == bytes.fromhex("43584356" "0100" "08000000" "03000000")
    assert len(data) == 14 + 3 * (4 + 8 * 4)
    path = tmp_path / "x.ccxv"
    path.write_bytes(data)
    for records in (read_ccxv(data), read_ccxv(path), read_ccxv(path, mmap=True)):
        assert records["doc_id"].tolist() == [0, 1, 2]
        assert np.array_equal(records["vector"], vectors)
    with pytest.raises(VectorFileError, match="need"):
        read_ccxv(data[:-1])
    with pytest.raises(VectorFileError, match="magic"):
        read_ccxv(b"\0" * 14)


def test_unknown_embedder_name_is_refused():
    from cruxsql.embeddings import embedder_named

    with pytest.raises(InvalidInput, match="unknown embedder 'bert'"):
        embedder_named("bert")
    assert embedder_named("none") is None
    assert embedder_named("crux-local-hash-v1").model() == "crux-local-hash-v1"
