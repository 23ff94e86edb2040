"""The Datasette plugin the console registers in its server process.

* every connection to a database a user can query (the served ones and Datasette's `_memory`) runs
  under the sandbox of `cruxsql sql` (`console/sandbox.py`): nothing in the console can write, read a
  file, register a tokenizer or outgrow the memory and time limits;
* SQL functions `cruxsql_blake3(text)` and `cruxsql_report_hash(json)` let canned queries verify hash chains;
* canned queries are offered per request, only those whose tables exist;
* an unexpected error answers Datasette's own error page and logs one line on stderr, never a traceback
  (Datasette's default handler, which prints one, is unregistered by `console/server.py`);
* with a token, a request is the `operator` actor when it carries `Authorization: Bearer <token>` or has
  signed in at `/-/login?token=<token>` (Datasette's own signed `ds_actor` cookie); the metadata's
  instance-level `allow` refuses everyone else.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import sys
from typing import Any, Optional

import blake3
from datasette import hookimpl
from datasette.handle_exception import handle_exception as datasette_error_page
from datasette.utils.asgi import Base400, Response
from datasette.views.base import DatasetteError

from ..governance.erasure_proof import report_hash
from . import canned, sandbox
from .metadata import OPERATOR_ACTOR

LOGIN_PATH = "/-/login"


def _blake3_hex(text: Optional[str]) -> Optional[str]:
    return None if text is None else blake3.blake3(text.encode("utf-8")).hexdigest()


def _report_hash(value: Optional[str]) -> Optional[str]:
    try:
        report = json.loads(value) if value is not None else None
    except ValueError:
        return None
    return report_hash(report) if isinstance(report, dict) else None


class ConsolePlugin:
    """Hook implementations bound to one console's served databases and access token."""

    def __init__(self, query_sets: dict[str, str], token: Optional[str]) -> None:
        self.query_sets = query_sets  # database name -> "view" or "audit"
        self.token = token
        self.__name__ = __name__  # Datasette lists plugins by module name

    @hookimpl
    def prepare_connection(self, conn: sqlite3.Connection, database: str) -> None:
        if database == "_internal":  # Datasette's own catalogue: it writes there, users cannot query it
            return
        if database in self.query_sets:
            conn.create_function(canned.BLAKE3_FUNCTION, 1, _blake3_hex, deterministic=True)
            conn.create_function(canned.REPORT_HASH_FUNCTION, 1, _report_hash, deterministic=True)
        sandbox.apply(conn)

    @hookimpl
    def canned_queries(self, datasette: Any, database: str) -> Any:
        kind = self.query_sets.get(database)
        if kind is None:
            return None

        async def offered() -> dict[str, Any]:
            queries = canned.view_queries() if kind == "view" else canned.audit_queries()
            columns = await datasette.get_database(database).execute_fn(columns_of)
            return {q.name: q.to_metadata() for q in queries if q.available(columns)}

        return offered

    def _token_matches(self, presented: Optional[str]) -> bool:
        return bool(self.token and presented and secrets.compare_digest(presented.encode(), self.token.encode()))

    @hookimpl
    def actor_from_request(self, request: Any) -> Optional[dict[str, str]]:
        auth = request.headers.get("authorization", "")
        if auth.startswith("Bearer ") and self._token_matches(auth[len("Bearer "):].strip()):
            return {"id": OPERATOR_ACTOR}
        return None

    @hookimpl
    def register_routes(self) -> list[tuple[str, Any]]:
        plugin = self

        async def login(request: Any, datasette: Any) -> Response:
            if plugin.token is None:
                return Response.redirect("/")
            if not plugin._token_matches(request.args.get("token")):
                return Response.html("<h1>Forbidden</h1><p>Open the console with "
                                     f"<code>{LOGIN_PATH}?token=&lt;the console's token&gt;</code>.</p>", status=403)
            response = Response.redirect("/")
            response.set_cookie("ds_actor", datasette.sign({"a": {"id": OPERATOR_ACTOR}}, "actor"), httponly=True,
                                samesite="strict")
            return response

        return [(r"^/-/login$", login)]

    @hookimpl
    def handle_exception(self, datasette: Any, request: Any, exception: Exception) -> Any:
        if not isinstance(exception, (Base400, DatasetteError)):
            log_failure(request, exception)
            exception = DatasetteError(str(exception), status=500)
        return datasette_error_page(datasette, request, exception)


def log_failure(request: Any, exception: Exception) -> None:
    """One line on stderr for a failed request: its path (not its query string, which may hold SQL and
    values) and the error."""
    message = " ".join(str(exception).split())[:200]
    print(f"cruxsql console: {request.method} {request.path} failed: {type(exception).__name__}: {message}",
          file=sys.stderr, flush=True)


def columns_of(conn: sqlite3.Connection) -> dict[str, set[str]]:
    """Every table and view of the database with its columns (which canned queries to offer)."""
    names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")]
    return {n: {r[0] for r in conn.execute("SELECT name FROM pragma_table_info(?)", (n,))} for n in names}
