"""The console's server process: `python -m cruxsql.console.server -` with its JSON config on stdin.

Runs Datasette under uvicorn on an already bound socket, so port 0 works and the first line on stdout
is the real address. Only Python's sqlite3 (Datasette's) opens the databases in this process.
The access token, if any, comes from the environment (`CRUXSQL_CONSOLE_TOKEN`), never from the file.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from typing import Any

TOKEN_ENV = "CRUXSQL_CONSOLE_TOKEN"


def serve(config: dict[str, Any]) -> None:
    import uvicorn
    from datasette.app import Datasette
    from datasette.database import Database
    from datasette.plugins import pm

    # (after datasette.plugins: imported first, this module would be registered as a plugin half-built)
    import datasette.handle_exception

    from .layout import LayoutPlugin
    from .plugin import ConsolePlugin

    # With `rich` importable (the mcp extra brings it), Datasette prints every failed request's traceback
    # and local variables to the terminal: ~85 KB per query stopped by the time limit, holding the SQL and
    # row values where erasure cannot reach them. The error page and JSON are unchanged without it.
    datasette.handle_exception.rich = None
    pm.unregister(name="datasette.handle_exception")  # it prints a traceback; ConsolePlugin logs one line
    token = os.environ.get(TOKEN_ENV) or None
    pm.register(ConsolePlugin({n: d["queries"] for n, d in config["databases"].items()}, token),
                name="cruxsql-console")
    pm.register(LayoutPlugin(), name="cruxsql-console-layout")
    ds = Datasette(metadata=config["metadata"], settings=config["settings"])
    ds.remove_database("_memory")   # Datasette adds an empty one when started without files
    for name, spec in config["databases"].items():
        ds.add_database(Database(ds, path=spec["path"], is_mutable=spec["mutable"]), name=name)
    family = socket.AF_INET6 if ":" in config["host"] else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((config["host"], config["port"]))
    sock.listen(2048)  # connections made as soon as the address is printed wait in the backlog
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if family == socket.AF_INET6 else host
    print(f"cruxsql console: http://{shown}:{port}/", flush=True)
    server = uvicorn.Server(uvicorn.Config(ds.app(), log_level="warning", lifespan="off"))
    server.run(sockets=[sock])


def main() -> None:
    serve(json.load(sys.stdin))


if __name__ == "__main__":
    main()
