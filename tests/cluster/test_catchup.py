"""A node's catch-up through the bulk path (cruxsql/cluster/mirror.py): far behind, it appends the stream's
accepted lines in large fsynced chunks and replays them in bulk; the result must be the one a node
mirroring the same messages one at a time reaches (same journal bytes, same view), and a node killed in
the middle must resume without losing or doubling a line. On a loopback NATS cluster, as test_cluster.py."""

from __future__ import annotations

import gc
import os
import random
import subprocess
import sys
from pathlib import Path

import apsw
import pytest

pytest.importorskip("nats")

from cruxsql.cluster import link as link_module  # noqa: E402
from cruxsql.cluster import mirror  # noqa: E402
from cruxsql.cluster.config import ClusterConfig  # noqa: E402
from cruxsql.cluster.generation import PartName, part_subject, publish_generation  # noqa: E402
from cruxsql.cluster.link import ClusterLink, scrub_subject, subject_prefix  # noqa: E402
from cruxsql.cluster.loopback import LoopbackCluster, server_binary  # noqa: E402
from cruxsql.cluster.node import bind  # noqa: E402
from cruxsql.cluster.store import ClusterStore  # noqa: E402
from cruxsql.facts import bulk  # noqa: E402
from cruxsql.facts.faults import CRASH_ENV  # noqa: E402
from support.mixed_journal import mixed_journal, present_text_index  # noqa: E402
from support.mixed_journal import tables as all_tables  # noqa: E402
from support.nats_cluster import nats_cluster  # noqa: E402,F401 (the module's loopback cluster)
from support.journal_files import journal_bytes

pytestmark = pytest.mark.slow

try:
    server_binary()
except Exception:  # pragma: no cover - the cluster extra is part of [test]
    pytest.skip("nats-server is not installed", allow_module_level=True)


@pytest.fixture
def small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sizes scaled down so that a few hundred messages cross every boundary: the bulk path from 50
    messages behind, fetched by a child process from 50 too, fetches of 97, journal chunks of 16 KiB, row
    writes every 64 lines."""
    monkeypatch.setattr(mirror, "BULK_FROM", 50)
    monkeypatch.setattr(link_module, "APART_FROM", 50)
    monkeypatch.setattr(mirror, "CHUNK_BYTES", 16 * 1024)
    monkeypatch.setattr(link_module, "FETCH_BATCH", 97)
    monkeypatch.setattr(bulk, "BATCH_LINES", 64)


@pytest.fixture
def bulk_catch_ups(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Each bulk catch-up's `defer` (its indexes deferred: the range outweighs the view), as it starts."""
    started: list[bool] = []

    class Counted(mirror._BulkSink):
        def __init__(self, *args, defer: bool) -> None:
            assert not gc.isenabled()  # the collector is paused for the whole bulk catch-up
            started.append(defer)
            super().__init__(*args, defer=defer)

    monkeypatch.setattr(mirror, "_BulkSink", Counted)
    return started


def publish_mixed(cluster: LoopbackCluster, group: str, seed: int = 11, events: int = 900,
                  generation: bool = True) -> int:
    """Publish support.mixed_journal's mixed journal (every op, chains, duplicates, latest-only control facts,
    consolidations, corrupt, blank and CRLF lines) as messages of 1-3 lines, with racing copies of store
    lines (same version, another id: the second is refused; a deleted copy first is no chain's head), a
    Raft log scrub filler every 200 messages, and half way (`generation`), a compaction's generation.
    Returns the stream's last sequence."""
    rng = random.Random(seed)
    lines = []
    for raw in mixed_journal(seed, events).split(b"\n")[:-1]:
        try:
            lines.append(raw.decode("utf-8"))
        except UnicodeDecodeError:
            continue  # a node publishes text: such a line never reaches a stream
    link = ClusterLink(cluster.urls, group)
    try:
        link.ensure_stream(3)
        i, n, rewritten = 0, 0, False
        while i < len(lines):
            take = rng.choice((1, 1, 1, 2, 3))
            message = lines[i:i + take]
            i += take
            payloads = ["".join(line + "\n" for line in message)]
            first = message[0]
            if first.startswith('{"op":"store",') and '"fact_id":"' in first:
                roll = rng.random()
                if roll < 0.3:  # after it: the same version under another id, refused
                    payloads.append(first.replace('"fact_id":"', f'"fact_id":"race{n}_', 1) + "\n")
                elif roll < 0.45 and '"deleted":false' in first:  # before it: a deleted copy, not a head
                    payloads.insert(0, first.replace('"fact_id":"', f'"fact_id":"dead{n}_', 1)
                                    .replace('"deleted":false', '"deleted":true', 1) + "\n")
            for payload in payloads:
                link.publish(f"{subject_prefix(group)}.multi", payload.encode("utf-8"), f"m{n}", None)
                n += 1
            if n and n % 200 == 0:
                link.publish(scrub_subject(group), os.urandom(64), f"scrub{n}", None)
            if generation and not rewritten and i > len(lines) // 2:
                # a compaction elsewhere: a generation cut short by a write (skipped), then a whole one
                # (the journal replaced by its bytes, the view rebuilt), then writes again
                link.publish(part_subject(group, PartName("cut", 1, 2)), b"", "cut-1", None)
                link.publish(f"{subject_prefix(group)}.multi", (lines[0] + "\n").encode(), f"m{n}", None)
                n += 1
                publish_generation(link, group, "".join(line + "\n" for line in lines[:300]).encode(),
                                   link.last_seq())
                rewritten = True
        return link.last_seq()
    finally:
        link.close()


def open_node(cluster: LoopbackCluster, data_dir: Path, group: str) -> ClusterStore:
    return ClusterStore(data_dir, bind(data_dir, ClusterConfig(cluster.urls, group, 3, data_dir.name)))


def catch_up_one_by_one(node: ClusterStore, until: int) -> None:
    """Mirror the messages up to `until` one catch-up each (never the bulk path, never two messages
    judged together: each head is read from the view)."""
    for seq in range(node.mirror.position(node).seq + 1, until + 1):
        with node.writer_lock():
            node.mirror.catch_up(node, until=seq)


def tables(db: apsw.Connection) -> dict[str, list]:
    """support/mixed_journal.py's `tables`, with the text index compared by the postings of the facts present."""
    out: dict[str, list] = all_tables(db)
    del out["recall_text"], out["recall_grams"]
    out["text index"] = list(present_text_index(db))
    return out


def assert_same_node(a: ClusterStore, b: ClusterStore) -> None:
    assert a.journal.path.read_bytes() == b.journal.path.read_bytes()
    assert a.mirror.position(a) == b.mirror.position(b)
    ta, tb = tables(a.db), tables(b.db)
    assert ta.keys() == tb.keys()
    for name in ta:
        assert ta[name] == tb[name], f"table {name} differs"


def test_a_bulk_catch_up_ends_with_the_journal_and_view_of_one_message_at_a_time(nats_cluster, tmp_path,
                                                                                 small_batches, bulk_catch_ups):
    # opened before the stream fills: the reference mirrors it one message at a time; the other two go
    # one message at a time until a third (two thirds) of it, then in bulk: the range outweighs the view
    # (its indexes deferred), or the view the range
    early = [open_node(nats_cluster, tmp_path / name, "bulkeq") for name in ("reference", "third", "two-thirds")]
    try:
        last = publish_mixed(nats_cluster, "bulkeq")
        reference, third, two_thirds = early
        catch_up_one_by_one(reference, last)
        assert bulk_catch_ups == []
        counts = reference.counts()
        assert counts["facts"] > 100 and counts["journal_events"] > 300, counts  # after the generation
        skipped = reference.db.execute("SELECT count(*) FROM journal_events WHERE applied = 0").get
        corrupt = reference.db.execute("SELECT count(*) FROM journal_corrupt_lines").get
        assert skipped > 10 and corrupt > 5, (skipped, corrupt)
        published = sum(len(mirror.split_lines(m.payload)) for m in reference.link.messages(1, last)
                        if m.subject.endswith(".multi"))
        assert reference.journal.path.read_bytes().count(b"\n") < published  # racing copies were refused
        fresh = open_node(nats_cluster, tmp_path / "fresh", "bulkeq")  # an empty view: heads followed in memory
        early.append(fresh)
        assert_same_node(reference, fresh)
        for node, at in ((third, last // 3), (two_thirds, last * 2 // 3)):
            catch_up_one_by_one(node, at)
            with node.writer_lock():
                node.mirror.catch_up(node)
            assert_same_node(reference, node)
        assert bulk_catch_ups == [True, True, False]
    finally:
        for node in early:
            node.close()


CHILD = """
import sys
from cruxsql.cluster import link, mirror
from cruxsql.cluster.store import open_cluster_store
mirror.BULK_FROM = 50
mirror.CHUNK_BYTES = 16 * 1024
link.FETCH_BATCH = 97
link.APART_FROM = 50
open_cluster_store(sys.argv[1]).close()
"""


@pytest.mark.parametrize("step", ["mirror-after-append", "mirror-after-position", "replay-before-commit"])
def test_a_node_killed_during_a_bulk_catch_up_resumes_it_without_losing_or_doubling_a_line(nats_cluster, tmp_path,
                                                                                         small_batches, step):
    group = f"bulkcrash-{step}"
    last = publish_mixed(nats_cluster, group, seed=5, events=700, generation=False)
    reference = open_node(nats_cluster, tmp_path / "ref", group)
    try:
        data_dir = tmp_path / "node"
        bind(data_dir, ClusterConfig(nats_cluster.urls, group, 3, "node"))
        env = {**os.environ, CRASH_ENV: step}
        crashed = subprocess.run([sys.executable, "-c", CHILD, str(data_dir)], env=env, capture_output=True,
                                 timeout=60)
        assert crashed.returncode == -9, crashed.stderr.decode()[-2000:]
        journal = journal_bytes(data_dir)
        if step == "replay-before-commit":  # every line appended, the view's one transaction lost
            assert journal == reference.journal.path.read_bytes()
        else:
            assert 0 < len(journal) < len(reference.journal.path.read_bytes())  # killed part-way
        resumed = open_node(nats_cluster, data_dir, group)
        if step != "replay-before-commit":
            assert len(journal) < len(journal_bytes(data_dir))  # resumed: the rest appended
        assert resumed.mirror.position(resumed).seq == last
        assert_same_node(reference, resumed)
        resumed.close()
    finally:
        reference.close()


def test_the_collector_paused_for_a_bulk_catch_up_is_restored_as_it_was():
    assert gc.isenabled()
    with pytest.raises(RuntimeError):
        with mirror.collector_paused():
            assert not gc.isenabled()
            raise RuntimeError("a failed catch-up")
    assert gc.isenabled()
    gc.disable()
    try:
        with mirror.collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # off before: left off
    finally:
        gc.enable()
