"""`cruxsql embed`: the vector and semantic profile an embedder gives a text (for debugging retrieval)."""

from __future__ import annotations

from typing import Optional

import click

from ..embeddings import EMBEDDER_ENV, configured_embedder, embedder_named
from ..errors import InvalidInput
from .common import echo_json, fails_cleanly
from .options import json_flag


@click.command()
@click.argument("text")
@click.option("--model", default=None,
              help=f"hash (crux-local-hash-v1), minilm (needs the [semantic] extra); default ${EMBEDDER_ENV}.")
@json_flag("Print {model, dimensions, profile, vector} as JSON.")
@fails_cleanly
def embed(text: str, model: Optional[str], as_json: bool) -> None:
    """Print TEXT's embedding: its non-zero components and the embedder's semantic profile."""
    embedder = embedder_named(model) if model is not None else configured_embedder()
    if embedder is None:
        raise InvalidInput(f"no embedder is configured ({EMBEDDER_ENV}=none); pass --model hash or minilm")
    vector = embedder.embed_one(text)
    profile = embedder.semantic_profile()
    if as_json:
        echo_json({"model": profile.model, "dimensions": profile.dimensions, "profile": profile.to_json(),
                   "vector": [float(x) for x in vector]})
        return
    nonzero = [(i, float(x)) for i, x in enumerate(vector) if x != 0]
    click.echo(f"{profile.model} · {profile.dimensions} dims · {profile.profile_id} · "
               f"{len(nonzero)} non-zero component(s)")
    shown = nonzero if len(nonzero) <= 24 else sorted(nonzero, key=lambda p: -abs(p[1]))[:24]
    for index, value in sorted(shown):
        click.echo(f"  [{index}] {value:+.8f}")
    if len(shown) < len(nonzero):
        click.echo(f"  ... {len(nonzero) - len(shown)} more (use --json for the whole vector)")


COMMANDS = (embed,)
