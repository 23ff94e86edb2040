"""How `minilm-int8` quantises the f32 ONNX graph, chosen by the CPU the query model runs on.

Two recipes, each measured on the processors it is chosen for (docs/performance.md, "An int8 query
model"):

- `blocks` (recipe v4): every projection's weights in 8-bit blocks of 128 with a scale each
  (`MatMulNBits`, `weights_to_8_bit_blocks`), multiplied in int8 against activations quantised per block
  at each call; the word-embedding table by `quantize_dynamic`. Fast where onnxruntime has 8-bit
  dot-product instructions (VNNI: 5.2 ms a query), slow without them (8.7-9.1 ms on an AVX2-only EPYC,
  where `MatMulNBits` is most of the time).
- `dynamic` (recipe v5): every product and the word-embedding table by onnxruntime's `quantize_dynamic`
  (int8 weights per output channel, activations as uint8 with one scale per call): onnxruntime's u8·s8
  kernels, which AVX2 has (4.5 ms a query on that EPYC). Its vectors are a little further from f32's
  (cosine 0.992 mean, 0.985 least over 300 SciFact queries, against v4's 0.999 / 0.998), within the SciFact
  quality bound (≤ 0.005 nDCG@10 lost on every row).

`chosen()` picks `dynamic` where /proc/cpuinfo lists AVX2 and no VNNI (`avx512_vnni`, `avx_vnni`,
`amx_int8`), `blocks` everywhere else: with VNNI, and where only `blocks` was measured (other CPUs, or no
/proc/cpuinfo, as on macOS). `CRUXSQL_MINILM_INT8_RECIPE` pins one (empty: unset).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any, Optional

import numpy as np

from ..errors import InvalidInput

BLOCKS, DYNAMIC = "blocks", "dynamic"
# Everything that shapes each file; changing it changes the cache key, so an old file is simply not found.
RECIPES = {
    BLOCKS: ("torch.onnx.export(MiniLmEmbedder._encode), opset 17, attention as MultiHeadAttention; every "
             "projection MatMulNBits bits=8 block 128 symmetric accuracy_level 4; embeddings quantize_dynamic QInt8 "
             "per-channel; v4"),
    DYNAMIC: ("torch.onnx.export(MiniLmEmbedder._encode), opset 17, attention as MultiHeadAttention; every MatMul "
              "and the embeddings Gather quantize_dynamic QInt8 per-channel weights, uint8 activations; v5"),
}
ENV = "CRUXSQL_MINILM_INT8_RECIPE"
BLOCK = 128       # rows per quantisation block: 64 is ~5% slower, 256 no faster and less precise (cos 0.9982)
_VNNI_FLAGS = frozenset({"avx512_vnni", "avx_vnni", "amx_int8"})


def recipe_for(cpuinfo: str) -> str:
    """The recipe for a CPU described by `cpuinfo` (the text of /proc/cpuinfo)."""
    flags: set[str] = set()
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            flags.update(line.partition(":")[2].split())
            break
    if "avx2" in flags and not flags & _VNNI_FLAGS:
        return DYNAMIC
    return BLOCKS


def pinned() -> Optional[str]:
    """The recipe `CRUXSQL_MINILM_INT8_RECIPE` names (unset or empty: None); InvalidInput for another name."""
    name = os.environ.get(ENV) or None
    if name is not None and name not in RECIPES:
        raise InvalidInput(f"{ENV}={name!r} is not a recipe; use one of: {', '.join(RECIPES)}")
    return name


def chosen() -> str:
    """`CRUXSQL_MINILM_INT8_RECIPE` when set, else the recipe for this machine's CPU."""
    name = pinned()
    if name is not None:
        return name
    try:
        return recipe_for(Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return BLOCKS


def quantise(f32_path: Path, out_path: Path, recipe: str) -> None:
    """Write `recipe`'s int8 model of the f32 ONNX graph at `f32_path` to `out_path`."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    source = f32_path
    operators = ["MatMul", "Gather"]
    if recipe == BLOCKS:
        graph_model = onnx.load(str(f32_path))
        weights_to_8_bit_blocks(graph_model)
        source = out_path.with_name("blocks.onnx")
        onnx.save(graph_model, str(source))
        operators = ["Gather"]  # what is left for quantize_dynamic: the word-embedding table
    logging.disable(logging.WARNING)  # quantize_dynamic's advice to pre-process, on the root logger
    try:
        quantize_dynamic(str(source), str(out_path), weight_type=QuantType.QInt8, per_channel=True,
                         op_types_to_quantize=operators)
    finally:
        logging.disable(logging.NOTSET)


def weights_to_8_bit_blocks(graph_model: Any) -> int:
    """Every MatMul by a constant 2-D weight becomes com.microsoft MatMulNBits, bits=8, in place; returns
    how many.

    Each column of the weight (K × N) is cut into blocks of BLOCK rows, each block stored as int8 (+128) with
    its own f32 scale, max |w| / 127. With accuracy_level 4 onnxruntime quantises the activations to int8
    per block of BLOCK values too, at each call, and multiplies in int8: outliers in one channel of a
    LayerNorm's output spoil one block, not the whole tensor as with quantize_dynamic's one scale per
    activation, which is why the feed-forward products, f32 in recipe v3, can be int8 here (mean cosine
    with f32 on 300 SciFact queries 0.99897, against v3's 0.99875 and 0.9938 with every product per-tensor;
    SciFact nDCG@10 loses at most 0.0011, v3 0.0023).
    """
    from onnx import helper, numpy_helper

    graph = graph_model.graph
    weights = {init.name: init for init in graph.initializer if len(init.dims) == 2}
    replaced: set[str] = set()
    nodes = []
    for node in graph.node:
        if node.op_type != "MatMul" or node.input[1] not in weights:
            nodes.append(node)
            continue
        name = node.input[1]
        w = numpy_helper.to_array(weights[name]).astype(np.float32)
        k, n = w.shape
        if k % BLOCK:
            raise ValueError(f"{name}: {k} rows are not a whole number of {BLOCK}-row blocks")
        blocks = w.T.reshape(n, k // BLOCK, BLOCK)
        scales = np.abs(blocks).max(axis=2) / 127.0
        scales[scales == 0] = 1.0               # an all-zero block: any scale gives zeros
        quantised = (np.clip(np.rint(blocks / scales[:, :, None]), -127, 127) + 128).astype(np.uint8)
        graph.initializer.extend([numpy_helper.from_array(quantised, name + ".int8"),
                                  numpy_helper.from_array(scales.astype(np.float32).reshape(-1), name + ".scales")])
        nodes.append(helper.make_node("MatMulNBits", [node.input[0], name + ".int8", name + ".scales"],
                                      list(node.output), name=node.name + ".int8", domain="com.microsoft",
                                      K=k, N=n, bits=8, block_size=BLOCK, accuracy_level=4))
        replaced.add(name)
    del graph.node[:]
    graph.node.extend(nodes)
    kept = [init for init in graph.initializer if init.name not in replaced]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    if not any(opset.domain == "com.microsoft" for opset in graph_model.opset_import):
        graph_model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return len(replaced)


def other(recipe: str) -> Optional[str]:
    """The recipe that is not `recipe` (a cached file of it can stand in where exporting is impossible)."""
    return next((name for name in RECIPES if name != recipe), None)
