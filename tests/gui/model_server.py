"""A local model server for the Models dialog's tests and the screenshots (holds no tests).

Serves byte strings on 127.0.0.1 with Range support; a route can be slowed down (to cancel it
halfway) or hang up after some bytes (a dropped connection).
"""

from __future__ import annotations

import hashlib
import re
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from realtime.api import ModelEntry, ModelFile


@dataclass
class Route:
    body: bytes
    chunk: int = 1 << 16
    delay_s: float = 0.0  # between chunks
    drop_after: int = 0  # bytes sent before hanging up, while drops_left > 0
    drops_left: int = 0


@dataclass
class ServerState:
    routes: dict[str, Route] = field(default_factory=dict)
    ranges: list[tuple[str, str | None]] = field(default_factory=list)  # (path, Range header)
    lock: threading.Lock = field(default_factory=threading.Lock)


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: object) -> None:  # quiet test output
        return

    def do_GET(self) -> None:
        state = self.server.state
        rng = self.headers.get("Range")
        with state.lock:
            state.ranges.append((self.path, rng))
            route = state.routes.get(self.path)
            drop = route is not None and route.drops_left > 0
            if route is not None and drop:
                route.drops_left -= 1
        if route is None:
            self.send_error(404)
            return
        start = 0
        m = re.fullmatch(r"bytes=(\d+)-", rng or "")
        if m:
            start = int(m.group(1))
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(route.body) - 1}/{len(route.body)}")
        else:
            self.send_response(200)
        payload = route.body[start:]
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("Content-Type", "application/octet-stream")
        self.end_headers()
        if drop:
            payload = payload[: route.drop_after]
        try:
            for i in range(0, len(payload), route.chunk):
                self.wfile.write(payload[i : i + route.chunk])
                self.wfile.flush()
                if route.delay_s:
                    time.sleep(route.delay_s)
        except (BrokenPipeError, ConnectionResetError):
            return  # the client stopped reading (a cancelled download)
        if drop:
            self.connection.shutdown(socket.SHUT_RDWR)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    state: ServerState


@dataclass
class ModelServer:
    state: ServerState
    base: str

    def add(self, path: str, route: Route) -> str:
        with self.state.lock:
            self.state.routes[path] = route
        return self.base + path

    def ranges(self, path: str) -> list[str | None]:
        with self.state.lock:
            return [r for p, r in self.state.ranges if p == path]


@contextmanager
def model_server() -> Iterator[ModelServer]:
    httpd = _Server(("127.0.0.1", 0), _Handler)
    httpd.state = ServerState()
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    try:
        yield ModelServer(httpd.state, f"http://127.0.0.1:{httpd.server_address[1]}")
    finally:
        httpd.shutdown()
        httpd.server_close()


def served_entry(
    server: ModelServer,
    filename: str,
    body: bytes,
    route: Route | None = None,
    name: str | None = None,
    licence: str = "test licence",
    default: bool = True,
) -> ModelEntry:
    """A catalogue entry for `body`, pinned to its SHA-256 and size, served by `server`."""
    path = f"/{filename}"
    url = server.add(path, route or Route(body))
    return ModelEntry(
        name=name or filename.rsplit(".", 1)[0],
        role="swapper",
        files=(ModelFile(filename, hashlib.sha256(body).hexdigest(), len(body)),),
        urls=(url,),
        archive=None,
        licence=licence,
        licence_url="https://example.invalid/licence",
        description=f"test model {filename}",
        default=default,
    )
