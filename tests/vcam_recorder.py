"""A pyvirtualcam backend that records what it is sent, so tests can check real Camera behaviour.

    with recording_backend() as rec:
        cam = pyvirtualcam.Camera(64, 48, 30, fmt=PixelFormat.BGR, backend=rec.name)
        ...
        rec.frames[0]  # (h, w, 3) copy of the first frame sent

Each handle registers a fresh backend class under a unique name and removes it again on exit, so
handles never share state and no recorder is left for a later `Camera(backend=None)` to pick up.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import numpy as np
import pyvirtualcam
import pyvirtualcam.camera
from pyvirtualcam.util import encode_fourcc

from models.types import ImageBGR

# The formats this recorder can reshape to (h, w, 3); others are refused like a real backend would.
_THREE_CHANNEL_FOURCCS = {
    encode_fourcc(pyvirtualcam.PixelFormat.BGR.value): "BGR",
    encode_fourcc(pyvirtualcam.PixelFormat.RGB.value): "RGB",
}


@dataclass(frozen=True, slots=True)
class OpenRequest:
    """The arguments one pyvirtualcam.Camera passed to the backend."""

    width: int
    height: int
    fps: float
    pixel_format: str
    device: str | None


@dataclass
class RecordingBackendHandle:
    """What one recording backend saw. Use as a context manager (or call unregister())."""

    name: str
    device_name: str = "/dev/video-recorder"
    opens: list[OpenRequest] = field(default_factory=list)
    frames: list[ImageBGR] = field(default_factory=list)
    send_times: list[float] = field(default_factory=list)
    closes: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def register(self) -> RecordingBackendHandle:
        pyvirtualcam.register_backend(self.name, _backend_class_for(self))
        return self

    def unregister(self) -> None:
        # pyvirtualcam has register_backend but no way to undo it; its registry is this dict.
        pyvirtualcam.camera.BACKENDS.pop(self.name, None)

    def __enter__(self) -> RecordingBackendHandle:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.unregister()

    def intervals(self) -> list[float]:
        """Seconds between consecutive send() calls."""
        return [b - a for a, b in zip(self.send_times, self.send_times[1:], strict=False)]

    def _record(self, image: ImageBGR) -> None:
        with self._lock:
            self.frames.append(image)
            self.send_times.append(time.perf_counter())


def _backend_class_for(handle: RecordingBackendHandle) -> type:
    """A new class per handle: the recording target is closed over, not stored on the module."""

    class RecordingBackend:
        def __init__(
            self, *, width: int, height: int, fps: float, fourcc: int, device: str | None, **kw: Any
        ) -> None:
            if fourcc not in _THREE_CHANNEL_FOURCCS:
                raise RuntimeError("Unsupported image format.")
            self._shape = (height, width, 3)
            self._device = device or handle.device_name
            handle.opens.append(OpenRequest(width, height, fps, _THREE_CHANNEL_FOURCCS[fourcc], device))

        def send(self, frame: np.ndarray[Any, Any]) -> None:
            # pyvirtualcam passes a view of the caller's buffer, which the sink reuses: keep a copy.
            handle._record(np.array(frame.reshape(self._shape), copy=True))

        def close(self) -> None:
            handle.closes += 1

        def device(self) -> str:
            return self._device

        def native_fourcc(self) -> int | None:
            return None

    RecordingBackend.__name__ = f"RecordingBackend_{handle.name}"
    return RecordingBackend


def recording_backend(name: str | None = None) -> RecordingBackendHandle:
    """Registers a fresh recording backend; use the handle in a `with` block to unregister it."""
    handle = RecordingBackendHandle(name or f"facecast-recorder-{uuid.uuid4().hex[:8]}")
    return handle.register()
