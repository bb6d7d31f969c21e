"""Frame sources: a camera, a video file or a still image behind one small Protocol.

Every source owns its device or file handle, hands out frames whose image it never touches again,
and turns every way an input can fail into a one-line `SourceError` naming the camera or file.
The camera (camera_source) and the video file (video_file) have their own modules; the still
image, the NVDEC-or-CPU fallback and the reading of a command line's input string are here.
"""

from __future__ import annotations

import logging
import re
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path

import cv2
import numpy as np

from models.cli_text import app_command
from models.types import ImageBGR
from realtime.core.contracts import FrameSource
from realtime.core.errors import SourceError
from realtime.core.frames import VideoFrame
from realtime.core.image_header import check_pixel_count
from realtime.core.source_base import SourceWrapper
from realtime.io.camera_source import (
    CameraSource,
)
from realtime.io.source_parts import DEFAULT_FPS, KnownFormat, Pacer, reason
from realtime.io.video_file import VideoFileSource

# The sources' names, importable from here whichever module defines them.
__all__ = [
    "IMAGE_EXTENSIONS",
    "MAX_CAMERA_INDEX",
    "FallbackSource",
    "ImageSource",
    "camera_index",
    "file_url_path",
    "load_image",
    "open_source",
    "refuse_stream_url",
]

log = logging.getLogger(__name__)

# Every still format OpenCV decodes here (.jfif is how Windows and browsers often save JPEGs): as a
# "video" such a file played one frame and ended the run.
IMAGE_EXTENSIONS = frozenset(
    {".png", ".jpg", ".jpeg", ".jpe", ".jfif", ".bmp", ".dib", ".webp", ".tif", ".tiff", ".ppm", ".pgm",
     ".pbm", ".pnm", ".jp2"}
)  # fmt: skip


# ---------------------------------------------------------------------------------------------- image


def load_image(path: str | Path) -> ImageBGR:
    """Read an image as BGR. np.fromfile + imdecode because cv2.imread cannot open non-ASCII paths
    on Windows."""
    path = Path(path)
    try:
        data = np.fromfile(path, dtype=np.uint8)
    except FileNotFoundError as err:
        raise SourceError(f"Image not found: {path}") from err
    except IsADirectoryError as err:
        raise SourceError(f"Image {path} is a folder, not a file.") from err
    except OSError as err:
        raise SourceError(f"Cannot read image {path} ({reason(err)}).") from err
    check_pixel_count(path, data[: 1 << 20].tobytes(), "Image")
    try:
        image = cv2.imdecode(data, cv2.IMREAD_COLOR) if data.size else None
    except cv2.error as err:  # a header OpenCV refuses (its own size limit, a damaged file)
        raise SourceError(f"{path} cannot be decoded: {str(err).strip().splitlines()[-1]}.") from err
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
    """A SourceError for a network stream's address (rtsp://, http://, ...): as a file name it would
    be reported as a missing file, with one '/' lost on the way."""
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
