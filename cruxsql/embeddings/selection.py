"""Which embedder is configured: `CRUXSQL_EMBEDDER` = `hash` (default), `minilm` or `none`.

A named embedder that cannot load is an error naming what is missing; there is no silent fallback to
the hash embedder (Crux falls back, and its operators cannot tell which model produced their vectors).
"""

from __future__ import annotations

import os
from typing import Optional

from ..errors import InvalidInput
from .hash_embedder import LocalHashEmbedder
from .profile import Embedder

EMBEDDER_ENV = "CRUXSQL_EMBEDDER"
EMBEDDER_NAMES = ("hash", "minilm", "none")
# Model ids Crux uses, accepted as names too.
_ALIASES = {"crux-local-hash-v1": "hash", "fastembed-all-minilm-l6-v2": "minilm", "off": "none"}


def embedder_named(name: str) -> Optional[Embedder]:
    """The embedder called `name` (None for `none`); InvalidInput for an unknown name or a missing extra."""
    key = _ALIASES.get(name.strip().lower(), name.strip().lower())
    if key == "hash":
        return LocalHashEmbedder()
    if key == "minilm":
        from .minilm import MiniLmEmbedder

        return MiniLmEmbedder.load()
    if key == "none":
        return None
    raise InvalidInput(f"unknown embedder {name!r}: choose one of {', '.join(EMBEDDER_NAMES)}")


def configured_embedder() -> Optional[Embedder]:
    """The embedder `CRUXSQL_EMBEDDER` names (the hash embedder when unset, as Crux defaults to it)."""
    return embedder_named(os.environ.get(EMBEDDER_ENV, "hash") or "hash")
