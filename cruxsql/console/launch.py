"""Starting the console: check the request, then run the server in its own process.

The caller (`cruxsql console`) catches the view up and migrates it through apsw (the only binding that
writes it) and closes it before `run`; Datasette then reads it in a child process through Python's sqlite3, read-only, as a WAL reader:
it sees every later write on reload and never holds a lock a writer waits for.
"""

from __future__ import annotations

import importlib.util
import ipaddress
import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import apsw

from ..errors import InvalidInput
from .metadata import AUDIT_DB, VIEW_DB, build_metadata
from .server import TOKEN_ENV

EXTRA_HINT = "pip install 'cruxsql[console]'"
REQUIRED_MODULES = ("datasette", "datasette_dashboards", "uvicorn")
MIN_TOKEN_LENGTH = 16
# Facet suggestions try every column of a table page under their own 50 ms limit: on the 28 columns of a
# 1M-row `facts` that is over a second per page for suggestions an operator rarely wants.
SETTINGS = {"sql_time_limit_ms": 1000, "max_returned_rows": 1000, "default_page_size": 100, "suggest_facets": False}


@dataclass(frozen=True)
class ConsoleRequest:
    data_dir: Optional[Path]
    host: str = "127.0.0.1"
    port: int = 8001
    token: Optional[str] = None
    audit: Optional[Path] = None


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_request(req: ConsoleRequest) -> None:
    """Refuse what must not start: missing extra, an exposed host without a token, a bad audit file."""
    missing = [m for m in REQUIRED_MODULES if importlib.util.find_spec(m) is None]
    if missing:
        raise InvalidInput(f"the console needs Datasette and datasette-dashboards ({', '.join(missing)} "
                           f"not installed): {EXTRA_HINT}")
    if not 0 <= req.port <= 65535:
        raise InvalidInput(f"--port {req.port} is not a TCP port (0..65535)")
    if req.token is not None and len(req.token) < MIN_TOKEN_LENGTH:
        raise InvalidInput(f"--token is {len(req.token)} characters long; use at least {MIN_TOKEN_LENGTH}")
    if not is_loopback(req.host) and req.token is None:
        raise InvalidInput(f"--host {req.host} is not a loopback address and the view holds every tenant's and "
                           f"every agent's facts, private ones included: pass --token (or {TOKEN_ENV}) to require it")
    if req.audit is not None:
        check_audit_export(req.audit)


def check_audit_export(path: Path) -> None:
    if not path.is_file():
        raise InvalidInput(f"--audit {str(path)!r} is not a file")
    try:
        db = apsw.Connection(f"file:{path}?mode=ro", flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI)
        try:
            names = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        finally:
            db.close()
    except apsw.Error:
        raise InvalidInput(f"--audit {str(path)!r} is not a SQLite database") from None
    if not {"events", "facts", "event_facts", "export_info"} <= names:
        raise InvalidInput(f"--audit {str(path)!r} is not a cruxsql audit export (`cruxsql export audit "
                           "--format sqlite` writes one)")


def server_config(req: ConsoleRequest) -> dict[str, Any]:
    databases: dict[str, Any] = {}
    if req.data_dir is not None:
        view = req.data_dir / "cruxsql.db"
        databases[VIEW_DB] = {"path": str(view.resolve()), "mutable": True, "queries": "view"}
    if req.audit is not None:
        databases[AUDIT_DB] = {"path": str(req.audit.resolve()), "mutable": True, "queries": "audit"}
    return {"host": req.host.strip("[]"), "port": req.port, "settings": SETTINGS, "databases": databases,
            "metadata": build_metadata(req.data_dir, req.audit, req.token is not None)}


def run(req: ConsoleRequest) -> int:
    """Start the server process and wait for it (the caller has checked the request and caught the view
    up); its first stdout line is the console's address."""
    env = dict(os.environ)
    env.pop(TOKEN_ENV, None)
    if req.token is not None:
        env[TOKEN_ENV] = req.token
    proc = subprocess.Popen([sys.executable, "-m", "cruxsql.console.server", "-"], stdin=subprocess.PIPE, env=env)
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(server_config(req)).encode("utf-8"))
    proc.stdin.close()

    stopped: list[int] = []

    def stop(signum: int, frame: Any) -> None:
        stopped.append(signum)
        proc.terminate()

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        code = proc.wait()
        return 0 if stopped else code
    except KeyboardInterrupt:
        proc.terminate()
        proc.wait()
        return 0
    finally:
        signal.signal(signal.SIGTERM, previous)
