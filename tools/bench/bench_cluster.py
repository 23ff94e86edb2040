"""Cluster mode benchmark on loopback: a 3-server NATS JetStream cluster (R3) and 3 cruxsql nodes, each
figure beside a single-node cruxsql baseline measured in the same run.

    python tools/bench/bench_cluster.py                          # 300 writes, 100,000-event catch-up
    python tools/bench/bench_cluster.py --catchup-events 20000   # quicker
    python tools/bench/bench_cluster.py --catchup-only           # only the catch-up row

Rows: store() latency p50/p95 (cluster vs a local store, interleaved call by call); throughput with
1/4/16 concurrent writers spread over the nodes (vs the same writers on one local store); catch-up time
of a node that was down for N events (vs a local rebuild of the same journal); failover time after
SIGKILL of the stream leader (the longest gap between acknowledged writes across the kill, vs the longest
gap before it); a ~1 MB document's ingest on one node and the time until a search on another finds it
(vs the same ingest on a single-node store; `--documents-only` for just these rows); the seconds until
no file under any server's storage directory (Raft logs included) holds an erased message's bytes, with
cruxsql's Raft log scrub vs left to JetStream's own compaction timer (`--raft-scrub-only`: just this row,
which waits minutes for its baseline).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import cruxsql  # noqa: E402
from cruxsql.cluster.config import ClusterConfig  # noqa: E402
from cruxsql.cluster.link import ClusterLink, scrub_subject, subject_prefix  # noqa: E402
from cruxsql.cluster.loopback import LoopbackCluster  # noqa: E402
from cruxsql.cluster.node import bind  # noqa: E402
from cruxsql.cluster.raftlog import files_holding, scrub_raft_logs  # noqa: E402
from cruxsql.cluster.store import ClusterStore  # noqa: E402
from cruxsql.documents import DocumentInput, DocumentLane  # noqa: E402
from cruxsql.documents.sources import chunk_document  # noqa: E402
from cruxsql.facts import codec, timestamps  # noqa: E402


def percentile(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def row(label: str, cluster: float, baseline: float, unit: str) -> None:
    ratio = cluster / baseline if baseline else float("inf")
    print(f"{label:<58} {cluster:>12,.2f} {baseline:>12,.2f} {unit:<10} {ratio:>7.2f}x", flush=True)


def open_nodes(cluster: LoopbackCluster, work: Path, group: str) -> list[ClusterStore]:
    stores = []
    for i in range(3):
        config = bind(work / group / f"node{i}", ClusterConfig(cluster.urls, group, 3, f"node{i}"))
        stores.append(ClusterStore(work / group / f"node{i}", config))
    return stores


def bench_latency(nodes: list[ClusterStore], local: cruxsql.Store, writes: int) -> None:
    cluster_ms, local_ms = [], []
    for i in range(writes):
        started = time.perf_counter()
        nodes[i % 3].store("bench", f"k{i % 50}", f"value {i}")
        cluster_ms.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        local.store("bench", f"k{i % 50}", f"value {i}")
        local_ms.append((time.perf_counter() - started) * 1000)
    row(f"store() latency p50 ({writes} writes, interleaved)", percentile(cluster_ms, 50),
        percentile(local_ms, 50), "ms")
    row("store() latency p95", percentile(cluster_ms, 95), percentile(local_ms, 95), "ms")


def _run_writers(stores: list, writers: int, seconds: float) -> float:
    counts = [0] * writers
    stop = threading.Event()

    def write(w: int) -> None:
        store = stores[w % len(stores)]
        while not stop.is_set():
            store.store(f"writer{w}", f"k{counts[w] % 20}", f"v{counts[w]}")
            counts[w] += 1

    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join()
    return sum(counts) / (time.perf_counter() - started)


def bench_throughput(nodes: list[ClusterStore], local: cruxsql.Store, seconds: float) -> None:
    for writers in (1, 4, 16):
        cluster_rate = _run_writers(nodes, writers, seconds)
        local_rate = _run_writers([local], writers, seconds)
        row(f"throughput, {writers} concurrent writer(s), writes/s", cluster_rate, local_rate, "writes/s")


def _events(n: int) -> list[bytes]:
    now = timestamps.now_ns()
    payloads = []
    for i in range(n):
        fact = codec.Fact(fact_id="f_" + uuid.uuid4().hex, tenant_hash="default", entity=f"catchup{i % 1000}",
                          key=f"k{i}", value=f"catch-up value number {i}", source_receipt=None, confidence=1.0,
                          stored_at=now + i, tokens=6, version=1, supersedes=None, horizon_class="medium")
        payloads.append((codec.encode_event(codec.StoreEvent(fact)) + "\n").encode())
    return payloads


def _publish_bulk(node: ClusterStore, group: str, payloads: list[bytes]) -> None:
    """Load the stream quickly (pipelined publishes, acknowledged in windows of 2,000)."""
    js = node.link._js

    async def load() -> None:
        for start in range(0, len(payloads), 2000):
            acks = []
            for i, payload in enumerate(payloads[start:start + 2000], start):
                acks.append(await js.publish_async(f"{subject_prefix(group)}.multi", payload,
                                                   headers={"Nats-Msg-Id": f"bulk-{i}"}))
            await asyncio.gather(*acks)

    asyncio.run_coroutine_threadsafe(load(), node.link._loop).result(600)


def bench_catchup(cluster: LoopbackCluster, work: Path, events: int, rounds: int = 3) -> None:
    """A node joining a stream of `events` stores (the bulk path), then a local rebuild of the journal it
    wrote, `rounds` times in turn: the medians."""
    group = "catchup"
    shutil.rmtree(work / group, ignore_errors=True)  # a kept --workdir: the last run's nodes are caught up already
    writer = open_nodes(cluster, work, group)[0]
    payloads = _events(events)
    _publish_bulk(writer, group, payloads)
    cluster_s, local_s = [], []
    for r in range(rounds):
        started = time.perf_counter()
        config = bind(work / group / f"late{r}", ClusterConfig(cluster.urls, group, 3, f"late{r}"))
        late = ClusterStore(work / group / f"late{r}", config)
        cluster_s.append(time.perf_counter() - started)
        assert late.counts()["facts"] == events, late.counts()
        late.close()
        local_dir = work / group / f"local-rebuild{r}"
        local_dir.mkdir()
        shutil.copy(work / group / f"late{r}" / "facts.jsonl", local_dir / "facts.jsonl")
        started = time.perf_counter()
        with cruxsql.open(local_dir) as local:
            assert local.counts()["facts"] == events
        local_s.append(time.perf_counter() - started)
        print(f"  round {r + 1}: catch-up {cluster_s[-1]:.2f} s, rebuild {local_s[-1]:.2f} s, "
              f"{cluster_s[-1] / local_s[-1]:.2f}x, load {os.getloadavg()[0]:.1f}", flush=True)
    row(f"catch-up of a node down for {events:,} events (vs local rebuild), median of {rounds}",
        statistics.median(cluster_s), statistics.median(local_s), "s")
    writer.close()


def bench_failover(cluster: LoopbackCluster, nodes: list[ClusterStore]) -> None:
    acks: list[float] = []
    stop = threading.Event()

    def write() -> None:
        i = 0
        while not stop.is_set():
            nodes[i % 3].store("failover", f"k{i % 10}", f"v{i}")
            acks.append(time.perf_counter())
            i += 1

    writer = threading.Thread(target=write)
    writer.start()
    time.sleep(2)
    leader = nodes[0].link.state().leader
    index = [s.name for s in cluster.servers].index(leader)
    killed_at = time.perf_counter()
    before = [b - a for a, b in zip(acks, acks[1:])]
    cluster.kill(index)
    while not acks or acks[-1] < killed_at + 3:
        time.sleep(0.1)
    stop.set()
    writer.join()
    after = [a for a in acks if a <= killed_at][-1:] + [a for a in acks if a > killed_at]
    stall = max(b - a for a, b in zip(after, after[1:]))
    row(f"failover: longest wait for an ack after SIGKILL of leader {leader} (vs before)", stall, max(before), "s")
    cluster.start(index)


def _megabyte_document(doc_id: str, megabytes: float) -> DocumentInput:
    """A plain-text document of about `megabytes` MB, chunked as `cruxsql ingest` chunks it."""
    words = ["terraform", "drift", "runbook", "rotation", "incident", "canary", "quorum", "replica", "segment"]
    lines, size, i = [], 0, 0
    while size < megabytes * 1_000_000:
        line = f"line {i} " + " ".join(words[(i * 7 + j) % len(words)] + str((i + j) % 97) for j in range(12)) + "\n"
        lines.append(line)
        size += len(line)
        i += 1
    lines.append("needle-zephyr-4242 marks the end\n")
    return chunk_document(doc_id, "".join(lines), markdown=False)


def bench_documents(cluster: LoopbackCluster, work: Path, megabytes: float, rounds: int = 3) -> None:
    """A ~1 MB document ingested on node A (sealed, uploaded, manifest replaced), then found by a search on
    node B (pull: fetch, BLAKE3 check, index); baseline: the same ingest into a single-node store."""
    nodes = open_nodes(cluster, work, "documents")
    ingest_ms, visible_ms, local_ms = [], [], []
    try:
        with cruxsql.open(work / "local-documents") as local:
            for r in range(rounds):
                document = _megabyte_document(f"big-{r}.txt", megabytes)
                started = time.perf_counter()
                DocumentLane(local).ingest([document], tenant=f"t{r}")
                local_ms.append((time.perf_counter() - started) * 1000)
                started = time.perf_counter()
                DocumentLane(nodes[0]).ingest([document], tenant=f"t{r}")
                ingest_ms.append((time.perf_counter() - started) * 1000)
                hits = DocumentLane(nodes[1]).search("needle-zephyr-4242", f"t{r}", 1).hits
                visible_ms.append((time.perf_counter() - started) * 1000)
                if not hits:
                    raise SystemExit("bench_documents: node B did not find the document node A ingested")
        chunks = len(document.chunks)
        row(f"ingest a {megabytes:g} MB document ({chunks} chunks), median ms", statistics.median(ingest_ms),
            statistics.median(local_ms), "ms")
        row("  ... until a search on another node finds it, median ms", statistics.median(visible_ms),
            statistics.median(local_ms), "ms")
    finally:
        for node in nodes:
            node.close()


def _erased_secret(cluster: LoopbackCluster, group: str) -> tuple[ClusterLink, bytes]:
    """A stream with a message holding a fresh secret among others, that message securely deleted."""
    link = ClusterLink(cluster.urls, group)
    link.ensure_stream(3)
    secret = f"bench-secret-{uuid.uuid4().hex}".encode()
    for i in range(20):
        link.publish(f"{subject_prefix(group)}.multi", b"kept %d\n" % i, f"{group}-{i}", None)
    seq = link.publish(f"{subject_prefix(group)}.multi", b"x " + secret + b"\n", f"{group}-s", None)
    link.publish(f"{subject_prefix(group)}.multi", b"after\n", f"{group}-a", None)
    dirs = [s.store_dir for s in cluster.servers]
    deadline = time.monotonic() + 10
    while len(files_holding(dirs, secret)) < 6 and time.monotonic() < deadline:  # 3 stream stores + 3 Raft logs
        time.sleep(0.05)
    link.erase(seq)
    return link, secret


def bench_raft_scrub(cluster: LoopbackCluster, cap: float = 400.0) -> None:
    dirs = [s.store_dir for s in cluster.servers]
    alone, alone_secret = _erased_secret(cluster, "scrub-alone")
    alone_started = time.monotonic()
    scrubbed, secret = _erased_secret(cluster, "scrub-on")
    started = time.monotonic()
    scrub_raft_logs(scrubbed, scrubbed.stream, scrub_subject("scrub-on"), dirs)
    with_scrub = time.monotonic() - started
    assert files_holding(dirs, secret) == []
    while files_holding(dirs, alone_secret) and time.monotonic() - alone_started < cap:
        time.sleep(0.5)
    left_alone = time.monotonic() - alone_started
    if files_holding(dirs, alone_secret):
        print(f"(left alone, the Raft logs still held the bytes after {cap:.0f} s)")
    row("erased bytes out of every server file, s (vs left alone)", with_scrub, left_alone, "s")
    alone.close()
    scrubbed.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--writes", type=int, default=300)
    parser.add_argument("--seconds", type=float, default=3.0, help="per throughput row")
    parser.add_argument("--catchup-events", type=int, default=100_000)
    parser.add_argument("--catchup-rounds", type=int, default=3, help="catch-ups and rebuilds, in turn (median)")
    parser.add_argument("--workdir", type=Path, default=None, help="kept; default: a temp dir, removed")
    parser.add_argument("--document-mb", type=float, default=1.0, help="size of the replicated document")
    parser.add_argument("--documents-only", action="store_true", help="only the document replication rows")
    parser.add_argument("--raft-scrub-only", action="store_true", help="only the Raft log scrub row (minutes)")
    parser.add_argument("--catchup-only", action="store_true", help="only the catch-up row (--catchup-events)")
    args = parser.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="cruxsql-bench-cluster-"))
    work.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(work / "nats", ignore_errors=True)  # a kept --workdir: the last run's streams would be read again
    print(f"{'measure':<58} {'cluster R3':>12} {'single node':>12} {'unit':<10} {'ratio':>8}")
    cluster = LoopbackCluster(work / "nats", 3)
    cluster.start()
    try:
        if args.raft_scrub_only:
            bench_raft_scrub(cluster)
            return
        if args.catchup_only:
            bench_catchup(cluster, work, args.catchup_events, args.catchup_rounds)
            return
        bench_documents(cluster, work, args.document_mb)
        if args.documents_only:
            return
        nodes = open_nodes(cluster, work, "latency")
        with cruxsql.open(work / "local") as local:
            bench_latency(nodes, local, args.writes)
            bench_throughput(nodes, local, args.seconds)
        bench_catchup(cluster, work, args.catchup_events, args.catchup_rounds)
        bench_failover(cluster, nodes)
        bench_raft_scrub(cluster)
        for node in nodes:
            node.close()
    finally:
        cluster.stop()
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
