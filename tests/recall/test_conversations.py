"""Conversations as memory: store_conversation through the real MCP server and the CLI, found by `recall`,
and covered unchanged by erasure, backup/restore and rebuild (the turns are ordinary facts)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from support.cli_process import run_cruxsql
from support.crux_reference import replay
from cruxsql import Recall, TurnInput, store_conversation
from cruxsql.errors import Conflict, InvalidInput
from cruxsql.facts.store import Store
from cruxsql.cli import conversations as cli_conversations
from cruxsql.recall import conversations
from cruxsql.recall.conversations import read_turns
from cruxsql.recall.tokens import estimate_tokens
from support.mcp_clients import server_env, stdio
from support.journal_files import journal_bytes

WHEN = "1:56 pm on 8 May, 2023"
TURNS = [
    {"speaker": "Caroline", "text": "Hey Mel! Good to see you!", "time": WHEN, "session": "1", "id": "D1:1"},
    {"speaker": "Melanie", "text": "Hey Caroline! I'm swamped with the kids & work.", "time": WHEN, "session": "1",
     "id": "D1:2"},
    {"speaker": "Caroline", "text": "I contacted an adoption agency yesterday, so exciting!", "time": WHEN,
     "session": "1", "id": "D1:3"},
    {"speaker": "Melanie", "text": "Wow, which agency? I ran a charity race for mental health last week.",
     "time": WHEN, "session": "1", "id": "D1:4"},
]
MORE = [{"speaker": "Caroline", "text": "Pottery class was fun", "time": "2023-05-25T13:14:00+01:00", "session": "2"},
        {"speaker": "Melanie", "text": "Send me a photo of the bowl"}]


@pytest.fixture(scope="module")
def mcp_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("conversations")


@pytest.fixture(scope="module")
def agent(mcp_client, mcp_dir):
    return mcp_client(mcp_dir, "--agent", "alice", env={"CRUXSQL_EMBEDDER": "none"})


@pytest.mark.slow
def test_a_conversation_stored_through_mcp_is_one_batch_of_turn_facts(agent, mcp_dir: Path) -> None:
    before = journal_bytes(mcp_dir, missing_ok=True)
    stored = agent.call("store_conversation", {"conversation": "locomo-mini", "turns": TURNS,
                                               "idempotency_key": "hook-1"})
    assert not stored.is_error, stored.content[0].text
    assert stored.content[0].text == "stored 4 turn(s) of conversation:locomo-mini at #0-#3 in one batch"
    assert {k: stored.structured_content[k] for k in ("stored", "first_position", "last_position")} == \
        {"stored": 4, "first_position": 0, "last_position": 3}
    lines = journal_bytes(mcp_dir, missing_ok=True)[len(before):].splitlines()
    assert len(lines) == 1                                   # one append, one fsync
    event = json.loads(lines[0])
    assert event["op"] == "store_batch"
    third = event["facts"][2]
    assert {k: third[k] for k in ("entity", "key", "value", "source_receipt", "actor", "private")} == {
        "entity": "conversation:locomo-mini", "key": "turn:000002",
        "value": "Caroline: I contacted an adoption agency yesterday, so exciting!",
        "source_receipt": 'turn:{"session":"1","time":"2023-05-08T13:56:00Z","id":"D1:3"}',
        "actor": "alice", "private": False}

    retried = agent.call("store_conversation", {"conversation": "locomo-mini", "turns": TURNS,
                                                "idempotency_key": "hook-1"})
    assert retried.structured_content["fact_ids"] == stored.structured_content["fact_ids"]
    assert journal_bytes(mcp_dir, missing_ok=True) == before + lines[0] + b"\n"   # the retry stored nothing

    later = agent.call("store_conversation", {"conversation": "locomo-mini", "turns": MORE})
    assert (later.structured_content["first_position"], later.structured_content["last_position"]) == (4, 5)
    late_retry = agent.call("store_conversation", {"conversation": "locomo-mini", "turns": TURNS,
                                                   "idempotency_key": "hook-1"})   # after other turns came
    assert late_retry.structured_content["fact_ids"] == stored.structured_content["fact_ids"]
    assert late_retry.structured_content["first_position"] == 0
    receipts = [json.loads(x)["facts"] for x in journal_bytes(mcp_dir, missing_ok=True).splitlines()[-1:]][0]
    assert [f["source_receipt"] for f in receipts] == ['turn:{"session":"2","time":"2023-05-25T12:14:00Z"}', "turn:{}"]


@pytest.mark.slow  # the module's MCP agent, on the conversation the first test stored
def test_recall_finds_turns_beside_facts_and_query_facts_stays_crux(agent) -> None:
    agent.text("store_fact", {"entity": "alice-notes", "key": "agency", "value": "ask about the adoption agency"})
    answer = agent.text("recall", {"query": "which adoption agency did Caroline contact?", "top_k": 3})
    lines = answer.splitlines()
    assert lines[0] == \
        "[locomo-mini #2, 2023-05-08 13:56] Caroline: I contacted an adoption agency yesterday, so exciting!"
    # the fact beside the turns; Melanie's "which agency?" after Caroline's turn may come before it
    assert "alice-notes · agency: ask about the adoption agency" in lines[1:3]
    with_ids = agent.text("recall", {"query": "adoption agency Caroline contacted", "top_k": 1, "ids": True})
    assert with_ids.startswith("[locomo-mini #2, 2023-05-08 13:56] Caroline: I contacted")
    first = with_ids.splitlines()[0]
    assert first.split(" · ")[1].startswith("f_") and first.endswith(" · id=D1:3")
    crux = agent.text("query_facts", {"query": "pottery", "contract": "legacy"})
    assert crux.startswith("[conversation:locomo-mini] turn:000004 = Caroline: Pottery class was fun (confidence=1.00")


@pytest.mark.slow  # the module's MCP agent, on the conversation the first test stored
def test_bad_turns_are_one_line_errors_naming_the_turn_and_store_nothing(agent, mcp_dir: Path) -> None:
    before = journal_bytes(mcp_dir, missing_ok=True)
    cases = {
        "missing text": ([{"speaker": "a", "text": "ok"}, {"speaker": "b"}], "turns.1.text"),
        "speaker not a string": ([{"speaker": 7, "text": "x"}], "turns.0.speaker"),
        "a speaker with a colon": ([{"speaker": "a: b", "text": "x"}], "turns[0].speaker"),
        "an unreadable time": ([{"speaker": "a", "text": "x", "time": "last tuesday"}], "turns[0].time"),
        "no turns": ([], "at least one turn"),
    }
    for name, (turns, named) in cases.items():
        reply = agent.call("store_conversation", {"conversation": "bad", "turns": turns})
        text = reply.content[0].text
        assert reply.is_error and named in text and "\n" not in text, (name, text)
    assert journal_bytes(mcp_dir, missing_ok=True) == before


@pytest.mark.slow
def test_two_concurrent_writers_never_take_the_same_position(tmp_path: Path) -> None:
    data_dir = tmp_path / "d"
    Store(data_dir).close()
    script = (
        "import sys\n"
        "import cruxsql\n"
        "from cruxsql.recall.conversations import TurnInput, store_conversation\n"
        "with cruxsql.open(sys.argv[1]) as s:\n"
        "    for call in range(12):\n"
        "        store_conversation(s, 'shared', [TurnInput(sys.argv[2], f'{call}.{i}') for i in range(4)])\n")
    writers = [subprocess.Popen([sys.executable, "-c", script, str(data_dir), name], env=server_env())
               for name in ("w1", "w2")]
    assert [w.wait(timeout=120) for w in writers] == [0, 0]
    with Store(data_dir) as store:
        rows = store.db.execute("SELECT key, value FROM facts WHERE entity = 'conversation:shared' "
                                "ORDER BY key").fetchall()
    assert [k for k, _ in rows] == [f"turn:{p:06d}" for p in range(96)]       # every position once
    for start in range(0, 96, 4):                                           # each call's turns together
        values = [v for _, v in rows[start:start + 4]]
        writer, call = values[0].split(": ")[0], values[0].split(": ")[1].split(".")[0]
        assert values == [f"{writer}: {call}.{i}" for i in range(4)]


@pytest.mark.slow
def test_the_cli_reads_json_jsonl_and_chat_messages(run_cli, data_dir: Path) -> None:
    as_json = json.dumps({"turns": [{"speaker": "Ann", "text": "the launch slipped to June", "id": 1}]})
    assert run_cli("store-conversation", "standup", input=as_json).stdout == \
        "stored 1 turn(s) of conversation:standup at #0 in one batch\n"
    as_jsonl = "\n".join(json.dumps(t) for t in MORE) + "\n"
    assert run_cli("store-conversation", "standup", "-", "--tenant", "acme", input=as_jsonl).returncode == 0
    messages = [{"role": "user", "content": "Where is the staging database?"},
                {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1"}]},
                {"role": "assistant", "content": [{"type": "text", "text": "On db-2,"},
                                                  {"type": "image_url", "image_url": {"url": "x"}},
                                                  {"type": "text", "text": "port 5433."}]}]
    reply = run_cli("store-conversation", "support", "--json", input=json.dumps(messages))
    assert {k: v for k, v in json.loads(reply.stdout).items() if k != "fact_ids"} == {
        "stored": 2, "conversation": "support", "first_position": 1 - 1, "last_position": 1,
        "skipped_messages": 1}
    with Store(data_dir) as store:
        rows = store.db.execute("SELECT tenant_hash, entity, key, value, source_receipt FROM facts "
                                "ORDER BY seq").fetchall()
    assert rows == [
        ("default", "conversation:standup", "turn:000000", "Ann: the launch slipped to June", 'turn:{"id":"1"}'),
        ("acme", "conversation:standup", "turn:000000", "Caroline: Pottery class was fun",
         'turn:{"session":"2","time":"2023-05-25T12:14:00Z"}'),
        ("acme", "conversation:standup", "turn:000001", "Melanie: Send me a photo of the bowl", "turn:{}"),
        ("default", "conversation:support", "turn:000000", "user: Where is the staging database?", "turn:{}"),
        ("default", "conversation:support", "turn:000001", "assistant: On db-2,\nport 5433.", "turn:{}")]
    found = run_cli("recall", "staging database", "--fusion", "bm25").stdout
    assert found.startswith("[support #0] user: Where is the staging database? · f_")
    rows = json.loads(run_cli("recall", "staging database", "--fusion", "bm25", "--json").stdout)["facts"]
    assert rows[0]["turn"] == {"conversation": "support", "position": 0, "speaker": "user",
                               "text": "Where is the staging database?", "time": None, "session": None,
                               "turn_id": None}


@pytest.mark.slow
@pytest.mark.parametrize("turns,error", [
    ([{"speaker": "a", "text": "x"}, {"speaker": "b", "time": "2023-05-08"}],
     "Error: turns[1].text: is required and must be a string\n"),
    ([{"speaker": ["a"], "text": "x"}], "Error: turns[0].speaker: is required and must be a string\n"),
    ([{"speaker": "a", "txt": "x"}], "Error: turns[0]: unknown key(s) txt (turn keys: speaker, text, time, session, "
                                     "id; or a message with role and content)\n"),
    ([{"speaker": "a", "text": "x"}] * 10_001, "Error: store_conversation takes at most 10000 turns per call, got 10001\n"),
])
def test_bad_input_is_one_line_and_creates_nothing(run_cli, data_dir: Path, turns: list, error: str) -> None:
    result = run_cli("store-conversation", "x", input=json.dumps(turns))
    assert (result.returncode, result.stdout, result.stderr) == (1, "", error)
    assert not data_dir.exists()                             # not even an empty store


def _recall(data_dir: Path, query: str) -> str:
    result = run_cruxsql(data_dir, "recall", query, "--fusion", "bm25", "--top-k", "10")
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.slow
def test_erased_with_proof_restored_without_it_and_rebuilt_to_the_same_ranking(tmp_path: Path) -> None:
    data_dir, secret = tmp_path / "d", "Kestrel-7731 is my bank PIN hint"
    keep = [{"speaker": "Ann", "text": f"the garden needs water on day {i}"} for i in range(6)]
    drop = [{"speaker": "Bob", "text": secret}, {"speaker": "Ann", "text": "the garden is lovely"}]
    for name, turns in (("keep", keep), ("drop", drop)):
        assert run_cruxsql(data_dir, "store-conversation", name, input=json.dumps(turns)).returncode == 0
    ranking = _recall(data_dir, "water the garden")
    assert ranking.count("\n") == 7 and "[drop #1] Ann: the garden is lovely" in ranking
    assert run_cruxsql(data_dir, "rebuild").returncode == 0
    assert _recall(data_dir, "water the garden") == ranking  # replayed from the journal alone

    erased = run_cruxsql(data_dir, "erase", "--tenant", "default", "--entity-prefix", "conversation:drop",
                         "--reason", "data-subject request", "--json")
    assert erased.returncode == 0, erased.stderr
    assert run_cruxsql(data_dir, "verify", "--erasure").returncode == 0
    assert _recall(data_dir, "Kestrel-7731 PIN") == "no relevant facts\n"
    after = _recall(data_dir, "water the garden")
    assert after == "".join(line + "\n" for line in ranking.splitlines() if "[drop " not in line)
    assert not [p for p in data_dir.rglob("*") if p.is_file() and b"Kestrel-7731" in p.read_bytes()]

    assert run_cruxsql(None, "backup", str(tmp_path / "bk"), "--data-dir", str(data_dir)).returncode == 0
    restored = tmp_path / "restored"
    assert run_cruxsql(None, "restore", str(tmp_path / "bk"), str(restored)).returncode == 0
    assert not [p for p in restored.rglob("*") if p.is_file() and b"Kestrel-7731" in p.read_bytes()]
    assert _recall(restored, "water the garden") == after
    assert run_cruxsql(restored, "rebuild").returncode == 0
    assert _recall(restored, "water the garden") == after
    again = run_cruxsql(restored, "store-conversation", "keep", input=json.dumps(keep[:1]))
    assert again.stdout == "stored 1 turn(s) of conversation:keep at #6 in one batch\n"


@pytest.mark.slow
def test_private_turns_are_the_agents_own(portal, tmp_path: Path) -> None:
    alice = stdio(portal, tmp_path, "--agent", "alice", env={"CRUXSQL_EMBEDDER": "none"})
    bob = stdio(portal, tmp_path, "--agent", "bob", env={"CRUXSQL_EMBEDDER": "none"})
    try:
        turns = [{"speaker": "alice", "text": "my locker code is 4471"}]
        mine = alice.call("store_conversation", {"conversation": "diary", "turns": turns, "private": True})
        shared = bob.call("store_conversation", {"conversation": "diary", "turns": turns})
        assert (mine.structured_content["first_position"], shared.structured_content["first_position"]) == (0, 0)
        assert alice.text("recall", {"query": "locker code", "top_k": 5}).splitlines() == [
            "[diary #0] alice: my locker code is 4471", "[diary #0] alice: my locker code is 4471"]
        assert bob.text("recall", {"query": "locker code", "top_k": 5}) == "[diary #0] alice: my locker code is 4471"
        seen = {name: client.text("query_facts", {"query": "locker", "contract": "legacy"}).count(
            "turn:000000 = alice: my locker code is 4471") for name, client in (("alice", alice), ("bob", bob))}
        assert seen == {"alice": 2, "bob": 1}
    finally:
        alice.close()
        bob.close()


def test_a_crux_daemon_replaying_the_journal_reads_every_turn_as_a_fact(store: Store, data_dir: Path) -> None:
    store_conversation(store, "locomo-mini", [TurnInput(**t) for t in TURNS], actor="hook")
    store_conversation(store, "locomo-mini", [TurnInput(**t) for t in MORE], tenant="acme", agent="alice",
                       private=True)
    crux = replay(data_dir / "facts.jsonl")
    assert crux.skipped_lines == []
    assert sorted((f.tenant_hash, f.entity, f.key, f.value) for f in crux.facts.values()) == [
        ("acme", "__agent::alice::conversation:locomo-mini", "turn:000000", "Caroline: Pottery class was fun"),
        ("acme", "__agent::alice::conversation:locomo-mini", "turn:000001", "Melanie: Send me a photo of the bowl"),
        *[("default", "conversation:locomo-mini", f"turn:{i:06d}", f"{t['speaker']}: {t['text']}")
          for i, t in enumerate(TURNS)]]
    assert store.verify().ok


@pytest.mark.slow
def test_the_storing_benchmark_runs_on_a_small_locomo_file(tmp_path: Path) -> None:
    conversation = {"speaker_a": "Ann", "speaker_b": "Bob",
                    "session_1_date_time": "1:56 pm on 8 May, 2023",
                    "session_1": [{"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a puppy named Rex"},
                                  {"speaker": "Bob", "dia_id": "D1:2", "text": "What breed is he?"}],
                    "session_2_date_time": "10:37 am on 27 June, 2023",
                    "session_2": [{"speaker": "Bob", "dia_id": "D2:1", "text": "How is Rex doing?"}]}
    qa = [{"question": "What is the name of Ann's puppy?", "answer": "Rex", "evidence": ["D1:1"], "category": 4}]
    data = tmp_path / "locomo"
    data.mkdir()
    (data / "7.json").write_text(json.dumps({**conversation, "qa": qa}), encoding="utf-8")
    bench = Path(__file__).resolve().parents[2] / "tools" / "bench" / "bench_conversations.py"
    result = subprocess.run([sys.executable, str(bench), "--data", str(data), "--rounds", "1"], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "conversations 1, turns 3, one call per conversation, best of 1" in out
    assert "recall after a rebuild, 1 questions:" in out and out.rstrip().endswith("evidence turns in the top 10 1.000")
    empty = subprocess.run([sys.executable, str(bench), "--data", str(tmp_path / "none")], capture_output=True,
                           text=True, timeout=60)
    assert (empty.returncode, empty.stderr.strip()) == (1, f"Error: no LoCoMo *.json files in {tmp_path / 'none'}")


def test_a_turn_line_stays_one_line_and_a_long_one_is_cut_to_the_budget(store: Store) -> None:
    store_conversation(store, "ops-chat", [TurnInput("sre", "rollback: run\nterraform apply", time="2026-01-05"),
                                           TurnInput("sre", "the deploy runbook says " + "word " * 2000)])
    recall = Recall(store)
    # (turn #1 follows with the context of the turn before it: recall/turn_context.py)
    assert recall.search("terraform rollback", fusion="bm25", ids=False).lines[0] == \
        "[ops-chat #0, 2026-01-05] sre: rollback: run ⏎ terraform apply"
    cut = recall.search("deploy runbook", fusion="bm25", ids=False, token_budget=60)
    assert len(cut.lines) == 1 and cut.lines[0].startswith("[ops-chat #1] sre: the deploy runbook says word")
    assert cut.lines[0].endswith("…") and estimate_tokens(cut.answer()) <= 60


@pytest.mark.parametrize("name,turn,error", [
    ("diary", TurnInput("a", "x", id="D1\nforged line"), "turns[1].id: must be a string of at most 256 bytes"),
    ("diary", TurnInput("a", "x", session="s\u2028"), "turns[1].session: must be a string"),
    ("diary", TurnInput("a\x85b", "x"), "turns[1].speaker: 'a\\x85b' must be a name"),
    ("diary\u2029x", TurnInput("a", "x"), "must not hold control characters or line breaks"),
    ("diary\x9b", TurnInput("a", "x"), "must not hold control characters or line breaks"),
])
def test_names_and_labels_that_would_break_the_answer_line_are_refused(store: Store, name: str, turn: TurnInput,
                                                                       error: str) -> None:
    with pytest.raises(InvalidInput, match=re.escape(error)):
        store_conversation(store, name, [TurnInput("a", "fine"), turn])
    assert store.db.execute("SELECT count(*) FROM facts").fetchone()[0] == 0


def test_chat_messages_read_responses_api_text_parts_and_skip_blank_ones() -> None:
    turns, skipped = read_turns(json.dumps({"model": "gpt-x", "messages": [
        {"role": "user", "content": [{"type": "input_text", "text": "Where is the staging database?"}]},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1"}]},
        {"role": "assistant", "content": [{"type": "output_text", "text": "On db-2,"}, "port 5433."]},
        {"role": "tool", "content": " \n"},
        {"role": "user", "text": None, "content": "Thanks"},              # a null text: the content is read
        {"role": "user", "text": " "}]}))
    assert (turns, skipped) == ([TurnInput("user", "Where is the staging database?"),
                                 TurnInput("assistant", "On db-2,\nport 5433."), TurnInput("user", "Thanks")], 3)


def test_the_cli_refuses_an_input_past_its_limit_before_reading_it_all(cli, data_dir: Path, monkeypatch) -> None:
    monkeypatch.setattr(cli_conversations, "MAX_INPUT_CHARS", 100)
    turns = json.dumps([{"speaker": "a", "text": "x" * 60}, {"speaker": "b", "text": "y"}])
    result = cli("store-conversation", "big", input=turns, ok=False)
    assert (result.exit_code, result.output.splitlines()[-1]) == (
        1, "Error: the input is over 100 characters: store the conversation in several calls (at most 10000 turns "
           "and 33554432 bytes of text each)")
    assert not data_dir.exists()
    assert cli("store-conversation", "big", input=turns[:99], ok=False).output.startswith("Error: line 1: invalid JSON")


def test_a_key_reused_for_other_turns_or_another_conversation_is_refused_and_stores_nothing(store: Store) -> None:
    first = store_conversation(store, "standup", [TurnInput("ann", "the launch slipped")], idempotency_key="hook-7")
    for name, text in (("standup", "the launch is on time"), ("retro", "the launch slipped")):
        with pytest.raises(Conflict, match="idempotency key 'hook-7' was already used for a different request"):
            store_conversation(store, name, [TurnInput("ann", text)], idempotency_key="hook-7")
    again = store_conversation(store, "standup", [TurnInput("ann", "the launch slipped")], idempotency_key="hook-7")
    assert again.facts == first.facts
    assert store.db.execute("SELECT count(*) FROM facts").fetchone()[0] == 1


def test_the_text_limit_counts_the_text_as_the_journal_line_holds_it(store: Store, monkeypatch) -> None:
    monkeypatch.setattr(conversations, "MAX_TOTAL_BYTES", 100)
    store_conversation(store, "ok", [TurnInput("a", "x" * 40), TurnInput("b", "y" * 40)])
    with pytest.raises(InvalidInput, match=r"the turns hold 304 bytes of text \(JSON-escaped\); the limit per call is 100"):
        store_conversation(store, "escaped", [TurnInput("a", "\x01" * 25), TurnInput("b", "\x02" * 25)])
    assert store.db.execute("SELECT count(*) FROM facts").fetchone()[0] == 2


def test_a_blank_tenant_continues_the_default_tenants_conversation_and_supersedes_no_turn(store: Store) -> None:
    store_conversation(store, "standup", [TurnInput("ann", "first"), TurnInput("bob", "second")])
    later = store_conversation(store, "standup", [TurnInput("ann", "third")], tenant=" ")   # stored as "default"
    assert later.positions == (2, 2)
    rows = store.db.execute("SELECT tenant_hash, key, value, superseded_by, version FROM facts ORDER BY seq").fetchall()
    assert rows == [("default", "turn:000000", "ann: first", None, 1), ("default", "turn:000001", "bob: second", None, 1),
                    ("default", "turn:000002", "ann: third", None, 1)]


def test_jsonl_lines_end_at_a_newline_alone() -> None:
    lines = [json.dumps({"speaker": "ann", "text": "page one\u2028page two\x0cend"}, ensure_ascii=False),
             json.dumps({"role": "user", "content": "ok"})]
    assert read_turns("\r\n".join(lines) + "\r\n") == (
        [TurnInput("ann", "page one\u2028page two\x0cend"), TurnInput("user", "ok")], 0)


# --- time cues: a question naming a period prefers the turns of that period ------------------------

def _dinners(store) -> None:
    from cruxsql.recall.conversations import TurnInput, store_conversation
    times = ["2023-01-10T10:00:00Z", "2023-03-02T10:00:00Z", "2023-05-04T10:00:00Z", "2023-08-20T10:00:00Z", "2023-09-01T10:00:00Z"]
    store_conversation(store, "maria", [TurnInput("Maria", f"I had dinner with a friend, note {i}", t, str(i + 1))
                                        for i, t in enumerate(times)])


def test_a_question_naming_a_month_prefers_the_turns_of_that_month(tmp_path: Path) -> None:
    from cruxsql.recall import Recall
    with Store(tmp_path / "data") as s:
        _dinners(s)
        hits = Recall(s).search("Who did Maria have dinner with in May 2023?").hits
        assert hits[0].turn is not None and hits[0].turn.time == "2023-05-04T10:00:00Z"
        hits = Recall(s).search("Who did Maria have dinner with on March 2, 2023?").hits
        assert hits[0].turn is not None and hits[0].turn.time == "2023-03-02T10:00:00Z"


@pytest.mark.slow
def test_last_month_is_read_at_the_conversations_latest_time(tmp_path: Path) -> None:
    from cruxsql.recall import Recall
    with Store(tmp_path / "data") as s:
        _dinners(s)
        hits = Recall(s).search("Who did Maria have dinner with last month?").hits   # August, the latest is Sept 1
        assert hits[0].turn is not None and hits[0].turn.time == "2023-08-20T10:00:00Z"
