"""The turn encoding (recall/turns.py): a turn is an ordinary fact, read back from its four fields."""

from __future__ import annotations

import pytest

from cruxsql.errors import InvalidInput
from cruxsql.facts.store import Store
from cruxsql.recall.turns import (
    Turn,
    adjacent_seqs,
    last_position,
    neighbours,
    normalize_time,
    parse_turn,
    turn_fact,
    turn_line,
)

CAROLINE = Turn("locomo-26", 123, "Caroline", "I went to the LGBTQ support group: it was powerful.\nReally.",
                "2023-05-08T13:56:00Z", "session_1", "D1:3")


def test_a_turn_is_the_documented_fact_and_reads_back() -> None:
    fact = turn_fact(CAROLINE)
    assert (fact.entity, fact.key) == ("conversation:locomo-26", "turn:000123")
    assert fact.value == "Caroline: I went to the LGBTQ support group: it was powerful.\nReally."
    assert fact.source_receipt == 'turn:{"session":"session_1","time":"2023-05-08T13:56:00Z","id":"D1:3"}'
    assert parse_turn(fact.entity, fact.key, fact.value, fact.source_receipt) == CAROLINE


def test_optional_fields_are_left_out_of_the_receipt() -> None:
    bare = Turn("c", 0, "user", "hello")
    fact = turn_fact(bare)
    assert fact.source_receipt == "turn:{}"
    assert parse_turn(fact.entity, fact.key, fact.value, fact.source_receipt) == bare
    assert parse_turn(fact.entity, fact.key, fact.value, None) == bare       # stored by hand, no receipt


def test_a_private_turn_reads_back_under_its_logical_conversation() -> None:
    fact = turn_fact(CAROLINE)
    assert parse_turn("__agent::alice::" + fact.entity, fact.key, fact.value, fact.source_receipt) == CAROLINE


@pytest.mark.parametrize("entity,key,value,receipt", [
    ("conversations:x", "turn:000001", "a: b", None),       # another entity
    ("conversation:", "turn:000001", "a: b", None),         # no name
    ("conversation:x", "turn:1", "a: b", None),             # not six digits
    ("conversation:x", "turn:000001", "no speaker", None),
    ("conversation:x", "turn:000001", "a: b", "crx_123"),   # someone else's receipt
    ("conversation:x", "turn:000001", "a: b", 'turn:{"time":5}'),
])
def test_facts_that_are_not_turns_parse_to_none(entity: str, key: str, value: str, receipt: str) -> None:
    assert parse_turn(entity, key, value, receipt) is None


@pytest.mark.parametrize("text,expected", [
    ("2023-05-08T13:56:00+02:00", "2023-05-08T11:56:00Z"),
    ("2023-05-08T13:56:00.5Z", "2023-05-08T13:56:00.500Z"),
    ("2023-05-08", "2023-05-08T00:00:00Z"),
    ("2023-05-08 13:56", "2023-05-08T13:56:00Z"),
    ("2023-05-08T13:56:07.123456", "2023-05-08T13:56:07.123456Z"),       # datetime.isoformat(), naive
    ("1:56 pm on 8 May, 2023", "2023-05-08T13:56:00Z"),
    ("12:09 am on 13 September, 2023", "2023-09-13T00:09:00Z"),
    ("12:30 pm on 1 Jan, 2024", "2024-01-01T12:30:00Z"),
])
def test_times_are_normalised_to_rfc3339_utc(text: str, expected: str) -> None:
    assert normalize_time(text) == expected


@pytest.mark.parametrize("text", ["yesterday", "2023-02-30", "13:56 pm on 8 May, 2023", "1:56 pm on 8 Ma, 2023"])
def test_a_time_it_cannot_read_is_refused_by_name(text: str) -> None:
    with pytest.raises(InvalidInput, match=f"time {text!r} is not a time cruxsql reads"):
        normalize_time(text)


def test_the_answer_line_names_conversation_position_time_and_speaker() -> None:
    assert turn_line(CAROLINE) == ("[locomo-26 #123, 2023-05-08 13:56] Caroline: I went to the LGBTQ support "
                                   "group: it was powerful. ⏎ Really.")
    assert turn_line(Turn("c", 0, "user", "hi", "2023-05-08T00:00:00Z"), None, "f_1", "id=7") == \
        "[c #0, 2023-05-08] user: hi · f_1 · id=7"
    assert turn_line(CAROLINE, "Caroline: I went…") == "[locomo-26 #123, 2023-05-08 13:56] Caroline: I went…"


def test_the_answer_line_stays_one_line_at_every_line_boundary() -> None:
    said = "a\r\nb\u2028c\x0cd\x85e\x1df"
    line = turn_line(Turn("c", 0, "user", said), None, "f_1", "id=x\ny")     # a hand-stored turn's id too
    assert line == "[c #0] user: a ⏎ b ⏎ c ⏎ d ⏎ e ⏎ f · f_1 · id=x ⏎ y"
    assert len(line.splitlines()) == 1


def _store_turns(store: Store, conversation: str, n: int, tenant: str = "default") -> list[int]:
    seqs = []
    for i in range(n):
        fact = turn_fact(Turn(conversation, i, "A" if i % 2 else "B", f"line {i}"))
        stored = store.store(fact.entity, fact.key, fact.value, source_receipt=fact.source_receipt, tenant=tenant)
        seqs.append(store.db.execute("SELECT seq FROM facts WHERE fact_id = ?", (stored.fact_id,)).fetchone()[0])
    return seqs


def test_neighbours_are_the_adjacent_turns_of_the_same_conversation_and_tenant(store: Store) -> None:
    seqs = _store_turns(store, "c", 5)
    other = _store_turns(store, "d", 5)
    elsewhere = _store_turns(store, "c", 5, tenant="acme")
    plain = store.store("c", "turn:000001", "x: y")
    found = neighbours(store.db, [seqs[0], seqs[2], seqs[4]])
    assert {a: [(n.seq, n.turn.position, n.turn.text, n.offset) for n in ns] for a, ns in found.items()} == {
        seqs[0]: [(seqs[1], 1, "line 1", 1)],
        seqs[2]: [(seqs[1], 1, "line 1", -1), (seqs[3], 3, "line 3", 1)],
        seqs[4]: [(seqs[3], 3, "line 3", -1)]}
    wide = neighbours(store.db, [seqs[2]], reach=2)[seqs[2]]
    assert [(n.turn.position, n.offset) for n in wide] == [(1, -1), (3, 1), (0, -2), (4, 2)]
    assert not set(n.seq for ns in neighbours(store.db, seqs).values() for n in ns) & set(other + elsewhere)
    plain_seq = store.db.execute("SELECT seq FROM facts WHERE fact_id = ?", (plain.fact_id,)).fetchone()[0]
    assert neighbours(store.db, [plain_seq]) == {}


def test_a_deleted_neighbour_is_left_out_and_its_position_never_reused(store: Store) -> None:
    seqs = _store_turns(store, "c", 3)
    fact_id = store.db.execute("SELECT fact_id FROM facts WHERE seq = ?", (seqs[2],)).fetchone()[0]
    store.delete(fact_id)
    assert [n.turn.position for n in neighbours(store.db, [seqs[1]])[seqs[1]]] == [0]
    assert last_position(store.db, "default", "conversation:c") == 2
    assert last_position(store.db, "default", "conversation:none") is None


def test_adjacent_seqs_are_the_neighbours_without_reading_them(store: Store) -> None:
    seqs = _store_turns(store, "c", 5)
    _store_turns(store, "c", 5, tenant="acme")
    store.store("c", "turn:000001", "x: y")
    store.store("c", "turn:000002", "x: z")
    plain = store.db.execute("SELECT seq FROM facts WHERE entity = 'c' AND key = 'turn:000001'").fetchone()[0]
    wanted = [seqs[0], seqs[2], seqs[4], plain]
    assert adjacent_seqs(store.db, wanted) == [(a, n.offset, n.seq) for a, ns in neighbours(store.db, wanted).items()
                                               for n in ns]
    assert adjacent_seqs(store.db, [plain]) == []       # not a conversation's turn: no context
