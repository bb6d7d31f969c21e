"""Deterministic fakes for driving the engine without cameras, models or codecs."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import numpy as np

from models.types import ImageBGR
from realtime.core.contracts import FramePlan
from realtime.core.errors import SinkError, SourceError
from realtime.core.frames import VideoFrame
from realtime.core.settings import Settings


def frame_with_index(index: int, size: tuple[int, int] = (64, 48)) -> ImageBGR:
    """A frame that says its index in its top-left pixel, in steps of 8 grey levels per digit, so
    the engine's watermark (+-2 levels) leaves it readable."""
    image = np.zeros((size[1], size[0], 3), dtype=np.uint8)
    image[0, 0] = (8 * (index % 32) + 4, 8 * ((index // 32) % 32) + 4, 8 * ((index // 1024) % 32) + 4)
    return image


def index_of(image: ImageBGR) -> int:
    b, g, r = (int(v) // 8 for v in image[0, 0])
    return b + 32 * g + 1024 * r


@dataclass
class FakeSource:
    frames: int = 50
    fps: float = 30.0
    is_live: bool = False
    pace: bool = False  # sleep 1/fps per read, like a camera
    fail_after: int | None = None  # raise SourceError after this many frames (camera vanished)
    size: tuple[int, int] = (64, 48)
    description: str = "fake source"
    opened: bool = False
    closed: bool = False
    _next: int = 0

    def open(self) -> None:
        self.opened = True

    def read(self) -> VideoFrame | None:
        if self.fail_after is not None and self._next >= self.fail_after:
            raise SourceError("Camera 0 disconnected.", hint="Reconnect it and start again.")
        if self._next >= self.frames:
            return None
        if self.pace:
            time.sleep(1.0 / self.fps)
        i = self._next
        self._next += 1
        return VideoFrame(frame_with_index(i, self.size), i, time.perf_counter())

    def close(self) -> None:
        self.closed = True


@dataclass
class RecordingSink:
    fail_at: int | None = None
    send_delay_s: float = 0.0
    description: str = "recording sink"
    indices: list[int] = field(default_factory=list)
    opened_with: tuple[int, int, float] | None = None
    closed: bool = False
    aborted: bool = False

    def open(self, width: int, height: int, fps: float) -> None:
        self.opened_with = (width, height, fps)

    def send(self, frame: VideoFrame) -> None:
        if self.fail_at is not None and len(self.indices) >= self.fail_at:
            raise SinkError("No space left on the disk while writing out.mp4.")
        if self.send_delay_s:
            time.sleep(self.send_delay_s)
        self.indices.append(index_of(frame.image))

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.aborted = True


@dataclass
class SlowWorker:
    """Takes longer on some frames so that workers finish out of order; tracks concurrency."""

    delays: dict[int, float] = field(default_factory=dict)
    base_delay_s: float = 0.0
    active: list[int] = field(default_factory=lambda: [0])
    max_active: list[int] = field(default_factory=lambda: [0])
    lock: threading.Lock = field(default_factory=threading.Lock)

    def apply(
        self, image: ImageBGR, plan: FramePlan, settings: Settings, *, device_picture: object | None = None
    ) -> dict[str, float]:
        with self.lock:
            self.active[0] += 1
            self.max_active[0] = max(self.max_active[0], self.active[0])
        time.sleep(self.delays.get(index_of(image) % 4, self.base_delay_s))
        image[1, 1] = (255, 255, 255)  # mark "processed"
        with self.lock:
            self.active[0] -= 1
        return {"swap": 1.0}
