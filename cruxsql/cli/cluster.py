"""CLI commands of cluster mode: `node` (a long-running mirror of the group's stream) and
`cluster status`. Every other command writes through the cluster once its data directory is bound."""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Optional

import click

from .common import echo_json, echo_rows, fails_cleanly, progress_callback, reject_empty
from .data_dir import check_directory
from .options import data_dir_option, output_options

CLUSTER_ENV = "CRUXSQL_CLUSTER"


def _config(data_dir: Path, urls: Optional[str], group: Optional[str], replicas: Optional[int],
            node_name: Optional[str], store_dirs: tuple[Path, ...] = ()):
    from ..cluster.config import ClusterConfig, default_node_name, parse_urls, read_config
    check_directory(data_dir)
    bound = read_config(data_dir)
    if urls is not None:
        cluster_urls = parse_urls(urls)
    elif bound is not None:
        cluster_urls = bound.urls
    else:
        raise click.UsageError(f"--cluster is required: {data_dir} is not bound to a cluster yet")
    return ClusterConfig(cluster_urls,
                         group or (bound.group if bound else "default"),
                         replicas or (bound.replicas if bound else 3),
                         node_name or (bound.node if bound else default_node_name()),
                         tuple(str(d.resolve()) for d in store_dirs) if store_dirs
                         else (bound.server_store_dirs if bound else ())).check()


cluster_option = click.option(
    "--cluster", "urls", envvar=CLUSTER_ENV, show_envvar=True, callback=reject_empty, metavar="URLS",
    help="NATS servers, comma-separated (nats://host:4222,...); default: the data directory's cluster.json.")


@click.command("node")
@cluster_option
@click.option("--group", callback=reject_empty, help="Tenant group: the stream CRUXSQL_<GROUP> [default: default].")
@click.option("--replicas", type=click.Choice(["1", "3", "5"]), default=None,
              help="Copies of the stream, when this node creates it [default: 3; 1 for a single server].")
@click.option("--node-name", callback=reject_empty, help="This node's name in `cluster status` [default: hostname].")
@click.option("--server-store-dir", "store_dirs", multiple=True,
              type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="A NATS server's JetStream storage directory visible on this host (repeatable): erasure then "
                   "waits until no file in it, Raft logs included, holds the erased entries [default: not checked].")
@data_dir_option
@fails_cleanly
def node(urls: Optional[str], group: Optional[str], replicas: Optional[str], node_name: Optional[str],
         store_dirs: tuple[Path, ...], data_dir: Path) -> None:
    """Run a cluster node: mirror the group's JetStream stream into DATA_DIR until stopped (SIGTERM/Ctrl-C).

    The first run binds DATA_DIR to the cluster (DATA_DIR/cluster.json); from then on every cruxsql
    command on DATA_DIR writes through the cluster: a write returns once a quorum of the stream has it
    and this node has applied it. DATA_DIR joins empty (or as a copy of another node's directory).

    \b
      cruxsql node --cluster nats://10.0.0.1:4222,nats://10.0.0.2:4222,nats://10.0.0.3:4222 \\
                   --data-dir /var/lib/cruxsql --node-name host1
    """
    from ..cluster.config import redact_all
    from ..cluster.node import run_node
    config = _config(data_dir, urls, group, int(replicas) if replicas else None, node_name, store_dirs)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    def ready() -> None:
        click.echo(f"node {config.node}: mirroring stream CRUXSQL_{config.group} into {data_dir} "
                   f"(R{config.replicas}, {redact_all(config.urls)})", err=True)

    run_node(data_dir, config, stop, on_ready=ready, progress=progress_callback("catching up with the cluster"))
    click.echo(f"node {config.node}: stopped", err=True)


@click.group("cluster")
def cluster_group() -> None:
    """Cluster mode: a fleet of cruxsql nodes sharing one memory on NATS JetStream."""


@cluster_group.command("status")
@cluster_option
@click.option("--group", callback=reject_empty, help="Tenant group [default: the data directory's, or default].")
@output_options(text="The stream, its replicas, then the nodes as a table (default).",
                json_help="Print the status as one JSON object.", records="nodes")
@data_dir_option
@fails_cleanly
def status(urls: Optional[str], group: Optional[str], fmt: str, data_dir: Path) -> None:
    """The group's stream (last sequence, leader, replicas) and every node: its mirrored position and lag."""
    from ..cluster.status import cluster_status
    report = cluster_status(_config(data_dir, urls, group, None, None))
    if fmt == "json":
        echo_json(report.to_dict())
        return
    if fmt == "text":
        click.echo(f"stream {report.stream}: last sequence {report.last_seq}, {report.messages} messages, "
                   f"leader {report.leader or '(none)'}")
        for replica in report.replicas:
            state = "offline" if replica["offline"] else "current" if replica["current"] else "catching up"
            click.echo(f"  replica {replica['name']}: {state} (lag {replica['lag']})")
    columns = ["node", "host", "pid", "position", "lag", "up", "reported_seconds_ago"]
    echo_rows(columns, [[n[c] for c in columns] for n in report.nodes], "table" if fmt == "text" else fmt)


COMMANDS = (node, cluster_group)
