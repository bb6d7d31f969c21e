"""A real Redis server and real FaceCast workers for the job-queue tests; each stops with its test
module (or at once, if the test fails)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.paths import REPO_ROOT
from tests.signals import CHILD_SIGNALS

Worker = Callable[..., "subprocess.Popen[bytes]"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisServer:
    """A real redis-server on 127.0.0.1 that a test can restart on the same port, with its data
    kept (`persist`: an append-only file, as the Kubernetes config runs it) or lost."""

    def __init__(self, folder: Path, persist: bool = False) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.skip("redis-server is not installed (apt-get install -y redis-server)")
        self.binary, self.folder, self.persist = binary, folder, persist
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> RedisServer:
        keep = ["--appendonly", "yes", "--appendfsync", "always"] if self.persist else ["--appendonly", "no"]
        self.proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", *keep],
            cwd=self.folder,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return self
            except OSError:
                assert self.proc.poll() is None and time.monotonic() < deadline, "redis-server did not start"
                time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)

    def restart(self) -> None:
        self.stop()
        self.start()


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    yield server.url
    server.stop()


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[Callable[..., RedisServer]]:
    """redis_server(persist=False): a redis-server of this test's own, stopped at its end."""
    servers: list[RedisServer] = []

    def start(persist: bool = False) -> RedisServer:
        folder = tmp_path / f"redis-{len(servers)}"
        folder.mkdir()
        servers.append(RedisServer(folder, persist).start())
        return servers[-1]

    yield start
    for server in servers:
        server.stop()


_WORKER = """
import sys
sys.path.insert(0, {root!r})
import main
sys.exit(main.main(["worker", "--broker", {url!r}, "--visibility-timeout", {vis!r}, *{extra!r}]))
"""


@pytest.fixture
def start_worker(tmp_path: Path) -> Iterator[Callable[..., subprocess.Popen[bytes]]]:
    """start_worker(url, visibility_s=3.0): a `main.py worker` in its own process group."""
    procs: list[subprocess.Popen[bytes]] = []

    def start(url: str, visibility_s: float = 3.0, *extra: str) -> subprocess.Popen[bytes]:
        code = _WORKER.format(root=str(REPO_ROOT), url=url, vis=str(visibility_s), extra=list(extra))
        log = open(tmp_path / f"worker-{len(procs)}.log", "wb")  # noqa: SIM115 - closed by the process end
        proc = subprocess.Popen(
            [sys.executable, "-c", code],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            **CHILD_SIGNALS,
        )
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)
