"""Embeddings: Crux's `Embedder` interface, the bit-exact `LocalHashEmbedder`, semantic profiles, `.ccxv` vectors.

    from cruxsql.embeddings import LocalHashEmbedder, configured_embedder

    embedder = LocalHashEmbedder()                 # crux-local-hash-v1, 256 dims, offline
    vector = embedder.embed_one("hello world")     # float32, unit length
    embedder.semantic_profile().to_json()          # Crux's cuecrux.semantic_profile.v1 JSON

Modules: `profile` (semantic profile and embedding fingerprint), `hash_embedder` (feature hashing of
unigrams and bigrams), `minilm` (all-MiniLM-L6-v2 from the optional `[semantic]` extra), `selection`
(which embedder `CRUXSQL_EMBEDDER` names), `vectors` (cosine and the `.ccxv` vector file format).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy_exports import lazy_attributes

_EXPORTS = {"LocalHashEmbedder": "hash_embedder", "Embedder": "profile", "SemanticProfile": "profile", "EMBEDDER_ENV": "selection", "configured_embedder": "selection", "embedder_named": "selection", "cosine_similarity": "vectors", "read_ccxv": "vectors", "write_ccxv": "vectors"}   # name -> module, imported on first use
__all__ = ['EMBEDDER_ENV', 'Embedder', 'LocalHashEmbedder', 'SemanticProfile', 'configured_embedder', 'cosine_similarity', 'embedder_named', 'read_ccxv', 'write_ccxv']

__getattr__ = lazy_attributes(__name__, _EXPORTS)


if TYPE_CHECKING:
    from .hash_embedder import LocalHashEmbedder
    from .profile import Embedder, SemanticProfile
    from .selection import EMBEDDER_ENV, configured_embedder, embedder_named
    from .vectors import cosine_similarity, read_ccxv, write_ccxv
