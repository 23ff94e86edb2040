"""The `--tools` sets and their `tools/list` cost, as `cruxsql mcp --help` and the docs state them, are
computed from the tools (a tool added, made core or given a longer description changes them)."""

from __future__ import annotations

import re
from pathlib import Path

from cruxsql.mcp.server import tool_sets

ROOT = Path(__file__).resolve().parents[2]


def test_the_help_states_the_core_set_and_its_cost(cli) -> None:
    sets = tool_sets()
    core, core_tokens = sets["core"]
    assert {"recall", "store_facts", "store_fact", "query_facts"} <= set(core)
    help_text = " ".join(cli("mcp", "--help").output.split())
    assert f"core: {', '.join(core)} (tools/list ≈ {core_tokens:,} tokens; all {len(sets['all'][0])} tools: " \
           f"≈ {sets['all'][1]:,})" in help_text


def test_the_docs_state_the_figures_the_code_computes() -> None:
    sets = tool_sets()
    core_tokens, all_tokens = f"{sets['core'][1]:,}", f"{sets['all'][1]:,}"
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    agents = " ".join((ROOT / "docs" / "agents.md").read_text(encoding="utf-8").split())
    budgets = " ".join((ROOT / "docs" / "budgets.md").read_text(encoding="utf-8").split())
    assert re.search(r"only the seven most used \(≈ ([\d,]+) tokens", readme)[1] == core_tokens  # type: ignore[index]
    assert len(sets["core"][0]) == 7
    assert f"(≈ {core_tokens} tokens of `tools/list` instead of ≈ {all_tokens} for all thirty-seven" in agents
    assert len(sets["all"][0]) == 37
    assert f"≈ {all_tokens} tokens for all 37 tools, ≈ {core_tokens} with `--tools core` (7 tools)" in budgets
