"""all-MiniLM-L6-v2 quantised to int8 for queries (`CRUXSQL_EMBEDDER=minilm-int8`), run by onnxruntime.

The f32 model of `minilm.py` (cruxsql's own forward pass over the pinned weights, mean pooling and L2
included) is exported once with `torch.onnx.export`, each layer's self-attention as one onnxruntime
MultiHeadAttention node, and quantised by the recipe chosen for this CPU (`int8_recipes`: 8-bit weight
blocks where the CPU has VNNI, onnxruntime's dynamic quantisation of every product on AVX2 without it).
The file is cached in the data directory, `models/minilm-int8-<key>.onnx`, where the key covers the
pinned weights and the export recipe;
its BLAKE3 is written beside it (`….onnx.blake3`) and checked at every load on the very bytes onnxruntime
then reads, so a changed or torn file is exported again, never used. Both are written temp + fsync +
rename. Exporting needs torch and onnx; a cached file needs only onnxruntime + tokenizers.

Only queries (`embed_one`, `embed_queries`) run on int8: `embed_batch` (documents, facts) stays the f32
torch pass, so stored vectors are those of `minilm` and the semantic profile is the same. An int8 query
vector is 384-dim and unit length, and its cosine with the f32 one is ≥ 0.995 with the `blocks` recipe,
≥ 0.98 with `dynamic` (tests/test_minilm_int8.py). Where the chosen recipe's file is missing and cannot be
exported (no torch or onnx), a cached file of the other recipe is used, with a note.
"""

from __future__ import annotations

import fcntl
import importlib.util
import os
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import blake3
import numpy as np

from ..errors import InvalidInput
from ..facts.files import write_file_durably
from . import int8_recipes
from .minilm import (DIMENSIONS, HEADS, PINNED_SHA256, PROFILE, MiniLmEmbedder, load_tokenizer, model_dir,
                     multi_head_attention, token_batches)
from .profile import SemanticProfile

NAME = "minilm-int8"
EXTRA_HINT = "install it with: pip install 'cruxsql[semantic-int8]'"
OPSET = 17
MODELS_DIR = "models"
RUNTIME_PACKAGES = ("onnxruntime", "tokenizers")


def note(line: str) -> None:
    """One line on stderr (stdout is the command's output, or an MCP server's protocol)."""
    print(f"note: {line}", file=sys.stderr, flush=True)


def cache_key(recipe: str) -> str:
    material = f"{PINNED_SHA256['model.safetensors']}\n{int8_recipes.RECIPES[recipe]}"
    return blake3.blake3(material.encode("utf-8")).hexdigest()[:16]


def model_path(data_dir: Path, recipe: str) -> Path:
    """Where the int8 model of these weights and `recipe` lives in `data_dir`."""
    return Path(data_dir) / MODELS_DIR / f"minilm-int8-{cache_key(recipe)}.onnx"


def checksum_path(path: Path) -> Path:
    return path.with_name(path.name + ".blake3")


def missing_runtime() -> Optional[str]:
    """The first package a cached int8 model needs that is not installed, else None."""
    return next((name for name in RUNTIME_PACKAGES if importlib.util.find_spec(name) is None), None)


def verified_model(path: Path) -> Optional[bytes]:
    """The file's bytes when its BLAKE3 is the one recorded beside it; None when either is missing or differs."""
    try:
        data = path.read_bytes()
        recorded = checksum_path(path).read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return data if blake3.blake3(data).hexdigest() == recorded else None


def can_export() -> bool:
    """Whether this installation can export a model (torch and onnx, beside the runtime)."""
    return all(importlib.util.find_spec(name) is not None for name in ("torch", "onnx"))


def cached_model(data_dir: Path, recipe: str, export: Optional[Callable[[], bytes]] = None) -> bytes:
    """The verified int8 model of `recipe` in `data_dir`, exported first when it is missing or fails its
    checksum.

    Exports are serialised by a lock file in the models directory, so concurrent first uses export once.
    """
    path = model_path(data_dir, recipe)
    data = verified_model(path)
    if data is not None:
        return data
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path.parent / ".minilm-int8.lock", "a+b") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            data = verified_model(path)        # another process may have exported it while we waited
            if data is None:
                if path.exists():
                    note(f"{path} does not match its recorded BLAKE3 checksum; exporting it again")
                note(f"exporting all-MiniLM-L6-v2 to int8 ONNX into {path} (once per data directory)")
                data = export() if export is not None else export_int8(recipe=recipe)
                write_file_durably(path, data)
                write_file_durably(checksum_path(path), (blake3.blake3(data).hexdigest() + "\n").encode("ascii"))
    except OSError as exc:
        raise InvalidInput(f"embedder {NAME!r} cannot keep its model in {path.parent}: "
                           f"{exc.strerror or exc}") from None
    return data


def _cached_or_stand_in(data_dir: Path) -> tuple[str, Optional[bytes]]:
    """(recipe, its verified cached bytes or None: to export) for this machine. When the chosen recipe's
    file is missing and cannot be made here (no torch or onnx, or a read-only directory) but the other
    recipe's is cached (a directory from a machine of the other CPU kind), that one, with a note; never
    for a recipe pinned with CRUXSQL_MINILM_INT8_RECIPE."""
    recipe = int8_recipes.chosen()
    data = verified_model(model_path(data_dir, recipe))
    stand_in = int8_recipes.other(recipe)
    if data is not None or stand_in is None or int8_recipes.pinned():
        return recipe, data
    models = data_dir / MODELS_DIR
    why = ("torch or onnx is not installed" if not can_export()
           else f"{models} cannot be written" if not os.access(models if models.exists() else data_dir, os.W_OK)
           else None)
    cached = verified_model(model_path(data_dir, stand_in)) if why else None
    if cached is None:
        return recipe, None
    note(f"the {recipe!r} int8 model is not cached in {data_dir} and cannot be made here ({why}); "
         f"using the cached {stand_in!r} one")
    return stand_in, cached


def export_int8(f32: Optional[MiniLmEmbedder] = None, recipe: str = int8_recipes.BLOCKS) -> bytes:
    """The bytes of the int8 ONNX model: cruxsql's f32 forward pass traced by torch, then quantised by
    `recipe` (`int8_recipes.quantise`)."""
    try:
        import onnx  # noqa: F401  (the export and the quantisation need it)
        import onnxruntime.quantization  # noqa: F401
    except ImportError as exc:
        raise InvalidInput(f"exporting the int8 MiniLM model needs the Python package {exc.name!r}; "
                           f"install it with: pip install 'cruxsql[semantic,semantic-int8]'") from None
    model = f32 or MiniLmEmbedder.load()
    with tempfile.TemporaryDirectory(prefix="cruxsql-minilm-int8-") as tmp:
        f32_path, int8_path = Path(tmp) / "f32.onnx", Path(tmp) / "int8.onnx"
        export_f32(model, f32_path)
        int8_recipes.quantise(f32_path, int8_path, recipe)
        return int8_path.read_bytes()


def export_f32(model: MiniLmEmbedder, path: Path) -> None:
    """`model._encode` traced into an f32 ONNX graph at `path`, each layer's self-attention one
    com.microsoft MultiHeadAttention node (onnxruntime's fused kernel: traced as written, the block is ~60
    small nodes per layer whose per-node costs add up on a 20-token query)."""
    import onnx
    import torch

    class FusedAttention(torch.autograd.Function):
        """Computes what `self_attention` computes after its projections (the trace needs the values) and
        exports as MultiHeadAttention over the bias-free projections, the biases added inside the node."""

        @staticmethod
        def forward(ctx: Any, q: Any, k: Any, v: Any, bias: Any, mask: Any) -> Any:
            width = q.shape[-1]
            return multi_head_attention(q + bias[:width], k + bias[width:2 * width], v + bias[2 * width:], mask)

        @staticmethod
        def symbolic(g: Any, q: Any, k: Any, v: Any, bias: Any, mask: Any) -> Any:
            padding = g.op("Cast", mask, to_i=onnx.TensorProto.INT32)         # key_padding_mask: 1 = token, 0 = padding
            return g.op("com.microsoft::MultiHeadAttention", q, k, v, bias, padding,
                        num_heads_i=HEADS).setType(q.type())

    def fused_attention(x: Any, mask: Any, w: dict[str, Any]) -> Any:
        def project(name: str) -> Any:
            return torch.nn.functional.linear(x, w[name + ".weight"])
        bias = torch.cat([w["query.bias"], w["key.bias"], w["value.bias"]])
        return FusedAttention.apply(project("query"), project("key"), project("value"), bias, mask)

    class Encoder(torch.nn.Module):
        """`_encode` with the weights registered as buffers, so the export stores them as initializers
        (which is what the quantisers rewrite) rather than as constants."""

        def __init__(self) -> None:
            super().__init__()
            for name, tensor in model._w.items():
                self.register_buffer(name.replace(".", "_"), tensor)

        def forward(self, ids: Any, mask: Any) -> Any:
            return model._encode(ids, mask, fused_attention)

    ids = torch.ones((2, 8), dtype=torch.long)
    mask = torch.ones((2, 8), dtype=torch.long)
    mask[1, 5:] = 0                 # a padded row, so the mask's path is traced
    with warnings.catch_warnings(), torch.inference_mode():
        warnings.simplefilter("ignore")     # the exporter's deprecation and tracer notices
        torch.onnx.export(Encoder().eval(), (ids, mask), str(path), input_names=["input_ids", "attention_mask"],
                          output_names=["embedding"], opset_version=OPSET, dynamo=False,
                          custom_opsets={"com.microsoft": 1},
                          dynamic_axes={"input_ids": {0: "batch", 1: "tokens"},
                                        "attention_mask": {0: "batch", 1: "tokens"}, "embedding": {0: "batch"}})


class MiniLmInt8Embedder:
    """Query vectors from the int8 model on one onnxruntime thread; document vectors from the f32 model."""

    def __init__(self, session: Any, tokenizer: Any, f32: Optional[MiniLmEmbedder] = None,
                 recipe: str = int8_recipes.BLOCKS) -> None:
        self._session = session
        self._tokenizer = tokenizer
        self._f32 = f32
        self.recipe = recipe

    @classmethod
    def load(cls, data_dir: Path) -> "MiniLmInt8Embedder":
        """The embedder over `data_dir`'s cached int8 model (exported first if needed); InvalidInput naming
        the missing package otherwise."""
        model_dir()     # first: the tokenizer (and, to export, the weights) come from the weights package
        missing = missing_runtime()
        if missing is not None:
            raise InvalidInput(f"embedder {NAME!r} needs the Python package {missing!r}; {EXTRA_HINT}")
        import onnxruntime

        f32: list[MiniLmEmbedder] = []
        recipe, data = _cached_or_stand_in(Path(data_dir))

        def export() -> bytes:
            f32.append(MiniLmEmbedder.load())
            return export_int8(f32[0], recipe)

        if data is None:
            data = cached_model(data_dir, recipe, export)
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1     # see MiniLmEmbedder.embed_one: one thread is faster on busy cores
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        try:
            session = onnxruntime.InferenceSession(data, options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own exception types for unreadable models
            raise InvalidInput(f"onnxruntime cannot load {model_path(data_dir, recipe)}: "
                               f"{str(exc).splitlines()[0]}; delete it and its .blake3 file to export it again") from None
        return cls(session, load_tokenizer(), f32[0] if f32 else None, recipe)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """int8 vectors of `texts` (unit length, 384 dims), batched as the f32 model batches; one at a time
        with the `dynamic` recipe, whose activation scale per call would otherwise depend on the padding
        and on the other texts of the batch."""
        if self.recipe == int8_recipes.DYNAMIC:
            return np.stack([self.embed_one(text) for text in texts]) if len(texts) else np.zeros(
                (0, DIMENSIONS), dtype=np.float32)
        out = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        for rows, ids, mask in token_batches(self._tokenizer, texts):
            out[rows] = self._session.run(None, {"input_ids": ids, "attention_mask": mask})[0]
        return out

    def embed_one(self, text: str) -> np.ndarray:
        """One query: its ids straight from the tokenizer (no batching, no padding; `embed_queries`' path
        costs ~0.1 ms more, a fortieth of the model's time)."""
        ids = np.array([self._tokenizer.encode(text).ids], dtype=np.int64)
        return self._session.run(None, {"input_ids": ids, "attention_mask": np.ones_like(ids)})[0][0]

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        """Documents: the f32 model's vectors (torch is loaded on first use), so stored vectors stay f32."""
        if self._f32 is None:
            self._f32 = MiniLmEmbedder.load()
        return self._f32.embed_batch(texts)

    def dimensions(self) -> int:
        return DIMENSIONS

    def model(self) -> str:
        return self.semantic_profile().model

    def semantic_profile(self) -> SemanticProfile:
        """The f32 model's profile: int8 query vectors are compared with f32 document vectors by design."""
        return PROFILE

    def runs_locally(self) -> bool:
        return True
