"""stdio for the MCP server without a thread hop per message.

The SDK's stdio transport reads and writes through worker threads (two or three thread switches per
request), which dominates a sub-millisecond tool call on a busy machine. Here stdin and stdout are
non-blocking pipes driven by the event loop. As the SDK does, the real descriptors are moved out of
the way while serving: fd 0 reads /dev/null and fd 1 goes to stderr, so a stray print can never
corrupt the JSON-RPC stream. A regular file (stdin or stdout redirected to one) never blocks, so it
is served the same way.
"""

from __future__ import annotations

import os
from contextlib import asynccontextmanager
from typing import AsyncIterator

import anyio

_CHUNK = 1 << 16


class FdLines:
    """Lines (bytes, newline included) read from a non-blocking descriptor as they arrive."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = b""

    def __aiter__(self) -> "FdLines":
        return self

    async def __anext__(self) -> bytes:
        while True:
            end = self.buffer.find(b"\n")
            if end >= 0:
                line, self.buffer = self.buffer[:end + 1], self.buffer[end + 1:]
                return line
            try:
                chunk = os.read(self.fd, _CHUNK)
            except BlockingIOError:
                await anyio.wait_readable(self.fd)
                continue
            if not chunk:
                if self.buffer:
                    line, self.buffer = self.buffer, b""
                    return line
                raise StopAsyncIteration
            self.buffer += chunk


class FdWriter:
    """`write` buffers, `flush` drains to a non-blocking descriptor, waiting only when the pipe is full."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.pending = bytearray()

    async def write(self, text: str) -> None:
        self.pending += text.encode("utf-8")

    async def flush(self) -> None:
        while self.pending:
            try:
                written = os.write(self.fd, self.pending)
            except BlockingIOError:
                await anyio.wait_writable(self.fd)
                continue
            del self.pending[:written]


@asynccontextmanager
async def stdio_pipes() -> AsyncIterator[tuple[FdLines, FdWriter]]:
    """Private non-blocking duplicates of stdin and stdout."""
    wire_in, wire_out = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    os.close(devnull)
    try:
        os.set_blocking(wire_in, False)
        os.set_blocking(wire_out, False)
        yield FdLines(wire_in), FdWriter(wire_out)
    finally:
        os.dup2(wire_in, 0)
        os.dup2(wire_out, 1)
        os.close(wire_in)
        os.close(wire_out)
