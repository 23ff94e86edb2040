"""Write tests/golden/minilm_reference.npz: all-MiniLM-L6-v2 vectors from sentence-transformers on torch.

    python tools/minilm_reference.py

The model's reference implementation embeds the texts in `tests/test_minilm.py`'s REFERENCE_TEXTS (a short
sentence, accents and case, digits and punctuation, an empty string, and a text past the 256-token limit);
the test checks that cruxsql's runtime gives the same vectors within 1e-5 of cosine. Needs the [semantic]
extra (sentence-transformers comes with the weights package).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))


def main() -> None:
    os.environ["HF_HUB_OFFLINE"] = "1"
    from sentence_transformers import SentenceTransformer
    from test_minilm import REFERENCE_TEXTS

    from cruxsql.embeddings.minilm import model_dir

    model = SentenceTransformer(str(model_dir()), device="cpu")
    vectors = model.encode(REFERENCE_TEXTS, normalize_embeddings=True).astype(np.float32)
    out = REPO / "tests" / "golden" / "minilm_reference.npz"
    np.savez(out, texts=np.array(REFERENCE_TEXTS), vectors=vectors)
    print(f"wrote {out}: {vectors.shape[0]} vectors of {vectors.shape[1]} dims")


if __name__ == "__main__":
    main()
