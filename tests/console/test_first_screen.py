"""The console shows data first: what an operator sees in the first viewport (1400x1000) of each page,
in Debian's Chromium driven by Playwright against a running `cruxsql console`."""

from __future__ import annotations

import re

import pytest

from support.browser import BROWSER_MARKS, CANNED, browser_console  # noqa: F401 (fixture)
from support.console import cli, console_store  # noqa: F401 (fixture)

pytestmark = [pytest.mark.slow, *BROWSER_MARKS]

VIEWPORT_HEIGHT = 1000


def _top(locator) -> float:
    return locator.bounding_box()["y"]


def _bottom(locator) -> float:
    box = locator.bounding_box()
    return box["y"] + box["height"]


def test_a_table_opens_on_its_rows_newest_first(browser_console):
    console, page, data_dir, _ = browser_console
    page.goto(console.url + "cruxsql/facts")
    first_row = page.locator("table.rows-and-columns tbody tr").first
    assert _bottom(first_row) < VIEWPORT_HEIGHT, "the first row is below the first screen"
    newest = cli(data_dir, "sql", "SELECT max(stored_at_ns) FROM facts", "--csv").stdout.split()[-1]
    assert first_row.locator("td.col-stored_at_ns").inner_text() == newest
    assert "sorted by stored_at_ns descending" in page.inner_text("h3")


def test_column_documentation_is_folded_one_click_away(browser_console):
    console, page, _, _ = browser_console
    page.goto(console.url + "cruxsql/facts")
    fold = page.locator("details.cruxsql-column-docs")
    assert fold.count() == 1 and fold.get_attribute("open") is None
    assert not page.locator("dl.column-descriptions").is_visible()
    assert fold.locator("summary").inner_text() == "Column documentation (30 columns)"
    fold.locator("summary").click()
    docs = page.locator("dl.column-descriptions")
    assert docs.is_visible() and "the fact's id" in docs.inner_text()


def test_canned_queries_show_their_form_and_rows_and_fold_the_sql(browser_console):
    console, page, _, ids = browser_console
    for name, params in CANNED.items():
        params = {"fact_id": ids["head"]} if params is None else params
        page.goto(f"{console.url}cruxsql/{name}?" + "&".join(f"{k}={v}" for k, v in params.items()))
        assert page.locator("pre#sql-query, textarea#sql-editor").count() == 0, f"{name}: SQL shown"
        assert _bottom(page.locator("form.sql input[type=submit]")) < VIEWPORT_HEIGHT, name
        assert _top(page.locator("table.rows-and-columns tbody tr").first) < VIEWPORT_HEIGHT, name
    page.click("span.show-hide-sql a")
    assert "FROM" in page.inner_text("pre#sql-query").upper()


def test_the_index_lists_no_empty_memory_database(browser_console):
    console, page, _, _ = browser_console
    page.goto(console.url)
    assert [a.inner_text() for a in page.locator("h2 a").all()] == ["cruxsql"]
    assert "_memory" not in page.inner_text("body")


def test_the_dashboard_gives_the_journal_size_in_a_readable_unit(browser_console):
    console, page, data_dir, _ = browser_console
    size = int(cli(data_dir, "sql", "SELECT byte_offset + byte_length FROM journal_events ORDER BY line_no DESC "
                                    "LIMIT 1", "--csv").stdout.split()[-1])
    page.goto(console.url + "-/dashboards/memory")
    card = page.locator("#card-journal-size")
    card.locator("text=/KiB|MiB|B$/").first.wait_for(timeout=20000)
    text = card.inner_text()
    assert text.splitlines()[0].strip() == "Journal size"
    expected = f"{size} B" if size < 1024 else f"{size / 1024:.1f} KiB"
    assert re.search(r"\d[\d.]* (B|KiB|MiB|GiB)", text).group(0) == expected
    assert _bottom(card) < VIEWPORT_HEIGHT
