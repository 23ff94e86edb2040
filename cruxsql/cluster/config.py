"""Which cluster a data directory mirrors: `<data_dir>/cluster.json`, written when a node first joins.

Once a data directory is bound, every surface that opens it (the CLI, the Python API, a node) writes
through the cluster: a local-only write would fork the directory from the fleet.
"""

from __future__ import annotations

import json
import re
import socket
import urllib.parse
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Optional

from ..errors import InvalidInput
from ..facts.files import write_file_durably

CONFIG_NAME = "cluster.json"
_GROUP = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@dataclass(frozen=True)
class ClusterConfig:
    urls: list[str]
    group: str = "default"
    replicas: int = 3
    node: str = ""
    server_store_dirs: tuple[str, ...] = ()
    """The NATS servers' storage directories, when this host sees them (a loopback trial, one host, or
    shared mounts): erasure then checks that their files, Raft logs included, no longer hold the bytes."""

    def store_paths(self) -> list[Path]:
        return [Path(d) for d in self.server_store_dirs]

    def check(self) -> "ClusterConfig":
        if not self.urls:
            raise InvalidInput("--cluster: give at least one nats:// URL")
        for url in self.urls:
            check_url(url)
        if not _GROUP.match(self.group):
            raise InvalidInput(f"--group: {self.group!r} must be 1-64 letters, digits, _ or -")
        if self.replicas not in (1, 3, 5):
            raise InvalidInput(f"--replicas: {self.replicas} must be 1, 3 or 5")
        if not _GROUP.match(self.node):
            raise InvalidInput(f"--node-name: {self.node!r} must be 1-64 letters, digits, _ or -")
        return self


def redact(url: str) -> str:
    """`url` with its credentials (user, password or token before `@`) replaced by `***`, for messages."""
    scheme, sep, rest = url.partition("://")
    authority, slash, path = rest.partition("/")
    if "@" not in authority:
        return url
    return f"{scheme}{sep}***@{authority.rpartition('@')[2]}{slash}{path}"


def redact_all(urls: list[str]) -> str:
    return ",".join(redact(u) for u in urls)


def check_url(url: str) -> None:
    """A nats:// (or tls://) URL with a host and, if given, a port 1-65535; else InvalidInput naming it."""
    shown = redact(url)
    if not url.startswith(("nats://", "tls://")) or len(url.split("://", 1)[1]) == 0:
        raise InvalidInput(f"--cluster: {shown!r} is not a nats:// URL")
    parts = urllib.parse.urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = -1
    if port is not None and not 1 <= port <= 65535:
        raise InvalidInput(f"--cluster: {shown!r} has no valid port (1-65535)")
    if not parts.hostname:
        raise InvalidInput(f"--cluster: {shown!r} names no host")


def parse_urls(text: str) -> list[str]:
    """`nats://a:4222,nats://b:4222` -> the list (blank entries dropped)."""
    return [u.strip() for u in text.split(",") if u.strip()]


def default_node_name() -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "-", socket.gethostname())[:64] or "node"


def read_config(data_dir: Path) -> Optional[ClusterConfig]:
    path = Path(data_dir) / CONFIG_NAME
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (ValueError, UnicodeError) as exc:
        raise InvalidInput(f"{path}: not a cluster configuration ({exc})") from None
    try:
        return ClusterConfig(list(obj["urls"]), obj["group"], int(obj["replicas"]), obj["node"],
                             tuple(str(d) for d in obj.get("server_store_dirs", []))).check()
    except KeyError as exc:
        raise InvalidInput(f"{path}: not a cluster configuration: the key {exc.args[0]!r} is missing") from None
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"{path}: not a cluster configuration ({exc})") from None


def write_config(data_dir: Path, config: ClusterConfig) -> None:
    Path(data_dir).mkdir(parents=True, exist_ok=True)
    write_file_durably(Path(data_dir) / CONFIG_NAME, json.dumps(asdict(config), indent=2).encode() + b"\n")


def is_bound(data_dir: Path) -> bool:
    return (Path(data_dir) / CONFIG_NAME).exists()
