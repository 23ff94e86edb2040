"""The benchmarks behind docs/performance.md's figures still run, print consistent rows, and refuse bad input.

Each runs as a user runs it (`python tools/bench/<name>.py`, in its own process) at the smallest size
that exercises every row, so a change to the code they measure cannot leave them broken until the
next time someone needs a figure. What is timed is not asserted (these machines are shared); what
follows from the arithmetic is: a ratio is the quotient of the two columns beside it (within what their
printed digits allow), a lower bound is not above what it bounds, a percentile is not below the median,
the counts are those of the journal asked for; and recall's answers equal both of its references.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

import cruxsql
from cruxsql.facts import replay
from cruxsql.facts.store import StoreRequest

BENCH = Path(__file__).resolve().parents[2] / "tools" / "bench"
NUMBER = r"[\d,]+(?:\.\d+)?"


def run_bench(script: str, *args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(BENCH / script), *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, check=False)


def printed(output: str, label: str) -> list[tuple[float, float]]:
    """(value, half its last printed digit) of each number printed after `label` at the start of a row."""
    match = re.search(rf"^{re.escape(label)}((?:\s+{NUMBER}x?)+)\s*$", output, re.M)
    assert match, f"no row {label!r} in:\n{output}"
    numbers = [n.replace(",", "").rstrip("x") for n in match.group(1).split()]
    return [(float(n), 0.5 * 10.0 ** -len(n.partition(".")[2])) for n in numbers]


def figures(output: str, label: str) -> list[float]:
    return [value for value, _ in printed(output, label)]


def assert_ratio(output: str, label: str) -> None:
    """The row's third number is its first over its second, as far as their printed digits tell."""
    (ours, d_ours), (base, d_base), (ratio, d_ratio) = printed(output, label)[:3]
    low = (ours - d_ours) / (base + d_base) - d_ratio
    high = (ours + d_ours) / (base - d_base) + d_ratio if base > d_base else math.inf
    assert low <= ratio <= high, f"{label}: {ratio} is not {ours} / {base}"


@pytest.mark.slow
def test_bench_facts_prints_every_row_with_ratios_of_its_columns(tmp_path):
    result = run_bench("bench_facts.py", "--events", "1000", "--stores", "20", "--batches", "2", "--batch-size", "50",
                       "--row-path-events", "200", "--workdir", str(tmp_path / "work"),
                       "--json-dir", str(tmp_path / "json"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "journal: 1,000 events" in out
    for label in ("rebuild throughput, events/s (vs json parse)", "rebuild floor: read + decode, events/s",
                  "rebuild floor: decode + bare inserts, events/s", "store() latency p50, ms (vs write+fsync)",
                  "store() latency p95, ms (vs write+fsync)", "store_batch of 50, facts/s (vs write+fsync)"):
        assert_ratio(out, label)
    decode, _, _ = figures(out, "rebuild floor: read + decode, events/s")
    floor, _, _ = figures(out, "rebuild floor: decode + bare inserts, events/s")
    assert floor < decode  # the inserts' time is added to the decode's
    p50 = figures(out, "store() latency p50, ms (vs write+fsync)")
    p95 = figures(out, "store() latency p95, ms (vs write+fsync)")
    assert p95[0] >= p50[0] and p95[1] >= p50[1]
    figures(out, "rebuild of 200 events, s (vs row-by-row path)")
    (syncs,) = figures(out, "syncs in a store_batch call (journal + SQLite)")
    (paced,) = figures(out, "  in a call after a 0.5 s pause")
    assert syncs >= 1.0 and paced >= 1.0  # at least the journal's own fsync in every call
    summary = json.loads((tmp_path / "json" / "facts-1000.json").read_text())
    assert summary["events"] == 1000 and summary["store_batch_syncs"] == pytest.approx(syncs, abs=0.05)


def test_bench_facts_times_the_decoders_side_by_side(tmp_path):
    checkout = Path(__file__).resolve().parents[2]  # this checkout against itself: the rows, not the speed
    result = run_bench("bench_facts.py", "--events", "300", "--decoders-vs", str(checkout), "--rounds", "1",
                       "--workdir", str(tmp_path / "work"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "300 lines of" in out
    (json_rate, _), (one, _) = printed(out, "json.loads")
    assert one == 1.0
    for label in ("msgspec.json.decode (untyped)", "bulk decoder, this checkout", f"bulk decoder, {checkout}"):
        (rate, d_rate), (ratio, d_ratio) = printed(out, label)
        assert abs(ratio - rate / json_rate) <= d_ratio + (rate + d_rate) / (json_rate - 0.5) - rate / json_rate


@pytest.mark.slow
def test_bench_compaction_reports_what_the_compaction_wrote(tmp_path):
    result = run_bench("bench_compaction.py", "--events", "2000", "--no-rebuild-baseline",
                       "--workdir", str(tmp_path / "work"), "--json-dir", str(tmp_path / "json"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    figures(out, "time (s)")
    match = re.search(rf"journal ({NUMBER}) -> ({NUMBER}) bytes, ({NUMBER}) -> ({NUMBER}) lines; retained ({NUMBER}), "
                      rf"dropped ({NUMBER}), tombstones ({NUMBER})", out)
    assert match, out
    before, after, lines_before, lines_after, retained, dropped, tombstones = (
        int(g.replace(",", "")) for g in match.groups())
    assert after < before  # the deleted facts' values are gone
    assert lines_before == 2000
    assert dropped == tombstones > 0
    assert lines_after >= retained + tombstones  # (and a provenance line per live consolidation)
    assert list(tmp_path.joinpath("work").iterdir()) == []  # its scratch store is removed
    report = json.loads((tmp_path / "json" / "compaction-2000.json").read_text())["compact"]["report"]
    assert (report["facts_retained"], report["facts_dropped"], report["bytes_after"]) == (retained, dropped, after)


@pytest.mark.slow
def test_bench_recall_answers_match_both_references(tmp_path):
    # The benchmark stops with MISMATCH when cruxsql's answers differ from the FTS5 reference or the scan.
    result = run_bench("bench_recall.py", "--sizes", "400", "--queries", "2", "--scan-queries", "1",
                       "--workdir", str(tmp_path / "work"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    goals = re.findall(r"^\s+400\s+(.+?)\s+" + NUMBER + r" \(max.*goal (.+)$", result.stdout, re.M)
    kinds = [kind for kind, _ in goals]
    assert kinds == ["memory_view, no entity", "known_at, one term (first + 9)", "known_at, first after a rebuild",
                     "term under 3 characters"], result.stdout
    assert (tmp_path / "work" / "n400" / "facts.jsonl").is_file()  # --workdir keeps the store for the next run


@pytest.mark.slow
def test_bench_fact_recall_names_its_slowest_queries(tmp_path):
    result = run_bench("bench_fact_recall.py", "--sizes", "1000", "--dense-sizes", "", "--per-kind", "2",
                       "--slowest", "3", "--workdir", str(tmp_path / "work"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert re.search(r"^rebuild [\d.]+ s wall / [\d.]+ s CPU, of which word postings .* CPU \(\d+%\)$", result.stdout,
                     re.M), result.stdout
    lists = re.findall(r"slowest `recall` \(bm25\) queries, ms wall / CPU:\n((?:- .*\n)+)", result.stdout)
    assert len(lists) == 2, result.stdout                      # the dev set and the held-out set
    for listed in lists:
        walls = [float(line.split()[1]) for line in listed.splitlines()]
        assert len(walls) == 3 and walls == sorted(walls, reverse=True), listed


@pytest.mark.slow
def test_bench_progress_times_the_first_frame_of_a_rebuild(tmp_path):
    data = tmp_path / "data"
    with cruxsql.open(data) as store:
        for b in range(20):
            store.store_batch([StoreRequest(f"svc:{b}:{i}", "status", f"deployed {i}") for i in range(100)])
    # A shorter journal is replayed row by row, which draws no bar (nothing to wait for).
    assert (data / "facts.jsonl").stat().st_size > 4 * replay.ROW_PATH_MAX_BYTES
    result = run_bench("bench_progress.py", "rebuild", "--data-dir", str(data), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    bar, floor, _ = figures(result.stdout, "first progress bar frame, s (vs --help)")
    assert 0 < bar < 60 and floor > 0
    assert_ratio(result.stdout, "first progress bar frame, s (vs --help)")


@pytest.mark.slow
@pytest.mark.parametrize("script, args, message", [
    ("bench_facts.py", ["--events", "0"], "--events must be 1 or more, not 0"),
    ("bench_facts.py", ["--workdir", "{file}/x"], "Not a directory"),
    ("bench_facts.py", ["--json-dir", "{file}"], "--json-dir"),
    ("bench_compaction.py", ["--events", "-5"], "--events must be 1 or more, not -5"),
    ("bench_compaction.py", ["--workdir", "{file}/x"], "Not a directory"),
    ("bench_compaction.py", ["--from-store", "{tmp}/nowhere"], "no facts.jsonl in it"),
    ("bench_compaction.py", ["--code", "{tmp}"], "not a cruxsql checkout"),
    ("bench_compaction.py", ["--from-store", "{empty}"], "its journal holds no facts to compact"),
    ("bench_recall.py", ["--sizes", "many"], "expected comma-separated fact counts, not 'many'"),
    ("bench_recall.py", ["--sizes", "1,000"], "each fact count must be 1 or more, not 0 (commas separate counts"),
    ("bench_recall.py", ["--scan-queries", "0"], "--scan-queries must be 1 or more, not 0"),
    ("bench_recall.py", ["--workdir", "{file}/x"], "Not a directory"),
    ("bench_recall.py", ["--short-only"], "--short-only needs --workdir"),
    ("bench_fact_recall.py", ["--slowest", "-1"], "--slowest must be 0 or more, not -1"),
])
def test_bad_input_is_one_line_naming_it(tmp_path, script, args, message):
    (tmp_path / "a-file").write_text("")
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "facts.jsonl").write_text("")
    args = [a.format(file=tmp_path / "a-file", tmp=tmp_path, empty=tmp_path / "empty") for a in args]
    result = run_bench(script, *args, cwd=tmp_path, timeout=60)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert message in result.stderr.strip().splitlines()[-1]


@pytest.mark.slow
def test_bench_progress_says_why_no_bar_came(tmp_path):
    result = run_bench("bench_progress.py", "rebuild", "--data-dir", str(tmp_path / "nowhere"), cwd=tmp_path)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("no progress bar from ") and "exited with code 1" in line and "no cruxsql store" in line


@pytest.mark.slow
def test_bench_agent_tokens_reports_the_session_within_its_budgets(tmp_path):
    result = run_bench("bench_agent_tokens.py", "--facts", "100", "--queries", "5", "--session-budget", "60000",
                       "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    figures = json.loads(result.stdout)
    crux = figures["cruxsql"]
    assert [k for k in crux if "@" in k and not k.startswith("document")] == [
        "query_facts@50", "query_facts@200", "query_facts@1000", "recall@50", "recall@200", "recall@1000"]
    assert crux["query_facts@1000"]["calls"] == 5
    for budget in (50, 200, 1000):               # recall: the asked-for fact first or near it, never past the budget
        row = crux[f"recall@{budget}"]
        assert row["calls"] == 5 and row["overshooting_calls"] == 0 and row["max_overshoot"] <= 0, row
        assert row["calls_received_over_budget"] == 0, row       # the whole MCP result within the budget
        assert row["recall_at_5"] == 1.0 > crux[f"query_facts@{budget}"]["recall_at_5"], row
        # query_facts: below the least CRC-v1 envelope (~240 tokens) compact lines, never past the budget
        assert crux[f"query_facts@{budget}"]["overshooting_calls"] == 0, crux[f"query_facts@{budget}"]
    # every asked-for fact comes whole (parsed from recall's lines), and the facts are most of what is received
    assert crux["recall@50"]["tokens_per_relevant_fact"] == crux["recall@50"]["tokens_per_call"]
    for budget in (200, 1000):
        assert crux[f"recall@{budget}"]["content_share_of_received"] >= 0.75, crux[f"recall@{budget}"]
    assert crux["document query@200"]["overshooting_calls"] == 0 and crux["document query@200"]["recall_at_5"] == 1.0
    assert crux["workspace"]["outline_share_of_full_read"] <= 0.10
    assert crux["session"]["used"] <= 60000 and crux["session"]["overshoot"] == 0
    assert "skipped" in figures["server-memory"]          # no --memory-server: its column is skipped, said so
