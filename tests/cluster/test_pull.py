"""A long range of the stream fetched by a child process (cruxsql/cluster/pull.py `ApartFetch`): the
batches must be the messages the node's own fetch gets, and wherever the child stops (at once, part way),
the node must go on from the next message itself, none lost or doubled. On a loopback NATS cluster, as
test_cluster.py."""

from __future__ import annotations

import pytest

pytest.importorskip("nats")

from cruxsql.cluster import link as link_module  # noqa: E402
from cruxsql.cluster import pull  # noqa: E402
from cruxsql.cluster.link import ClusterLink, subject_prefix  # noqa: E402
from cruxsql.cluster.loopback import server_binary  # noqa: E402
from support.nats_cluster import nats_cluster  # noqa: E402,F401 (the module's loopback cluster)

pytestmark = pytest.mark.slow

try:
    server_binary()
except Exception:  # pragma: no cover - the cluster extra is part of [test]
    pytest.skip("nats-server is not installed", allow_module_level=True)

GROUP = "pull"
# the real child, told to stop after 150 messages (as after a failed fetch: it ends its frames there)
STOPS_PART_WAY = ("import io, json, runpy, sys; sys.path.pop(0); r = json.loads(sys.stdin.readline()); "
                  "r['end'] = r['start'] + 149; sys.stdin = io.TextIOWrapper(io.BytesIO(json.dumps(r).encode() + b'\\n')); "
                  "runpy.run_path(sys.argv[1], run_name='__main__')")


@pytest.fixture(scope="module")
def stream(nats_cluster):  # noqa: F811 (the fixture imported above)
    """A link to a stream of 600 messages of 1-3 lines (some not ASCII, one of 40 KB), two subjects,
    and two messages erased; with the erased sequences."""
    link = ClusterLink(nats_cluster.urls, GROUP)
    link.ensure_stream(3)
    for i in range(600):
        subject = f"{subject_prefix(GROUP)}.{'multi' if i % 3 else 'chain.c' + str(i % 7)}"
        body = "".join(f'{{"n":{i},"line":{j},"text":"é{"x" * (i % 50)}"}}\n' for j in range(1 + i % 3))
        if i == 300:
            body = "y" * 40_000 + "\n"
        link.publish(subject, body.encode("utf-8"), f"pull-{i}", None)
    erased = [10, 444]
    for seq in erased:
        link.erase(seq)
    try:
        yield link, erased
    finally:
        link.close()


def fetched(link: ClusterLink, start: int, end: int) -> list[pull.StreamMessage]:
    return [m for batch in link.batches(start, end) for m in batch]


def own_fetch(link: ClusterLink, start: int, end: int, monkeypatch: pytest.MonkeyPatch) -> list[pull.StreamMessage]:
    with monkeypatch.context() as m:
        m.setattr(link_module, "APART_FROM", 10**9)
        return fetched(link, start, end)


def children(monkeypatch: pytest.MonkeyPatch) -> list[list[int]]:
    """The last sequence of each batch each child delivered, as the node reads them."""
    runs: list[list[int]] = []
    real = pull.ApartFetch.batches

    def counted(self):
        runs.append([])
        for batch in real(self):
            runs[-1].append(batch[-1].seq)
            yield batch
    monkeypatch.setattr(pull.ApartFetch, "batches", counted)
    return runs


def test_a_range_fetched_apart_is_the_range_fetched_here(stream, monkeypatch):
    link, erased = stream
    monkeypatch.setattr(link_module, "FETCH_BATCH", 97)
    monkeypatch.setattr(link_module, "APART_FROM", 50)
    runs = children(monkeypatch)
    last = link.last_seq()
    here = own_fetch(link, 5, last, monkeypatch)
    assert [m.seq for m in here] == [s for s in range(5, last + 1) if s not in erased]
    here_fetches: list[int] = []  # this process's fetches (the child's are its own)
    real = pull.Pull.fetch

    async def counted(self, want, wait):
        got = await real(self, want, wait)
        here_fetches.append(len(got))
        return got
    monkeypatch.setattr(pull.Pull, "fetch", counted)
    asked: list[bool] = []
    monkeypatch.setattr(pull.ApartFetch, "ready", lambda self: asked.append(True) or len(asked) > 1)
    apart = fetched(link, 5, last)
    assert apart == here
    assert here_fetches == [97]  # the first batch while the child started (ready at the second look); then its
    assert len(runs) == 1 and runs[0][-1] == last and len(runs[0]) >= 7  # 594 messages, batches of 97
    monkeypatch.setattr(pull.ApartFetch, "ready", lambda self: False)  # a child slower than the whole range
    assert fetched(link, 5, last) == here
    assert sum(here_fetches[1:]) == len(here)
    assert fetched(link, 20, 120) == [m for m in here if 20 <= m.seq <= 120]  # a range ending before the stream


def test_where_the_child_stops_the_node_goes_on_from_the_next_message(stream, monkeypatch):
    link, erased = stream
    monkeypatch.setattr(link_module, "FETCH_BATCH", 97)
    monkeypatch.setattr(link_module, "APART_FROM", 50)
    runs = children(monkeypatch)
    last = link.last_seq()
    here = own_fetch(link, 1, last, monkeypatch)
    monkeypatch.setattr(pull.ApartFetch, "ready", lambda self: True)  # at once: no batch fetched here first
    monkeypatch.setattr(pull, "_BOOT", STOPS_PART_WAY)
    assert fetched(link, 1, last) == here
    assert runs == [[98, 150]]  # the child's (97 messages, 10 erased; then to 150), then this process's
    monkeypatch.setattr(pull, "_BOOT", "import sys; sys.exit(3)")  # a child that dies at once
    assert fetched(link, 1, last) == here
    assert runs[1:] == [[]]


def test_a_frame_whose_records_do_not_add_up_to_its_blob_is_refused():
    messages = [pull.StreamMessage(7, "cruxsql.g.multi", b"{}\n"), pull.StreamMessage(9, "cruxsql.g.chain.ab", b"")]
    frame = pull._frame(messages)
    kind, count, size = pull.HEAD.unpack_from(frame)
    table, blob = frame[pull.HEAD.size:pull.HEAD.size + count * pull.RECORD.size], frame[-size:]
    assert (kind, count) == (1, 2)
    assert pull._messages(table, blob) == messages
    assert pull._messages(table, blob + b"x") is None
    assert pull._messages(table, blob[:-1]) is None


def test_the_child_gets_the_cluster_urls_on_its_stdin_never_on_its_command_line(monkeypatch):
    started: dict[str, object] = {}

    class Child:
        def __init__(self, args, **kwargs):
            started["args"], self.stdin, self.stdout = args, self, None

        def write(self, data):
            started["stdin"] = data

        def close(self):
            pass

        def poll(self):
            return 0

        def wait(self):
            return 0

    monkeypatch.setattr(pull.subprocess, "Popen", Child)
    fetch = pull.ApartFetch(["nats://user:s3cret@127.0.0.1:4222"], "CRUXSQL_g", 1, 10, 2.0, 97, 1024, 4)
    fetch.close()
    assert not any("s3cret" in str(arg) for arg in started["args"])  # type: ignore[attr-defined]
    assert b"nats://user:s3cret@127.0.0.1:4222" in started["stdin"]  # type: ignore[operator]
