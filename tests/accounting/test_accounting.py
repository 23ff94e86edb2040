"""Token accounting, session budgets, the savings holdout and the agent token registry, unit by unit."""

from __future__ import annotations

import pytest

from cruxsql.accounting.holdout import (Holdout, fnv1a, holdout_fraction, is_control, paired_savings,
                                        unpaired_savings)
from cruxsql.accounting.usage import BudgetPolicy, Standing, TokenLedger, parse_agent_budgets, parse_limit
from cruxsql.errors import InvalidInput
from cruxsql.facts.store import Store
from cruxsql.mcp.identity import AgentRegistry, Identity


def test_paired_savings_match_the_spec_examples():
    every = paired_savings([100, 200, 400, 80], [75, 150, 300, 60])
    assert (every.n, every.reduction, every.ci_low, every.ci_high) == (4, 0.25, 0.25, 0.25)
    report = paired_savings([100, 100, 100], [70, 80, 75])
    assert report.format("beir", "abc123") == ("token savings 25.0% (95% CI 19.3\u201330.7%) \u00b7 n=3 \u00b7 "
                                               "control_tokens=300 \u00b7 treatment_tokens=225 \u00b7 corpus=beir "
                                               "\u00b7 commit=abc123")
    assert round(report.ci_low, 5) == 0.19342 and round(report.ci_high, 5) == 0.30658
    assert paired_savings([0, 0], [5, 5]) == paired_savings([0, 0], [5, 5]).__class__(0, 0.0, 0.0, 0.0, 0, 10)


def test_unpaired_savings_match_the_spec_example():
    report = unpaired_savings([400] * 4, [300] * 4)
    assert (report.n, report.reduction, report.ci_low, report.ci_high) == (8, 0.25, 0.25, 0.25)
    assert unpaired_savings([], [300]).reduction == 0.0


def test_arm_assignment_is_a_pure_function_of_the_arguments():
    buckets = {'{"query":"alpha","tenant_id":"t1"}': 0.43438015, "key-0": 0.49741513, "key-1": 0.74218615,
               "query:alpha:500": 0.82437331}                           # worked values (holdout.rs)
    assert {k: round((fnv1a(k) >> 11) / 2.0**53, 8) for k in buckets} == buckets
    # holdout.rs: control iff bucket < fraction (the spec's prose has the two arms the other way round)
    assert [is_control(k, 0.5) for k in buckets] == [True, True, False, False]
    assert Holdout(0.5).request_is_control({"query": "alpha", "tenant_id": "t1"}) is True
    key = "key-1"
    bucket = (fnv1a(key) >> 11) / 2.0**53
    assert is_control(key, bucket + 1e-9) and not is_control(key, bucket)
    assert not is_control(key, 0.0) and is_control(key, 1.0)
    holdout = Holdout(0.5)
    picks = [holdout.request_is_control({"query": f"q{i}"}) for i in range(400)]
    assert picks == [Holdout(0.5).request_is_control({"query": f"q{i}"}) for i in range(400)]
    assert 150 < sum(picks) < 250


@pytest.mark.parametrize("raw,fraction", [(None, 0.0), ("", 0.0), ("abc", 0.0), (" 0.05 ", 0.05), ("7", 1.0),
                                          ("-1", 0.0), ("nan", 0.0), ("inf", 1.0)])
def test_holdout_fraction_parsing(raw, fraction):
    assert holdout_fraction({} if raw is None else {"CRUX_OUTPUT_HOLDOUT": raw}) == fraction


def test_token_savings_quotes_both_arms_by_name():
    holdout = Holdout(1.0)
    for _ in range(4):
        holdout.control.append(400)
        holdout.treatment.append(300)
        holdout.compaction.append((100, 75))
    report = holdout.token_savings_payload()
    assert report["text"] == (
        "token_savings (holdout=1.000):\n"
        "  compaction (M3): 25.0% (95% CI 25.0\u201325.0%) \u00b7 n=4 \u2014 the token saving\n"
        "  net (all-shaped vs unshaped): 25.0% (95% CI 25.0\u201325.0%) \u00b7 control=4 reqs/1600 tok \u00b7 "
        "treatment=4 reqs/1200 tok \u2014 includes reversible's (M1) recall cost, so it can be negative")
    assert report["fields"]["net"]["reduction_pct"] == 25.0
    assert report["fields"]["compaction"] == {"n": 4, "reduction_pct": 25.0, "ci95_low_pct": 25.0,
                                              "ci95_high_pct": 25.0, "pretty_tokens": 400, "compact_tokens": 300}


def test_rings_keep_the_newest_5000_samples():
    holdout = Holdout(1.0)
    for i in range(5003):
        holdout.record({"i": i}, True, "x" * 8, {"v": i})
    assert len(holdout.control) == 5000 and len(holdout.compaction) == 5000 and len(holdout.treatment) == 0


def test_budget_limits_and_standing():
    assert [parse_limit(v) for v in ("500", " 7 ", "0", "", "x", "-3", None)] == [500, 7, None, None, None, None, None]
    assert parse_agent_budgets("alice:100, bob:0") == {"alice": 100, "bob": None}
    with pytest.raises(InvalidInput, match="'bob' is not name:tokens"):
        parse_agent_budgets("alice:100,bob")
    policy = BudgetPolicy.from_env({"CORECRUXD_SESSION_TOKEN_BUDGET": "1000", "CRUXSQL_SESSION_BUDGETS": "bob:0,eve:50"})
    assert [policy.limit_for(a) for a in ("alice", "bob", "eve")] == [1000, None, 50]
    assert [Standing("a", used, 1000).state for used in (0, 799, 800, 999, 1000)] == ["ok", "ok", "near", "near", "over"]
    assert Standing("a", 10**9, None).state == "ok"


def test_the_ledger_keeps_session_totals_and_daily_rows(tmp_path):
    with Store(tmp_path) as store:
        ledger = TokenLedger(store.db, BudgetPolicy(100))
        ledger.record("alice", 10, 30, 200, at_ns=1_780_000_000 * 10**9)
        ledger.record("alice", 5, 5, None, refused=True, at_ns=1_780_000_000 * 10**9)
        ledger.record(None, 1, 1)
        # the refused read costs the session nothing; the day's row keeps it
        assert ledger.session_payload("alice") == {
            "text": "session_token_usage: passport=alice used\u224840 of 100 tokens (40%) across 2 calls",
            "fields": {"passport": "alice", "used": 40, "tokens_in": 10, "tokens_out": 30, "declared_budget_in": 200,
                       "calls": 2, "estimator": "chars/4", "limit": 100, "pct": 40}}
        rows = store.db.execute("SELECT agent, day, calls, tokens_in, tokens_out, declared_budget_in, refused "
                                "FROM token_usage WHERE agent = 'alice'").fetchall()
        assert rows == [("alice", "2026-05-28", 2, 15, 35, 200, 1)]
        assert ledger.usage("__anon__").calls == 1


def test_agent_registry_follows_crux_rules():
    registry = AgentRegistry.from_pairs(f" alice:{'a' * 32}:acme , ,bob:{'b' * 32}")
    assert registry.authenticate("Bearer " + "a" * 32) == Identity("alice", "acme")
    assert registry.authenticate("Bearer " + "b" * 32) == Identity("bob", "default")
    assert registry.authenticate("Bearer " + "c" * 32) is None and registry.authenticate("a" * 32) is None
    with pytest.raises(InvalidInput, match="contained no valid name:token pairs"):
        AgentRegistry.from_pairs(" , ")
    with pytest.raises(InvalidInput, match="the token of agent 'eve' must be 32-256 characters"):
        AgentRegistry.from_pairs(f"alice:{'a' * 32},eve:short")
    with pytest.raises(InvalidInput, match="agent name 'e v' must be"):
        AgentRegistry.from_pairs(f"e v:{'a' * 32}")
    single = AgentRegistry.from_env({"CRUX_AGENT_TOKEN": "t" * 40})
    assert single.authenticate("Bearer " + "t" * 40) == Identity("default", "default")
    assert not AgentRegistry.from_env({})
