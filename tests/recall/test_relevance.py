"""Relevance-ranked recall (`Recall.search`, `cruxsql recall`): analyzer, ranking, floor, phrases,
exclusions, filters, paging, budget, visibility through query_facts' pipeline, and the word postings kept
by replay (rebuildable from the journal)."""

from __future__ import annotations

import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from cruxsql.facts.store import Store, StoreRequest
from cruxsql.recall import Recall, relevance
from cruxsql.recall.fact_lines import MIN_SHARED_CHARS
from cruxsql.recall.fact_analyzer import analyse_texts, name_terms, term_of, value_terms, words
from cruxsql.recall.fact_terms import POSTING, FactTerms
from cruxsql.recall.relevance import RecallResult
from cruxsql.recall.text_index import TextIndex
from cruxsql.recall.tokens import estimate_tokens

CLI = [sys.executable, "-m", "cruxsql"]


@pytest.fixture
def store(tmp_path: Path):
    with Store(tmp_path / "data") as s:
        s.store("payments-api", "database", "PostgreSQL 15 on the shared cluster")
        s.store("payments-api", "owner", "Maria Okafor")
        s.store("billing-worker", "database", "MySQL 8")
        s.store("Maria Okafor", "role", "staff engineer on the payments team")
        s.store("Maria Smith", "role", "designer")
        s.store("search-api", "language", "Rust, with a Python client")
        s.store("ops", "note", "the payments database was moved to a new api gateway")
        yield s


def ranked(result: RecallResult) -> list[tuple[str, str]]:
    return [(h.entity, h.key) for h in result.hits]


def search(store: Store, text: str, **options) -> RecallResult:
    return Recall(store).search(text, fusion="bm25", **options)


def test_analyzer_stems_to_one_term_drops_stopwords_and_keeps_names_whole() -> None:
    assert term_of("payments") == term_of("payment") == term_of("pay")
    assert term_of("owns") == term_of("owner")
    assert words("What is Maria Okafor's role?") == ["what", "is", "maria", "okafor", "role"]
    assert name_terms("payments-api") == (("pay", "api", "=payments-api"), 2)
    assert name_terms("Maria Okafor") == (("maria", "okafor", "=maria-okafor"), 2)
    terms, length = value_terms("the database moved to eu-west-1")
    assert "the" not in terms and "to" not in terms and "=eu-west" in terms and length == 4
    assert "=maria-okafor" in value_terms("Maria Okafor")[0]          # a short value is a name too


TEXTS = ["What's Maria's role? 'quoted' it's", "", "a b c", "PostgreSQL 15, the payments-api's db", "x'",
         "Été à Paris", "payments-api", "Maria Okafor", "note-48954", "eu-west-1 moved to eu-central-1",
         "the ledger-edge-worker and auth-core-frontend talk to ledger-edge-worker", "tab\there new\nline",
         "unit\x1fseparator inside", "nul\x00inside it", "2027-12-15", "on_call rotation", "O'Brien's team", "ΣΊΣΥΦΟΣ Straße",
         "12 34 56", "a-1 b-2 c-3", "rock'n'roll band", "five words of plain text", "ops-team", "x" * 300]


def _postings_of(rows: list[tuple]) -> tuple[dict, dict]:
    """What `FactTerms` should index for `rows` (seq, tenant, entity, key, value, private), fact by fact
    through `name_terms` and `value_terms`: {(tenant, owner, term): [(seq, tf per field, length per
    field)]} and {(tenant, owner): [facts, summed lengths per field]}."""
    postings: dict = {}
    stats: dict = {}
    for seq, tenant, entity, key, value, private in rows:
        owner, visible = ("", entity) if not entity.startswith("__agent::") else entity.split("::")[1:3]
        if private and not owner:
            continue
        (e_terms, e_len), (k_terms, k_len), (v_terms, v_len) = name_terms(visible), name_terms(key), value_terms(value)
        lengths = tuple(min(n, 255) for n in (e_len, k_len, v_len))
        counts = [Counter(e_terms), Counter(k_terms), Counter(v_terms)]
        for term in sorted(set(e_terms) | set(k_terms) | set(v_terms)):
            postings.setdefault((tenant, owner, term), []).append(
                (seq, tuple(min(c[term], 255) for c in counts), lengths))
        total = stats.setdefault((tenant, owner), [0, 0, 0, 0])
        for i, n in enumerate((1, *lengths)):
            total[i] += n
    return postings, stats


def _indexed(store: Store) -> tuple[dict, dict]:
    postings: dict = {}
    for tenant, owner, term, block, blob in store.db.execute("SELECT * FROM recall_terms ORDER BY 1, 2, 3, 4"):
        postings.setdefault((tenant, owner, term), []).extend(
            ((block << 16) + int(r["off"]), tuple(r["tf"].tolist()), tuple(r["len"].tolist()))
            for r in np.frombuffer(blob, dtype=POSTING))
    stats = {(t, o): list(rest) for t, o, *rest in store.db.execute("SELECT * FROM recall_term_stats")}
    return postings, stats


def test_facts_indexed_in_bulk_get_the_terms_of_one_at_a_time(tmp_path: Path) -> None:
    # many facts at once, as a rebuild indexes them: each field's distinct texts analysed together (one
    # regular expression over the ASCII ones), units only where two words are not all digits
    rng = random.Random(5)
    rows = []
    for seq in range(1, 3001):
        entity = rng.choice(TEXTS[5:12] + ["__agent::ann::payments-api", "__agent::bob::Maria Okafor", "svc"])
        rows.append((seq + (70_000 if seq > 2000 else 0), rng.choice(("default", "t1")), entity,
                     rng.choice(TEXTS + [f"note-{seq}"]), rng.choice(TEXTS) + rng.choice(("", f" #{seq}", " ok")),
                     int(rng.random() < 0.1)))
    with Store(tmp_path / "data") as s:
        with s.db:
            terms = FactTerms(s.db)
            terms.wipe()
            terms.add(rows[:2000], fresh=True)
            for i in range(2000, 3000, 7):                      # and a few at a time, as replay adds them
                terms.add(rows[i:i + 7])
            indexed = _indexed(s)
    expected = _postings_of(rows)
    assert indexed[1] == expected[1]
    assert indexed[0].keys() == expected[0].keys()
    for name, records in expected[0].items():
        assert indexed[0][name] == records, name
    assert ("default", "ann", "=payments-api") in indexed[0] and ("t1", "", "=eu-central") in indexed[0]


def _stored_rows(s: Store) -> list[tuple]:
    return s.db.execute("SELECT seq, tenant_hash, entity, key, value, private FROM facts ORDER BY seq").fetchall()


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["public", "tenants", "private", "agents", "nul", "gaps"])
def test_a_range_read_from_the_facts_gets_the_terms_of_one_at_a_time(tmp_path: Path, kind: str) -> None:
    # index_range reads each column of a range as one string: one tenant or several, with the rows read
    # instead for private facts, agents' facts and a text holding the separator; seqs with gaps (facts
    # dropped); and a range indexed in two parts, the second appended onto the first's block
    rng = random.Random(kind)
    texts = [t for t in TEXTS if "\x00" not in t] + (["nul\x00inside it"] if kind == "nul" else [])
    with Store(tmp_path / "data") as s:
        s.store_batch([StoreRequest(
            rng.choice(TEXTS[5:12] + ["svc", "Maria Okafor"]), rng.choice([t for t in texts if t.strip()] + [f"note-{i}"]),
            rng.choice(texts) + rng.choice(("", f" #{i}", " ok")),
            tenant_hash=rng.choice(("default", "t1", "t2")) if kind == "tenants" else "default",
            private=kind in ("private", "agents") and rng.random() < 0.2,
            agent=rng.choice(("ann", "bob")) if kind == "agents" else None) for i in range(600)])
        with s.db:
            if kind == "gaps":
                s.db.execute("DELETE FROM facts WHERE seq % 3 = 0 OR seq BETWEEN 100 AND 180")
            rows = _stored_rows(s)
            terms = FactTerms(s.db)
            terms.wipe()
            middle = rows[len(rows) // 2][0]
            terms.index_range(0, middle)
            terms.index_range(middle, rows[-1][0])
            indexed = _indexed(s)
    assert any("\x00" in r[3] + r[4] for r in rows) == (kind == "nul")
    assert len({r[1] for r in rows}) == (3 if kind == "tenants" else 1)
    assert any(r[5] for r in rows) == (kind in ("private", "agents"))
    assert any(r[2].startswith("__agent::") for r in rows) == (kind == "agents")
    assert len(rows) == (600 if kind != "gaps" else 346)
    assert indexed == _postings_of(rows)


def test_texts_analysed_together_give_the_words_of_each() -> None:
    # all-ASCII (one regular expression), mixed, and numbers a word gives too (`'15'` and 15 meet)
    for texts in (TEXTS[:5], TEXTS, ["'15' and 15 15", "15", "007 '007' 12"]):
        analysed = analyse_texts(texts)
        assert analysed.owners.tolist() == sorted(analysed.owners.tolist())
        for i, text in enumerate(texts):
            terms = [analysed.terms[t] for t, o in zip(analysed.ids.tolist(), analysed.owners.tolist()) if o == i]
            value, length = value_terms(text)
            assert sorted(terms) == sorted(t for t in value if not t.startswith("=")), text
            assert analysed.counts[i] == length
            assert analysed.named[i] == sum(1 for w in words(text) if not w.isdigit()), text


@pytest.mark.slow
def test_many_candidates_rank_as_when_every_one_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Above PREFIX_FROM candidates, BM25 alone ranks a prefix of them (relevance._rank_prefix): the same
    # pages, totals, scores and explanations as ranking every visible one, however confidence, staleness,
    # superseded and deleted facts reorder them.
    rng = random.Random(3)
    with Store(tmp_path / "data") as s:
        facts = s.store_batch([StoreRequest(
            f"svc-{i % 300}", rng.choice(("alpha", "beta", "note")),
            " ".join(["alpha beta"] + [f"w{rng.randrange(40)}" for _ in range(rng.choice((0, 0, 1, 3)))]),
            confidence=rng.choice((1.0, 0.9, 0.5, 0.2, 0.0)), horizon_class=rng.choice((None, "volatile")))
            for i in range(900)])
        for fact in facts[::17]:
            s.delete(fact.fact_id)
        recall = Recall(s)
        rounds: list[int] = []             # the rows each ranking of a search was given
        grown = cut_short = False
        rank = relevance._rank
        monkeypatch.setattr(relevance, "_rank", lambda *a: (rounds.append(len(a[0])), rank(*a))[1])
        for query in ("alpha", "alpha beta", "beta w7", "svc-12 alpha", "w3 w5 alpha"):
            for options in ({}, {"top_k": 3, "offset": 40}, {"top_k": 50}, {"key": "alpha"}, {"top_k": 0},
                            {"now": "2030-01-01T00:00:00Z"}, {"now": "2030-01-01T00:00:00Z", "top_k": 7, "offset": 5}):
                options = {"now": "2026-06-01T00:00:00Z", **options}
                monkeypatch.setattr(relevance, "PREFIX_FROM", 10 ** 9)
                whole = recall.search(query, fusion="bm25", explain=True, **options)
                monkeypatch.setattr(relevance, "PREFIX_FROM", 0)
                rounds.clear()
                cut = recall.search(query, fusion="bm25", explain=True, **options)
                assert (cut.to_dict(), cut.answer()) == (whole.to_dict(), whole.answer()), (query, options)
                grown |= len(rounds) > 1
                # a prefix read short of the visible candidates (the count is of them all)
                cut_short |= bool(rounds) and max(rounds) < cut.total
    assert grown and cut_short


def test_literal_questions_find_the_answer_first(store: Store) -> None:
    assert ranked(search(store, "which database does payments-api use?"))[0] == ("payments-api", "database")
    assert ranked(search(store, "who owns payments-api?"))[0] == ("payments-api", "owner")
    assert ranked(search(store, "what is Maria Okafor's role?"))[0] == ("Maria Okafor", "role")


def test_a_name_is_matched_as_a_unit(store: Store) -> None:
    # "maria" alone is in two names; the unit picks the one named, and holds every concept
    result = search(store, "Maria Okafor role")
    assert ranked(result)[:2] == [("Maria Okafor", "role"), ("payments-api", "owner")]
    assert result.hits[0].all_terms and ("Maria Smith", "role") not in ranked(result)[:2]


def test_facts_holding_every_concept_rank_above_those_holding_some(store: Store) -> None:
    result = search(store, "payments database")
    tiers = [h.all_terms for h in result.hits]
    assert tiers == sorted(tiers, reverse=True) and tiers[0] and not tiers[-1]
    assert {("payments-api", "database"), ("ops", "note")} == set(ranked(result)[:2])


def test_holding_every_concept_outranks_a_stronger_partial_match(store: Store) -> None:
    for i in range(20):
        store.store(f"filler-{i}", "note", f"beta number {i}")
    store.store("alpha", "alpha", "alpha alpha")                    # strong, but no beta
    store.store("zzz", "note", "alpha beta " + " ".join(f"word{i}" for i in range(30)))
    result = search(store, "alpha beta")
    assert ranked(result)[:2] == [("zzz", "note"), ("alpha", "alpha")]
    assert result.hits[0].all_terms and not result.hits[1].all_terms and result.hits[1].score > result.hits[0].score


def test_nothing_comes_back_when_nothing_is_relevant(store: Store) -> None:
    for text in ("kubernetes ingress controller", "what is the", ""):
        result = search(store, text)
        assert result.hits == [] and result.total == 0 and result.text() == "no relevant facts"
    for i in range(30):
        store.store(f"svc-{i}", "database", f"MariaDB {i}")
    # a fact holding only the common word of the query ranks after those holding the name, but is not dropped
    # (no floor: SQLite FTS5 would return it)
    found = ranked(search(store, "payments-api database", top_k=50, token_budget=5000))
    assert set(found[:2]) == {("payments-api", "database"), ("payments-api", "owner")}
    assert {("svc-12", "database"), ("svc-29", "database")} <= set(found[2:])


def test_quoted_phrases_need_adjacent_words_and_minus_excludes(store: Store) -> None:
    assert ranked(search(store, '"staff engineer"')) == [("Maria Okafor", "role")]
    assert ranked(search(store, '"engineer staff"')) == []
    assert ("billing-worker", "database") not in ranked(search(store, "database -mysql"))
    assert ("billing-worker", "database") in ranked(search(store, "database"))
    assert {e for e, _ in ranked(search(store, "database -payments-api"))} == {"billing-worker", "ops"}


def test_paging_counts_and_the_more_line(store: Store) -> None:
    first = search(store, "database", top_k=1)
    assert (first.total, first.offset, len(first.hits), first.has_more, first.next_offset) == (3, 0, 1, True, 1)
    assert first.text().splitlines()[-1] == "+2 more (offset=1)"
    rest = search(store, "database", top_k=5, offset=1)
    assert len(rest.hits) == 2 and not rest.has_more and rest.next_offset is None
    whole = [h.fact_id for h in search(store, "database").hits]
    assert [h.fact_id for h in first.hits + rest.hits] == whole
    assert first.answer() == first.text() and first.text().splitlines()[0].endswith(whole[0])
    assert first.structured() == {"ids": whole[:1], "total": 3, "offset": 0, "returned": 1, "has_more": True,
                                  "next_offset": 1}


def test_one_line_per_fact_and_the_whole_answer_fits_the_budget(store: Store) -> None:
    for i in range(40):
        store.store(f"svc-{i}", "database", f"PostgreSQL {i} " + "with replicas " * 5)
    result = search(store, "database", top_k=50, token_budget=120)
    lines = result.text().splitlines()
    assert len(lines) == len(result.hits) + 1 and lines[-1].startswith(f"+{result.total - len(result.hits)} more")
    first = result.hits[0]
    # 50 lines do not fit even cut to MIN_SHARED_CHARS: the values are cut to it (87 bytes -> 80 and `…`), then
    # as many lines as fit are kept
    assert lines[0] == f"{first.entity} · database: {first.value[:MIN_SHARED_CHARS]}… · now · {first.fact_id}"
    assert 120 - 40 < estimate_tokens(result.answer()) <= 120      # a line more would not fit
    lean = search(store, "database", top_k=50, token_budget=120, ids=False, reserve=20)
    assert lean.text().splitlines()[0] == f"{lean.hits[0].entity} · database: {lean.hits[0].value[:MIN_SHARED_CHARS]}…"
    assert estimate_tokens(lean.answer()) + 20 <= 120 and len(lean.hits) >= len(result.hits)
    tiny = search(store, "database", token_budget=10)
    assert len(tiny.hits) == 1 and tiny.text().startswith(tiny.hits[0].entity)
    assert tiny.text().splitlines()[0].split(" · ")[1].endswith("…")       # the first fact, its value cut


def test_long_values_are_cut_to_a_common_length_before_a_line_is_left_out(store: Store) -> None:
    for i in range(10):
        store.store(f"svc-{i}", "database", f"PostgreSQL {i} " + "with replicas in three zones " * (2 + i))
    whole = search(store, "replicas zones", token_budget=5000, ids=False)
    assert whole.total == len(whole.hits) == 10 and estimate_tokens(whole.answer()) > 400
    result = search(store, "replicas zones", ids=False)            # the default budget: 400 tokens
    lines = result.text().splitlines()
    assert len(lines) == len(result.hits) == 10 and estimate_tokens(result.answer()) <= 400
    cut = [line for line in lines if line.endswith("…")]
    assert cut and len({len(line.split(": ", 1)[1]) for line in cut}) == 1     # one common length
    assert all(len(line.split(": ", 1)[1]) > MIN_SHARED_CHARS for line in cut)


def test_age_only_when_useful_and_stale_marked(store: Store, tmp_path: Path) -> None:
    now = "2030-01-01T00:00:00Z"
    fact = store.store("old-svc", "region", "eu-west-1", horizon_class="volatile")
    hit = search(store, "old-svc region", ids=False, now=now).hits[0]
    assert hit.fact_id == fact.fact_id and hit.line() != hit.line(ids=True)
    assert hit.line() == f"old-svc · region: eu-west-1 · {hit.age} stale" and hit.age.endswith("y")
    fresh = search(store, "old-svc region", ids=False).hits[0]
    assert fresh.line() == "old-svc · region: eu-west-1"        # stored now: no age, not stale


def test_only_what_the_caller_may_see_and_only_the_newest_value(store: Store) -> None:
    store.store("payments-api", "database", "CockroachDB")              # supersedes PostgreSQL 15
    store.store("secrets", "database", "alice's private database", private=True, agent="alice")
    store.store("payments-api", "region", "database in eu", tenant="other")
    gone = store.store("tmp", "database", "to be deleted")
    store.delete(gone.fact_id)
    values = [h.value for h in search(store, "payments-api database").hits]
    assert "CockroachDB" in values and "PostgreSQL 15 on the shared cluster" not in values
    assert "to be deleted" not in values and "database in eu" not in values
    assert "alice's private database" not in [h.value for h in search(store, "database").hits]
    assert ("secrets", "database") in ranked(search(store, "database", agent="alice"))
    assert [h.value for h in search(store, "database", tenant="other").hits] == ["database in eu"]
    assert "PostgreSQL 15 on the shared cluster" in [
        h.value for h in search(store, "payments-api database", include_superseded=True).hits]


def test_scores_never_depend_on_facts_the_caller_cannot_see(store: Store) -> None:
    before = {h.fact_id: h.score for h in search(store, "payments database").hits}
    for i in range(50):   # other tenants' and other agents' facts full of the same words
        store.store(f"x{i}", "database", "payments database payments", tenant="other")
        store.store(f"y{i}", "database", "payments database", private=True, agent="bob")
    after = {h.fact_id: h.score for h in search(store, "payments database").hits}
    assert after == before


def test_filters_key_actor_entity_prefix_and_time(store: Store) -> None:
    store.store("payments-worker", "database", "Redis", actor="deployer")
    assert {e for e, _ in ranked(search(store, "payments", entity_prefix="payments-"))} == {
        "payments-api", "payments-worker"}
    assert ranked(search(store, "payments database", key="database"))[0][1] == "database"
    assert {k for _, k in ranked(search(store, "payments database", key="database"))} == {"database"}
    assert ranked(search(store, "database", actor="deployer")) == [("payments-worker", "database")]
    assert ranked(search(store, "database", entity="billing-worker")) == [("billing-worker", "database")]
    late = store.db.execute("SELECT max(stored_at) FROM facts").fetchone()[0]
    assert ranked(search(store, "database", stored_after=late)) == [("payments-worker", "database")]
    assert ("payments-worker", "database") not in ranked(search(store, "database", stored_before=late))
    assert search(store, "database", known_at="2000-01-01T00:00:00Z").hits == []


def test_bad_arguments_name_the_argument(store: Store) -> None:
    with pytest.raises(Exception, match="top_k must be at most 200"):
        search(store, "x", top_k=201)
    with pytest.raises(Exception, match="stored_after: cannot read 'the other day' as a time; use RFC 3339"):
        search(store, "x", stored_after="the other day")      # phrases are read; nonsense is not
    with pytest.raises(Exception, match="fusion must be one of"):
        Recall(store).search("x", fusion="magic")


def _postings(store: Store) -> tuple[set, list]:
    out = set()
    for tenant, owner, term, block, blob in store.db.execute("SELECT tenant, owner, term, block, postings FROM recall_terms"):
        out.update((tenant, owner, term, int(r["off"]) + (block << 16), tuple(r["tf"]), tuple(r["len"]))
                   for r in np.frombuffer(blob, dtype=POSTING))
    return out, sorted(store.db.execute("SELECT * FROM recall_term_stats").fetchall())


def test_postings_are_kept_by_replay_and_rebuilt_the_same_from_the_journal(store: Store, tmp_path: Path) -> None:
    TextIndex(store.db).catch_up()          # what the writes left (a read scans it instead), indexed now
    kept = _postings(store)
    answer = [h.fact_id for h in search(store, "which database does payments-api use?").hits]
    store.close()
    (tmp_path / "data" / "cruxsql.db").unlink()
    with Store(tmp_path / "data") as again:
        assert [h.fact_id for h in search(again, "which database does payments-api use?").hits] == answer
        assert _postings(again) == kept


@pytest.mark.slow
def test_cli_recall_prints_lines_and_refuses_bad_input(store: Store, tmp_path: Path) -> None:
    store.close()
    data = str(tmp_path / "data")
    out = subprocess.run(CLI + ["recall", "which database does payments-api use?", "--fusion", "bm25",
                                "--top-k", "1", "--data-dir", data], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    first, more = out.stdout.splitlines()
    assert first.startswith("payments-api · database: PostgreSQL 15 on the shared cluster · now · f_")
    assert more.startswith("+") and more.endswith("more (offset=1)")
    bad = subprocess.run(CLI + ["recall", "x", "--top-k", "500", "--data-dir", data], capture_output=True, text=True)
    assert bad.returncode != 0 and "Invalid value for '--top-k': 500 is not in the range 0<=x<=200" in bad.stderr
    assert "Traceback" not in bad.stderr


# --- word stems: Snowball English and irregular forms, then Crux's suffix stemmer ------------------

@pytest.mark.parametrize("forms", [("running", "run", "runs"), ("went", "go", "goes"), ("happiness", "happy"),
                                   ("studies", "studying", "study"), ("activities", "activity"),
                                   ("relaxation", "relaxing", "relax"), ("owner", "owns"), ("payments", "pay"),
                                   ("children", "child")])
def test_the_forms_of_a_word_meet_in_one_term(forms: tuple[str, ...]) -> None:
    assert len({term_of(w) for w in forms}) == 1, {w: term_of(w) for w in forms}


def test_a_question_in_another_form_of_the_facts_words_finds_it(tmp_path: Path) -> None:
    with Store(tmp_path / "data") as s:
        s.store("melanie", "weekend", "Melanie went running by the lake")
        s.store("melanie", "hobby", "Melanie paints sunsets")
        assert [h.key for h in Recall(s).search("does melanie go for a run?").hits][:1] == ["weekend"]


def test_a_store_indexed_with_the_old_stems_is_indexed_again_on_upgrade(tmp_path: Path) -> None:
    """Migration 0040: postings made by the previous analyzer (planted: a term no fact holds) are dropped
    and every fact indexed again with the new stems."""
    import apsw
    with Store(tmp_path / "data") as s:
        s.store("melanie", "weekend", "Melanie went running by the lake")
        Recall(s).search("lake")
    db = apsw.Connection(str(tmp_path / "data" / "cruxsql.db"))
    with db:
        db.execute("UPDATE recall_terms SET term = 'runn' WHERE term = 'run'")
        db.execute("DELETE FROM schema_migrations WHERE version = 40")
    db.close()
    with Store(tmp_path / "data") as s:
        assert [h.key for h in Recall(s).search("running").hits] == ["weekend"]
        assert s.db.execute("SELECT count(*) FROM recall_terms WHERE term = 'runn'").get == 0
