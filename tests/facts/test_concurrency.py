"""Reads beside a writer, exact write outcomes and idempotent retries (real processes where it matters)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import apsw
import pytest

import cruxsql
from cruxsql.errors import Conflict, JournalPoisoned
from cruxsql.facts import appended, store as store_module
from cruxsql.facts.idempotency import IDEMPOTENCY_NAME
from cruxsql.facts.store import Store, StoreRequest
from support.mcp_clients import server_env
from support.journal_files import journal_lines, journal_text

CLI = [sys.executable, "-m", "cruxsql"]
HOLD_LOCK = r"""
import sys, time
from cruxsql.facts.journal import Journal
journal = Journal(sys.argv[1])
with journal.lock():
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
"""


@pytest.mark.slow
def test_reads_answer_at_once_while_another_process_holds_the_writer_lock(tmp_path: Path) -> None:
    with cruxsql.open(tmp_path) as store:
        fact = store.store("svc", "k", "visible before the lock")
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(tmp_path), "30"], stdout=subprocess.PIPE,
                              text=True, env=server_env())
    try:
        assert holder.stdout.readline().strip() == "held"
        started = time.monotonic()
        with Store(tmp_path) as reader:  # opens beside the writer, without waiting for it
            assert reader.get(fact.fact_id).value == "visible before the lock"
            rows = cruxsql.Recall(reader).query_facts("visible", contract="legacy").rows
            assert [r["fact_id"] for r in rows] == [fact.fact_id]
        api_s = time.monotonic() - started
        for args in (["query", "visible", "--contract", "legacy", "--json"],
                     ["sql", "SELECT value FROM facts", "--json"]):
            started = time.monotonic()
            out = subprocess.run(CLI + args + ["--data-dir", str(tmp_path), "--lock-timeout", "20"],
                                 capture_output=True, text=True, timeout=60)
            assert out.returncode == 0, out.stderr
            assert "visible before the lock" in out.stdout and "waiting for the writer lock" not in out.stderr
            assert time.monotonic() - started < 15  # (an interpreter start on a loaded machine; the lock: 30 s)
        assert api_s < 5
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.slow
def test_a_read_sees_a_write_acknowledged_by_another_process(tmp_path: Path) -> None:
    with Store(tmp_path) as reader:
        subprocess.run(CLI + ["store", "svc", "k", "from another process", "--data-dir", str(tmp_path)],
                       check=True, capture_output=True)
        rows = cruxsql.Recall(reader).query_facts("another", contract="legacy").rows
        assert [r["value"] for r in rows] == ["from another process"]


def test_a_keyed_retry_returns_the_first_result_and_appends_nothing(tmp_path: Path) -> None:
    with cruxsql.open(tmp_path) as store:
        first = store.store("svc", "k", "v1", idempotency_key="req-1")
        size = (tmp_path / "facts.jsonl").stat().st_size
        again = store.store("svc", "k", "v1", idempotency_key="req-1")
        assert again == first and (tmp_path / "facts.jsonl").stat().st_size == size
        with pytest.raises(Conflict, match="already used for a different request"):
            store.store("svc", "k", "v2", idempotency_key="req-1")
        # the same key from another agent is another key
        other = store.store("svc", "k", "v1", idempotency_key="req-1", agent="bob")
        assert other.fact_id != first.fact_id and other.version == 2
        batch = store.store_batch([StoreRequest("b", "k", "x"), StoreRequest("b", "k", "y")], idempotency_key="b-1")
        retried = store.store_batch([StoreRequest("b", "k", "x"), StoreRequest("b", "k", "y")],
                                    idempotency_key="b-1")  # the same facts, as they stand now
        assert [(f.fact_id, f.version) for f in retried] == [(f.fact_id, f.version) for f in batch] == \
            [(batch[0].fact_id, 1), (batch[1].fact_id, 2)]
        store.delete(first.fact_id, idempotency_key="d-1")
        store.delete(first.fact_id, idempotency_key="d-1")  # a retry: no "already deleted"
        with pytest.raises(Conflict, match="already deleted"):
            store.delete(first.fact_id)
    ops = [e["op"] for e in journal_lines(tmp_path)]
    assert ops == ["store", "store", "supersede", "store_batch", "supersede", "delete"]
    # a new process reads the keys back from the journal of its own (replay agrees)
    with cruxsql.open(tmp_path) as store:
        assert store.store("svc", "k", "v1", idempotency_key="req-1").fact_id == first.fact_id
    keys = [json.loads(line) for line in (tmp_path / IDEMPOTENCY_NAME).read_text().splitlines()]
    assert {k["key"] for k in keys} == {"req-1", "b-1", "d-1"} and not any("value" in k for k in keys)
    assert "idempotency" not in journal_text(tmp_path)  # Crux's journal holds only its ops


@pytest.mark.slow
def test_cli_writes_take_an_idempotency_key(tmp_path: Path) -> None:
    args = CLI + ["store", "svc", "k", "v", "--idempotency-key", "cli-1", "--data-dir", str(tmp_path)]
    first = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    assert subprocess.run(args, capture_output=True, text=True, check=True).stdout == first
    assert len(journal_lines(tmp_path)) == 1
    help_text = subprocess.run(CLI + ["delete", "--help"], capture_output=True, text=True, check=True).stdout
    assert "--idempotency-key" in help_text


def test_a_failed_append_appends_nothing_and_the_keyed_retry_stores_once(tmp_path: Path, monkeypatch) -> None:
    with cruxsql.open(tmp_path) as store:
        store.store("svc", "k", "v0")
        size = (tmp_path / "facts.jsonl").stat().st_size
        real_sync = store.journal._sync

        def failing_sync(fd: int, created: bool) -> None:
            real_sync(fd, created)
            raise OSError(5, "Input/output error")

        monkeypatch.setattr(store.journal, "_sync", failing_sync)
        with pytest.raises(JournalPoisoned):
            store.store("svc", "k", "v1", idempotency_key="once")
        assert (tmp_path / "facts.jsonl").stat().st_size == size  # reported failed: nothing appended
    with cruxsql.open(tmp_path) as store:  # the client retries after the restart the poisoning asks for
        fact = store.store("svc", "k", "v1", idempotency_key="once")
        assert store.store("svc", "k", "v1", idempotency_key="once") == fact
        assert [f.value for f in store.history("svc", "k")] == ["v0", "v1"]
        assert store.verify().ok


def test_a_view_commit_that_fails_after_the_fsync_still_reports_the_write(tmp_path: Path, monkeypatch) -> None:
    with cruxsql.open(tmp_path) as store:
        store.store("svc", "k", "v0")
        calls = {"n": 0}
        real = appended.replay_appended

        def busy_once(*args, **kwargs):
            calls["n"] += 1
            if calls["n"] == 1:
                raise apsw.BusyError("database is locked")
            return real(*args, **kwargs)

        monkeypatch.setattr(store_module, "replay_appended", busy_once)
        fact = store.store("svc", "k", "v1")  # durable, so reported done; the view is repaired from the journal
        assert store.get(fact.fact_id).value == "v1"
        assert store.store("svc", "k", "v2").version == 3  # the store stays usable
        assert [f.value for f in store.history("svc", "k")] == ["v0", "v1", "v2"]
        assert store.verify().ok


def test_a_read_never_waits_for_sqlites_write_lock(tmp_path: Path) -> None:
    # a write indexes what it stored, so a read has nothing to write: it answers while another
    # connection (a compaction's view rewrite, say) holds SQLite's write lock
    with cruxsql.open(tmp_path) as store:
        fact = store.store("svc", "k", "indexed by its own write")
        from cruxsql.recall.text_index import TextIndex
        assert TextIndex(store.db).is_current()
        other = apsw.Connection(str(tmp_path / "cruxsql.db"))
        other.execute("BEGIN IMMEDIATE")
        try:
            store.db.setbusytimeout(0)  # a wait would fail at once instead of passing unseen
            rows = cruxsql.Recall(store).query_facts("indexed", contract="legacy").rows
            assert [r["fact_id"] for r in rows] == [fact.fact_id]
        finally:
            other.execute("ROLLBACK")
            other.close()
