"""The console in Debian's Chromium, driven by Playwright: the skip marks of a machine without them, the
canned queries' parameters, and a page on a running console over the shared console store."""

from __future__ import annotations

import importlib.util
import os

import pytest

from support.console import console_store, running_console  # noqa: F401 (fixture)

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]

BROWSER_MARKS = [
    pytest.mark.skipif(importlib.util.find_spec("datasette") is None,
                       reason="Datasette is not installed (pip install -e '.[test]' brings it)"),
    pytest.mark.skipif(importlib.util.find_spec("playwright") is None,
                       reason="Playwright is not installed (pip install -e '.[test]' brings it)"),
    pytest.mark.skipif(not os.access(CHROMIUM, os.X_OK),
                       reason=f"no Chromium at {CHROMIUM} (apt-get install chromium; .ci/run does)"),
]

CANNED = {
    "live_facts_of_tenant": {"tenant": "acme"},
    "fact_history": None,  # filled with a real fact id
    "actor_writes": {"actor": "ops", "since": "2025-01-01", "until": ""},
    "retention_candidates": {"days": "30", "tenant": ""},
    "active_legal_holds": {},
    "erasure_reports": {},
    "corrupt_journal_lines": {},
    "stale_facts": {"horizon_class": ""},
}


@pytest.fixture(scope="module")
def browser_console(console_store):
    from playwright.sync_api import sync_playwright

    data_dir, ids = console_store
    with running_console(data_dir) as console, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        yield console, page, data_dir, ids
        browser.close()
