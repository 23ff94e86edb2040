"""Plain-language time for time filters (cruxsql/facts/time_phrases.py): resolved in a stated zone or the
server's, echoed back by cruxsql's own `recall`, refused in one line with examples otherwise; Crux's
query_facts keeps Crux's argument form."""

from __future__ import annotations

from pathlib import Path

import pytest

from cruxsql.errors import InvalidInput
from cruxsql.facts import timestamps
from cruxsql.facts.time_phrases import resolve
from support.mcp_clients import stdio
from support.journal_files import journal_text

MONDAY = timestamps.parse_ns("2026-12-07T15:30:00Z")     # a Monday afternoon


@pytest.mark.parametrize("phrase,paris", [
    ("yesterday", "2026-12-06T00:00:00+01:00"),
    ("Yesterday", "2026-12-06T00:00:00+01:00"),
    ("today", "2026-12-07T00:00:00+01:00"),
    ("last week", "2026-11-30T00:00:00+01:00"),
    ("this week", "2026-12-07T00:00:00+01:00"),
    ("3 days ago", "2026-12-04T16:30:00+01:00"),
    ("an hour ago", "2026-12-07T15:30:00+01:00"),
    ("2 months ago", "2026-10-07T16:30:00+02:00"),        # summer time then: the wall clock is kept
    ("since monday", "2026-12-07T00:00:00+01:00"),         # today is Monday
    ("since  Friday", "2026-12-04T00:00:00+01:00"),
    ("last month", "2026-11-01T00:00:00+01:00"),
    ("last year", "2025-01-01T00:00:00+01:00"),
    ("2026-11", "2026-11-01T00:00:00+01:00"),
    ("2026-11-03", "2026-11-03T00:00:00+01:00"),
])
def test_phrases_resolve_in_the_stated_zone(phrase: str, paris: str) -> None:
    resolved = resolve(phrase, "stored_after", zone="Europe/Paris", now_ns=MONDAY)
    assert resolved.text == paris
    assert resolved.ns == timestamps.parse_ns(paris)


def test_rfc_3339_is_exact_and_not_an_echoed_phrase() -> None:
    resolved = resolve("2026-11-03T09:00:00.5Z", "as_of", zone="Asia/Tokyo", now_ns=MONDAY)
    assert (resolved.ns, resolved.was_phrase) == (timestamps.parse_ns("2026-11-03T09:00:00.5Z"), False)


def test_the_zone_moves_midnight() -> None:
    utc = resolve("yesterday", "x", zone="UTC", now_ns=MONDAY).ns            # 2026-12-06T00:00Z
    tokyo = resolve("yesterday", "x", zone="Asia/Tokyo", now_ns=MONDAY).ns   # already Tuesday there: 12-07 00:00+09
    assert (tokyo - utc) // 10**9 == 15 * 3600


@pytest.mark.parametrize("bad", ["next blue moon", "2026-13", "tomorrow-ish", "", "3 fortnights ago"])
def test_anything_else_is_one_line_with_examples(bad: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        resolve(bad, "stored_after", now_ns=MONDAY)
    message = str(refused.value)
    assert message.startswith(f"stored_after: cannot read {bad!r} as a time; use RFC 3339")
    assert "yesterday" in message and "2026-11-03" in message and "\n" not in message


def test_an_unknown_zone_is_named() -> None:
    with pytest.raises(InvalidInput, match="time_zone: unknown time zone 'Mars/Olympus'"):
        resolve("yesterday", "x", zone="Mars/Olympus")


@pytest.mark.slow
def test_recall_over_mcp_takes_phrases_and_says_what_they_meant(portal, tmp_path: Path) -> None:
    data_dir = tmp_path / "store"
    client = stdio(portal, data_dir, "--agent", "alice", "--tenant", "acme")
    try:
        client.text("store_fact", {"entity": "payments-api", "key": "database", "value": "postgres 16"})
        recent = client.text("recall", {"query": "payments database", "stored_after": "yesterday",
                                        "time_zone": "UTC"})
        assert "postgres 16" in recent
        footer = recent.splitlines()[-1]
        assert footer.startswith("times: stored_after 'yesterday' = ") and footer.endswith("T00:00:00+00:00")
        none_yet = client.text("recall", {"query": "payments database", "stored_before": "3 days ago"})
        assert "postgres 16" not in none_yet and "stored_before '3 days ago' = " in none_yet
        exact = client.text("recall", {"query": "payments database", "stored_after": "2000-01-01T00:00:00Z"})
        assert "postgres 16" in exact and "times:" not in exact        # RFC 3339 needs no echo
        bad = client.call("recall", {"query": "payments database", "stored_after": "next blue moon"})
        assert bad.is_error and bad.content[0].text.startswith("stored_after: cannot read 'next blue moon'")
        crux = client.call("query_facts", {"query": "payments", "as_of": "yesterday"})
        assert crux.is_error and "as_of must be an RFC 3339 timestamp" in crux.content[0].text   # Crux's form
    finally:
        client.close()
    assert journal_text(data_dir).count("\n") == 1


def test_the_cli_recall_takes_phrases_and_says_what_they_meant(cli) -> None:
    assert cli("store", "payments-api", "database", "postgres 16").exit_code == 0
    found = cli("recall", "payments database", "--stored-after", "yesterday")
    assert found.exit_code == 0 and "postgres 16" in found.stdout
    assert found.stderr.startswith("times: --stored-after 'yesterday' = ")
    empty = cli("recall", "payments database", "--stored-before", "last week")
    assert "postgres 16" not in empty.stdout
    refused = cli("recall", "payments database", "--stored-after", "next blue moon", ok=False)
    assert refused.exit_code == 1
    assert refused.stderr.startswith("Error: --stored-after: cannot read 'next blue moon' as a time; use RFC 3339")


def test_the_python_api_search_takes_phrases_in_the_callers_zone(store) -> None:
    from cruxsql.recall import Recall

    store.store("payments-api", "database", "postgres 16")
    stored = store.db.execute("SELECT stored_at_ns FROM facts").fetchone()[0]
    recall = Recall(store)
    day_after = stored + 86_400 * 10**9
    assert [h.key for h in recall.search("postgres", stored_after="yesterday", now=day_after).hits] == ["database"]
    assert recall.search("postgres", stored_after="today", now=day_after, time_zone="UTC").hits == []
    assert [h.key for h in recall.search("postgres", stored_before="now",
                                         now=day_after).hits] == ["database"]
    with pytest.raises(InvalidInput, match="stored_before: cannot read 'soonish' as a time; use RFC 3339"):
        recall.search("postgres", stored_before="soonish")
    with pytest.raises(InvalidInput, match="time_zone: unknown time zone"):
        recall.search("postgres", stored_after="today", time_zone="Mars/Olympus")


@pytest.mark.parametrize("option", ["--stored-after", "--stored-before"])
def test_an_instant_past_2262_is_the_columns_end_not_a_traceback(cli, option: str) -> None:
    assert cli("store", "payments-api", "database", "postgres 16").exit_code == 0
    res = cli("recall", "postgres", option, "9999-01-01T00:00:00Z")
    assert res.exit_code == 0 and "Traceback" not in res.output
    assert ("payments-api · database" in res.output) == (option == "--stored-before")


def test_a_duration_ago_is_read_as_retention_writes_it() -> None:
    assert resolve("7d", "--since", zone="UTC", now_ns=MONDAY).text == "2026-11-30T15:30:00+00:00"
    assert resolve("30m", "--since", zone="UTC", now_ns=MONDAY).text == "2026-12-07T15:00:00+00:00"


def test_export_and_doctor_take_phrases_said_back_resolved(cli, tmp_path: Path) -> None:
    assert cli("store", "payments-api", "database", "postgres 16").exit_code == 0
    out = tmp_path / "audit.jsonl"
    recent = cli("export", "audit", "--format", "jsonl", "--output", str(out), "--since", "yesterday", "--json")
    assert recent.stderr.startswith("times: --since 'yesterday' = ")
    assert '"events": 1' in recent.stdout
    old = cli("export", "audit", "--format", "jsonl", "--output", str(out), "--until", "last year")
    assert "wrote 0 event(s)" in old.stdout
    assert cli("doctor", "--since", "last week").stderr.startswith("times: --since 'last week' = ")
    refused = cli("doctor", "--since", "the dawn of time", ok=False)
    assert refused.exit_code == 4
    assert refused.stderr.startswith("Error: --since: cannot read 'the dawn of time' as a time; use RFC 3339")


def test_older_than_stays_a_duration_and_says_so(cli) -> None:
    assert cli("store", "payments-api", "database", "postgres 16").exit_code == 0
    refused = cli("retention", "report", "--older-than", "yesterday", ok=False)
    assert refused.exit_code == 1
    assert refused.stderr.strip() == ("Error: invalid cutoff 'yesterday': expected a duration such as 90d, 12h, "
                                      "30m, 2w, 45s or an RFC 3339 timestamp")
