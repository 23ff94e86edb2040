"""Beyond-Crux detectors (numeric, phrase polarity, actor flip-flops, lexical near-duplicates) and
the curation SQL views, on real data directories; plus the read paths never touching the journal."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from cruxsql.curation import shingles
from cruxsql.curation.contradictions import contradiction_candidates_v1, memory_contradictions
from cruxsql.curation.disagreements import actor_flip_flops, classify_pair, disagreements, live_disagreements
from cruxsql.curation.duplicates import lexical_duplicates, semantic_duplicates
from cruxsql.curation.phrases import numeric_disagreement, phrase_polarity, polarity_disagreement
from cruxsql.facts.store import Store, StoreRequest


def batch(store: Store, entity: str, key: str, *values: str, **kw) -> list[str]:
    return [f.fact_id for f in store.store_batch([StoreRequest(entity, key, v, **kw) for v in values], chain=False)]


@pytest.mark.parametrize("a,b,expected", [
    ("3", "7", {"a": [3.0], "b": [7.0], "template": "qnumq", "match": "template"}),
    ("120 ms", "95ms", {"a": [120.0], "b": [95.0], "template": "qnumq ms", "match": "template"}),
    ("120 milliseconds", "95 ms", {"a": [120.0], "b": [95.0], "template": "qnumq ms", "match": "template"}),
    ("3 replicas", "7 replicas", {"a": [3.0], "b": [7.0], "template": "qnumq replicas", "match": "template"}),
    ("3", "3.0", None), ("120 ms", "2 s", None), ("3 replicas", "region eu-west-3", None), ("abc", "7", None),
])
def test_numeric_disagreement(a: str, b: str, expected) -> None:
    assert numeric_disagreement(a, b) == expected


@pytest.mark.parametrize("value,expected", [
    ("deployed to prod", (1, ["deployed"])), ("not deployed", (-1, ["not deployed"])),
    ("rolled back", (-1, ["rolled back"])), ("isn't live yet", (-1, ["not live"])),
    ("the service is not down", (1, ["not down"])), ("owner is alice", (0, [])),
    ("deployed " * 13, (0, [])),
])
def test_phrase_polarity(value: str, expected) -> None:
    assert phrase_polarity(value) == expected


def test_phrase_polarity_disagreement_and_crux_overlap() -> None:
    assert polarity_disagreement("deployed to prod", "not deployed")["shared_words"] == ["deployed"]
    assert polarity_disagreement("tests passing", "tests passing again") is None
    assert classify_pair("true", "false") is None            # Crux's detector reports this one
    assert classify_pair("deployed to prod", "rolled back")[:2] == ("phrase_polarity", 0.7)
    assert classify_pair("deployed to prod", "not deployed")[:2] == ("phrase_polarity", 0.85)
    assert classify_pair("owner alice", "owner bob") is None


def test_live_disagreements_between_shared_facts(store: Store) -> None:
    n1, n2 = batch(store, "svc", "replicas", "3", "7")
    p1, p2 = batch(store, "svc", "deploy", "deployed to prod", "not deployed")
    batch(store, "svc", "owner", "alice", "bob")
    batch(store, "svc", "flag", "true", "false")
    batch(store, "other", "replicas", "3", "7", tenant_hash="t2")
    got = [(f.reason, f.entity, f.key, f.fact_ids, f.confidence) for f in live_disagreements(store.db)]
    assert got == [("phrase_polarity", "svc", "deploy", sorted([p1, p2]), 0.85),
                   ("numeric_disagreement", "svc", "replicas", sorted([n1, n2]), 0.9)]


def test_actor_flip_flops_window_and_revert(store: Store) -> None:
    a = store.store("svc", "region", "eu", actor="agent-a").fact_id
    b = store.store("svc", "region", "us", actor="agent-b").fact_id
    c = store.store("svc", "region", "EU", actor="agent-a").fact_id        # back to a's value
    store.store("svc", "owner", "alice", actor="agent-a")
    store.store("svc", "owner", "Alice!", actor="agent-b")                 # same normalised value
    store.store("svc", "lat", "120 ms", actor="agent-a")
    store.store("svc", "lat", "95 ms", actor="agent-a")                    # same actor
    found = actor_flip_flops(store.db)
    assert [(f.fact_ids, f.confidence, f.evidence["reverted_to_earlier_value"], f.evidence["actors"])
            for f in found] == [([a, b], 0.6, False, ["agent-a", "agent-b"]),
                                ([b, c], 0.95, True, ["agent-b", "agent-a"])]
    assert actor_flip_flops(store.db, window_ns=0) == []
    view = store.db.execute("SELECT from_fact_id, to_fact_id FROM actor_flip_flops ORDER BY seconds_apart").fetchall()
    assert sorted(map(tuple, view)) == sorted([(a, b), (b, c), tuple(
        r[0] for r in store.db.execute("SELECT fact_id FROM facts WHERE key = 'owner' ORDER BY seq"))])


def test_lexical_duplicates_across_keys_exact_similarity(store: Store) -> None:
    x, y, z, w = batch(store, "svc", "note", "Deploy the canary to eu-west first",
                       "deploy the canary to eu-west first!", "deploy the canary to eu-west first, then asia",
                       "owner is alice")
    k = batch(store, "svc", "summary", "Deploy the canary to EU-West first.")[0]
    batch(store, "other", "note", "deploy the canary to eu-west first")     # other entity: never paired
    pairs = {(p.fact_ids, p.reason): p.similarity for p in lexical_duplicates(store.db, threshold=0.6)}
    exact = "exact_normalised_duplicate"
    assert {ids for ids, r in pairs if r == exact} == {tuple(sorted(p)) for p in ((x, y), (x, k), (y, k))}
    near = {ids: sim for (ids, r), sim in pairs.items() if r == "lexical_near_duplicate"}
    want = shingles.jaccard(shingles.shingle_set(shingles.normalise("deploy the canary to eu-west first")),
                            shingles.shingle_set(shingles.normalise("deploy the canary to eu-west first, then asia")))
    assert set(near) == {tuple(sorted((z, o))) for o in (x, y, k)} and set(near.values()) == {want}
    assert 0.6 < want < 0.8
    assert all(z not in ids for ids, _ in {(p.fact_ids, p.reason) for p in lexical_duplicates(store.db)}
               ) and w
    with pytest.raises(Exception, match="threshold must be a number in"):
        lexical_duplicates(store.db, threshold=0)


@pytest.mark.parametrize("text", ["Deploy  the CANARY -- to eu_west!", "naïve Café, déjà-vu", "  ", "a\x1fb"])
def test_normalise_fast_path_equals_the_regex(text: str) -> None:
    import re
    assert shingles.normalise(text) == re.sub(r"[\W_]+", " ", text.lower()).strip()


def test_minhash_signature_equals_brute_force() -> None:
    a, b = shingles.hash_params(8)
    texts = ["deployed to prod", "a", "ab", "naïve café"]
    sig = shingles.minhash_signatures(texts, a, b)
    for text, row in zip(texts, sig):
        codes = [int.from_bytes(g.ljust(4, b"\0"), "big") for g in shingles.shingle_set(text)]
        expect = [min((c * int(a[j]) + int(b[j])) % 2**32 for c in codes) for j in range(8)]
        assert row.tolist() == expect


def test_semantic_hook_uses_the_embedder(store: Store) -> None:
    x, y, z = batch(store, "svc", "note", "alpha", "beta", "gamma")
    vectors = {"alpha": [1.0, 0.0], "beta": [0.99, 0.05], "gamma": [0.0, 1.0]}
    pairs = semantic_duplicates(store.db, lambda texts: np.array([vectors[t] for t in texts]))
    assert [(p.fact_ids, p.reason) for p in pairs] == [(tuple(sorted((x, y))), "semantic_near_duplicate")]


def test_sql_views(store: Store) -> None:
    neg, pos = batch(store, "svc", "up", "No.", "✅ yes")
    d1, d2 = batch(store, "svc", "a", "Same Value", "same value ")
    row = store.db.execute("SELECT entity, key, fact_ids, \"values\" FROM contradiction_candidates").fetchall()
    assert [(r[0], r[1], json.loads(r[2]), json.loads(r[3])) for r in row] == [("svc", "up", [neg, pos], ["No.", "✅ yes"])]
    python = [(c.entity, c.key, c.fact_ids) for c in contradiction_candidates_v1(store.db)]
    assert python == [("svc", "up", [neg, pos])]
    dup = store.db.execute("SELECT fact_id_a, fact_id_b, reason FROM duplicate_candidates").fetchall()
    assert [tuple(r) for r in dup] == [(min(d1, d2), max(d1, d2), "exact_duplicate")]


_values = st.sampled_from(["true", "false", "3", "7 ms", "deployed", "not deployed", "Yes!", "same text", "x"])


@pytest.mark.slow
@settings(max_examples=15, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["e1", "e2"]), st.sampled_from(["k1", "k2"]), _values,
                          st.sampled_from([None, "a", "b"]), st.booleans()), min_size=1, max_size=12))
def test_read_paths_never_change_the_journal(tmp_path_factory, ops) -> None:
    with Store(tmp_path_factory.mktemp("d")) as store:
        for entity, key, value, actor, as_batch in ops:
            if as_batch:
                store.store_batch([StoreRequest(entity, key, value, actor=actor)] * 2, chain=False)
            else:
                store.store(entity, key, value, actor=actor)
        before = store.journal.path.read_bytes()
        contradiction_candidates_v1(store.db)
        memory_contradictions(store.db)
        disagreements(store.db)
        lexical_duplicates(store.db)
        for view in ("contradiction_candidates", "duplicate_candidates", "actor_flip_flops", "consolidation_history",
                     "active_consolidations"):
            store.db.execute(f"SELECT * FROM {view}").fetchall()
        assert store.journal.path.read_bytes() == before
