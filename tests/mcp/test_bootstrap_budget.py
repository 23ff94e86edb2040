"""`get_bootstrap` honours its token_budget through the real `cruxsql mcp` process (Crux's greedy fill:
the best fact always, then each next one while it fits; then the leading lines whose whole answer fits
the budget on the wire, the first always), not only through the Python API."""

from __future__ import annotations


import pytest

import cruxsql
from cruxsql.recall import bootstrap_seed

pytestmark = pytest.mark.slow

# five 40-byte values (10 tokens each), ranked by confidence: v0 first
VALUES = [f"bootstrap page {i} ".ljust(40, "x") for i in range(5)]
# (the topic is stored normalised: `docs` -> `doc`)
# token_budget -> how many of them come back: Crux's greedy fill (10, 20 | 30 > 25; the first always; 40
# used up: 2, 1, 5 at 80), cut to what fits whole (a line and the MCP frame are ~30 tokens): 1, 1, 3; 1000: all
RETURNED = {None: 5, 25: 1, 5: 1, 80: 3, 1000: 5}


@pytest.fixture(scope="module")
def client(mcp_client, tmp_path_factory: pytest.TempPathFactory):
    data_dir = tmp_path_factory.mktemp("bootstrap") / "data"
    with cruxsql.open(data_dir) as store:
        for i, value in enumerate(VALUES):
            bootstrap_seed.seed(store, "docs", f"page{i}", "text", value, confidence=0.9 - i / 10)
    return mcp_client(data_dir, "--agent", "alice")


@pytest.mark.parametrize("budget", list(RETURNED))
def test_get_bootstrap_returns_what_the_budget_holds(client, budget: int | None) -> None:
    arguments = {"topic": "docs"} if budget is None else {"topic": "docs", "token_budget": budget}
    expected = [f"[__bootstrap__::doc:page{i}] text = {VALUES[i]}" for i in range(RETURNED[budget])]
    assert client.text("get_bootstrap", arguments).splitlines() == expected
