"""MiniLM's token batching, shared by cruxsql's runtime and the benchmark's numpy and onnxruntime rows."""

from types import SimpleNamespace

import numpy as np

from cruxsql.embeddings import minilm
from cruxsql.embeddings.minilm import token_batches


class WordTokenizer:
    """One id per word (its length), as `tokenizers.Tokenizer.encode_batch` returns them."""

    def encode_batch(self, texts):
        return [SimpleNamespace(ids=[len(word) for word in text.split()]) for text in texts]


def test_batches_follow_token_count_and_pad_with_a_mask(monkeypatch):
    monkeypatch.setattr(minilm, "BATCH_SIZE", 2)
    batches = list(token_batches(WordTokenizer(), ["aa bbb cccc", "d", "", "ee ff"]))
    assert [rows for rows, _, _ in batches] == [[2, 1], [3, 0]]
    (_, ids0, mask0), (_, ids1, mask1) = batches
    assert ids0.dtype == mask0.dtype == np.int64
    assert ids0.tolist() == [[0], [1]] and mask0.tolist() == [[0], [1]]
    assert ids1.tolist() == [[2, 2, 0], [2, 3, 4]] and mask1.tolist() == [[1, 1, 0], [1, 1, 1]]
