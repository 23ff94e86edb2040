"""A Crux data directory opens as it is: journal timestamps parse like chrono's `FromStr`, and repeated
keys are judged like serde's derive (repeated known fields are errors, repeated unknown keys are not)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cruxsql.errors import InvalidInput
from cruxsql.facts import codec, timestamps
from cruxsql.facts.codec import CorruptLine
from cruxsql.facts.store import Store
from support.journal_builders import fact_obj, line, write_journal

BASE = timestamps.parse_ns("2026-05-27T10:00:00Z")


@pytest.mark.parametrize("text, offset_s", [
    ("2026-05-27T10:00:00Z", 0),
    ("2026-05-27 10:00:00Z", 0),            # a space separator
    ("2026-05-27t10:00:00z", 0),            # lowercase t and z
    ("2026-05-27T10:00:00 UTC", 0),         # `UTC` (Debug format of DateTime<Utc>), any case
    ("2026-05-27T10:00:00utc", 0),
    ("2026-5-27T10:0:0Z", 0),               # unpadded numbers
    ("+2026-05-27T10:00:00Z", 0),           # a signed year
    ("2026 - 05 - 27T10 : 00 : 00 Z", 0),   # whitespace between components
    (" 2026-05-27T10:00:00Z\t", 0),         # leading and trailing whitespace
    ("2026-05-27T11:00:00+0100", 3600),     # no colon in the offset
    ("2026-05-27T11:30:00 +01 : 30", 5400),
    ("2026-05-27T08:30:00\u221201:30", -5400),  # U+2212 MINUS SIGN
])
def test_journal_timestamps_parse_like_chrono_from_str(text: str, offset_s: int) -> None:
    """chrono `impl FromStr for DateTime<FixedOffset>` / `parse_rfc3339_relaxed` (what serde's
    `DateTime<Utc>` visitor calls): these forms are accepted and mean 2026-05-27T10:00:00Z."""
    assert timestamps.parse_ns(text) == BASE


@pytest.mark.parametrize("text", [
    "2026-05-27T10:00:00",                  # the offset is mandatory
    "\u0662\u0660\u0662\u0666-05-27T10:00:00Z",  # non-ASCII digits (Python's \\d would take them)
    "2026-05-27T10:00:0\u0660Z",
    "2026-05-27T10:00:00.Z",                # a fraction needs a digit
    "2026-05-27  T10:00:00Z",               # exactly one separator character
    "2026-05-27T10:00:00+24:00",            # FixedOffset must be under a day
    "2026-05-27T10:00:00+01:60",
    "2026-05-27T10:00:00+01",               # minutes are required
    "20260-05-27T10:00:00Z",                # an unsigned year has at most 4 digits
    "2026-05-27T10:00:00 UTCX",
    "2026-05-27T10:00:00\x1cZ",             # U+001C is not White_Space in Rust
])
def test_journal_timestamps_reject_what_chrono_rejects(text: str) -> None:
    """chrono `parse_rfc3339_relaxed` rejects these (numbers are ASCII digits via `scan::number`)."""
    with pytest.raises(InvalidInput):
        timestamps.parse_ns(text)


def test_a_crux_journal_with_relaxed_timestamps_opens_as_is(tmp_path: Path) -> None:
    """serde reads `stored_at` through chrono's `FromStr`, so such a line is a fact, not a corrupt line."""
    write_journal(tmp_path, [
        line("store", fact=fact_obj("f_1", stored_at="2026-05-27 10:00:00 UTC")),
        line("store", fact=fact_obj("f_2", stored_at="\u0662026-05-27T10:00:00Z")),
    ])
    with Store(tmp_path) as store:
        assert store.get("f_1").stored_at == BASE
        report = store.verify()
    assert [c["line_no"] for c in report.corrupt_lines] == [2]


def test_repeated_unknown_keys_are_ignored_and_known_fields_are_errors(tmp_path: Path) -> None:
    """serde derive: `duplicate_field` only for fields the struct declares; unknown keys go to
    `IgnoredAny` however often they appear. The internally tagged `op` is a field too."""
    fact = '{"fact_id":"f_1","tenant_hash":"default","entity":"e","key":"k","value":"v","source_receipt":null,' \
           '"confidence":1.0,"stored_at":"2026-05-27T10:00:00Z","tokens":1,"deleted":false,' \
           '"x_future":1,"x_future":{"a":1,"a":2}}'
    event = codec.decode_event(('{"op":"store","meta":1,"meta":2,"fact":' + fact + '}').encode())
    assert event.fact.fact_id == "f_1"
    for raw, where in [
        ('{"op":"store","fact":' + fact[:-1] + ',"value":"w"}}', "store.fact: duplicate field `value`"),
        ('{"op":"store","fact":' + fact + ',"fact":' + fact + '}', "store: duplicate field `fact`"),
        ('{"op":"delete","op":"delete","fact_id":"f","deleted_at":"x"}', "delete: duplicate field `op`"),
        ('{"op":"set_validity","fact_id":"f","set_at":"x","valid_to":null,"valid_to":null}',
         "set_validity: duplicate field `valid_to`"),
    ]:
        with pytest.raises(CorruptLine) as info:
            codec.decode_event(raw.encode())
        assert str(info.value) == where
    (tmp_path / "facts.jsonl").write_text('{"op":"store","meta":1,"meta":2,"fact":' + fact + '}\n')
    with Store(tmp_path) as store:
        assert store.get("f_1").value == "v" and store.verify().ok
