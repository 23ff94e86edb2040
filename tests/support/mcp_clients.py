"""SDK clients driving real `cruxsql mcp` processes from synchronous tests (through an anyio portal)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Optional

import httpx2
from anyio.from_thread import BlockingPortal
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

CLI = [sys.executable, "-m", "cruxsql"]


def server_env(extra: Optional[dict[str, str]] = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CRUX", "CORECRUXD"))}
    env.update(extra or {})
    return env


class McpClient:
    """One SDK ClientSession over a transport, with blocking calls."""

    def __init__(self, portal: BlockingPortal, transport: Any) -> None:
        self.portal = portal
        self._stack = ExitStack()
        streams = self._stack.enter_context(portal.wrap_async_context_manager(transport))
        self.session = self._stack.enter_context(portal.wrap_async_context_manager(
            ClientSession(*streams[:2], read_timeout_seconds=60)))
        portal.call(self.session.initialize)

    def call(self, name: str, arguments: Optional[dict[str, Any]] = None) -> Any:
        return self.portal.call(self.session.call_tool, name, arguments or {})

    def text(self, name: str, arguments: Optional[dict[str, Any]] = None) -> str:
        result = self.call(name, arguments)
        assert not result.is_error, result.content[0].text
        return result.content[0].text

    def tools(self) -> list[Any]:
        return self.portal.call(self.session.list_tools).tools

    def close(self) -> None:
        self._stack.close()


def stdio(portal: BlockingPortal, data_dir: Path, *args: str, env: Optional[dict[str, str]] = None) -> McpClient:
    params = StdioServerParameters(command=CLI[0], args=CLI[1:] + ["mcp", "--data-dir", str(data_dir), "--create", *args],
                                   env=server_env(env))
    return McpClient(portal, stdio_client(params, errlog=open(os.devnull, "w")))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class HttpServer:
    """A `cruxsql mcp --http` process on a free 127.0.0.1 port."""

    def __init__(self, data_dir: Path, env: dict[str, str], *args: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.proc = subprocess.Popen(CLI + ["mcp", "--data-dir", str(data_dir), "--create", "--http", f"127.0.0.1:{self.port}",
                                            *args], env=server_env(env), stderr=subprocess.PIPE)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                if self.proc.poll() is not None:
                    raise RuntimeError(self.proc.stderr.read().decode()) from None
                time.sleep(0.05)
        raise RuntimeError("cruxsql mcp --http did not start")

    def client(self, portal: BlockingPortal, token: Optional[str]) -> McpClient:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        http = httpx2.AsyncClient(headers=headers, timeout=30)
        return McpClient(portal, streamable_http_client(self.url, http_client=http))

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)
