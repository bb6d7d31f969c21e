"""Frame sources: a camera, a video file or a still image behind one small Protocol.

Every source owns its device or file handle, hands out frames whose image it never touches again,
and turns every way an input can fail into a one-line `SourceError` naming the camera or file.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import av
import av.error
import cv2
import numpy as np

from models.cli_text import app_command
from models.errors import SourceError
from models.types import ImageBGR
from realtime.cameras import (
    camera_access_hint,
    camera_lock,
    default_camera_backend,
    quiet_opencv,
    request_mode,
)
from realtime.frames import VideoFrame

log = logging.getLogger(__name__)

IMAGE_EXTENSIONS = frozenset({".png", ".jpg", ".jpeg", ".bmp", ".webp", ".tif", ".tiff"})
DEFAULT_FPS = 30.0
PROBE_INDICES = range(10)


@runtime_checkable
class FrameSource(Protocol):
    """Where frames come from. `size`/`fps` are what the input really gives, valid after open()."""

    def open(self) -> None: ...

    def read(self) -> VideoFrame | None:
        """The next frame, or None at the end of the stream. Raises SourceError on failure."""
        ...

    def close(self) -> None: ...

    @property
    def size(self) -> tuple[int, int]:
        """(width, height) in pixels."""
        ...

    @property
    def fps(self) -> float: ...

    @property
    def is_live(self) -> bool:
        """True when frames arrive on their own clock (camera, paced file or repeated image)."""
        ...

    @property
    def description(self) -> str: ...


class KnownFormat:
    """`size` and `fps` of a source, read from what open() found (0 before it)."""

    _size: tuple[int, int] = (0, 0)
    _fps: float = 0.0

    @property
    def size(self) -> tuple[int, int]:
        return self._size

    @property
    def fps(self) -> float:
        return self._fps


class Pacer:
    """Sleeps until a media time is due, measured from one absolute start time.

    Anchoring on a single start (rather than sleeping 1/fps after each frame) keeps rounding errors
    from accumulating into drift. A consumer that stalls for longer than `resync_after_s` re-anchors
    the clock instead of receiving a burst of overdue frames afterwards, as a camera would behave.
    """

    def __init__(
        self,
        resync_after_s: float = 0.25,
        clock: Callable[[], float] = time.perf_counter,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._resync_after_s = resync_after_s
        self._clock = clock
        self._sleep = sleep
        self._start: float | None = None

    def reset(self) -> None:
        self._start = None

    def wait_until(self, media_time_s: float) -> None:
        now = self._clock()
        if self._start is None:
            self._start = now - media_time_s
            return
        delay = self._start + media_time_s - now
        if delay > 0:
            self._sleep(delay)
        elif -delay > self._resync_after_s:
            self._start = now - media_time_s


# --------------------------------------------------------------------------------------------- camera


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
    """A camera picture as 3-channel BGR: DirectShow hands grey/IR cameras' Y8 frames out as one
    channel, and a few drivers BGRA."""
    if image.ndim == 2:
        return np.asarray(cv2.cvtColor(image, cv2.COLOR_GRAY2BGR), dtype=np.uint8)
    if image.shape[2] == 4:
        return np.asarray(cv2.cvtColor(image, cv2.COLOR_BGRA2BGR), dtype=np.uint8)
    return np.asarray(image, dtype=np.uint8)


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
    retries: int = 3
    retry_delay_s: float = 0.5
    first_frame_s: float = 2.0  # how long open() waits for a slow-starting camera's first picture


class CameraSource(KnownFormat):
    """A webcam through OpenCV. Survives short dropouts by reopening the device `retries` times.

    The capture is released only by the thread that reads it: close() from another thread while a
    read is stuck in the driver (V4L2 waits up to 10 s) marks the source closed, and the reader
    releases the device when its read returns. Releasing it under a running read crashed, and a
    reconnect finishing after close() leaked the device.
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
        retries: int = 3,
        retry_delay_s: float = 0.5,
        list_cameras: Callable[[], Sequence[int]] | None = None,
        first_frame_s: float = 2.0,
    ) -> None:
        api = default_camera_backend() if backend is None else backend
        self.settings = CameraSettings(
            index, api, width, height, fps, prefer_mjpg, retries, retry_delay_s, first_frame_s
        )
        self._capture_factory = capture_factory
        self._list_cameras = list_cameras
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
        image = self._first_picture(cap)
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

    def _first_picture(self, cap: CaptureLike) -> ImageBGR | None:
        # Some webcams need a second or two (and a few empty reads) after opening.
        deadline = time.monotonic() + self.settings.first_frame_s
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
        for attempt in range(1, settings.retries + 1):
            log.warning(
                "Camera %d stopped sending frames; reconnecting (%d/%d).",
                settings.index,
                attempt,
                settings.retries,
            )
            self._release()
            # A replugged USB camera needs a moment before the driver lists it again; close() ends
            # the wait at once.
            if self._closed.wait(settings.retry_delay_s):
                return None
            cap = self._connect()
            if cap is None:
                continue
            with self._lock:
                if self._closed.is_set():
                    _release_capture(cap)
                    return None
                self._cap = cap
            ok, image = cap.read()
            if not ok or image is None:
                continue
            if (int(image.shape[1]), int(image.shape[0])) != self._size:
                # Indices shift when a camera is unplugged: this is another device (the laptop's
                # camera, a virtual camera), not ours coming back.
                log.warning(
                    "Camera %d came back as a %dx%d device, not the %dx%d one that left; not using it.",
                    settings.index,
                    image.shape[1],
                    image.shape[0],
                    *self._size,
                )
                continue
            self.reconnects += 1
            return as_bgr(image)
        self._release()
        raise SourceError(
            f"Camera {settings.index} disconnected: "
            f"no picture after {settings.retries} reconnection attempts.",
            hint="Check the cable or USB port, and that no other app has taken the camera.",
        )

    def _connect(self) -> CaptureLike | None:
        s = self.settings
        with camera_lock():
            cap = self._capture_factory(s.index, s.backend)
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
        else:
            found = probe_cameras(backend=self.settings.backend, capture_factory=self._capture_factory)
        listed = ", ".join(str(i) for i in found) if found else "none"
        return f"Cameras found: {listed} — run `{app_command('doctor')}` to list them."


# ----------------------------------------------------------------------------------------- video file


def playback_mode(realtime: bool, loop: bool) -> str:
    """', real time, looping' and the like, for a video file source's description."""
    return (", real time" if realtime else "") + (", looping" if loop else "")


def require_video_file(path: Path) -> None:
    """A clear SourceError when `path` is not a file (missing, or a folder)."""
    if not path.is_file():
        what = "is a folder, not a video file" if path.is_dir() else "not found"
        raise SourceError(f"Video file {what}: {path}")


_GAP_S = 0.5  # a jump in a file's timestamps longer than this is reported as missing frames


class VideoFileSource(KnownFormat):
    """A video file decoded with PyAV, as fast as it is read or paced like a camera (`realtime`).

    Damaged packets are skipped and counted in `bad_packets`; a file with no decodable frame at all is
    rejected at open().
    """

    _MAX_CONSECUTIVE_ERRORS = 50

    def __init__(self, path: str | Path, realtime: bool = False, loop: bool = False) -> None:
        self.path = Path(path)
        self.realtime = realtime
        self.loop = loop
        self.bad_packets = 0
        self.frames_missing = 0  # skipped over by the decoder in damaged parts (see _timeline_pts)
        self._pacer = Pacer()
        self._container: av.container.InputContainer | None = None
        self._stream: av.VideoStream | None = None
        self._frames: Iterator[av.VideoFrame] = iter(())
        self._pending: av.VideoFrame | None = None
        self._size = (0, 0)
        self._fps = 0.0
        self._next_index = 0
        self._frames_this_pass = 0
        self._pass_first_pts: float | None = None
        self._pass_last_pts = 0.0
        self._loop_offset_s = 0.0

    @property
    def is_live(self) -> bool:
        return self.realtime

    @property
    def description(self) -> str:
        mode = playback_mode(self.realtime, self.loop)
        return f"video file {self.path} ({self._size[0]}x{self._size[1]} @ {self._fps:g} fps{mode})"

    def open(self) -> None:
        require_video_file(self.path)
        try:
            container = av.open(str(self.path), mode="r")
        except (av.error.FFmpegError, OSError) as err:
            raise SourceError(f"{self.path} is not a readable video file ({_reason(err)}).") from err
        if not container.streams.video:
            container.close()
            raise SourceError(f"{self.path} contains no video stream.")
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"  # frame threading: whole-file decode runs several times faster
        self._container, self._stream = container, stream
        rate = stream.average_rate or stream.guessed_rate or stream.base_rate
        self._fps = float(rate) if rate else DEFAULT_FPS
        self._frames = self._decoded_frames()
        # Decoding one frame now turns "no decodable frames" into an error at open(), not a silent
        # empty run later.
        self._pending = next(self._frames, None)
        if self._pending is None:
            self.close()
            raise SourceError(f"{self.path} contains no decodable video frames.")
        self._size = (self._pending.width, self._pending.height)

    def read(self) -> VideoFrame | None:
        if self._container is None:
            raise RuntimeError("VideoFileSource.read() called before open()")
        av_frame = self._next_av_frame()
        if av_frame is None:
            return None
        pts = self._timeline_pts(av_frame)
        # bgr24 rows can be padded for odd widths; downstream OpenCV code wants contiguous rows.
        image: ImageBGR = np.ascontiguousarray(av_frame.to_ndarray(format="bgr24"), dtype=np.uint8)
        if self.realtime:
            self._pacer.wait_until(pts)
        frame = VideoFrame(image, self._next_index, time.perf_counter(), pts)
        self._next_index += 1
        return frame

    def close(self) -> None:
        self._pending = None
        self._frames = iter(())
        if self._container is not None:
            self._container.close()
            self._container = None
            self._stream = None

    def _next_av_frame(self) -> av.VideoFrame | None:
        if self._pending is not None:
            first = self._pending
            self._pending = None
            return first
        av_frame = next(self._frames, None)
        if av_frame is not None or not self.loop:
            return av_frame
        if self._frames_this_pass == 0:
            log.warning("%s: nothing decodable after seeking back to the start; stopping.", self.path)
            return None
        self._rewind()
        return next(self._frames, None)

    def _rewind(self) -> None:
        assert self._container is not None and self._stream is not None
        # The next pass continues the timeline one frame after this pass ended, so pts stay increasing
        # and real-time pacing does not stall.
        first = self._pass_first_pts or 0.0
        self._loop_offset_s += self._pass_last_pts - first + 1.0 / self._fps
        self._pass_first_pts = None
        self._frames_this_pass = 0
        self._container.seek(self._stream.start_time or 0, stream=self._stream)
        self._frames = self._decoded_frames()

    def _timeline_pts(self, av_frame: av.VideoFrame) -> float:
        raw = av_frame.time
        if raw is None:
            raw = self._frames_this_pass / self._fps
        if self._pass_first_pts is None:
            self._pass_first_pts = raw
        elif raw - self._pass_last_pts > _GAP_S:
            # FFmpeg resyncs after damaged bytes without an error: the only trace is the jump in
            # time. (Variable-rate phone videos skip a frame or two, never half a second.)
            missing = max(round((raw - self._pass_last_pts) * self._fps) - 1, 1)
            self.frames_missing += missing
            log.warning(
                "%s: about %d frames are missing before %.1f s (the file is damaged there); skipped.",
                self.path,
                missing,
                raw,
            )
        self._pass_last_pts = raw
        self._frames_this_pass += 1
        return raw + self._loop_offset_s

    def _decoded_frames(self) -> Iterator[av.VideoFrame]:
        assert self._container is not None and self._stream is not None
        container, stream = self._container, self._stream
        packets = container.demux(stream)
        consecutive_errors = 0
        while consecutive_errors < self._MAX_CONSECUTIVE_ERRORS:
            try:
                packet = next(packets)
            except StopIteration:
                return
            except av.error.FFmpegError as err:
                # A demux error ends the generator; libavformat resumes after the damaged bytes.
                consecutive_errors += 1
                self._count_bad_packet(err)
                packets = container.demux(stream)
                continue
            try:
                frames = packet.decode()
            except av.error.FFmpegError as err:
                consecutive_errors += 1
                self._count_bad_packet(err)
                continue
            consecutive_errors = 0
            yield from frames
        log.warning("%s: %d damaged packets in a row; treating it as the end.", self.path, consecutive_errors)

    def _count_bad_packet(self, err: Exception) -> None:
        self.bad_packets += 1
        log.warning("%s: skipped a damaged packet (%s).", self.path, _reason(err))


def _reason(err: Exception) -> str:
    return str(getattr(err, "strerror", None) or err)


# ---------------------------------------------------------------------------------------------- image


def load_image(path: str | Path) -> ImageBGR:
    """Read an image as BGR. np.fromfile + imdecode because cv2.imread cannot open non-ASCII paths
    on Windows."""
    path = Path(path)
    try:
        data = np.fromfile(path, dtype=np.uint8)
    except FileNotFoundError as err:
        raise SourceError(f"Image not found: {path}") from err
    except OSError as err:
        raise SourceError(f"Cannot read image {path} ({_reason(err)}).") from err
    image = cv2.imdecode(data, cv2.IMREAD_COLOR) if data.size else None
    if image is None:
        raise SourceError(f"{path} is not an image that can be read (PNG, JPEG, BMP, WebP or TIFF).")
    return image  # type: ignore[return-value]


class ImageSource(KnownFormat):
    """A still image: delivered once, or repeated at `fps` (paced) to feed a live output."""

    def __init__(self, path: str | Path, repeat: bool = False, fps: float = DEFAULT_FPS) -> None:
        if fps <= 0:
            raise ValueError(f"fps must be positive, got {fps}")
        self.path = Path(path)
        self.repeat = repeat
        self._fps = float(fps)
        self._pacer = Pacer()
        self._image: ImageBGR | None = None
        self._size = (0, 0)
        self._next_index = 0

    @property
    def is_live(self) -> bool:
        return self.repeat

    @property
    def description(self) -> str:
        mode = f", repeated at {self._fps:g} fps" if self.repeat else ""
        return f"image {self.path} ({self._size[0]}x{self._size[1]}{mode})"

    def open(self) -> None:
        self._image = load_image(self.path)
        self._size = (int(self._image.shape[1]), int(self._image.shape[0]))

    def read(self) -> VideoFrame | None:
        if self._image is None:
            return None
        index = self._next_index
        self._next_index += 1
        if self.repeat:
            self._pacer.wait_until(index / self._fps)
            # A copy per frame: downstream stages may draw on their frame in place.
            copy: ImageBGR = np.array(self._image, copy=True)
            return VideoFrame(copy, index, time.perf_counter(), index / self._fps)
        image = self._image
        self._image = None  # delivered once: the frame now owns the only reference
        return VideoFrame(image, index, time.perf_counter(), 0.0)

    def close(self) -> None:
        self._image = None


# --------------------------------------------------------------------------------------------- router


def open_source(
    spec: str,
    *,
    realtime: bool | None,
    loop: bool,
    width: int | None = None,
    height: int | None = None,
    fps: float | None = None,
) -> FrameSource:
    """The source a command-line input names; the caller calls open() (and close()).

    - all digits: a camera index (width/height/fps are requests to the camera);
    - an existing file with an image extension: an ImageSource, repeated when `realtime` or `loop`;
    - anything else: a video file, paced when `realtime` (None means as fast as it is read).
    """
    if spec.isascii() and spec.isdigit():
        return CameraSource(int(spec), width=width, height=height, fps=fps)
    path = Path(spec)
    if path.suffix.lower() in IMAGE_EXTENSIONS and path.is_file():
        return ImageSource(path, repeat=bool(realtime) or loop, fps=fps or DEFAULT_FPS)
    if not path.exists():
        raise SourceError(
            f"Input not found: {spec}", hint="Give a camera index (e.g. 0), a video file or an image file."
        )
    return VideoFileSource(path, realtime=bool(realtime), loop=loop)
