"""Embeddings: Crux's `Embedder` interface, the bit-exact `LocalHashEmbedder`, semantic profiles, `.ccxv` vectors.

    from cruxsql.embeddings import LocalHashEmbedder, configured_embedder

    embedder = LocalHashEmbedder()                 # crux-local-hash-v1, 256 dims, offline
    vector = embedder.embed_one("hello world")     # float32, unit length
    embedder.semantic_profile().to_json()          # Crux's cuecrux.semantic_profile.v1 JSON

Modules: `profile` (semantic profile and embedding fingerprint), `hash_embedder` (feature hashing of
unigrams and bigrams), `minilm` (all-MiniLM-L6-v2 from the optional `[semantic]` extra), `selection`
(which embedder `CRUXSQL_EMBEDDER` names), `vectors` (cosine and the `.ccxv` vector file format).
"""

from .hash_embedder import LocalHashEmbedder
from .profile import Embedder, SemanticProfile
from .selection import EMBEDDER_ENV, configured_embedder, embedder_named
from .vectors import cosine_similarity, read_ccxv, write_ccxv

__all__ = ["EMBEDDER_ENV", "Embedder", "LocalHashEmbedder", "SemanticProfile", "configured_embedder",
           "cosine_similarity", "embedder_named", "read_ccxv", "write_ccxv"]
