"""A TCP proxy for fault tests: pass, refuse (cut every connection, refuse new ones), stall.

It runs its own event loop on a thread, so a test (or a server in a subprocess) connects to
`proxy.port` as it would to the database, and the test switches the mode at any moment:

- `pass`: bytes flow both ways.
- `refuse`: every open connection is cut (reset), and the listening socket is closed, so a new
  connection is refused, as when the database's host is down. Back to `pass` listens again on
  the same port.
- `stall`: connections are accepted and kept, but nothing is forwarded either way (bytes read
  are held), as when packets stop getting through. Back to `pass`, the held bytes go on, as
  after a network partition heals.
- `cut_after_commit` (one shot, then `pass`): the next client message that contains a COMMIT
  is forwarded to the server, and the connection is cut before the server's answer comes back
  (a commit whose acknowledgement was lost).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

Mode = Literal["pass", "refuse", "stall", "cut_after_commit"]
T = TypeVar("T")


@dataclass(eq=False)
class _Link:
    client: asyncio.StreamWriter
    upstream: asyncio.StreamWriter | None = None

    def cut(self) -> None:
        for writer in (self.client, self.upstream):
            if writer is not None:
                writer.transport.abort()  # a reset, not a polite close


@dataclass(eq=False)
class FaultProxy:
    """Forward 127.0.0.1:`port` to `upstream_host`:`upstream_port`, with faults on demand."""

    upstream_host: str
    upstream_port: int
    port: int = 0
    mode: Mode = "pass"
    accepted: int = 0  # connections accepted so far
    commits_cut: int = 0
    _links: set[_Link] = field(default_factory=set)
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None
    _server: asyncio.Server | None = None
    _flowing: asyncio.Event | None = None

    def start(self) -> FaultProxy:
        ready = threading.Event()

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            self._flowing = asyncio.Event()
            self._flowing.set()
            loop.run_until_complete(self._listen())
            ready.set()
            loop.run_forever()
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

        self._thread = threading.Thread(target=run, name="faultproxy", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("the fault proxy did not start")
        return self

    def url_for(self, url: str) -> str:
        """`url` (a PostgreSQL URL to the upstream) pointed at the proxy instead."""
        return url.replace(f"{self.upstream_host}:{self.upstream_port}", f"127.0.0.1:{self.port}")

    def set_mode(self, mode: Mode) -> None:
        self._call(self._set_mode(mode))

    def close(self) -> None:
        if self._loop is None or self._thread is None:
            return
        self._call(self._shutdown())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop = None

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- on the proxy's loop ---------------------------------------------------------------

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._loop is None:
            raise RuntimeError("the fault proxy is not running")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(10)

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(
            self._handle, "127.0.0.1", self.port, reuse_address=True
        )
        self.port = self._server.sockets[0].getsockname()[1]

    async def _set_mode(self, mode: Mode) -> None:
        flowing = self._flowing
        if flowing is None:
            raise RuntimeError("not started")
        previous, self.mode = self.mode, mode
        if mode == "refuse":
            if self._server is not None:
                self._server.close()
                self._server = None
            for link in list(self._links):
                link.cut()
            self._links.clear()
            flowing.set()  # nothing is held: every link is gone
            return
        if mode == "stall":
            flowing.clear()
            return
        flowing.set()
        if previous == "refuse" or self._server is None:
            await self._listen()

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for link in list(self._links):
            link.cut()
        self._links.clear()
        if self._flowing is not None:
            self._flowing.set()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.mode == "refuse" or self._flowing is None:
            writer.transport.abort()
            return
        self.accepted += 1
        link = _Link(writer)
        self._links.add(link)
        try:
            await self._flowing.wait()  # a stalled proxy accepts but does not connect on
            if link not in self._links:
                return
            try:
                up_reader, up_writer = await asyncio.open_connection(
                    self.upstream_host, self.upstream_port
                )
            except OSError:
                writer.transport.abort()
                return
            link.upstream = up_writer
            if link not in self._links:  # cut while connecting
                link.cut()
                return
            await asyncio.gather(
                self._pump(reader, up_writer, link, to_server=True),
                self._pump(up_reader, writer, link, to_server=False),
            )
        finally:
            self._links.discard(link)
            link.cut()

    async def _pump(
        self,
        src: asyncio.StreamReader,
        dst: asyncio.StreamWriter,
        link: _Link,
        *,
        to_server: bool,
    ) -> None:
        flowing = self._flowing
        if flowing is None:
            return
        with contextlib.suppress(ConnectionError, OSError):
            while data := await src.read(65536):
                await flowing.wait()  # stalled: hold the bytes
                if link not in self._links:
                    return
                dst.write(data)
                await dst.drain()
                if to_server and self.mode == "cut_after_commit" and b"COMMIT" in data.upper():
                    # Let the server receive and commit it, then cut before its answer.
                    self.mode = "pass"
                    self.commits_cut += 1
                    self._links.discard(link)
                    link.cut()
                    return
        link.cut()
