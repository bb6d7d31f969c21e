"""Frame sources: a camera, a video file or a still image behind one small Protocol.

Every source owns its device or file handle, hands out frames whose image it never touches again,
and turns every way an input can fail into a one-line `SourceError` naming the camera or file.
"""

from __future__ import annotations

import logging
import re
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import av
import av.error
import cv2
import numpy as np

from models.cli_text import app_command
from models.types import ImageBGR
from realtime.core.contracts import FrameSource, Notify
from realtime.core.errors import SourceError
from realtime.core.frames import VideoFrame, to_bgr8
from realtime.core.source_base import SourceBase, SourceWrapper
from realtime.io.cameras import (
    camera_access_hint,
    camera_lock,
    default_camera_backend,
    list_cameras,
    quiet_opencv,
    request_mode,
)

log = logging.getLogger(__name__)

# Every still format OpenCV decodes here (.jfif is how Windows and browsers often save JPEGs): as a
# "video" such a file played one frame and ended the run.
IMAGE_EXTENSIONS = frozenset(
    {".png", ".jpg", ".jpeg", ".jpe", ".jfif", ".bmp", ".dib", ".webp", ".tif", ".tiff", ".ppm", ".pgm",
     ".pbm", ".pnm", ".jp2"}
)  # fmt: skip
DEFAULT_FPS = 30.0
PROBE_INDICES = range(10)


class KnownFormat(SourceBase):
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
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        self._resync_after_s = resync_after_s
        self._clock = clock
        self._interrupted = threading.Event()
        self._sleep = sleep or self._sleep_interruptibly
        self._start: float | None = None

    def interrupt(self) -> None:
        """End the current and every later wait at once (the source is being closed)."""
        self._interrupted.set()

    def rearm(self) -> None:
        """Pace again from the next frame on (a source opened again after an interrupt)."""
        self._interrupted.clear()
        self._start = None

    def _sleep_interruptibly(self, seconds: float) -> None:
        # time.sleep in short slices, not Event.wait: on Windows an event wait is rounded to the
        # ~15.6 ms system tick (jitter at 30 fps), time.sleep uses a high-resolution timer.
        deadline = self._clock() + seconds
        while not self._interrupted.is_set():
            remaining = deadline - self._clock()
            if remaining <= 0:
                return
            time.sleep(min(remaining, 0.05))

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
    """A camera picture as 3-channel 8-bit BGR: DirectShow hands grey/IR cameras' Y8 frames out as
    one channel, a few drivers BGRA, and infrared cameras Y16 (scaled down, not wrapped: a cast
    turned mid-grey black)."""
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
        # alone left the user staring at a frozen picture for seconds).
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
            # cameras); opening ten indices took seconds and listed loopback devices as cameras.
            found = [camera.index for camera in list_cameras()]
        else:
            found = probe_cameras(backend=self.settings.backend, capture_factory=self._capture_factory)
        listed = ", ".join(str(i) for i in found) if found else "none"
        return f"Cameras found: {listed} — run `{app_command('doctor')}` to list them."


# ----------------------------------------------------------------------------------------- video file


def playback_mode(realtime: bool, loop: bool) -> str:
    """', real time, looping' and the like, for a video file source's description."""
    return (", real time" if realtime else "") + (", looping" if loop else "")


def require_video_file(path: Path) -> None:
    """A clear SourceError when `path` is not a file (missing, a folder, a device or a pipe)."""
    if path.is_file():
        return
    if path.is_dir():
        raise SourceError(f"Video file is a folder, not a video file: {path}")
    if path.exists():
        raise SourceError(
            f"{path} is not a regular file (a device or a pipe).",
            hint="For a camera give its number (e.g. --input 0); for a video, the file itself.",
        )
    raise SourceError(f"Video file not found: {path}")


GAP_S = 0.5  # a jump in a file's timestamps longer than this is reported as missing frames
# PyAV's VideoFrame.rotation: degrees counterclockwise that turn the stored picture upright.
_ROTATE_CODES = {90: cv2.ROTATE_90_COUNTERCLOCKWISE, 180: cv2.ROTATE_180, 270: cv2.ROTATE_90_CLOCKWISE}
_QUARTER_TURNS = (cv2.ROTATE_90_COUNTERCLOCKWISE, cv2.ROTATE_90_CLOCKWISE)


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
        self._rotate: int | None = None  # cv2.rotate code that shows the picture upright
        self._recent_steps: deque[float] = deque(maxlen=31)  # frame intervals, for the gap estimate
        self._gaps = 0
        self._resized = False  # said once that the picture size changed mid-file

    @property
    def is_live(self) -> bool:
        return self.realtime

    @property
    def description(self) -> str:
        mode = playback_mode(self.realtime, self.loop)
        return f"video file {self.path} ({self._size[0]}x{self._size[1]} @ {self._fps:g} fps{mode})"

    def open(self) -> None:
        require_video_file(self.path)
        self._pacer.rearm()
        self._open_container()
        assert self._stream is not None
        stream = self._stream
        rate = stream.average_rate or stream.guessed_rate or stream.base_rate
        self._fps = float(rate) if rate else DEFAULT_FPS
        # Decoding one frame now turns "no decodable frames" into an error at open(), not a silent
        # empty run later.
        self._pending = next(self._frames, None)
        if self._pending is None:
            self.close()
            raise SourceError(f"{self.path} contains no decodable video frames.")
        # Phones store portrait video sideways with a "display rotated" tag that players obey.
        self._rotate = _ROTATE_CODES.get(round(self._pending.rotation or 0) % 360)
        w, h = self._pending.width, self._pending.height
        self._size = (h, w) if self._rotate in _QUARTER_TURNS else (w, h)

    def _open_container(self) -> None:
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
        self._frames = self._decoded_frames()

    def read(self) -> VideoFrame | None:
        if self._container is None:
            raise RuntimeError("VideoFileSource.read() called before open()")
        av_frame = self._next_av_frame()
        if av_frame is None:
            return None
        pts = self._timeline_pts(av_frame)
        # bgr24 rows can be padded for odd widths; downstream OpenCV code wants contiguous rows.
        image: ImageBGR = np.ascontiguousarray(av_frame.to_ndarray(format="bgr24"), dtype=np.uint8)
        if self._rotate is not None:
            image = np.asarray(cv2.rotate(image, self._rotate), dtype=np.uint8)
        if (image.shape[1], image.shape[0]) != self._size:
            image = self._fit(image)
        if self.realtime:
            self._pacer.wait_until(pts)
        frame = VideoFrame(image, self._next_index, time.perf_counter(), pts)
        self._next_index += 1
        return frame

    def _fit(self, image: ImageBGR) -> ImageBGR:
        """A picture whose size changed mid-file, scaled into the run's size with its shape kept
        (black bars), not squeezed: the outputs were opened for the first size."""
        w, h = self._size
        ih, iw = image.shape[:2]
        if not self._resized:
            log.warning(
                "%s: the picture size changes to %dx%d mid-file; fitted into %dx%d.", self.path, iw, ih, w, h
            )
            self._resized = True
        scale = min(w / iw, h / ih)
        nw, nh = max(1, round(iw * scale)), max(1, round(ih * scale))
        fitted = np.zeros((h, w, 3), dtype=np.uint8)
        x0, y0 = (w - nw) // 2, (h - nh) // 2
        interp = cv2.INTER_AREA if scale < 1.0 else cv2.INTER_LINEAR
        cv2.resize(image, (nw, nh), dst=fitted[y0 : y0 + nh, x0 : x0 + nw], interpolation=interp)
        return fitted

    def interrupt(self) -> None:
        """From another thread: end a real-time wait at once (the run is stopping)."""
        self._pacer.interrupt()

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
            log.warning("%s: nothing decodable after going back to the start; stopping.", self.path)
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
        # Reopened, not seeked: a seek to the start cannot be done on raw H.264/HEVC streams and
        # lands after the first keyframe group in MPEG-TS (each pass lost its first second or two).
        self._container.close()
        self._container = self._stream = None
        self._open_container()

    def _timeline_pts(self, av_frame: av.VideoFrame) -> float:
        raw = av_frame.time
        if raw is None:
            raw = self._frames_this_pass / self._fps
        if self._pass_first_pts is None:
            self._pass_first_pts = raw
        else:
            step = raw - self._pass_last_pts
            if step > max(GAP_S, 3.0 * self._frame_interval()):
                self._note_gap(step, raw)
            elif step > 0:
                self._recent_steps.append(step)
        self._pass_last_pts = raw
        self._frames_this_pass += 1
        return raw + self._loop_offset_s

    def _note_gap(self, step: float, at: float) -> None:
        """A jump in the file's time: frames lost to damage (FFmpeg resyncs after damaged bytes
        without an error), or a recording that held one picture (screen and meeting recorders do).
        Played in real time, the picture would freeze for the whole jump: playback goes on at once."""
        missing = max(round(step / self._frame_interval()) - 1, 1)
        self.frames_missing += missing
        self._gaps += 1
        if self._gaps <= 3 or str(self._gaps).rstrip("0") == "1":  # 1-3, then 10, 100, ...
            log.warning(
                "%s: the picture jumps %.1f s before %.1f s (about %d frames missing: damage, or a "
                "recording that held one picture); playing on without the wait (%d such jumps so far).",
                self.path,
                step,
                at,
                missing,
                self._gaps,
            )
        if self.realtime:
            self._pacer.reset()  # re-anchor: the next frame is due now

    def _frame_interval(self) -> float:
        """The file's usual step between frames (its recent median; 1/fps until there is one)."""
        if len(self._recent_steps) >= 3:
            return float(np.median(self._recent_steps))
        return 1.0 / self._fps

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
        n = self.bad_packets
        # The first few, then 10, 100, 1000, ...: a long damaged recording wrote a line per packet.
        if n <= 3 or (n >= 10 and str(n).rstrip("0") == "1"):
            log.warning("%s: skipped a damaged packet (%s); %d so far.", self.path, _reason(err), n)


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
        raise SourceError(
            f"{path} is not an image that can be read (PNG, JPEG, BMP, WebP, TIFF, PNM or JPEG 2000)."
        )
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
        self._pacer.rearm()
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

    def interrupt(self) -> None:
        """From another thread: end a repeat wait at once (the run is stopping)."""
        self._pacer.interrupt()

    def close(self) -> None:
        self._image = None


# ------------------------------------------------------------------------------------------- fallback


class FallbackSource(SourceWrapper):
    """`primary` (NVDEC) unless it fails to open; then the source `fallback()` makes (the CPU
    decoder), for this and every later open. Everything else is the open source's."""

    def __init__(self, primary: FrameSource, fallback: Callable[[], FrameSource]) -> None:
        super().__init__(primary)
        self.primary = primary
        self._make_fallback = fallback
        self.fell_back = ""  # why the primary was given up ('' while it is in use)

    def open(self) -> None:
        if self.inner is self.primary:
            try:
                self.primary.open()
                return
            except SourceError as err:
                self.fell_back = err.user_message()
                log.warning("%s; decoding on the CPU instead.", self.fell_back)
                self._use(self._make_fallback())
        self.inner.open()


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
    spec = file_url_path(spec)
    index = camera_index(spec)
    if index is not None:
        return CameraSource(index, width=width, height=height, fps=fps)
    refuse_stream_url(spec)
    path = Path(spec)
    if path.suffix.lower() in IMAGE_EXTENSIONS and path.is_file():
        return ImageSource(path, repeat=bool(realtime) or loop, fps=fps or DEFAULT_FPS)
    if not path.exists():
        raise SourceError(
            f"Input not found: {spec}.", hint="Give a camera index (e.g. 0), a video file or an image file."
        )
    return VideoFileSource(path, realtime=bool(realtime), loop=loop)


_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def file_url_path(spec: str) -> str:
    """`spec` as a plain path when it is a file:// address (as copied from a browser or a file
    manager), else unchanged."""
    text = spec.strip()
    if not text.lower().startswith("file://"):
        return spec
    parsed = urllib.parse.urlparse(text)
    path = urllib.request.url2pathname(parsed.path)
    if parsed.netloc and parsed.netloc.lower() != "localhost":
        path = f"//{parsed.netloc}{path}"  # a network share (file://server/share/...)
    return path


def refuse_stream_url(spec: str) -> None:
    """A SourceError for a network stream's address (rtsp://, http://, ...): as a file name it was
    reported as a missing file, with one '/' lost on the way."""
    if _URL.match(spec.strip()):
        raise SourceError(
            f"Network streams are not read by the CPU decoder: {spec.strip()}.",
            hint="Streams need NVDEC (an NVIDIA GPU that runs the models: --provider auto or cuda). "
            "Otherwise give a camera, a video "
            "file or an image; OBS can turn a stream into a virtual camera that FaceCast opens.",
        )


_V4L2_NODE = re.compile(r"^/dev/video(\d+)$")
MAX_CAMERA_INDEX = 9999


def camera_index(spec: str) -> int | None:
    """The camera an input names: all digits ("0"), or a Linux device node ("/dev/video2", as
    ffmpeg and OBS spell it); None for anything else. Raises SourceError for an index no camera
    API can have."""
    node = _V4L2_NODE.match(spec)
    digits = node.group(1) if node else spec if spec.isascii() and spec.isdigit() else None
    if digits is None:
        return None
    index = int(digits)
    if index > MAX_CAMERA_INDEX:
        raise SourceError(
            f"Camera {spec} cannot exist (camera numbers go up to {MAX_CAMERA_INDEX}).",
            hint=f"Run `{app_command('doctor')}` to list the cameras.",
        )
    return index
