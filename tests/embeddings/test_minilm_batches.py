"""MiniLM's token batching, shared by cruxsql's runtime and the benchmark's numpy and onnxruntime rows."""

from types import SimpleNamespace

import numpy as np

from cruxsql.embeddings import minilm
from cruxsql.embeddings.minilm import token_batches


class WordTokenizer:
    """One id per word (its length), as `tokenizers.Tokenizer.encode_batch` returns them."""

    def encode_batch(self, texts):
        return [SimpleNamespace(ids=[len(word) for word in text.split()]) for text in texts]


def test_batches_hold_texts_of_one_token_count_shortest_first_never_padded(monkeypatch):
    monkeypatch.setattr(minilm, "BATCH_SIZE", 2)
    texts = ["aa bbb", "d", "ee ff", "g h", "", "ii jj"]
    batches = list(token_batches(WordTokenizer(), texts))
    assert [rows for rows, _ in batches] == [[4], [1], [0, 2], [3, 5]]
    assert all(ids.dtype == np.int64 for _, ids in batches)
    assert [ids.tolist() for _, ids in batches] == [[[]], [[1]], [[2, 3], [2, 2]], [[1, 1], [2, 2]]]
