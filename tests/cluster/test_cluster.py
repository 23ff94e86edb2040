"""Cluster mode on loopback: a 3-server NATS JetStream cluster and cruxsql nodes on 127.0.0.1, started
here on free ports in temp directories and killed at teardown. Each test writes its own tenant group
(its own stream), so tests share the servers but not the data."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable

import pytest

pytest.importorskip("nats")

from cruxsql.cluster.config import ClusterConfig  # noqa: E402
from cruxsql.cluster.link import ClusterLink, ClusterRefused  # noqa: E402
from cruxsql.cluster.loopback import LoopbackCluster, server_binary  # noqa: E402
from cruxsql.cluster.node import bind  # noqa: E402
from cruxsql.cluster.store import ClusterStore, chain_subject  # noqa: E402
from cruxsql.errors import NotFound  # noqa: E402
from cruxsql.facts import codec  # noqa: E402
from support.nats_cluster import nats_cluster  # noqa: E402,F401 (fixture)

pytestmark = pytest.mark.slow

try:
    server_binary()
except Exception:  # pragma: no cover - the cluster extra is part of [test]
    pytest.skip("nats-server is not installed", allow_module_level=True)

CLI = [sys.executable, "-m", "cruxsql"]


def wait_until(predicate: Callable[[], bool], timeout: float = 20.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def open_nodes(cluster: LoopbackCluster, base: Path, group: str, n: int = 3,
               see_servers: bool = False) -> list[ClusterStore]:
    """`see_servers`: the nodes are bound with the servers' storage directories, so an erasure waits
    until no file in them (Raft logs included) holds the erased entries."""
    dirs = tuple(str(s.store_dir) for s in cluster.servers) if see_servers else ()
    stores = []
    for i in range(n):
        config = bind(base / f"node{i}", ClusterConfig(cluster.urls, group, 3, f"node{i}", dirs))
        stores.append(ClusterStore(base / f"node{i}", config))
    return stores


def close_all(stores: list[ClusterStore]) -> None:
    for store in stores:
        store.close()


def view_rows(store: ClusterStore) -> list[tuple]:
    return list(store.db.execute("SELECT * FROM facts ORDER BY seq"))


def journal_bytes(store: ClusterStore) -> bytes:
    return store.journal.path.read_bytes()


def test_writes_through_every_node_converge_to_identical_views_and_journals(nats_cluster, tmp_path):
    stores = open_nodes(nats_cluster, tmp_path, "converge")
    try:
        a, b, c = stores
        first = a.store("deploy", "strategy", "blue-green")
        second = b.store("deploy", "strategy", "canary")
        c.store_batch([codec_request("svc", "owner", "ops"), codec_request("svc", "tier", "gold")])
        c.delete(first.fact_id)
        b.set_horizon(second.fact_id, "volatile")
        for store in stores:
            store.refresh()
        assert [f.version for f in a.history("deploy", "strategy")] == [1, 2]
        assert a.get(first.fact_id).deleted and a.get(second.fact_id).horizon_class == "volatile"
        assert view_rows(a) == view_rows(b) == view_rows(c)
        assert len(view_rows(a)) == 4
        assert journal_bytes(a) == journal_bytes(b) == journal_bytes(c)
        # the journal is Crux's line format, one stream message per mutation, byte for byte
        lines = journal_bytes(a).decode().splitlines()
        assert [json.loads(line)["op"] for line in lines] == [
            "store", "store", "supersede", "store_batch", "delete", "set_horizon"]
        link = a.link
        payloads = b"".join(m.payload for m in link.messages(1, link.last_seq()))
        assert payloads == journal_bytes(a)
    finally:
        close_all(stores)


def codec_request(entity: str, key: str, value: str):
    from cruxsql.facts.store import StoreRequest
    return StoreRequest(entity, key, value)


def test_one_chain_written_from_three_nodes_gets_versions_one_to_n_exactly_once(nats_cluster, tmp_path):
    stores = open_nodes(nats_cluster, tmp_path, "chain")
    per_node = 12
    errors: list[BaseException] = []

    def write(store: ClusterStore, node: int) -> None:
        try:
            for i in range(per_node):
                fact = store.store("incident", "status", f"node{node}-{i}")
                # read-your-writes: the writing node serves its own write at once
                assert store.get(fact.fact_id).value == f"node{node}-{i}"
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    try:
        threads = [threading.Thread(target=write, args=(s, i)) for i, s in enumerate(stores)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        for store in stores:
            store.refresh()
            history = store.history("incident", "status")
            assert sorted(f.version for f in history) == list(range(1, 3 * per_node + 1))
            assert sorted(f.value for f in history) == sorted(f"node{n}-{i}" for n in range(3) for i in range(per_node))
            assert [f.version for f in history if not f.superseded_by] == [3 * per_node]
        assert journal_bytes(stores[0]) == journal_bytes(stores[1]) == journal_bytes(stores[2])
    finally:
        close_all(stores)


def test_a_version_built_on_a_stale_view_is_applied_by_no_node(nats_cluster, tmp_path):
    """A store that lost the race (built from a head another node had already replaced) is in the stream
    but every node skips it the same way; the writer sees it absent and builds again."""
    stores = open_nodes(nats_cluster, tmp_path, "stale")
    try:
        a, b, _ = stores
        v1 = a.store("plan", "phase", "one")
        v2 = b.store("plan", "phase", "two")
        stale = codec.Fact(fact_id="f_" + "0" * 32, tenant_hash="default", entity="plan", key="phase",
                           value="stale-two", source_receipt=None, confidence=1.0, stored_at=v2.stored_at + 1,
                           tokens=3, version=2, supersedes=v1.fact_id, horizon_class=v1.horizon_class)
        payload = (codec.encode_event(codec.StoreEvent(stale)) + "\n").encode()
        seq = a.link.publish("cruxsql.stale.multi", payload, "stale-1", None)
        v3 = a.store("plan", "phase", "three")
        for store in stores:
            store.refresh()
            assert [f.value for f in store.history("plan", "phase")] == ["one", "two", "three"]
            with pytest.raises(NotFound):
                store.get(stale.fact_id)
        assert v3.version == 3 and a.link.last_seq() == seq + 1
        assert journal_bytes(a) == journal_bytes(b) == journal_bytes(stores[2])
        assert b"stale-two" not in journal_bytes(a)
    finally:
        close_all(stores)


def test_a_stale_node_serves_only_what_it_has_applied_and_writes_after_catching_up(nats_cluster, tmp_path):
    stores = open_nodes(nats_cluster, tmp_path, "lagging")
    try:
        a, _, c = stores
        written = [a.store("runbook", "step", f"s{i}") for i in range(4)]
        # c has applied none of them: it serves none of them (nothing visible before it is applied here)
        assert c.counts()["facts"] == 0
        with pytest.raises(NotFound):
            c.get(written[-1].fact_id)
        # a write through c is built only after c has applied everything before it
        fact = c.store("runbook", "step", "s4")
        assert (fact.version, fact.supersedes) == (5, written[-1].fact_id)
        assert [f.version for f in c.history("runbook", "step")] == [1, 2, 3, 4, 5]
    finally:
        close_all(stores)


@pytest.mark.parametrize("position", ["missing", "behind", "torn"])
def test_a_journal_tail_past_a_lagging_position_is_adopted_not_appended_twice(nats_cluster, tmp_path, position):
    """A crash after the journal's fsync and before the position file was replaced leaves the position
    behind the journal (or the file torn): the next open matches the tail against the stream."""
    (store,) = open_nodes(nats_cluster, tmp_path, f"adopt-{position}", 1)
    facts = [store.store("e", f"k{i}", f"v{i}") for i in range(2)]
    store.set_horizon(facts[0].fact_id, "stable")  # not a store: only the position keeps it from a second copy
    before = journal_bytes(store)
    first_line = before.splitlines(keepends=True)[0]
    store.close()
    path = tmp_path / "node0" / "cluster-position.json"
    if position == "missing":
        path.unlink()
    elif position == "behind":
        path.write_text(json.dumps({"stream": "x", "seq": 1, "journal_offset": len(first_line)}))
    else:
        path.write_text('{"seq": 2, "jour')
    (store,) = open_nodes(nats_cluster, tmp_path, f"adopt-{position}", 1)
    try:
        assert journal_bytes(store) == before
        assert json.loads(path.read_text())["seq"] == 3
        assert store.counts() == {"journal_events": 3, "facts": 2, "live_facts": 2}
        store.store("e", "k3", "v3")
        assert journal_bytes(store).startswith(before) and store.counts()["facts"] == 3
    finally:
        store.close()


def test_a_retried_publish_with_the_same_message_id_is_stored_once(nats_cluster):
    link = ClusterLink(nats_cluster.urls, "dedupe")
    try:
        link.ensure_stream(3)
        subject = chain_subject("dedupe", "default", "e", "k")
        first = link.publish(subject, b"payload\n", "same-id", None)
        again = link.publish(subject, b"payload\n", "same-id", None)
        assert first == again == link.last_seq() == 1
    finally:
        link.close()


def test_stream_creation_retries_no_suitable_peers_for_a_bounded_time(nats_cluster, monkeypatch):
    """Error 10005 (no suitable peers for placement) answers while a peer is offline or not yet current:
    the stream's creation retries it within the link's patience, then gives up with the refusal."""
    link = ClusterLink(nats_cluster.urls, "placement", patience=1.0)
    real, refusals = link._retry, []

    def placement_fails_twice(make):
        if len(refusals) < 2:
            refusals.append(time.monotonic())
            raise ClusterRefused("JetStream refused the request: no suitable peers for placement (error 10005)",
                                 10005)
        return real(make)
    try:
        monkeypatch.setattr(link, "_retry", placement_fails_twice)
        link.ensure_stream(3)
        assert len(refusals) == 2 and len(link.state().replicas) == 2  # R3: the leader and two followers
        def placement_always_fails(make):
            raise ClusterRefused("JetStream refused the request: no suitable peers for placement (error 10005)",
                                 10005)
        monkeypatch.setattr(link, "_retry", placement_always_fails)
        started = time.monotonic()
        with pytest.raises(ClusterRefused, match=r"cannot create the stream CRUXSQL_placement .*\(error 10005\)"):
            link.ensure_stream(3)
        assert 1.0 <= time.monotonic() - started < 3.0  # the link's patience bounds the wait
    finally:
        link.close()


def _leader_index(cluster: LoopbackCluster, link: ClusterLink) -> int:
    leader = link.state().leader
    return [s.name for s in cluster.servers].index(leader)


def test_every_acknowledged_write_survives_sigkill_of_the_stream_leader(nats_cluster, tmp_path):
    stores = open_nodes(nats_cluster, tmp_path, "failover")
    acked: list[str] = []
    stop = threading.Event()
    errors: list[BaseException] = []

    def loop() -> None:
        i = 0
        try:
            while not stop.is_set():
                fact = stores[i % 3].store(f"job{i % 5}", "state", f"run-{i}")
                acked.append(fact.fact_id)
                i += 1
        except BaseException as exc:
            errors.append(exc)

    try:
        writer = threading.Thread(target=loop)
        writer.start()
        wait_until(lambda: len(acked) >= 10, what="writes before the kill")
        killed = _leader_index(nats_cluster, stores[0].link)
        nats_cluster.kill(killed)
        before_kill = len(acked)
        wait_until(lambda: len(acked) >= before_kill + 10, timeout=40, what="writes after the leader died")
        nats_cluster.start(killed)
        wait_until(lambda: len(acked) >= before_kill + 20, timeout=40, what="writes after the restart")
        stop.set()
        writer.join()
        assert not errors, errors
        for store in stores:
            store.refresh()
            present = {r[0] for r in store.db.execute("SELECT fact_id FROM facts")}
            assert set(acked) <= present
            assert len(present) == len(acked)
        assert journal_bytes(stores[0]) == journal_bytes(stores[1]) == journal_bytes(stores[2])
    finally:
        stop.set()
        close_all(stores)
        nats_cluster.start(killed) if nats_cluster.servers[killed].process.poll() is not None else None


def _node_process(cluster: LoopbackCluster, data_dir: Path, group: str, name: str) -> subprocess.Popen:
    return subprocess.Popen(CLI + ["node", "--cluster", cluster.url(), "--group", group, "--node-name", name,
                                   "--data-dir", str(data_dir)], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _mirrored(data_dir: Path) -> int:
    try:
        return json.loads((data_dir / "cluster-position.json").read_text())["seq"]
    except (FileNotFoundError, ValueError):
        return -1


def test_a_sigkilled_node_catches_up_on_restart_and_status_shows_its_lag(nats_cluster, tmp_path):
    writers = open_nodes(nats_cluster, tmp_path, "catchup", 2)
    mirror_dir = tmp_path / "node-c"
    node = _node_process(nats_cluster, mirror_dir, "catchup", "node-c")
    try:
        for i in range(20):
            writers[i % 2].store("ticket", f"t{i % 4}", f"v{i}")
            if i == 9:
                wait_until(lambda: _mirrored(mirror_dir) >= 1 and "node-c" in writers[0].link.node_reports(3),
                           what="the node mirroring and reporting")
                node.send_signal(signal.SIGKILL)
                node.wait()
        last = writers[0].link.last_seq()
        assert 1 <= _mirrored(mirror_dir) < last
        status = subprocess.run(CLI + ["cluster", "status", "--data-dir", str(mirror_dir), "--json"],
                                capture_output=True, text=True, timeout=30)
        assert status.returncode == 0, status.stderr
        report = json.loads(status.stdout)
        assert report["last_seq"] == last and report["leader"] in {"n1", "n2", "n3"}
        (entry,) = [n for n in report["nodes"] if n["node"] == "node-c"]
        assert entry["lag"] == last - entry["position"] > 0
        rows = subprocess.run(CLI + ["cluster", "status", "--data-dir", str(mirror_dir), "--csv"],
                              capture_output=True, text=True, timeout=30).stdout.splitlines()
        assert rows[0] == "node,host,pid,position,lag,up,reported_seconds_ago"
        assert [r.split(",")[:5] for r in rows[1:]] == [
            ["node-c", entry["host"], str(entry["pid"]), str(entry["position"]), str(entry["lag"])]]
        node = _node_process(nats_cluster, mirror_dir, "catchup", "node-c")
        wait_until(lambda: _mirrored(mirror_dir) == last, what="the restarted node to catch up")
        writers[0].refresh()
        assert (mirror_dir / "facts.jsonl").read_bytes() == journal_bytes(writers[0])
        wait_until(lambda: json.loads(subprocess.run(
            CLI + ["cluster", "status", "--data-dir", str(mirror_dir), "--json"], capture_output=True, text=True,
            timeout=30).stdout)["nodes"][0]["lag"] == 0, what="status to show the node caught up")
        # the CLI on the node's directory reads the fleet's facts and writes through the cluster
        out = subprocess.run(CLI + ["store", "--data-dir", str(mirror_dir), "ticket", "t0", "closed", "--json"],
                             capture_output=True, text=True, timeout=30)
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["version"] == 6
        writers[1].refresh()
        assert writers[1].history("ticket", "t0")[-1].value == "closed"
    finally:
        if node.poll() is None:
            node.send_signal(signal.SIGTERM)
            node.wait(10)
        close_all(writers)


def test_cli_refusals_are_one_error_line(nats_cluster, tmp_path):
    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(CLI + list(args), capture_output=True, text=True, timeout=30,
                              env={**os.environ, "CRUXSQL_CLUSTER": ""})

    unbound = run("node", "--data-dir", str(tmp_path / "fresh"))
    assert unbound.returncode == 1
    assert unbound.stderr.startswith("Error: --cluster is required") and "Traceback" not in unbound.stderr
    bad_url = run("node", "--cluster", "http://127.0.0.1:1", "--data-dir", str(tmp_path / "fresh"))
    assert (bad_url.returncode, bad_url.stderr) == (1, "Error: --cluster: 'http://127.0.0.1:1' is not a nats:// URL\n")
    down = run("cluster", "status", "--cluster", "nats://127.0.0.1:1", "--data-dir", str(tmp_path / "fresh"))
    assert down.returncode == 1 and down.stderr.startswith("Error: the NATS cluster at nats://127.0.0.1:1 did not")
    assert len(down.stderr.splitlines()) == 1
    stores = open_nodes(nats_cluster, tmp_path, "refusals", 1)
    try:
        stores[0].store("e", "k", "v")
        before = journal_bytes(stores[0])
    finally:
        close_all(stores)
    node_dir = tmp_path / "node0"
    # the cluster does not answer: a read serves the local mirror (said on stderr), a write fails
    config = json.loads((node_dir / "cluster.json").read_text())
    (node_dir / "cluster.json").write_text(json.dumps({**config, "urls": ["nats://127.0.0.1:1"]}))
    read = run("history", "e", "k", "--json", "--data-dir", str(node_dir))
    assert read.returncode == 0 and [f["value"] for f in json.loads(read.stdout)] == ["v"]
    assert read.stderr.startswith(f"note: {node_dir} is a cluster node and the NATS cluster at nats://127.0.0.1:1 "
                                  f"did not answer")
    write = run("store", "e", "k", "v2", "--data-dir", str(node_dir))
    assert write.returncode == 1 and write.stderr.startswith("Error: the NATS cluster at nats://127.0.0.1:1 did not")
    assert len(write.stderr.splitlines()) == 1 and (node_dir / "facts.jsonl").read_bytes() == before


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(CLI + list(args), capture_output=True, text=True, timeout=30,
                          env={**os.environ, "CRUXSQL_CLUSTER": ""})


@pytest.mark.parametrize("url", ["nats://127.0.0.1:abc", "nats://127.0.0.1:99999"])
@pytest.mark.parametrize("command", [["node"], ["cluster", "status"]])
def test_a_url_with_a_bad_port_is_one_error_line_naming_it(tmp_path, command, url):
    out = _cli(*command, "--cluster", url, "--data-dir", str(tmp_path / "d"))
    assert (out.returncode, out.stderr) == (1, f"Error: --cluster: {url!r} has no valid port (1-65535)\n")
    assert not (tmp_path / "d").exists()


def test_a_failed_start_leaves_the_directory_unbound_and_unchanged(tmp_path):
    empty, missing = tmp_path / "empty", tmp_path / "missing"
    empty.mkdir()
    for data_dir in (empty, missing):
        out = _cli("node", "--cluster", "nats://127.0.0.1:1", "--group", "typo", "--data-dir", str(data_dir))
        assert out.returncode == 1 and len(out.stderr.splitlines()) == 1
        assert out.stderr.startswith("Error: the NATS cluster at nats://127.0.0.1:1 did not answer")
    assert (list(empty.iterdir()), missing.exists()) == ([], False)
    # the typo did not stick: the directory is still a plain local store
    assert _cli("store", "e", "k", "v", "--data-dir", str(empty)).returncode == 0


@pytest.mark.parametrize("command", [["node"], ["cluster", "status"]])
def test_credentials_in_a_url_are_redacted_in_error_lines(tmp_path, command):
    out = _cli(*command, "--cluster", "nats://alice:s3cret@127.0.0.1:1,nats://t0ken@127.0.0.1:2",
               "--data-dir", str(tmp_path / "d"))
    assert out.returncode == 1 and "s3cret" not in out.stderr and "t0ken" not in out.stderr
    assert out.stderr.startswith("Error: the NATS cluster at nats://***@127.0.0.1:1,nats://***@127.0.0.1:2 did not")
    bad = _cli(*command, "--cluster", "nats://alice:s3cret@127.0.0.1:abc", "--data-dir", str(tmp_path / "d"))
    assert bad.stderr == "Error: --cluster: 'nats://***@127.0.0.1:abc' has no valid port (1-65535)\n"


def test_a_cluster_json_without_a_key_names_the_missing_key(tmp_path):
    (tmp_path / "cluster.json").write_text(json.dumps({"urls": ["nats://127.0.0.1:1"], "replicas": 3, "node": "n"}))
    out = _cli("cluster", "status", "--data-dir", str(tmp_path))
    assert (out.returncode, out.stderr) == (
        1, f"Error: {tmp_path / 'cluster.json'}: not a cluster configuration: the key 'group' is missing\n")


def test_an_mcp_server_on_a_node_writes_and_reads_through_the_cluster(nats_cluster, tmp_path):
    """`cruxsql mcp` on a bound directory: the agent's store goes through the cluster to the other nodes,
    and its recall sees what another node wrote (identity still from the connection)."""
    from anyio.from_thread import start_blocking_portal
    from support.mcp_clients import stdio

    (other,) = open_nodes(nats_cluster, tmp_path, "agents", 1)
    agent_dir = tmp_path / "agent-node"
    bind(agent_dir, ClusterConfig(nats_cluster.urls, "agents", 3, "agent-node"))
    try:
        with start_blocking_portal() as portal:
            alice = stdio(portal, agent_dir, "--agent", "alice", "--tenant", "acme")
            try:
                stored = alice.call("store_fact", {"entity": "svc", "key": "owner", "value": "platform team"})
                fid = stored.structured_content["fact_id"]
                other.refresh()
                fact = other.get(fid)
                assert (fact.tenant_hash, fact.actor, fact.value) == ("acme", "alice", "platform team")
                newer = other.store("svc", "owner", "sre team", tenant="acme")
                found = alice.call("query_facts", {"query": "team", "contract": "legacy"})
                assert [r["fact_id"] for r in found.structured_content["rows"]] == [newer.fact_id]
            finally:
                alice.close()
        assert (agent_dir / "facts.jsonl").read_bytes() == journal_bytes(other)
    finally:
        other.close()


def test_a_single_server_takes_one_replica_and_refuses_three_in_one_line(tmp_path):
    with LoopbackCluster(tmp_path / "nats", 1) as single:
        def node(*args: str) -> subprocess.CompletedProcess:
            return subprocess.run(CLI + ["node", "--cluster", single.url(), "--node-name", "solo", *args],
                                  capture_output=True, text=True, timeout=30)

        refused = node("--data-dir", str(tmp_path / "r3"))
        assert refused.returncode == 1 and len(refused.stderr.splitlines()) == 1, refused.stderr
        assert refused.stderr.startswith(
            "Error: cannot create the stream CRUXSQL_default with 3 replica(s): JetStream refused the request: ")
        assert refused.stderr.endswith("(a single server takes --replicas 1)\n")
        config = bind(tmp_path / "r1", ClusterConfig(single.urls, "default", 1, "solo"))
        with ClusterStore(tmp_path / "r1", config) as store:
            assert store.store("e", "k", "v").version == 1
            assert store.link.state().replicas == [] and store.link.last_seq() == 1


def _facts(store: ClusterStore) -> list[tuple]:
    return list(store.db.execute("SELECT fact_id, tenant_hash, entity, key, version, value, deleted, superseded_by "
                                 "FROM facts ORDER BY fact_id"))


def test_compaction_is_a_new_stream_generation_that_every_node_applies(nats_cluster, tmp_path):
    a, b, c = open_nodes(nats_cluster, tmp_path, "compact")
    try:
        doomed = a.store("svc", "token", "to-be-compacted-away-987")
        for i in range(3):
            b.store("svc", "owner", f"owner {i}")
        b.delete(doomed.fact_id)
        stale_position = c.mirror.position(c).seq  # c mirrors nothing until after the compaction
        last_before = a.link.last_seq()
        done = subprocess.run(CLI + ["compact", "--data-dir", str(tmp_path / "node0")], capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        a.refresh()
        state = a.link.state()
        # one part, older purged; then the Raft log scrub: its marker (erased), 9 filler messages (purged)
        # and its empty end mark, the one message after the part
        assert (state.first_seq, state.last_seq, state.messages) == (last_before + 1, last_before + 12, 2)
        assert b"to-be-compacted-away-987" not in journal_bytes(a)
        for node in (b, c):
            node.refresh()
            assert journal_bytes(node) == journal_bytes(a) and _facts(node) == _facts(a)
        assert stale_position == 0 and c.mirror.position(c).seq == state.last_seq
        assert [f.value for f in b.history("svc", "owner") if not f.superseded_by] == ["owner 2"]
        late_config = bind(tmp_path / "late", ClusterConfig(nats_cluster.urls, "compact", 3, "late"))
        with ClusterStore(tmp_path / "late", late_config) as late:
            assert journal_bytes(late) == journal_bytes(a) and _facts(late) == _facts(a)
        newer = c.store("svc", "owner", "owner 3")
        assert newer.version == 4
        for node in (a, b):
            node.refresh()
            assert journal_bytes(node) == journal_bytes(c)
        assert b"to-be-compacted-away-987" not in (tmp_path / "node2" / "cruxsql.db").read_bytes()
    finally:
        close_all([a, b, c])


def test_a_legal_hold_blocks_fleet_compaction_and_a_write_meanwhile_makes_it_change_nothing(nats_cluster, tmp_path):
    (a,) = open_nodes(nats_cluster, tmp_path, "held", 1)
    try:
        def run(*args: str) -> subprocess.CompletedProcess:
            return subprocess.run(CLI + list(args) + ["--data-dir", str(tmp_path / "node0")], capture_output=True,
                                  text=True, timeout=60)

        assert run("hold", "place", "--tenant", "acme", "--reason", "litigation").returncode == 0
        kept = a.store("contract", "terms", "held-back value 4242", tenant="acme")
        a.delete(kept.fact_id)
        a.refresh()
        before, last = journal_bytes(a), a.link.last_seq()
        refused = run("compact")
        assert refused.returncode == 1 and refused.stderr.startswith("Error: hard erasure blocked by active legal hold")
        assert a.link.last_seq() == last and journal_bytes(a) == before
        # a generation whose first part finds a write it has not seen is refused by the stream: nothing changes
        from cruxsql.cluster.generation import publish_generation
        from cruxsql.errors import Conflict
        with pytest.raises(Conflict):
            publish_generation(a.link, "held", b"", last - 1)
        assert a.link.last_seq() == last
    finally:
        a.close()


def _files_holding(root: Path, needle: bytes) -> list[str]:
    found = []
    for path in sorted(root.rglob("*")):
        try:
            if path.is_file() and needle in path.read_bytes():
                found.append(str(path.relative_to(root)))
        except FileNotFoundError:  # a Raft log block removed by a compaction meanwhile
            continue
    return found


def _server_files_holding(cluster: LoopbackCluster, needle: bytes) -> list[list[str]]:
    """Per NATS server, every file under its storage directory holding `needle` (stream stores, Raft
    logs of streams, key-value and object stores, the meta log)."""
    return [_files_holding(s.store_dir, needle) for s in cluster.servers]


def _in_stream_store_and_raft_log(files: list[str]) -> bool:
    return any(f.startswith("jetstream/$G/streams/") for f in files) and \
        any(f.startswith("jetstream/$SYS/_js_/S-R3F-") for f in files)


def test_erasure_leaves_the_value_in_no_node_file_and_no_stream_store(nats_cluster, tmp_path):
    """`cruxsql erase` on one node: the deletion goes through the stream, the compaction becomes a new
    generation, the old messages holding the value are securely deleted (overwritten on every replica's
    stream store) and purged, every replica's Raft log is compacted past them (the erasure returns once
    no file under any server's storage directory holds them), every node rewrites its journal and scrubs
    its view, and `verify --erasure --cluster` collects every running node's proof of its own directory."""
    value = b"erase-me-please-31337@example.org"
    nodes = open_nodes(nats_cluster, tmp_path, "erasure", see_servers=True)
    try:
        person = nodes[0].store("person", "email", value.decode())
        for i in range(4):
            nodes[i % 3].store("other", f"k{i}", f"kept value {i}")
        for node in nodes:
            node.refresh()
        assert all(_in_stream_store_and_raft_log(files) for files in _server_files_holding(nats_cluster, value))
        done = subprocess.run(CLI + ["erase", "--all-tenants", "--fact-id", person.fact_id, "--reason", "data-subject request",
                                     "--json", "--data-dir", str(tmp_path / "node0")],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["ok"] is True
        assert done.stderr == ""  # the directories were checked: no note that they were not
        assert _server_files_holding(nats_cluster, value) == [[], [], []]  # Raft logs included
        for node in nodes:
            node.refresh()
            # the scrub's filler was purged and its empty end mark ends the stream: every node reaches it
            assert node.mirror.position(node).seq == node.link.last_seq()
            assert node.db.execute("SELECT count(*) FROM facts WHERE fact_id = ?", (person.fact_id,)).fetchone() == (0,)
            assert [v for (v,) in node.db.execute("SELECT value FROM live_facts WHERE entity = 'other' ORDER BY key")] \
                == [f"kept value {i}" for i in range(4)]
        assert _files_holding(tmp_path, value) == []  # every node's files, its view open (WAL included)
        close_all(nodes)
        nodes = []
        daemons = [_node_process(nats_cluster, tmp_path / f"node{i}", "erasure", f"node{i}") for i in range(3)]
        try:
            link = ClusterLink(nats_cluster.urls, "erasure")
            try:
                wait_until(lambda: len(link.node_reports(3)) == 3, what="three nodes reporting")
            finally:
                link.close()

            def fleet_proof() -> subprocess.CompletedProcess:
                return subprocess.run(CLI + ["verify", "--erasure", "--cluster", "--json", "--data-dir",
                                             str(tmp_path / "node0")], capture_output=True, text=True, timeout=60)

            proof = fleet_proof()
            assert proof.returncode == 0, proof.stdout + proof.stderr
            result = json.loads(proof.stdout)
            assert sorted(result["nodes"]) == ["node0", "node1", "node2"] and result["missing"] == []
            assert all(p["ok"] and p["reports"] == 1 and p["hits"] == [] for p in result["nodes"].values())
            # a copy of the value left in one node's directory: that node's proof fails, and so the fleet's
            (tmp_path / "node2" / "notes.txt").write_bytes(b"copied: " + value)
            proof = fleet_proof()
            assert proof.returncode == 1
            result = json.loads(proof.stdout)
            assert [n for n, p in sorted(result["nodes"].items()) if not p["ok"]] == ["node2"]
            (tmp_path / "node2" / "notes.txt").unlink()
        finally:
            for daemon in daemons:
                daemon.send_signal(signal.SIGTERM)
            for daemon in daemons:
                daemon.wait(10)
        assert _server_files_holding(nats_cluster, value) == [[], [], []]
    finally:
        close_all(nodes)


def test_a_node_mirroring_while_the_raft_log_scrub_filler_is_in_the_stream_skips_it(nats_cluster, tmp_path):
    """The filler (random bytes, not journal lines) sits in the stream until it is purged: a node catching
    up meanwhile passes over it, and writes go on."""
    import asyncio
    from cruxsql.cluster.link import scrub_subject
    a, b = open_nodes(nats_cluster, tmp_path, "scrub-skip", 2)
    try:
        a.store("deploy", "strategy", "canary")

        async def filler() -> None:
            for _ in range(10):
                await a.link._js.publish(scrub_subject("scrub-skip"), b"\xff\xfe" + os.urandom(64),
                                         stream=a.link.stream)
        asyncio.run_coroutine_threadsafe(filler(), a.link._loop).result(10)
        b.refresh()
        assert b.mirror.position(b).seq == b.link.last_seq() == 11
        b.store("deploy", "owner", "ops")
        a.refresh()
        assert journal_bytes(a) == journal_bytes(b)
        assert [v for (v,) in a.db.execute("SELECT value FROM live_facts ORDER BY key")] == ["ops", "canary"]
    finally:
        close_all([a, b])


def test_the_raft_log_scrub_waits_a_bounded_time_and_names_the_files_still_holding_entries(
        nats_cluster, tmp_path, monkeypatch):
    """Filler below nats-server's 8 MiB threshold compacts no Raft log: the scrub gives up after its wait
    with one error naming each server's Raft log block that still holds the marker."""
    from cruxsql.cluster import raftlog
    from cruxsql.cluster.link import scrub_subject
    monkeypatch.setattr(raftlog, "FILLER_MESSAGE_BYTES", 100_000)
    monkeypatch.setattr(raftlog, "FILLER_ROUND_BYTES", 200_000)
    monkeypatch.setattr(raftlog, "ROUND_WAIT_SECONDS", 0.5)
    (a,) = open_nodes(nats_cluster, tmp_path, "scrub-short", 1)
    try:
        a.store("deploy", "strategy", "canary")
        dirs = [s.store_dir for s in nats_cluster.servers]
        started = time.monotonic()
        with pytest.raises(raftlog.RaftLogsNotScrubbed, match=r"after 2 s and \d round\(s\) of filler, these NATS "
                           r"server files still hold Raft log entries of stream CRUXSQL_scrub-short from before"):
            raftlog.scrub_raft_logs(a.link, a.link.stream, scrub_subject("scrub-short"), dirs, wait=2.0)
        assert 2.0 <= time.monotonic() - started < 6.0
        try:
            raftlog.scrub_raft_logs(a.link, a.link.stream, scrub_subject("scrub-short"), dirs, wait=2.0)
        except raftlog.RaftLogsNotScrubbed as exc:
            named = str(exc).split(": ", 1)[1].split(", ")
        assert len(named) == 3 and all("/jetstream/$SYS/_js_/S-R3F-" in f and f.endswith(".blk") for f in named)
        assert a.link.state().messages == 2  # the store, and the end mark: the filler was purged
    finally:
        a.close()


def test_a_cross_chain_supersede_built_before_another_nodes_write_is_built_again(nats_cluster, tmp_path):
    """A supersede naming two chains goes on the multi subject expecting the stream's last sequence it was
    built on: a consolidation of the target landing from another node in between refuses the publish,
    and the rebuilt supersede meets the consolidation guard instead of breaking the consolidation."""
    from cruxsql.curation.consolidation import ConsolidationRequest, consolidate_facts_v1
    from cruxsql.errors import Conflict
    a, b = open_nodes(nats_cluster, tmp_path, "multi-race", 2)
    try:
        target = a.store("plan", "phase", "draft", confidence=0.5)
        by = a.store("plan", "phase-final", "final")
        b.refresh()
        real_publish, published = a.link.publish, []

        def publish_after_b_consolidates(*args, **kwargs):
            if not published:  # b's write reaches the stream between a's build and a's publish
                consolidate_facts_v1(b, ConsolidationRequest("c-1", "plan", "phase", "merged", [target.fact_id]))
            published.append(args[0])
            return real_publish(*args, **kwargs)

        a.link.publish = publish_after_b_consolidates
        with pytest.raises(Conflict, match="is a consolidation member"):
            a.supersede(target.fact_id, by.fact_id)
        assert published == ["cruxsql.multi-race.multi"]  # refused by the stream; the rebuild meets the guard
        for node in (a, b):
            node.refresh()
            canonical = node.db.execute("SELECT superseded_by FROM facts WHERE fact_id = ?", (target.fact_id,)).fetchone()
            assert node.db.execute("SELECT value FROM facts WHERE fact_id = ?", canonical).fetchone() == ("merged",)
        assert journal_bytes(a) == journal_bytes(b)
        assert [json.loads(line)["op"] for line in journal_bytes(a).decode().splitlines()] == ["store", "store", "consolidate"]
    finally:
        close_all([a, b])


def test_a_write_after_another_nodes_compaction_is_stored_once(nats_cluster, tmp_path):
    """The writer mirrors the other node's generation (its journal rewritten, shorter) before its own
    message: whether the message was applied is asked of the view by fact id, not of the old offset."""
    a, b = open_nodes(nats_cluster, tmp_path, "compact-race", 2)
    try:
        for i in range(6):
            doomed = a.store("scratch", f"k{i}", f"bulky value that compaction drops {i} " + "x" * 200)
            a.delete(doomed.fact_id)
        b.refresh()
        done = subprocess.run(CLI + ["compact", "--data-dir", str(tmp_path / "node1")], capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        # the servers' directories are not bound to these nodes: the Raft log scrub says it did not check them
        assert done.stderr.startswith("note: Raft logs of stream CRUXSQL_compact-race: 9 MB of filler made every ")
        assert done.stderr.endswith("the NATS servers' storage directories were not checked (not visible here: "
                                    "bind them with `cruxsql node --server-store-dir`)\n")
        fact = a.store("deploy", "strategy", "canary")  # a has not mirrored the generation yet
        for node in (a, b):
            node.refresh()
            assert [(f.version, f.value) for f in node.history("deploy", "strategy")] == [(1, "canary")]
            assert node.get(fact.fact_id).value == "canary"
        assert journal_bytes(a) == journal_bytes(b)
        assert journal_bytes(a).count(b'"op":"store"') == 1
    finally:
        close_all([a, b])


def test_documents_ingested_on_one_node_are_searched_on_every_node_verified_and_erased_fleet_wide(
        nats_cluster, tmp_path):
    """Sealed segments and sidecars go to the object store, the manifest (with their BLAKE3) to the
    fleet's bucket; every node fetches, verifies and indexes them. Erasure removes the objects' bytes from
    every file under every server's storage directory, the object store's Raft logs included; a tampered
    object is refused."""
    from cruxsql.cluster.documents import FleetSegments
    from cruxsql.documents import ChunkInput, DocumentInput, DocumentLane
    from cruxsql.documents.segments import SegmentError
    secret = b"zanzibar-credential-771"
    a, b, c = open_nodes(nats_cluster, tmp_path, "docs", see_servers=True)
    try:
        DocumentLane(a).ingest([DocumentInput("runbook.md", [
            ChunkInput("runbook.md#0", "Terraform drift runs nightly on the ops cluster"),
            ChunkInput("runbook.md#1", "Drift reports land in the ops channel")])], tenant="acme")
        DocumentLane(b).ingest([DocumentInput("keys.md", [ChunkInput("keys.md#0", f"rotate {secret.decode()} weekly")])],
                               tenant="gone")
        # the same chunk id sent to another node is a no-op there too
        again = DocumentLane(c).ingest([DocumentInput("runbook.md", [ChunkInput("runbook.md#0", "x")])], tenant="acme")
        assert (again.ingested, again.duplicates, again.sealed) == (0, 1, False)
        found = [[(h.result_id, h.score) for h in DocumentLane(n).search("terraform drift", "acme", 10).hits]
                 for n in (a, b, c)]
        assert found[0] == found[1] == found[2]
        assert [result_id for result_id, _ in found[0]] == ["0:0", "0:1"]  # segment 1 (sealed on a), both chunks
        manifests = [(tmp_path / f"node{i}" / "segments" / "MANIFEST.json").read_bytes() for i in range(3)]
        assert manifests[0] == manifests[1] == manifests[2]
        assert [s["segment_seq"] for s in json.loads(manifests[0])["segments"]] == [1, 2]
        assert [h.result_id for h in DocumentLane(c).search("rotate weekly", "gone", 10).hits] == ["1:0"]
        runner_manifest = tmp_path / "runner" / "segments" / "MANIFEST.json"
        runner = _node_process(nats_cluster, tmp_path / "runner", "docs", "runner")  # pulls every second

        def runner_has(manifest: bytes) -> bool:
            return runner_manifest.exists() and runner_manifest.read_bytes() == manifest
        try:
            wait_until(lambda: runner_has(manifests[0]), what="a running node pulling the segments")

            assert all(_in_stream_store_and_raft_log(files) for files in _server_files_holding(nats_cluster, secret))
            assert DocumentLane(c).erase_tenant("gone")["chunks_erased"] == 1
            assert _server_files_holding(nats_cluster, secret) == [[], [], []]  # Raft logs included
            for node in (a, b, c):
                assert DocumentLane(node).search("rotate weekly", "gone", 10).hits == []
            wait_until(lambda: runner_has((tmp_path / "node2" / "segments" / "MANIFEST.json").read_bytes())
                       and not _files_holding(tmp_path / "runner", secret),
                       what="the running node dropping the erased segment")
            assert _files_holding(tmp_path, secret) == []   # every node's files, the running one's included
            kept = json.loads((tmp_path / "node2" / "segments" / "MANIFEST.json").read_bytes())["segments"]
            assert [s["segment_seq"] for s in kept] == [1] and kept[0]["vectors"]
            assert FleetSegments(a.link, "docs", 3).object_names() == sorted(  # the sidecars went too
                [kept[0]["file_name"], kept[0]["vectors"]["file_name"], kept[0]["vectors"]["profile_file_name"]])
        finally:
            runner.send_signal(signal.SIGTERM)
            runner.wait(10)

        # a tampered object: a joining node refuses that segment (one error line) and indexes none of it
        name = json.loads(manifests[0])["segments"][0]["file_name"]
        FleetSegments(a.link, "docs", 3).upload(name, b'{"format":"cruxsql-segment-v1"}\n')
        late_dir = tmp_path / "late"
        bind(late_dir, ClusterConfig(nats_cluster.urls, "docs", 3, "late"))
        with ClusterStore(late_dir, read_config_of(late_dir)) as late:
            with pytest.raises(SegmentError, match=f"segment file {name} from the object store has BLAKE3 .* refused"):
                DocumentLane(late)
            assert late.db.execute("SELECT count(*) FROM document_chunks").fetchone() == (0,)
        done = subprocess.run(CLI + ["search", "terraform", "--tenant", "acme", "--data-dir", str(late_dir)],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 1 and done.stderr.startswith(f"Error: segment file {name}")
        assert len(done.stderr.splitlines()) == 1
    finally:
        close_all([a, b, c])


def read_config_of(data_dir: Path) -> ClusterConfig:
    from cruxsql.cluster.config import read_config
    config = read_config(data_dir)
    assert config is not None
    return config


def test_two_nodes_sealing_at_once_get_distinct_segment_numbers_and_leave_no_orphan_object(nats_cluster, tmp_path):
    """The loser of the manifest's compare-and-set deletes what it uploaded, takes the winner's segment
    and seals again with the next number."""
    from cruxsql.cluster.documents import FleetSegments
    from cruxsql.documents import ChunkInput, DocumentInput, DocumentLane
    from cruxsql.documents.segments import segment_files
    a, b = open_nodes(nats_cluster, tmp_path, "docs-race", 2)
    try:
        lane_a, real_pull, pulls = DocumentLane(a), a.segment_replica.pull, []

        def pull_then_b_seals(directory):
            dropped = real_pull(directory)
            if not pulls:  # b seals between a's pull and a's push
                DocumentLane(b).ingest([DocumentInput("b.md", [ChunkInput("b#0", "written on b")])])
            pulls.append(directory)
            return dropped

        a.segment_replica.pull = pull_then_b_seals
        report = lane_a.ingest([DocumentInput("a.md", [ChunkInput("a#0", "written on a")])])
        assert (report.segment_seq, len(pulls)) == (2, 2)  # the lost seal, then the second seal
        manifest = json.loads((tmp_path / "node0" / "segments" / "MANIFEST.json").read_bytes())
        assert [s["segment_seq"] for s in manifest["segments"]] == [1, 2]
        DocumentLane(b)
        assert (tmp_path / "node1" / "segments" / "MANIFEST.json").read_bytes() == \
            (tmp_path / "node0" / "segments" / "MANIFEST.json").read_bytes()
        from cruxsql.documents.segments import load_manifest
        wanted = sorted(n for info in load_manifest(tmp_path / "node0" / "segments").segments for n in segment_files(info))
        assert FleetSegments(a.link, "docs-race", 3).object_names() == wanted
    finally:
        close_all([a, b])
