"""Take the console's screenshots: a demo store of 60 days, the console, headless Chromium at 1400x1000.

    python tools/console_screenshot.py                 # writes docs/console/<page>.png, one per page
    python tools/console_screenshot.py --keep DIR      # also keep the demo data directory in DIR

Each page is shot as an operator first sees it (the first viewport); the dashboard whole.

Needs Debian's chromium at /usr/bin/chromium and `pip install -e '.[test]'` (Datasette, Playwright).
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from cruxsql.facts import codec, timestamps
from cruxsql.facts.codec import Fact

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]
DAY_NS = 86_400 * 10**9
PAGES = {  # file name -> (path, what to wait for, whole page)
    "index": ("", "h2 a", False),
    "database": ("cruxsql", "ul.cruxsql-tables", False),
    "facts-table": ("cruxsql/facts", "table.rows-and-columns tbody tr", False),
    "journal-events-table": ("cruxsql/journal_events", "table.rows-and-columns tbody tr", False),
    "canned-query": ("cruxsql/live_facts_of_tenant?tenant=acme", "table.rows-and-columns tbody tr", False),
    "canned-query-retention": ("cruxsql/retention_candidates?days=30&tenant=", "form.sql", False),
    "dashboard": ("-/dashboards/memory", "#card-journal-growth svg .role-mark path", True),
}


def demo_journal(path: Path, days: int = 60, seed: int = 3) -> None:
    """Stores, supersedes and deletes over the last `days` days in three tenants, busier on weekdays."""
    rng = random.Random(seed)
    now = timestamps.now_ns()
    chains: dict[tuple[str, str, str], tuple[str, int]] = {}
    live: list[str] = []
    with open(path, "w", encoding="utf-8") as fh:
        for day in range(days, 0, -1):
            start = now - day * DAY_NS
            weekday = (start // DAY_NS + 4) % 7 < 5
            for i in range(rng.randint(30, 70) if weekday else rng.randint(5, 15)):
                at = start + rng.randrange(DAY_NS)
                if live and rng.random() < 0.08:
                    fh.write(codec.encode_event(codec.DeleteEvent(live.pop(rng.randrange(len(live))),
                                                                  timestamps.format_event_time(at))) + "\n")
                    continue
                tenant = rng.choices(("acme", "globex", "initech"), (5, 3, 1))[0]
                entity = rng.choice(("svc:", "incident:", "__ops::", "bench:", "user:")) + str(rng.randrange(40))
                key = rng.choice(("owner", "status", "region", "runbook"))
                prev = chains.get((tenant, entity, key))
                fact = Fact(fact_id=f"f_{rng.getrandbits(128):032x}", tenant_hash=tenant, entity=entity, key=key,
                            value=f"{key} of {entity} #{i}", confidence=codec.to_f32(rng.choice((0.7, 0.9, 1.0))),
                            stored_at=at, tokens=6, version=prev[1] + 1 if prev else 1,
                            supersedes=prev[0] if prev else None, horizon_class=codec.default_horizon_for_entity(entity),
                            actor=rng.choice(("claude", "codex", "ops")))
                fh.write(codec.encode_event(codec.StoreEvent(fact)) + "\n")
                if prev:
                    fh.write(codec.encode_event(codec.SupersedeEvent(prev[0], fact.fact_id,
                                                                     timestamps.format_event_time(at))) + "\n")
                chains[(tenant, entity, key)] = (fact.fact_id, fact.version)
                live.append(fact.fact_id)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, default=None)
    parser.add_argument("--output", type=Path, default=ROOT / "docs" / "console",
                        help="The folder the PNGs go to (default: docs/console).")
    args = parser.parse_args()
    data_dir = args.keep or Path(tempfile.mkdtemp()) / "data"
    data_dir.mkdir(parents=True, exist_ok=True)
    demo_journal(data_dir / "facts.jsonl")
    env = {**os.environ, "CRUXSQL_DATA_DIR": str(data_dir)}
    proc = subprocess.Popen([sys.executable, "-m", "cruxsql", "console", "--port", "0"], stdout=subprocess.PIPE,
                            text=True, env=env)
    try:
        url = proc.stdout.readline().split()[-1]
        from playwright.sync_api import sync_playwright

        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_FLAGS)
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            args.output.mkdir(parents=True, exist_ok=True)
            for name, (path, ready, whole) in PAGES.items():
                page.goto(url + path)
                page.wait_for_selector(ready, timeout=30000)
                page.wait_for_timeout(500)
                page.screenshot(path=str(args.output / f"{name}.png"), full_page=whole)
            browser.close()
        print(f"wrote {len(PAGES)} screenshots to {args.output}")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait()


if __name__ == "__main__":
    main()
