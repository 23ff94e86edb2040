"""The codec reads and writes journal lines exactly as the Rust daemon does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cruxsql.facts import codec, timestamps
from cruxsql.facts.codec import CorruptLine, Fact
from support.journal_files import journal_text

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "crux_spec_examples.jsonl"


def golden_lines() -> list[str]:
    return GOLDEN.read_text(encoding="utf-8").splitlines()


@pytest.mark.parametrize("line", golden_lines(), ids=lambda l: json.loads(l)["op"])
def test_golden_line_reserialises_byte_identically(line: str) -> None:
    event = codec.decode_event(line.encode("utf-8"))
    assert codec.encode_event(event) == line


def test_every_op_is_covered_by_the_golden_file() -> None:
    ops = {json.loads(l)["op"] for l in golden_lines()}
    assert ops == set(codec.ALL_OPS)


@pytest.mark.parametrize("value, text", [
    (0.95, "0.95"), (0.7, "0.7"), (1.0, "1.0"), (1 / 3, "0.33333334"), (0.0, "0.0"), (0.1, "0.1"),
    (0.5, "0.5"), (1e-6, "0.000001"), (1e-7, "1e-7"), (1.5e13, "1.5e13"), (123456.0, "123456.0"),
    (0.000123, "0.000123"), (16777216.0, "16777216.0"), (-0.25, "-0.25"),
])
def test_f32_shortest_form_matches_ryu(value: float, text: str) -> None:
    assert codec.format_f32(codec.to_f32(value)) == text


@pytest.mark.parametrize("text, expected", [
    ("2026-05-27T10:11:12Z", "2026-05-27T10:11:12Z"),
    ("2026-05-27T10:11:12.5Z", "2026-05-27T10:11:12.500Z"),
    ("2026-05-27T10:11:12.123Z", "2026-05-27T10:11:12.123Z"),
    ("2026-05-27T10:11:12.123456Z", "2026-05-27T10:11:12.123456Z"),
    ("2026-05-27T10:11:12.123456789Z", "2026-05-27T10:11:12.123456789Z"),
    ("2026-05-27T10:11:12.120000Z", "2026-05-27T10:11:12.120Z"),
    ("2026-05-27T11:11:12+01:00", "2026-05-27T10:11:12Z"),
    ("2026-05-27T00:30:00.000000001-02:30", "2026-05-27T03:00:00.000000001Z"),
    ("1970-01-01T00:00:00Z", "1970-01-01T00:00:00Z"),
    ("1969-12-31T23:59:59.999999999Z", "1969-12-31T23:59:59.999999999Z"),
    ("2024-02-29T12:00:00z", "2024-02-29T12:00:00Z"),
])
def test_fact_time_round_trip(text: str, expected: str) -> None:
    assert timestamps.format_fact_time(timestamps.parse_ns(text)) == expected


def test_event_time_uses_plus_zero_offset() -> None:
    ns = timestamps.parse_ns("2026-05-27T10:15:00.500731204Z")
    assert timestamps.format_event_time(ns) == "2026-05-27T10:15:00.500731204+00:00"


@pytest.mark.parametrize("bad", ["2026-02-30T00:00:00Z", "2026-05-27 10:11", "1716800000", "2026-05-27T25:00:00Z",
                                 "2026-05-27T10:11:12", "2026-05-27T10:11:12+24:00", ""])
def test_bad_timestamps_are_rejected(bad: str) -> None:
    with pytest.raises(ValueError, match="RFC 3339"):
        timestamps.parse_ns(bad)


@given(st.integers(min_value=-(2**62), max_value=2**62))
def test_timestamp_format_parse_inverse(ns: int) -> None:
    assert timestamps.parse_ns(timestamps.format_fact_time(ns)) == ns


@given(st.floats(min_value=0.0, max_value=1.0, allow_nan=False))
def test_f32_text_round_trips_through_float32(x: float) -> None:
    q = codec.to_f32(x)
    assert codec.to_f32(float(codec.format_f32(q))) == q


def test_plus_offset_on_read_normalises_to_z() -> None:
    line = ('{"op":"store","fact":{"fact_id":"f_1","entity":"e","key":"k","value":"v","confidence":1,'
            '"stored_at":"2026-05-27T12:11:12.1+02:00","tokens":1,"deleted":false}}')
    event = codec.decode_event(line.encode())
    assert event.fact.tenant_hash == "default" and event.fact.version == 1 and event.fact.horizon_class == "none"
    assert codec.encode_event(event) == (
        '{"op":"store","fact":{"fact_id":"f_1","tenant_hash":"default","entity":"e","key":"k","value":"v",'
        '"source_receipt":null,"confidence":1.0,"stored_at":"2026-05-27T10:11:12.100Z","tokens":1,"deleted":false,'
        '"version":1,"private":false,"horizon_class":"none"}}')


def test_null_optional_fields_read_as_absent() -> None:
    line = ('{"op":"store","fact":{"fact_id":"f_1","entity":"e","key":"k","value":"v","confidence":0.5,'
            '"stored_at":"2026-05-27T10:11:12Z","tokens":1,"deleted":false,"supersedes":null,"actor":null,'
            '"valid_to":null,"unknown_key":[1,2]}}')
    fact = codec.decode_event(line.encode()).fact
    assert (fact.supersedes, fact.actor, fact.valid_to) == (None, None, None)
    assert '"supersedes"' not in fact.to_json() and '"unknown_key"' not in fact.to_json()


BASE = {"fact_id": "f_1", "entity": "e", "key": "k", "value": "v", "confidence": 1.0,
        "stored_at": "2026-05-27T10:11:12Z", "tokens": 1, "deleted": False}


@pytest.mark.parametrize("change, reason", [
    ({"tenant_hash": None}, "tenant_hash"),
    ({"version": None}, "version"),
    ({"version": -1}, "version"),
    ({"version": 1.0}, "version"),
    ({"tokens": 1.5}, "tokens"),
    ({"confidence": None}, "confidence"),
    ({"confidence": "0.5"}, "confidence"),
    ({"deleted": 0}, "deleted"),
    ({"private": None}, "private"),
    ({"horizon_class": "None"}, "horizon_class"),
    ({"stored_at": 1716800000}, "stored_at"),
    ({"stored_at": "yesterday"}, "stored_at"),
    ({"access_count": None}, "access_count"),
    ({"entity": 5}, "entity"),
])
def test_type_errors_reject_the_line(change: dict, reason: str) -> None:
    fact = {**BASE, **change}
    line = json.dumps({"op": "store", "fact": fact}).encode()
    with pytest.raises(CorruptLine, match=reason):
        codec.decode_event(line)


def test_missing_required_field_rejects_the_line() -> None:
    fact = dict(BASE)
    del fact["tokens"]
    with pytest.raises(CorruptLine, match="tokens"):
        codec.decode_event(json.dumps({"op": "store", "fact": fact}).encode())


@pytest.mark.parametrize("raw, reason", [
    (b'{"op":"teleport","fact_id":"f_1"}', "unknown op"),
    (b'{"fact_id":"f_1"}', "op"),
    (b'{"op":"delete","fact_id":"f_1"', "invalid JSON"),
    (b'{"op":"delete","fact_id":"f_\xff","deleted_at":"x"}', "UTF-8"),
    (b'{"op":"delete","fact_id":"\\ud800","deleted_at":"x"}', "surrogate"),
    (b'{"op":"delete","fact_id":NaN,"deleted_at":"x"}', "invalid JSON"),
    (b'[1,2]', "object"),
    (b'{"op":"supersede","fact_id":"a","by_fact_id":7,"superseded_at":"x"}', "by_fact_id"),
    (b'{"op":"consolidate_undo","canonical_fact_id":"a","restored_fact_ids":"b","undone_at":"x"}', "array"),
    (b'{"op":"delete","fact_id":"a","fact_id":"b","deleted_at":"x"}', "duplicate field `fact_id`"),
    (b'{"op":"delete","fact_id":"a","deleted_at":"x","junk":' + b"[" * 200 + b"]" * 200 + b"}", "nested deeper"),
    (b'{"op":"delete","fact_id":"a","deleted_at":"x","junk":' + b"[" * 100000 + b"]" * 100000 + b"}",
     "nested deeper"),
])
def test_corrupt_lines_say_why(raw: bytes, reason: str) -> None:
    with pytest.raises(CorruptLine, match=reason):
        codec.decode_event(raw)


def test_fact_json_key_order_and_omissions() -> None:
    fact = Fact(fact_id="f_a", entity="e", key="k", value="ü", confidence=codec.to_f32(0.95),
                stored_at=timestamps.parse_ns("2026-01-01T00:00:00.000001Z"), tokens=1)
    assert fact.to_json() == (
        '{"fact_id":"f_a","tenant_hash":"default","entity":"e","key":"k","value":"ü","source_receipt":null,'
        '"confidence":0.95,"stored_at":"2026-01-01T00:00:00.000001Z","tokens":1,"deleted":false,"version":1,'
        '"private":false,"horizon_class":"none"}')


@pytest.mark.parametrize("value, tokens", [("", 0), ("a", 1), ("abcd", 1), ("abcde", 2), ("é", 1), ("🚀🚀", 2)])
def test_token_cost_is_utf8_bytes_over_four_rounded_up(value: str, tokens: int) -> None:
    assert codec.token_cost(value) == tokens


@pytest.mark.parametrize("entity, horizon", [
    ("__ops::x", "volatile"), ("__ops__::x", "none"), ("bench:x", "stable"), ("__bootstrap__::x", "stable"),
    ("execplan:1", "medium"), ("incident:2", "medium"), ("__candidate_fact__::x", "medium"), ("other", "none"),
])
def test_default_horizon_by_entity_prefix(entity: str, horizon: str) -> None:
    assert codec.default_horizon_for_entity(entity) == horizon


def test_parse_horizon_trims_and_lowercases_and_names_bad_input() -> None:
    assert codec.parse_horizon("  Stable ") == "stable"
    with pytest.raises(ValueError, match="'weekly'"):
        codec.parse_horizon("weekly")


@pytest.mark.parametrize("change", [{"confidence": 1e40}, {"confidence": 10**400}])
def test_a_confidence_beyond_f32_is_an_unrepresentable_line_not_a_crash(change: dict) -> None:
    """serde reads it (as an f32 infinity); the view cannot hold it: compaction carries such a line over."""
    with pytest.raises(codec.UnrepresentableLine, match="outside the f32 range") as caught:
        codec.decode_event(json.dumps({"op": "store", "fact": {**BASE, **change}}).encode())
    assert str(caught.value).startswith(codec.UNREPRESENTABLE)


@pytest.mark.parametrize("field, text", [
    ("stored_at", "2300-01-01T00:00:00Z"), ("valid_to", "9999-12-31T23:59:59Z"), ("valid_from", "0001-01-01T00:00:00Z"),
    ("valid_to", "1500-01-01T00:00:00.500Z"), ("last_accessed_at", "+10000-01-01T00:00:00Z"),
    ("reverified_at", "-0001-12-31T23:59:59.000000001Z"), ("valid_to", "0000-01-01T00:00:00Z"),
])
def test_times_over_chronos_range_are_read_and_written_back_exactly(field: str, text: str) -> None:
    """chrono's DateTime<Utc> holds years -262144..+262143 and writes a year outside 0..=9999 with its sign
    and at least four digits (write_rfc3339: `{:+05}`)."""
    fact = codec.decode_event(json.dumps({"op": "store", "fact": {**BASE, field: text}}).encode()).fact
    assert f'"{field}":"{text}"' in fact.to_json()


@pytest.mark.parametrize("text", ["+262144-01-01T00:00:00Z", "-262145-12-31T23:59:59Z", "+99999999999-01-01T00:00:00Z"])
def test_times_beyond_chronos_range_are_corrupt(text: str) -> None:
    with pytest.raises(CorruptLine, match="outside chrono's range"):
        codec.decode_event(json.dumps({"op": "store", "fact": {**BASE, "stored_at": text}}).encode())


@pytest.mark.parametrize("text, written", [("2016-12-31T23:59:60.5Z", "2016-12-31T23:59:60.500Z"),
                                           ("2016-12-31T23:59:60Z", "2016-12-31T23:59:60Z"),
                                           ("2017-01-01T00:59:60.25+01:00", "2016-12-31T23:59:60.250Z")])
def test_a_leap_second_is_kept_as_written_and_sorted_as_chrono_sorts_it(text: str, written: str) -> None:
    """chrono reads :60 as second 59 with 1e9 more nanoseconds, writes it back as :60 and sorts it after
    all of :59 and before the next :00."""
    leap = timestamps.parse_ns(text)
    assert timestamps.format_fact_time(leap) == written
    assert timestamps.parse_ns("2016-12-31T23:59:59.999Z") < leap < timestamps.parse_ns("2017-01-01T00:00:00Z")


def test_a_leap_second_fact_keeps_its_text_in_the_view_and_through_compaction(tmp_path) -> None:
    import cruxsql
    from cruxsql.governance import compaction
    line = ('{"op":"store","fact":{"fact_id":"f_leap","tenant_hash":"default","entity":"e","key":"k","value":"v",'
            '"source_receipt":null,"confidence":1.0,"stored_at":"2016-12-31T23:59:60.500Z","tokens":1,'
            '"deleted":false,"version":1,"private":false,"horizon_class":"none"}}')
    after = line.replace("f_leap", "f_next").replace("2016-12-31T23:59:60.500Z", "2017-01-01T00:00:00Z")
    (tmp_path / "facts.jsonl").write_text(after + "\n" + line + "\n")
    with cruxsql.open(tmp_path) as store:
        assert store.db.execute("SELECT stored_at FROM facts WHERE fact_id = 'f_leap'").fetchone()[0] == \
            "2016-12-31T23:59:60.500Z"
        assert [r[0] for r in store.db.execute("SELECT fact_id FROM facts ORDER BY stored_at_ns")] == \
            ["f_leap", "f_next"]
        compaction.compact(store)
    assert journal_text(tmp_path) == line + "\n" + after + "\n"


def test_nesting_up_to_serdes_limit_is_accepted() -> None:
    deep = b"[" * 120 + b"]" * 120
    event = codec.decode_event(b'{"op":"delete","fact_id":"a","deleted_at":"x","junk":' + deep + b"}")
    assert event.fact_id == "a"


@pytest.mark.parametrize("depth, accepted", [(127, True), (128, False)])
def test_serdes_recursion_limit_rejects_a_line_128_levels_deep(depth: int, accepted: bool) -> None:
    """serde_json starts at remaining_depth 128 and fails when entering a container brings it to 0:
    the line's own object is level 1, so 126 more arrays make 127 (read), 127 more make 128 (rejected)."""
    raw = b'{"op":"delete","fact_id":"a","deleted_at":"x","junk":' + b"[" * (depth - 1) + b"]" * (depth - 1) + b"}"
    assert codec._nesting_depth(raw) == depth
    if accepted:
        assert codec.decode_event(raw).fact_id == "a"
    else:
        with pytest.raises(CorruptLine, match="nested deeper than 127"):
            codec.decode_event(raw)


def test_tokens_are_a_usize_up_to_u64_max() -> None:
    line = ('{"op":"store","fact":{"fact_id":"f_1","entity":"e","key":"k","value":"v","source_receipt":null,'
            '"confidence":1.0,"stored_at":"2026-01-01T00:00:00Z","tokens":%d,"deleted":false}}')
    for tokens in (2**63 - 1, 2**63, 2**64 - 1):
        assert codec.decode_event((line % tokens).encode()).fact.tokens == tokens
    with pytest.raises(CorruptLine, match="`tokens` must be an unsigned integer"):
        codec.decode_event((line % 2**64).encode())
