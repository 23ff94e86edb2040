"""`cruxsql console`: the operators' Datasette console over the view (extra `cruxsql[console]`)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import click

from ..console.server import TOKEN_ENV
from .common import fails_cleanly, open_store
from .options import data_dir_option


@click.command("console")
@data_dir_option
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on. Anything but loopback requires --token.")
@click.option("--port", type=int, default=8001, show_default=True, help="TCP port (0: any free port).")
@click.option("--token", envvar=TOKEN_ENV, show_envvar=True, default=None,
              help="Access token (16+ characters): requests need `Authorization: Bearer TOKEN`, or sign in once "
                   "at /-/login?token=TOKEN. Required off loopback.")
@click.option("--audit", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also serve this audit export (`cruxsql export audit --format sqlite`) with its own metadata.")
@click.option("--no-view", is_flag=True, help="Serve only the --audit export, not the data directory's view.")
@fails_cleanly
def console(data_dir: Path, host: str, port: int, token: Optional[str], audit: Optional[Path],
            no_view: bool) -> None:
    """Browse the view in Datasette: documented tables, canned queries, dashboards.

    Read-only, in its own process (Datasette reads cruxsql.db as a WAL reader: new writes show on
    reload and a writer never waits for it). Binds 127.0.0.1 by default: the view holds every
    tenant's and every agent's facts, private ones included. Dashboards are at /-/dashboards.
    Stop it with Ctrl-C.
    """
    if no_view and audit is None:
        raise click.ClickException("--no-view needs --audit (there would be nothing to serve)")
    from ..console.launch import ConsoleRequest, check_request, run  # metadata and dashboards: only when serving

    req = ConsoleRequest(data_dir=None if no_view else data_dir, host=host, port=port, token=token, audit=audit)
    check_request(req)
    if req.data_dir is not None:
        with open_store(req.data_dir, "read") as store:  # migrations and journal catch-up through apsw, closed
            if store.read_only:
                raise click.ClickException(f"{req.data_dir} cannot be written, so its cruxsql.db cannot be caught "
                                           "up for the console to serve (`cruxsql sql` reads such a store)")
            store.refresh()
    sys.exit(run(req))


COMMANDS = (console,)
