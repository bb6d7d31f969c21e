"""Fixtures for the remote tests: the model doubles, a photo, a token file, a server on 127.0.0.1."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import cv2
import numpy as np
import pytest

from models.fakes.doubles import write_all
from realtime.api import ModelOptions, VideoFrame
from realtime.remote.limits import ContentMode, Limits
from realtime.remote.runner import ServerThread
from realtime.remote.server import ServerConfig
from realtime.remote.tls import ensure_certificate, server_context
from realtime.tools.bench import astronaut_bgr

TOKEN = "test-token-0123456789"


@pytest.fixture(scope="session")
def doubles(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = Path(tmp_path_factory.mktemp("doubles"))
    write_all(folder)
    return folder


@pytest.fixture(scope="session")
def photo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = Path(tmp_path_factory.mktemp("photo")) / "me.png"
    cv2.imwrite(str(path), astronaut_bgr()[:, ::-1].copy())
    return path


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "tokens.txt"
    path.write_text(f"alice:{TOKEN}\n", encoding="utf-8")
    return path


@pytest.fixture
def make_config(tmp_path: Path, token_file: Path, doubles: Path) -> Callable[..., ServerConfig]:
    def make(content_policy: ContentMode = "off", **limits: float) -> ServerConfig:
        base = Limits(max_streams=2, idle_s=5.0)
        return ServerConfig(
            data_dir=tmp_path / "data",
            token_file=token_file,
            limits=replace(base, **limits),  # type: ignore[arg-type]
            models=ModelOptions(models_dir=doubles, allow_unverified=True),
            provider="cpu",
            content_policy=content_policy,
        )

    return make


@pytest.fixture
def start_server(make_config: Callable[..., ServerConfig]) -> Iterator[Callable[..., ServerThread]]:
    servers: list[ServerThread] = []

    def start(
        tls: bool = False, port: int = 0, content_policy: ContentMode = "off", **limits: float
    ) -> ServerThread:
        config = make_config(content_policy, **limits)
        context = None
        if tls:
            cert = ensure_certificate(config.data_dir)
            context = server_context(cert.cert, cert.key)
        server = ServerThread(config, port=port, tls=context).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


class CollectingSink:
    """A FrameSink that keeps copies of the last frames it was sent."""

    def __init__(self, keep: int = 400) -> None:
        self.frames: list[VideoFrame] = []
        self.keep = keep
        self.opened: tuple[int, int, float] | None = None
        self.closed = False
        self.lock = threading.Lock()

    def open(self, width: int, height: int, fps: float) -> None:
        self.opened = (width, height, fps)

    def send(self, frame: VideoFrame) -> None:
        with self.lock:
            self.frames.append(VideoFrame(frame.image.copy(), frame.index, frame.capture_ts))
            del self.frames[: -self.keep]

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True

    @property
    def description(self) -> str:
        return "collecting"


class StillSource:
    """A live source: the same picture at `fps`, like a camera pointed at a photo."""

    def __init__(self, image: np.ndarray, fps: float = 15.0) -> None:
        self.image = image
        self._fps = fps
        self._index = 0
        self._stop = threading.Event()
        self._next = 0.0
        self.notify: Callable[[str, str], None] | None = None

    def open(self) -> None:
        import time

        self._next = time.perf_counter()

    def read(self) -> VideoFrame | None:
        import time

        self._next += 1.0 / self._fps
        delay = self._next - time.perf_counter()
        if delay > 0 and self._stop.wait(delay):
            return None
        if self._stop.is_set():
            return None
        self._index += 1
        return VideoFrame(self.image.copy(), self._index, time.perf_counter())

    def interrupt(self) -> None:
        self._stop.set()

    def close(self) -> None:
        self._stop.set()

    @property
    def size(self) -> tuple[int, int]:
        return int(self.image.shape[1]), int(self.image.shape[0])

    @property
    def fps(self) -> float:
        return self._fps

    @property
    def is_live(self) -> bool:
        return True

    @property
    def description(self) -> str:
        return "still picture"


def frame_image(width: int = 320, height: int = 240) -> np.ndarray:
    """A smooth picture (it survives the video codec) with the astronaut in the middle."""
    canvas = np.full((height, width, 3), 120, dtype=np.uint8)
    face = cv2.resize(astronaut_bgr(), (height, height))
    x = (width - height) // 2
    canvas[:, x : x + height] = face
    return canvas
