"""The console in a real browser: Debian's Chromium driven by Playwright against a running console."""

from __future__ import annotations

import pytest

from cruxsql.console import contract

from support.browser import BROWSER_MARKS, CANNED, browser_console  # noqa: F401 (fixture)
from support.console import cli, console_store  # noqa: F401 (fixture)

pytestmark = [pytest.mark.slow, *BROWSER_MARKS]


def test_index_lists_the_documented_tables_with_descriptions(browser_console):
    console, page, _, _ = browser_console
    page.goto(console.url + "cruxsql")
    assert page.inner_text("h1").startswith("cruxsql view")
    assert "The materialised view of the fact journal" in page.inner_text(".metadata-description")
    guide = page.locator("ul.cruxsql-tables li").all_inner_texts()
    assert guide == [f"{r.name} ({r.kind}): {r.description}" for r in contract.VIEW_RELATIONS]
    tables = page.locator("div.db-table h3 a").all_inner_texts()
    assert {"facts", "journal_events", "journal_event_facts", "journal_corrupt_lines"} <= set(tables)
    assert "recall_grams" not in tables  # internal tables are hidden
    page.goto(console.url + "cruxsql/journal_events")
    assert "One row per applied journal line." in page.inner_text(".metadata-description")
    page.goto(console.url + "cruxsql/facts")
    header = page.locator("th.col-stored_at_ns")
    assert header.count() == 1


def test_each_canned_query_renders_rows(browser_console):
    console, page, _, ids = browser_console
    for name, params in CANNED.items():
        params = {"fact_id": ids["head"]} if params is None else params
        query = "&".join(f"{k}={v}" for k, v in params.items())
        page.goto(f"{console.url}cruxsql/{name}?{query}")
        rows = page.locator("table.rows-and-columns tbody tr")
        assert rows.count() >= 1, f"{name} rendered no rows"
    page.goto(f"{console.url}cruxsql/active_legal_holds")
    assert page.locator("table.rows-and-columns tbody td.col-reason").first.inner_text() == "litigation 17"


def test_a_write_through_the_cli_appears_on_reload(browser_console):
    console, page, data_dir, _ = browser_console
    page.goto(f"{console.url}cruxsql/live_facts_of_tenant?tenant=acme")
    assert "written-from-the-cli" not in page.inner_text("table.rows-and-columns")
    cli(data_dir, "store", "svc", "note", "written-from-the-cli", "--tenant", "acme")
    page.reload()
    assert "written-from-the-cli" in page.inner_text("table.rows-and-columns")


def test_the_dashboard_renders_its_charts(browser_console):
    console, page, data_dir, _ = browser_console
    live = cli(data_dir, "sql", "SELECT count(*) FROM live_facts", "--csv").stdout.split()[-1]
    page.goto(console.url + "-/dashboards/memory")
    page.wait_for_selector("#card-stored-per-day svg .mark-rect path, #card-stored-per-day canvas", timeout=20000)
    for chart in ("stored-per-day", "fact-states", "age-by-horizon", "events-by-op", "journal-growth"):
        card = page.locator(f"#card-{chart}")
        card.locator("svg, canvas").first.wait_for(timeout=20000)
        marks = card.locator("svg .role-mark path, svg .role-mark line, svg .role-mark rect")
        assert marks.count() > 0, f"{chart}: no marks drawn"
    assert page.locator("#card-live-facts").inner_text().split()[-1] == live
    # the one stale live fact (volatile, stored in 2025) is drawn faded against its horizon
    assert page.locator('#card-age-by-horizon svg .role-mark path[opacity="0.35"]').count() == 1
