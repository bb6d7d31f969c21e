"""Find the cameras a user can pick from, and ask each what it actually delivers.

On Linux the names come from sysfs (instant, and it does not open the devices, so it neither turns
on camera LEDs nor fails on a camera another program is using). v4l2loopback devices are virtual
cameras — FaceCast's *output* — so they are listed apart, by `list_loopback_devices()`.
On Windows and macOS cv2-enumerate-cameras asks the system's own device list (DirectShow,
AVFoundation) for names, in the order OpenCV numbers them, without opening any camera. Only where
that package is missing or fails are indices probed with `cv2.VideoCapture` (each miss can cost a
second, and each hit flashes the camera's light).
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from realtime.core.errors import SourceError

log = logging.getLogger(__name__)

SYSFS_VIDEO4LINUX = Path("/sys/class/video4linux")

#: (width, height, fps) asked for by `probe_modes` unless told otherwise.
DEFAULT_MODE_CANDIDATES: tuple[tuple[int, int, float], ...] = (
    (640, 480, 30),
    (1280, 720, 30),
    (1920, 1080, 30),
    (1280, 720, 60),
)

# OpenCV's CAP_PROP_* values; stable across 4.x, kept here so the fakes in tests need no cv2.
_PROP_FRAME_WIDTH = 3
_PROP_FRAME_HEIGHT = 4
_PROP_FPS = 5
_PROP_FOURCC = 6

# Probing stops after this many indices in a row fail to open: Windows and macOS number cameras
# contiguously, and every failed open costs up to a second with some backends.
_MAX_CONSECUTIVE_MISSES = 2

# OpenCV's capture API numbers (cv2.CAP_*), for the same reason.
CAP_V4L2 = 200
CAP_DSHOW = 700
CAP_AVFOUNDATION = 1200

# Serialises camera opens and probes across threads: a device opened twice at once (the GUI's
# Refresh while the engine captures; MSMF and DSHOW on one camera) fails or breaks the running
# stream, and OpenCV's log level, which probing silences, is process-wide. Re-entrant: a probe
# may run inside an open that failed (to list what is there).
_CAMERA_LOCK = threading.RLock()


def default_camera_backend(platform: str = sys.platform) -> int:
    """The capture API that opens webcams fastest and honours MJPG/size requests on each OS. Listing,
    probing and capturing all use it: on Windows, MSMF and DSHOW number cameras differently (only
    DSHOW sees OBS's virtual camera), so mixing them opens the wrong device."""
    if platform.startswith("win"):
        return CAP_DSHOW
    if platform == "darwin":
        return CAP_AVFOUNDATION
    return CAP_V4L2


def request_mode(
    cap: Capture,
    backend: int,
    width: int | None = None,
    height: int | None = None,
    fps: float | None = None,
    prefer_mjpg: bool = True,
) -> None:
    """Ask an open capture for a size, rate and MJPG, in the order its backend keeps them.

    V4L2 (and the others): the pixel format first, since the driver picks the size/fps list from it
    and many webcams reach 30 fps at 720p and above only in MJPG. DirectShow: the rate, then the
    size, then MJPG last: there a size or rate change rebuilds the graph with its own format
    preference (YUY2 before MJPG), dropping an MJPG asked for earlier (cap_dshow.cpp).
    """
    mjpg = float(_fourcc_code("MJPG")) if prefer_mjpg else None
    steps: list[tuple[int, float | None]] = [
        (_PROP_FOURCC, mjpg),
        (_PROP_FRAME_WIDTH, width),
        (_PROP_FRAME_HEIGHT, height),
        (_PROP_FPS, fps),
    ]
    if backend == CAP_DSHOW:
        steps = [steps[3], steps[1], steps[2], steps[0]]
    for prop, value in steps:
        if value:
            cap.set(prop, value)


def _fourcc_code(text: str) -> int:
    return sum(ord(c) << (8 * i) for i, c in enumerate(text))


@dataclass(frozen=True, slots=True)
class CameraMode:
    """A format a camera delivered: the frame size it really produced and the rate it reported."""

    width: int
    height: int
    fps: float
    fourcc: str

    def __str__(self) -> str:
        fps = f"{self.fps:g}"
        return f"{self.width}x{self.height}@{fps} {self.fourcc}".rstrip()


@dataclass(frozen=True, slots=True)
class CameraInfo:
    """One video device.

    index: the number to pass to cv2.VideoCapture (N of /dev/videoN on Linux).
    path: the device node on Linux, None elsewhere.
    modes: filled only by `probe_modes` (listing does not open devices); empty means "not probed".
    """

    index: int
    name: str
    path: str | None
    modes: tuple[CameraMode, ...] = ()


class Capture(Protocol):
    """The part of cv2.VideoCapture used here (so tests can pass a fake)."""

    def isOpened(self) -> bool: ...  # OpenCV's spelling

    def set(self, prop_id: int, value: float) -> bool: ...

    def get(self, prop_id: int) -> float: ...

    def read(self) -> tuple[bool, Any]: ...

    def release(self) -> None: ...


CaptureFactory = Callable[[int], Capture]


@dataclass(frozen=True, slots=True)
class _SysfsDevice:
    info: CameraInfo
    node_index: int  # sysfs `index`: 0 for a device's main node, 1+ for e.g. UVC metadata nodes
    loopback: bool


def list_cameras(
    max_index: int = 10,
    *,
    platform: str = sys.platform,
    sysfs_root: Path = SYSFS_VIDEO4LINUX,
    capture_factory: CaptureFactory | None = None,
) -> list[CameraInfo]:
    """The real cameras on this machine, by index.

    max_index: how many indices to probe where there is no sysfs (not Linux); on Linux every
    video4linux device is listed, whatever its number.
    """
    if platform.startswith("linux"):
        return [dev.info for dev in _read_sysfs(sysfs_root) if not dev.loopback and dev.node_index == 0]
    if capture_factory is None:
        named = _enumerate_named(default_camera_backend(platform))
        if named is not None:
            return named
    return _probe_indices(max_index, capture_factory or _open_capture)


def _enumerate_named(backend: int) -> list[CameraInfo] | None:
    """The cameras `backend` numbers, with their names, from cv2-enumerate-cameras (nothing is
    opened); None when the package is missing or fails, and the indices are probed instead."""
    try:
        from cv2_enumerate_cameras import enumerate_cameras
    except ImportError as exc:
        log.debug("cv2-enumerate-cameras is not installed (%s): probing camera indices", exc)
        return None
    try:
        found = enumerate_cameras(backend)
    except (OSError, RuntimeError, NotImplementedError, AttributeError) as exc:
        log.warning("could not list the cameras by name (%s): probing camera indices", exc)
        return None
    cameras: dict[int, CameraInfo] = {}
    for camera in found:
        index = int(camera.index)
        name = str(camera.name or "").strip() or f"Camera {index}"
        cameras.setdefault(index, CameraInfo(index=index, name=name, path=None))
    return [cameras[index] for index in sorted(cameras)]


def list_loopback_devices(
    *, platform: str = sys.platform, sysfs_root: Path = SYSFS_VIDEO4LINUX
) -> list[CameraInfo]:
    """v4l2loopback devices (virtual cameras FaceCast can write to). Linux only; [] elsewhere."""
    if not platform.startswith("linux"):
        return []
    return [dev.info for dev in _read_sysfs(sysfs_root) if dev.loopback]


def probe_modes(
    index: int,
    candidates: Sequence[tuple[int, int, float]] = DEFAULT_MODE_CANDIDATES,
    *,
    capture_factory: CaptureFactory | None = None,
    backend: int | None = None,
) -> tuple[CameraMode, ...]:
    """Open camera `index`, ask for each (width, height, fps) and return the distinct modes it
    actually delivered, in the order first seen.

    Drivers silently substitute the nearest mode they support, so the size is read from a real
    frame rather than trusted from `set()`. The fps is what the driver reports for that mode
    (measuring it would take a second per mode). Each mode is asked for exactly as CameraSource
    asks (MJPG preferred, the backend's order), so the list shows what a capture would get.
    Raises SourceError when the camera cannot be opened.
    """
    factory = capture_factory or _open_capture
    api = default_camera_backend() if backend is None else backend
    with quiet_opencv():
        cap = factory(index)
        try:
            if not cap.isOpened():
                raise SourceError(f"Camera {index} could not be opened.", hint=camera_access_hint())
            modes: list[CameraMode] = []
            for width, height, fps in candidates:
                request_mode(cap, api, width, height, fps)
                ok, frame = cap.read()
                if not ok or frame is None:
                    # The driver accepted the settings but then produced nothing: that mode is
                    # not one the camera delivers, so it is not reported.
                    continue
                mode = CameraMode(
                    width=int(frame.shape[1]),
                    height=int(frame.shape[0]),
                    fps=round(float(cap.get(_PROP_FPS)), 2),
                    fourcc=fourcc_to_str(cap.get(_PROP_FOURCC)),
                )
                if mode not in modes:
                    modes.append(mode)
            return tuple(modes)
        finally:
            cap.release()


def fourcc_to_str(value: float) -> str:
    """OpenCV's CAP_PROP_FOURCC (a float holding 4 packed ASCII bytes) as text, '' if unknown."""
    code = int(value)
    text = bytes((code >> (8 * i)) & 0xFF for i in range(4)).decode("ascii", errors="replace")
    text = text.rstrip("\x00 ")
    return text if text.isprintable() else ""


def _read_sysfs(root: Path) -> list[_SysfsDevice]:
    if not root.is_dir():
        # No video4linux class at all (a container, or no V4L2 driver loaded): no devices.
        return []
    devices: list[_SysfsDevice] = []
    for entry in root.iterdir():
        number = entry.name.removeprefix("video")
        if not entry.name.startswith("video") or not number.isdigit():
            continue  # v4l-subdev*, radio*, vbi*: not cameras
        name = _read_text(entry / "name") or entry.name
        node_index = _read_text(entry / "index")
        devices.append(
            _SysfsDevice(
                info=CameraInfo(index=int(number), name=name, path=f"/dev/{entry.name}"),
                node_index=int(node_index) if node_index.isdigit() else 0,
                # v4l2loopback adds these attributes to its devices' sysfs folders (see
                # v4l2loopback_create_sysfs); real drivers have no `max_openers`.
                loopback=(entry / "max_openers").exists(),
            )
        )
    return sorted(devices, key=lambda dev: dev.info.index)


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace").strip()
    except FileNotFoundError:
        return ""


def _probe_indices(max_index: int, factory: CaptureFactory) -> list[CameraInfo]:
    cameras: list[CameraInfo] = []
    misses = 0
    with quiet_opencv():
        for index in range(max_index):
            cap = factory(index)
            try:
                opened = cap.isOpened()
            finally:
                cap.release()
            if opened:
                misses = 0
                cameras.append(CameraInfo(index=index, name=f"Camera {index}", path=None))
            else:
                misses += 1
                if misses >= _MAX_CONSECUTIVE_MISSES:
                    break
    return cameras


def _open_capture(index: int) -> Capture:
    import cv2

    # The backend a capture uses (default_camera_backend); CAP_ANY would also try GStreamer and
    # FFmpeg on Linux and MSMF first on Windows, which numbers cameras differently.
    return cv2.VideoCapture(index, default_camera_backend())


@contextmanager
def camera_lock() -> Iterator[None]:
    """Hold while opening, probing or releasing a camera (see _CAMERA_LOCK)."""
    with _CAMERA_LOCK:
        yield


@contextmanager
def quiet_opencv() -> Iterator[None]:
    """Silence OpenCV's "can't open camera by index" warnings while probing, then restore the
    previous level (it is process-wide, and the rest of the app may want its warnings). Holds the
    camera lock, so overlapping probes cannot restore the levels out of order."""
    import cv2

    logging = cv2.utils.logging
    with _CAMERA_LOCK:
        previous = logging.getLogLevel()
        logging.setLogLevel(logging.LOG_LEVEL_SILENT)
        try:
            yield
        finally:
            logging.setLogLevel(previous)


def camera_access_hint(platform: str = sys.platform) -> str:
    if platform.startswith("linux"):
        return "Close other programs using it, and check your user is in the 'video' group."
    if platform == "darwin":
        return "Allow camera access for this app in System Settings > Privacy & Security > Camera."
    if platform == "win32":
        return "Close other apps using the camera and check Settings > Privacy > Camera."
    return "Close other programs using it."
