"""A Crux writer beside cruxsql writers, readers and an MCP server on one data directory, for a few
seconds (bounded): nothing either side acknowledged is lost, nothing is quarantined, and cruxsql's
view equals a replay of the final journal by Crux's rules (tests/support/crux_reference.py).

The Crux writer (tests/support/crux_writer.py) writes Crux's exact line sequences: two writes per line, a new
version's `supersede` line in a later write after a pause, `store_synced` single lines, and
compactions that rewrite and rename the journal.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

import cruxsql
from cruxsql.facts.view import iter_facts
from support.crux_reference import replay
from support.mcp_clients import server_env, stdio
from support.journal_files import journal_text

pytestmark = pytest.mark.slow

SECONDS = 8.0
SUPPORT = Path(__file__).resolve().parents[1] / "support"

# A write that fails is not acknowledged (and is not counted as lost). Every process counts the
# SQLITE_BUSY and inconsistent-read failures (KeyError on a row a read selected) it meets and prints them.
KNOWN_RACES = ("BusyError", "KeyError")
CRUXSQL_WRITER = r"""
import sys, time
import apsw
import cruxsql
data, seconds, ack_path = sys.argv[1], float(sys.argv[2]), sys.argv[3]
deadline = time.monotonic() + seconds
busy = 0
with cruxsql.open(data) as store, open(ack_path, "a") as ack:
    i = 0
    while time.monotonic() < deadline:
        try:
            fact = store.store("py", f"p{i % 4}", f"py {i}")
            ack.write(f"store {fact.fact_id}\n")
            if i % 5 == 1:  # ops Crux has none for: kept out of facts.jsonl
                store.set_horizon(fact.fact_id, "stable")
                store.reverify(fact.fact_id)
                ack.write(f"horizon {fact.fact_id}\n")
            if i % 7 == 3:  # noted first: a delete refused with SQLITE_BUSY may still be durable
                ack.write(f"try-delete {fact.fact_id}\n")
                store.delete(fact.fact_id)
                ack.write(f"delete {fact.fact_id}\n")
        except apsw.BusyError:
            busy += 1
        ack.flush()
        i += 1
        time.sleep(0.01)
print(busy)
"""

CRUXSQL_READER = r"""
import sys, time
import apsw
import cruxsql
data, seconds = sys.argv[1], float(sys.argv[2])
deadline = time.monotonic() + seconds
reads = 0
races = 0
while time.monotonic() < deadline:
    try:
        with cruxsql.open(data) as store:
            cruxsql.Recall(store).query_facts("crux py", top_k=50)
            reads += 1
    except (apsw.BusyError, KeyError):
        races += 1
    time.sleep(0.02)
print(reads, races)
"""


def journal_mentions(data: Path, fact_id: str) -> list[str]:
    return [line for line in journal_text(data).splitlines() if fact_id in line]


def _acks(path: Path) -> tuple[set[str], set[str], set[str], set[str], int]:
    """(stores acknowledged, deletes attempted, deletes acknowledged, horizons set and re-verified,
    compactions) of one writer."""
    stored, tried, deleted, horizons, compactions = set(), set(), set(), set(), 0
    for line in path.read_text().splitlines():
        kind, _, fact_id = line.partition(" ")
        {"store": stored, "try-delete": tried, "delete": deleted, "horizon": horizons}.get(kind, set()).add(fact_id)
        compactions += kind == "compacted"
    return stored, tried, deleted, horizons, compactions


def test_crux_and_cruxsql_share_a_live_directory(portal, tmp_path: Path) -> None:
    data = tmp_path / "data"
    with cruxsql.open(data) as store:
        store.store("seed", "k", "v")
    env = server_env({"PYTHONPATH": ":".join(sys.path)})
    crux_ack, py_ack = tmp_path / "crux.ack", tmp_path / "py.ack"
    procs = [
        subprocess.Popen([sys.executable, str(SUPPORT / "crux_writer.py"), str(data), str(SECONDS), str(crux_ack)],
                         env=env, stderr=subprocess.PIPE, text=True),
        subprocess.Popen([sys.executable, "-c", CRUXSQL_WRITER, str(data), str(SECONDS), str(py_ack)],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True),
        subprocess.Popen([sys.executable, "-c", CRUXSQL_READER, str(data), str(SECONDS)], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True),
    ]
    mcp_stored: set[str] = set()
    mcp_races = 0
    client = stdio(portal, data, "--agent", "a1")
    try:
        deadline = time.monotonic() + SECONDS
        i = 0
        while time.monotonic() < deadline:
            result = client.call("store_fact", {"entity": "mcp", "key": f"m{i % 3}", "value": f"mcp {i}"})
            if result.is_error:
                assert any(race in result.content[0].text for race in KNOWN_RACES), result.content[0].text
                mcp_races += 1
            else:
                mcp_stored.add(result.structured_content["fact_id"])
            answer = client.call("query_facts", {"query": "crux"})
            if answer.is_error:
                assert answer.content[0].text.startswith(tuple(
                    f"internal error in query_facts: {race}" for race in KNOWN_RACES)), answer.content[0].text
                mcp_races += 1
            i += 1
    finally:
        client.close()
    outputs = []
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        outputs.append(out)
    # counted, not failed: a store opened while other processes create or catch up the view can still meet
    # SQLITE_BUSY under heavy load (seen once in 243 opens); docs/concurrency.md names it
    print(f"busy/inconsistent reads: writer {outputs[1].strip()}, reader (passes, races) {outputs[2].strip()}, "
          f"mcp {mcp_races}")

    crux_stored, _, _, _, compactions = _acks(crux_ack)
    py_stored, py_tried, py_deleted, py_horizons, _ = _acks(py_ack)
    assert compactions >= 1 and len(crux_stored) > 20 and len(py_stored) > 20 and len(mcp_stored) > 5

    reference = replay(data / "facts.jsonl")
    assert reference.skipped_lines == []  # nothing in the journal that Crux would skip as corrupt
    assert list(data.glob("facts.jsonl.torn.*")) == []
    with cruxsql.open(data) as store:
        report = store.verify()
        assert report.ok, report.to_dict()
        view = {f.fact_id: f for f in iter_facts(store.db)}
    assert py_horizons and all(view[f].horizon_class == "stable" and view[f].reverified_at is not None
                               for f in py_horizons - py_tried if f in view)
    ref = reference.facts

    def shape(f):
        return (f.entity, f.key, f.value, f.version, f.supersedes, f.superseded_by, f.deleted, f.stored_at)

    assert {k: shape(f) for k, f in view.items()} == {k: shape(f) for k, f in ref.items()}
    # every acknowledged store is there; one whose delete was attempted is deleted, or gone after a compaction
    for source, ids in (("crux", crux_stored), ("cruxsql", py_stored - py_tried), ("mcp", mcp_stored)):
        for fact_id in ids:
            assert fact_id in ref and not ref[fact_id].deleted, (source, fact_id, journal_mentions(data, fact_id))
    assert py_deleted and all(ref[f].deleted for f in py_deleted if f in ref)  # gone, or kept as deleted
