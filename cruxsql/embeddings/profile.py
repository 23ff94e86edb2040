"""Crux's semantic profile and embedding fingerprint (its semantic.rs), and the `Embedder` interface (embeddings.rs).

The profile names everything that makes two vectors comparable: model, dimensions, tokenizer, prompt
template version and normalisation. Its hash is BLAKE3 over those five fields joined by newlines; a
segment whose vectors carry another profile is not comparable with the configured embedder's queries.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, Sequence

import blake3
import numpy as np

PROFILE_SCHEMA = "cuecrux.semantic_profile.v1"
FINGERPRINT_SCHEMA = "cuecrux.embedding_fingerprint.v1"


@dataclass(frozen=True)
class SemanticProfile:
    model: str
    dimensions: int
    tokenizer: str
    prompt_template_version: str
    normalisation: str

    @property
    def hash(self) -> str:
        """BLAKE3 of `model\\ndims\\ntokenizer\\ntemplate\\nnormalisation`, 64 lowercase hex digits."""
        material = "\n".join([self.model, str(self.dimensions), self.tokenizer, self.prompt_template_version,
                              self.normalisation])
        return blake3.blake3(material.encode("utf-8")).hexdigest()

    @property
    def profile_id(self) -> str:
        return "sp_" + self.hash[:24]

    @property
    def fingerprint_id(self) -> str:
        return "efp_" + self.hash[:24]

    def fingerprint_json(self) -> dict[str, Any]:
        return {"schema": FINGERPRINT_SCHEMA, "fingerprint_id": self.fingerprint_id, "model": self.model,
                "dimensions": self.dimensions, "tokenizer": self.tokenizer,
                "prompt_template_version": self.prompt_template_version, "normalisation": self.normalisation,
                "hash": self.hash}

    def to_json(self) -> dict[str, Any]:
        """Crux's SemanticProfile JSON, keys in its declaration order."""
        return {"schema": PROFILE_SCHEMA, "profile_id": self.profile_id, "model": self.model,
                "dimensions": self.dimensions, "tokenizer": self.tokenizer,
                "prompt_template_version": self.prompt_template_version, "normalisation": self.normalisation,
                "embedding_fingerprint": self.fingerprint_json()}

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> "SemanticProfile":
        """Read a profile written by `to_json` (a `.ccxp` file); raises KeyError/TypeError/ValueError."""
        if raw.get("schema") != PROFILE_SCHEMA:
            raise ValueError(f"unknown semantic profile schema {raw.get('schema')!r}")
        return cls(str(raw["model"]), int(raw["dimensions"]), str(raw["tokenizer"]),
                   str(raw["prompt_template_version"]), str(raw["normalisation"]))


class Embedder(Protocol):
    """What the dense lane needs from a model (Crux's `Embedder` trait)."""

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        """One float32 row per text."""

    def embed_one(self, text: str) -> np.ndarray:
        """`embed_batch([text])[0]`."""

    def dimensions(self) -> int: ...

    def model(self) -> str: ...

    def semantic_profile(self) -> SemanticProfile: ...

    def runs_locally(self) -> bool: ...
