"""Running the server: in the foreground (`serve`) or on a thread of its own (tests, the bench)."""

from __future__ import annotations

import asyncio
import socket
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from aiohttp import web

from realtime.remote.server import Server, ServerConfig


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


async def start_site(server: Server, host: str, port: int, tls: ssl.SSLContext | None) -> web.AppRunner:
    runner = web.AppRunner(server.app(), handle_signals=False, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port, ssl_context=tls, reuse_address=True)
    await site.start()
    return runner


@dataclass
class ServerThread:
    """A server on its own event loop thread; `stop()` ends it (sessions closed, faces deleted)."""

    config: ServerConfig
    host: str = "127.0.0.1"
    port: int = 0
    tls: ssl.SSLContext | None = None
    server: Server = field(init=False)
    _loop: asyncio.AbstractEventLoop = field(init=False)
    _thread: threading.Thread = field(init=False)
    _runner: web.AppRunner | None = None
    _started: threading.Event = field(default_factory=threading.Event)
    _failure: BaseException | None = None

    def __post_init__(self) -> None:
        self.port = self.port or free_port(self.host)
        self.server = Server(self.config)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="remote-server", daemon=True)

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.host}:{self.port}"

    def start(self, timeout: float = 10.0) -> ServerThread:
        self._thread.start()
        if not self._started.wait(timeout):
            raise TimeoutError("the server did not start")
        if self._failure is not None:
            raise self._failure
        return self

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._runner = self._loop.run_until_complete(
                start_site(self.server, self.host, self.port, self.tls)
            )
        except BaseException as exc:
            self._failure = exc
            self._started.set()
            return
        self._started.set()
        self._loop.run_forever()
        self._loop.run_until_complete(self._runner.cleanup())
        self._loop.close()

    def call(self, fn: Callable[[], object]) -> None:
        self._loop.call_soon_threadsafe(fn)

    def stop(self, timeout: float = 10.0) -> None:
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout)

    def __enter__(self) -> ServerThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
