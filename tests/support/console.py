"""A real console for tests: a store built through the CLI and the journal, and `cruxsql console` running."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import urllib.parse
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Optional

import pytest

import cruxsql
from cruxsql.governance import erasure, legal_holds
from support.journal_builders import fact_obj, line, write_journal
from support.cli_process import run_cruxsql

OLD_FACTS = [
    fact_obj("f_0000000000000000000000000000a001", entity="svc", key="owner", value="alice",
             tenant_hash="acme", horizon_class="medium", actor="ops", stored_at="2025-01-01T00:00:00Z"),
    fact_obj("f_0000000000000000000000000000a002", entity="user:42", key="email", value="someone@example.org",
             tenant_hash="acme", stored_at="2025-01-02T00:00:00Z"),
    fact_obj("f_0000000000000000000000000000a003", entity="__agent::claude::notes", key="plan", value="ship it",
             tenant_hash="acme", private=True, stored_at="2025-01-03T00:00:00Z"),
    fact_obj("f_0000000000000000000000000000a004", entity="svc", key="region", value="eu-west-1",
             tenant_hash="globex", horizon_class="volatile", actor="ops", stored_at="2025-01-04T00:00:00Z"),
    fact_obj("f_0000000000000000000000000000a005", entity="__ops::deploy", key="status", value="green",
             tenant_hash="acme", stored_at="2025-01-05T00:00:00Z"),
]


def cli(data_dir: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    result = run_cruxsql(data_dir, *args)
    if check and result.returncode != 0:
        raise AssertionError(f"cruxsql {' '.join(args)} failed: {result.stderr}")
    return result


def build_store(data_dir: Path) -> dict[str, str]:
    """Old facts in the journal, then writes through the Python API and the CLI: stores, a supersede, a
    delete, a legal hold, two erasures and a corrupt line. Returns named fact ids."""
    write_journal(data_dir, [line("store", fact=f) for f in OLD_FACTS])
    ids = {"old_owner": OLD_FACTS[0]["fact_id"], "held_email": OLD_FACTS[1]["fact_id"]}
    with cruxsql.open(data_dir) as store:
        first = store.store("svc", "owner", "bob", tenant="acme", actor="claude").fact_id
        second = store.store("svc", "owner", "carol", tenant="acme", actor="claude").fact_id
        store.supersede(first, second)
        doomed = store.store("tmp", "scratch", "delete me", tenant="acme").fact_id
        store.delete(doomed)
        legal_holds.place_hold(store, "acme", "litigation 17", ["user:"], "legal")
        for n in (1, 2):
            gone = store.store("pii", f"phone{n}", f"+44 20 7946 00{n}{n}", tenant="acme").fact_id
            erasure.erase(store, erasure.Selection(fact_ids=(gone,)), reason=f"data-subject request {n}")
    with open(data_dir / "facts.jsonl", "ab") as fh:  # after the erasures: their compaction drops corrupt lines
        fh.write(b"this line is not JSON\n")
    cli(data_dir, "store", "svc", "tier", "gold", "--tenant", "globex", "--actor", "ops")
    ids.update(superseded=first, head=second, deleted=doomed)
    return ids


@pytest.fixture(scope="session")
def console_store(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """One store for the console's HTTP and browser tests (they only add facts to it)."""
    data_dir = tmp_path_factory.mktemp("console") / "data"
    return data_dir, build_store(data_dir)


class Console:
    """A running `cruxsql console` process and its address. Its stdout and stderr are read as they come
    (a pipe nobody reads fills at 64 KiB and then blocks the server) and kept in `output`."""

    def __init__(self, proc: subprocess.Popen, url: str) -> None:
        self.proc = proc
        self.url = url
        self._chunks: list[str] = []
        self._drains = [threading.Thread(target=self._drain, args=(stream,), daemon=True)
                        for stream in (proc.stdout, proc.stderr)]
        for drain in self._drains:
            drain.start()

    def _drain(self, stream: Any) -> None:
        for chunk in iter(lambda: stream.read(4096), ""):
            self._chunks.append(chunk)

    def output(self) -> str:
        """What the console printed after its address line, on stdout and stderr, so far."""
        return "".join(self._chunks)

    def output_at_exit(self) -> str:
        """Everything the console printed, once its process has ended (stop it first)."""
        for drain in self._drains:
            drain.join(timeout=20)
        return self.output()

    def get(self, path: str, headers: Optional[dict[str, str]] = None) -> tuple[int, str, Any]:
        req = urllib.request.Request(self.url + path.lstrip("/"), headers=headers or {})
        opener = urllib.request.build_opener(NoRedirect)
        try:
            with opener.open(req, timeout=30) as resp:
                return resp.status, resp.read().decode("utf-8"), resp.headers
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode("utf-8"), exc.headers

    def rows(self, db: str, query: str, **params: str) -> list[dict[str, Any]]:
        """A canned query's rows (all of them) as dicts."""
        qs = urllib.parse.urlencode({**params, "_shape": "array", "_size": "max"})
        status, body, _ = self.get(f"{db}/{query}.json?{qs}")
        assert status == 200, body
        return json.loads(body)

    def sql(self, db: str, sql: str) -> tuple[int, Any]:
        status, body, _ = self.get(f"{db}.json?" + urllib.parse.urlencode({"sql": sql, "_shape": "array"}))
        return status, json.loads(body)


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


@contextmanager
def running_console(data_dir: Optional[Path], *args: str, env: Optional[dict[str, str]] = None) -> Iterator[Console]:
    full_env = {**os.environ, **(env or {})}
    if data_dir is not None:
        full_env["CRUXSQL_DATA_DIR"] = str(data_dir)
    proc = subprocess.Popen([sys.executable, "-m", "cruxsql", "console", "--port", "0", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=full_env)
    try:
        first = proc.stdout.readline()
        if not first.startswith("cruxsql console: http://"):
            proc.kill()
            raise AssertionError(f"console did not start: {first!r} {proc.stderr.read()}")
        yield Console(proc, first.split()[-1])
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
