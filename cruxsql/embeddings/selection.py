"""Which embedder is configured: `CRUXSQL_EMBEDDER` = `hash` (default), `minilm`, `minilm-int8` or `none`.

A named embedder that cannot load is an error naming what is missing; there is no silent fallback to
the hash embedder (Crux falls back, and its operators cannot tell which model produced their vectors).
The one fallback is `minilm-int8` without onnxruntime: its vectors are comparable with `minilm`'s by
design (same profile), so queries go to `minilm` with a one-line note on stderr.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

from ..errors import InvalidInput
from .hash_embedder import LocalHashEmbedder
from .profile import Embedder

EMBEDDER_ENV = "CRUXSQL_EMBEDDER"
EMBEDDER_NAMES = ("hash", "minilm", "minilm-int8", "none")
# Model ids Crux uses, accepted as names too.
_ALIASES = {"crux-local-hash-v1": "hash", "fastembed-all-minilm-l6-v2": "minilm", "off": "none"}


def embedder_named(name: str, data_dir: Optional[Path] = None) -> Optional[Embedder]:
    """The embedder called `name` (None for `none`); InvalidInput for an unknown name or a missing extra.

    `data_dir`: the store whose `models/` holds `minilm-int8`'s exported model (the other embedders ignore it).
    """
    key = _ALIASES.get(name.strip().lower(), name.strip().lower())
    if key == "hash":
        return LocalHashEmbedder()
    if key == "minilm":
        from .minilm import MiniLmEmbedder

        return MiniLmEmbedder.load()
    if key == "minilm-int8":
        return _minilm_int8(data_dir)
    if key == "none":
        return None
    raise InvalidInput(f"unknown embedder {name!r}: choose one of {', '.join(EMBEDDER_NAMES)}")


def _minilm_int8(data_dir: Optional[Path]) -> Embedder:
    from .minilm import MiniLmEmbedder
    from .minilm_int8 import EXTRA_HINT, NAME, MiniLmInt8Embedder, missing_runtime, note

    missing = missing_runtime()
    if missing is None:
        if data_dir is None:
            raise InvalidInput(f"embedder {NAME!r} keeps its exported model in a data directory, and none was given")
        return MiniLmInt8Embedder.load(data_dir)
    try:
        fallback = MiniLmEmbedder.load()
    except InvalidInput as exc:
        raise InvalidInput(f"embedder {NAME!r} needs the Python package {missing!r} ({EXTRA_HINT}), and its "
                           f"fallback 'minilm' cannot load either: {exc}") from None
    note(f"embedder {NAME!r} needs the Python package {missing!r} ({EXTRA_HINT}); queries use 'minilm' (f32 torch)")
    return fallback


def configured_embedder(data_dir: Optional[Path] = None) -> Optional[Embedder]:
    """The embedder `CRUXSQL_EMBEDDER` names (the hash embedder when unset, as Crux defaults to it)."""
    return embedder_named(os.environ.get(EMBEDDER_ENV, "hash") or "hash", data_dir)
