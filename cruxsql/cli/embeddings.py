"""`cruxsql embed`: the vector and semantic profile an embedder gives a text (for debugging retrieval), or
`--facts`: the vectors recall's dense lane needs, for every fact of a store still lacking one."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

import click

from ..embeddings import EMBEDDER_ENV, configured_embedder, embedder_named
from ..errors import InvalidInput
from ..recall import Recall
from ..recall.fact_indexer import FactIndexer
from .common import echo_json, fails_cleanly, open_store
from .options import data_dir_option, json_flag


@click.command()
@click.argument("text", required=False)
@click.option("--model", default=None,
              help=f"hash (crux-local-hash-v1), minilm (needs the [semantic] extra); default ${EMBEDDER_ENV}.")
@click.option("--facts", "fill_facts", is_flag=True,
              help="Instead of TEXT: embed every fact of the store that has no vector for recall's model yet "
                   "(what the MCP server's indexer does in the background); print how many.")
@json_flag("Print {model, dimensions, profile, vector} as JSON.")
@data_dir_option
@fails_cleanly
def embed(text: Optional[str], model: Optional[str], fill_facts: bool, as_json: bool, data_dir: Path) -> None:
    """Print TEXT's embedding: its non-zero components and the embedder's semantic profile."""
    if fill_facts:
        if text is not None or model is not None:
            raise InvalidInput("--facts takes no TEXT and no --model (it embeds with recall's model)")
        return _fill_facts(data_dir)
    if text is None:
        raise InvalidInput("give a TEXT to embed, or --facts")
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



def _fill_facts(data_dir: Path) -> None:
    """Embed the store's facts lacking a vector for recall's dense lane, on this thread."""
    with open_store(data_dir, "write") as store:
        indexer = FactIndexer.for_recall(Recall(store))
        assert indexer is not None                   # a writable store
        started = time.perf_counter()
        done = indexer.fill()
        if indexer.embedder is None:
            raise InvalidInput("no embedding model is installed (the [semantic] extra): recall ranks by BM25 alone")
        click.echo(f"embedded {done} fact(s) with {indexer.embedder.model()} in {time.perf_counter() - started:.1f} s")


COMMANDS = (embed,)
