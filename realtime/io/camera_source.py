"""A webcam through OpenCV, surviving unplugs and driver hiccups by looking for it again."""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import cv2

from models.cli_text import app_command
from models.types import ImageBGR
from realtime.core.contracts import Notify
from realtime.core.errors import SourceError
from realtime.core.frames import VideoFrame, to_bgr8
from realtime.io.cameras import (
    camera_access_hint,
    camera_lock,
    default_camera_backend,
    list_cameras,
    quiet_opencv,
    request_mode,
)
from realtime.io.source_parts import DEFAULT_FPS, KnownFormat

log = logging.getLogger(__name__)

PROBE_INDICES = range(10)


class CaptureLike(Protocol):
    """The part of cv2.VideoCapture a CameraSource uses (tests inject fakes).

    read() must return a freshly allocated image per call: cv2's binding does, because it copies any
    frame that the backend did not allocate through numpy.
    """

    def isOpened(self) -> bool: ...

    def read(self) -> tuple[bool, Any]: ...

    def set(self, propId: int, value: float) -> bool: ...

    def get(self, propId: int) -> float: ...

    def release(self) -> None: ...


def probe_cameras(
    indices: Iterable[int] = PROBE_INDICES,
    backend: int | None = None,
    capture_factory: Callable[..., CaptureLike] = cv2.VideoCapture,
) -> list[int]:
    """Camera indices that open. Opening is cheap (no frame is read); still, call it only on demand."""
    api = default_camera_backend() if backend is None else backend
    found: list[int] = []
    with quiet_opencv():
        for index in indices:
            cap = capture_factory(index, api)
            try:
                if cap.isOpened():
                    found.append(index)
            finally:
                cap.release()
    return found


def as_bgr(image: Any) -> ImageBGR:
    """A camera picture as 3-channel 8-bit BGR: DirectShow hands grey/IR cameras' Y8 frames out as
    one channel, a few drivers BGRA, and infrared cameras Y16 (scaled down, not wrapped: a cast
    would turn mid-grey black)."""
    return to_bgr8(image)


def _release_capture(cap: CaptureLike) -> None:
    with camera_lock():
        cap.release()


@dataclass(frozen=True, slots=True)
class CameraSettings:
    """What was asked of the camera. The camera may give something else; the source reports that."""

    index: int
    backend: int
    width: int | None = None
    height: int | None = None
    fps: float | None = None
    prefer_mjpg: bool = True
    reconnect_s: float = 15.0  # how long a camera that stopped sending is looked for before giving up
    retry_delay_s: float = 0.5  # the first pause between reopening attempts; doubles up to 2 s
    first_frame_s: float = 2.0  # how long open() waits for a slow-starting camera's first picture


class CameraSource(KnownFormat):
    """A webcam through OpenCV. Survives dropouts (an unplug and replug, a driver hiccup) by
    reopening the device for up to `reconnect_s` seconds, telling `notify` while it looks.

    The capture is released only by the thread that reads it: close() from another thread while a
    read is stuck in the driver (V4L2 waits up to 10 s) marks the source closed, and the reader
    releases the device when its read returns. Releasing it under a running read can crash, and a
    reconnect finishing after close() would leak the device.
    """

    def __init__(
        self,
        index: int,
        backend: int | None = None,
        width: int | None = None,
        height: int | None = None,
        fps: float | None = None,
        prefer_mjpg: bool = True,
        capture_factory: Callable[..., CaptureLike] = cv2.VideoCapture,
        reconnect_s: float = 15.0,
        retry_delay_s: float = 0.5,
        list_cameras: Callable[[], Sequence[int]] | None = None,
        first_frame_s: float = 2.0,
    ) -> None:
        api = default_camera_backend() if backend is None else backend
        self.settings = CameraSettings(
            index, api, width, height, fps, prefer_mjpg, reconnect_s, retry_delay_s, first_frame_s
        )
        self._capture_factory = capture_factory
        self._list_cameras = list_cameras
        # Told (level, message) while the camera is being looked for (the engine shows it; logging
        # alone leaves the user staring at a frozen picture for seconds).
        self.notify: Notify | None = None
        self._cap: CaptureLike | None = None
        self._pending: ImageBGR | None = None
        self._size = (0, 0)
        self._fps = 0.0
        self._next_index = 0
        self.reconnects = 0
        self._lock = threading.Lock()  # guards _cap hand-over between the reader and close()
        self._reading = False
        self._closed = threading.Event()  # also wakes a reconnect wait at once

    @property
    def is_live(self) -> bool:
        return True

    @property
    def description(self) -> str:
        text = f"camera {self.settings.index}"
        if self._size != (0, 0):
            text += f" ({self._size[0]}x{self._size[1]} @ {self._fps:g} fps)"
        return text

    def open(self) -> None:
        index = self.settings.index
        self._closed.clear()
        cap = self._connect()
        if cap is None:
            raise SourceError(
                f"Camera {index} could not be opened.", hint=f"{self._cameras_hint()} {camera_access_hint()}"
            )
        try:
            image = self._first_picture(cap)
        except SourceError:
            _release_capture(cap)  # a picture it cannot use: the device is not kept
            raise
        if image is None:
            _release_capture(cap)
            raise SourceError(
                f"Camera {index} opened but sent no picture.",
                hint="Close other apps that may be using it (video calls, OBS) and try again. "
                + camera_access_hint(),
            )
        self._cap = cap
        self._pending = image
        self._size = (int(image.shape[1]), int(image.shape[0]))
        reported = cap.get(cv2.CAP_PROP_FPS)
        # Some drivers report 0 fps; the request (or the common webcam rate) is the best guess then.
        self._fps = float(reported) if reported > 0 else (self.settings.fps or DEFAULT_FPS)

    def check_present(self, platform: str = sys.platform, dev: Path = Path("/dev")) -> None:
        """Without opening it: fail now when the camera plainly is not there (Linux: no
        /dev/videoN), so a wrong number is said before the models load rather than after."""
        if not platform.startswith("linux") or (dev / f"video{self.settings.index}").exists():
            return
        raise SourceError(
            f"Camera {self.settings.index} could not be opened.",
            hint=f"{self._cameras_hint()} {camera_access_hint()}",
        )

    def read(self) -> VideoFrame | None:
        with self._lock:
            if self._closed.is_set():
                return None
            if self._cap is None:
                raise RuntimeError("CameraSource.read() called before open()")
            self._reading = True
        try:
            image = self._pending if self._pending is not None else self._grab()
        finally:
            with self._lock:
                self._reading = False
                closed = self._closed.is_set()
            if closed:
                self._release()  # close() came while this read was in the driver: free it here
        if closed or image is None:
            return None
        self._pending = None
        frame = VideoFrame(image, self._next_index, time.perf_counter())
        self._next_index += 1
        return frame

    def close(self) -> None:
        with self._lock:
            self._closed.set()
            self._pending = None
            if self._reading:
                return  # the reading thread releases the device when its read returns
        self._release()

    def interrupt(self) -> None:
        """From another thread: stop waiting and reconnecting now (safe during a read; the reading
        thread releases the device when its read returns)."""
        self.close()

    def _first_picture(self, cap: CaptureLike, limit_s: float | None = None) -> ImageBGR | None:
        # Some webcams need a second or two (and a few empty reads) after opening.
        wait_s = self.settings.first_frame_s if limit_s is None else min(self.settings.first_frame_s, limit_s)
        deadline = time.monotonic() + max(wait_s, 0.0)
        while True:
            ok, image = cap.read()
            if ok and image is not None:
                return as_bgr(image)
            if time.monotonic() >= deadline or self._closed.wait(0.05):
                return None

    def _grab(self) -> ImageBGR | None:
        assert self._cap is not None
        ok, image = self._cap.read()
        if ok and image is not None:
            return as_bgr(image)
        settings = self.settings
        log.warning("Camera %d stopped sending frames; reconnecting.", settings.index)
        self._say(f"Camera {settings.index} stopped sending pictures; looking for it again …")
        self._release()
        deadline = time.monotonic() + settings.reconnect_s
        delay = settings.retry_delay_s
        attempts = 0
        while True:
            # A replugged USB camera needs a moment before the driver lists it again; close() ends
            # the wait at once.
            if self._closed.wait(min(delay, max(deadline - time.monotonic(), 0.0))):
                return None
            delay = min(delay * 2.0, 2.0)
            attempts += 1
            image = self._reconnect_once(deadline - time.monotonic())
            if self._closed.is_set():
                return None
            if image is not None:
                self.reconnects += 1
                log.warning("Camera %d is back after %d attempt(s).", settings.index, attempts)
                self._say(f"Camera {settings.index} is back.", level="info")
                return image
            if time.monotonic() >= deadline:
                break
        self._release()
        raise SourceError(
            f"Camera {settings.index} disconnected: not back after {settings.reconnect_s:g} s "
            f"({attempts} reconnection attempts).",
            hint="Check the cable or USB port, and that no other app has taken the camera.",
        )

    def _reconnect_once(self, budget_s: float) -> ImageBGR | None:
        """Reopen the camera and wait out its warm-up (a camera that is back often needs a few
        empty reads first, as at open()) within what is left of the budget; None when it is not
        there, or is another device."""
        cap = self._connect()
        if cap is None:
            return None
        with self._lock:
            if self._closed.is_set():
                _release_capture(cap)
                return None
            self._cap = cap
        image = self._first_picture(cap, budget_s)
        if image is None:
            self._release()
            return None
        if (int(image.shape[1]), int(image.shape[0])) != self._size:
            # Indices shift when a camera is unplugged: this is another device (the laptop's
            # camera, a virtual camera), not ours coming back.
            log.warning(
                "Camera %d came back as a %dx%d device, not the %dx%d one that left; not using it.",
                self.settings.index,
                image.shape[1],
                image.shape[0],
                *self._size,
            )
            self._release()
            return None
        return image

    def _say(self, message: str, level: str = "warning") -> None:
        if self.notify is None:
            return
        try:
            self.notify(level, message)
        except Exception:  # a listener's bug must not end the capture
            log.exception("camera status listener failed")

    def _connect(self) -> CaptureLike | None:
        s = self.settings
        with camera_lock():
            try:
                cap = self._capture_factory(s.index, s.backend)
            except cv2.error as err:  # an index OpenCV cannot even take (beyond a C int)
                log.debug("Opening camera %d failed: %s", s.index, err)
                return None
            if not cap.isOpened():
                cap.release()
                return None
            request_mode(cap, s.backend, s.width, s.height, s.fps, s.prefer_mjpg)
        return cap

    def _release(self) -> None:
        with self._lock:
            cap, self._cap = self._cap, None
        if cap is not None:
            _release_capture(cap)

    def _cameras_hint(self) -> str:
        if self._list_cameras is not None:
            found = list(self._list_cameras())
        elif self._capture_factory is cv2.VideoCapture:
            # The system's list (sysfs on Linux: instant, and without FaceCast's own virtual
            # cameras); opening ten indices takes seconds and lists loopback devices as cameras.
            found = [camera.index for camera in list_cameras()]
        else:
            found = probe_cameras(backend=self.settings.backend, capture_factory=self._capture_factory)
        listed = ", ".join(str(i) for i in found) if found else "none"
        return f"Cameras found: {listed} — run `{app_command('doctor')}` to list them."
