"""Recall behaviours ported from the Rust daemon's own code (crux-mcp tools/facts.rs, memory.rs,
crc_v1.rs; corecrux-projections decay.rs), each on a real data directory written like Crux's journal."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from cruxsql.cli import main
from cruxsql.facts.store import Store
from cruxsql.recall import Recall
from cruxsql.recall.freshness import DecayPolicy, parse_rust_i64
from support.journal_builders import fact_obj, line, write_journal
from support.journal_files import journal_bytes

SCHEMA = "https://cuecrux.com/contracts/crc-v1.schema.json"


def test_confidence_floor_is_compared_as_f32(tmp_path: Path) -> None:
    """`handle_query_facts` casts the validated floor `f as f32` and `query_visible_facts_opts_as_of`
    compares `eff >= floor as f64`: a fact stored at 0.7 (f32 0.699999988) clears a 0.7 floor."""
    with Store(tmp_path) as store:
        store.store("svc", "status", "green", confidence=0.7)
        result = Recall(store).query_facts("green", min_effective_confidence=0.7, contract="legacy")
        assert [r["value"] for r in result.rows] == ["green"]
        assert result.filtered_below_threshold == 0
        assert Recall(store).query_facts("green", min_effective_confidence=0.70001).filtered_below_threshold == 1


def test_bootstrap_tool_output_appends_the_crc_v1_catalogue(tmp_path: Path) -> None:
    """`handle_get_bootstrap` appends `crc_v1::tool_output_catalogue()` for topic `tool-output` (any
    alias), after the stored facts, each rendered `[{entity}] {key} = {value}` with the JSON value."""
    write_journal(tmp_path, [line("store", fact=fact_obj(
        "f_1", entity="__bootstrap__::tool-output:custom", key="note", value="operator note", private=True))])
    with Store(tmp_path) as store:
        result = Recall(store).get_bootstrap(" Tool-Outputs ")
    assert result.prefix == "__bootstrap__::tool-output:"
    assert result.text().split("\n") == [
        "[__bootstrap__::tool-output:custom] note = operator note",
        '[__bootstrap__::tool-output:_contract] crc-v1 = {"schema":"' + SCHEMA + '","negotiate":'
        '"contract:\\"v1\\" arg (MCP) | Accept-Contract: crc-v1 (HTTP)","envelope":"pointers + cost_estimate + '
        'agent_decision + envelope{freshness,receipts,links} + next","default_when_negotiated":'
        '"hydrate=pointer (cheap); expand via next.expand"}',
        '[__bootstrap__::tool-output:query] query = {"contract":"crc-v1","kind":"search","schema":"' + SCHEMA + '"}',
        '[__bootstrap__::tool-output:query_scan] query_scan = {"contract":"crc-v1","kind":"search","schema":"'
        + SCHEMA + '"}',
        '[__bootstrap__::tool-output:query_expand] query_expand = {"contract":"crc-v1","kind":"addressed",'
        '"schema":"' + SCHEMA + '"}',
        '[__bootstrap__::tool-output:query_facts] query_facts = {"contract":"crc-v1","kind":"fact","schema":"'
        + SCHEMA + '"}',
    ]


def test_blank_bootstrap_topic_matches_nothing(tmp_path: Path) -> None:
    """`handle_get_bootstrap`: `Some(t)` builds `__bootstrap__::{normalize(t)}:`, so a blank topic gives
    `__bootstrap__:::` and no facts, answered with the topic as given; no topic reads everything."""
    write_journal(tmp_path, [line("store", fact=fact_obj(
        "f_1", entity="__bootstrap__::doc:setup", key="install", value="pip install", private=True))])
    with Store(tmp_path) as store:
        recall = Recall(store)
        for topic in ("", "  "):
            result = recall.get_bootstrap(topic)
            assert (result.prefix, result.facts) == ("__bootstrap__:::", [])
            assert result.text() == f"no bootstrap knowledge for topic '{topic}'"
        assert [f["fact_id"] for f in recall.get_bootstrap(None).facts] == ["f_1"]
        assert [f["fact_id"] for f in recall.get_bootstrap(" DOCS ").facts] == ["f_1"]


def test_bootstrap_help_lists_the_topic_aliases() -> None:
    """`normalize_bootstrap_topic`'s aliases are documented where an operator looks for them."""
    out = CliRunner().invoke(main, ["bootstrap", "--help"]).output
    assert "error, errors, resolution, resolutions   -> resolution" in out
    assert "tool, tool-output, tool-outputs          -> tool-output" in out


@pytest.mark.parametrize("value, pinned", [
    ("1", True), ("true", True), ("TRUE", True), ("tRuE", True),
    (" true", False), ("true\n", False), ("1 ", False), ("yes", False), ("\u0130rue", False),
])
def test_pin_is_one_or_ascii_case_insensitive_true_untrimmed(tmp_path: Path, value: str, pinned: bool) -> None:
    """memory.rs pins: the latest `__memory_pin::<agent>::<id>` / `pinned` fact counts when its value is
    `"1"` or `eq_ignore_ascii_case("true")`, nothing trimmed."""
    write_journal(tmp_path, [
        line("store", fact=fact_obj("f_1", entity="svc", key="status", value="green")),
        line("store", fact=fact_obj("f_pin", entity="__memory_pin::bob::f_1", key="pinned", value=value,
                                    private=True)),
    ])
    with Store(tmp_path) as store:
        view = Recall(store).memory_view(agent="bob")
    assert [(f["id"], f["pinned"]) for f in view.facts] == [("f_1", pinned)]


def test_memory_view_entity_filter_compares_the_visible_entity(tmp_path: Path) -> None:
    """`memory_view` keeps a fact when its *visible* entity equals the filter: bob's wrapped
    `__agent::bob::svc` fact is found as `svc`, never under its stored name."""
    write_journal(tmp_path, [
        line("store", fact=fact_obj("f_plain", entity="svc", key="a", value="x")),
        line("store", fact=fact_obj("f_bob", entity="__agent::bob::svc", key="b", value="y", private=True)),
    ])
    with Store(tmp_path) as store:
        recall = Recall(store)
        assert sorted(f["id"] for f in recall.memory_view("svc", agent="bob").facts) == ["f_bob", "f_plain"]
        assert recall.memory_view("__agent::bob::svc", agent="bob").facts == []


@pytest.mark.parametrize("text, expected", [
    ("1_0", None), ("\u0663", None), ("1 0", None), ("+5", 5), ("-5", -5), (" 7\u3000", 7), ("\x1c7", None),
    ("9223372036854775807", 2**63 - 1), ("9223372036854775808", None), ("", None),
])
def test_decay_overrides_parse_like_rust_i64(text: str, expected) -> None:
    """decay.rs `DecayPolicy::from_env`: `value.trim().parse::<i64>()`, kept only when > 0. Rust's
    parse takes an optional sign and ASCII digits; `trim` strips White_Space (U+3000 yes, U+001C no)."""
    assert parse_rust_i64(text) == expected
    policy = DecayPolicy.from_env({"CORECRUXD_DECAY_VOLATILE_HOURS": text})
    assert policy.volatile_hours == (expected if expected is not None and expected > 0 else 24)


def test_age_hours_comes_from_the_nanosecond_difference(tmp_path: Path) -> None:
    """`handle_query_facts`: `(now - anchor).num_hours().max(0)` on nanosecond times. Stored at
    10:00:00.0009 and read at 10:59:59.9995 + 1 ms is 59 min 59.9996 s: 0 hours (whole milliseconds
    would have said 1)."""
    write_journal(tmp_path, [line("store", fact=fact_obj(
        "f_1", entity="svc", value="green", stored_at="2026-05-27T10:00:00.0009Z"))])
    with Store(tmp_path) as store:
        recall = Recall(store)
        rows = recall.query_facts("green", now="2026-05-27T11:00:00.0005Z", contract="legacy").rows
        assert rows[0]["age_hours"] == 0
        rows = recall.query_facts("green", now="2026-05-27T11:00:00.0009Z", contract="legacy").rows
        assert rows[0]["age_hours"] == 1


def test_access_counts_survive_a_restart_but_never_reach_the_journal(tmp_path: Path, monkeypatch) -> None:
    """Crux `FactStore::record_access` bumps `access_count` in memory only, so a daemon restart resets
    it. cruxsql keeps the counts in the view (`recall_salience`) across restarts, on purpose (docs/recall.md:
    every CLI call is a restart), and still never writes them to the journal."""
    monkeypatch.setenv("CORECRUXD_MEMORY_SALIENCE", "1")
    with Store(tmp_path) as store:
        fact = store.store("svc", "status", "green")
        journal = journal_bytes(tmp_path)
        Recall(store).query_facts("green")
        Recall(store).query_facts("green")
    with Store(tmp_path) as store:
        assert Recall(store).access_counts() == {fact.fact_id: 2}
        assert store.get(fact.fact_id).access_count == 0
    assert journal_bytes(tmp_path) == journal
