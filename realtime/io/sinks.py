"""Frame sinks: the virtual camera, a video or image file, or nothing, behind one small Protocol.

File sinks write to a hidden temporary name next to the target and rename it into place on close(),
so an interrupted run never leaves a half-written file under the name the user asked for.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import shutil
import sys
import time
import uuid
from collections.abc import Callable, Mapping
from fractions import Fraction
from pathlib import Path
from types import MappingProxyType
from typing import Any, Protocol

import av
import av.error
import cv2
import numpy as np
import pyvirtualcam
import pyvirtualcam.camera

from models.ops.yuv import AVCOL_RANGE_MPEG, AVCOL_SPC_SMPTE170M
from models.types import ImageBGR
from realtime.core.contracts import FrameSink
from realtime.core.errors import SinkError, VirtualCameraUnavailableError
from realtime.core.frames import VideoFrame

log = logging.getLogger(__name__)

IMAGE_EXTENSIONS = frozenset({".png", ".jpg", ".jpeg", ".bmp", ".webp", ".tif", ".tiff"})
DEFAULT_FPS = 30.0
ALTERNATIVES_HINT = "Meanwhile use `--output window` to preview, or write a file such as `--output out.mp4`."

LINUX_MODPROBE = "sudo modprobe v4l2loopback devices=1 exclusive_caps=1 card_label=FaceCast"
LINUX_RELOAD = f"sudo modprobe -r v4l2loopback && {LINUX_MODPROBE}"




def letterbox_into(src: ImageBGR, dst: ImageBGR) -> None:
    """Scale `src` into the preallocated `dst`, keeping its aspect ratio, centred between black bars."""
    dst_h, dst_w = dst.shape[:2]
    src_h, src_w = src.shape[:2]
    if (src_h, src_w) == (dst_h, dst_w):
        np.copyto(dst, src)
        return
    scale = min(dst_w / src_w, dst_h / src_h)
    new_w = max(1, min(dst_w, round(src_w * scale)))
    new_h = max(1, min(dst_h, round(src_h * scale)))
    x0 = (dst_w - new_w) // 2
    y0 = (dst_h - new_h) // 2
    # Only the bars are cleared: the content area is overwritten below, and clearing the bars every
    # time keeps them black even if the source size changed since the last frame.
    dst[:y0] = 0
    dst[y0 + new_h :] = 0
    dst[y0 : y0 + new_h, :x0] = 0
    dst[y0 : y0 + new_h, x0 + new_w :] = 0
    view = dst[y0 : y0 + new_h, x0 : x0 + new_w]
    shrinking = new_w < src_w
    interpolation = cv2.INTER_AREA if shrinking else cv2.INTER_LINEAR
    out = cv2.resize(src, (new_w, new_h), dst=view, interpolation=interpolation)
    if out is not view:
        # cv2 writes into a strided view directly; copy only if a binding ever hands back a new array.
        np.copyto(view, out)


def _even(n: int) -> int:
    """Rounded up: 4:2:0 video needs even sizes, and padding one row/column never scales the picture."""
    return max(2, n + n % 2)


# ------------------------------------------------------------------------------------ virtual camera


class CameraLike(Protocol):
    """The part of pyvirtualcam.Camera the sink uses."""

    def send(self, frame: ImageBGR) -> None: ...

    def sleep_until_next_frame(self) -> None: ...

    def close(self) -> None: ...


def virtual_camera_fix(platform: str = sys.platform, error_text: str = "", loopback_devices: int = 0) -> str:
    """What the user should do so a virtual camera can be opened, from pyvirtualcam's error text
    (and, on Linux, how many v4l2loopback devices exist: pyvirtualcam says "no device found" both
    when the module is not loaded and when every device is taken by another program)."""
    text = error_text.lower()
    if platform.startswith("linux") and loopback_devices > 0 and "no v4l2 loopback device" in text:
        return (
            f"The virtual camera exists ({loopback_devices} v4l2loopback device"
            f"{'s' if loopback_devices > 1 else ''}) but another program is sending to it (OBS's virtual "
            "camera, another FaceCast): close that program, or add a device for FaceCast with "
            f"`sudo modprobe -r v4l2loopback && {LINUX_MODPROBE.replace('devices=1', 'devices=2')}`."
        )
    if platform.startswith("linux"):
        if "permission" in text or "'video' group" in text:
            return (
                "Give your user access to the video devices: `sudo usermod -a -G video $USER`, "
                "then log out and back in."
            )
        if "already in use" in text:
            return (
                "Another program is already sending to the virtual camera: close it, or create two devices "
                f"with `sudo modprobe -r v4l2loopback && {LINUX_MODPROBE.replace('devices=1', 'devices=2')}`."
            )
        if "not a video output device" in text:
            return (
                "That device is not a v4l2loopback output: leave the device unset or pick the FaceCast "
                "device from `v4l2-ctl --list-devices`; if it worked before, reload the module: "
                f"`{LINUX_RELOAD}`."
            )
        return (
            f"Load the v4l2loopback kernel module: `{LINUX_MODPROBE}` (if modprobe says the module "
            "is not found, install it first: `sudo apt install v4l2loopback-dkms`)."
        )
    if platform.startswith("win"):
        if "could not be started" in text or "in use" in text:
            return (
                "Only one program can drive the virtual camera: stop 'Virtual Camera' in OBS "
                "(or close the other app using it) and try again."
            )
        return (
            "Install OBS Studio 26 or newer, which provides the 'OBS Virtual Camera' device; if it is "
            "still not found, click 'Start Virtual Camera' in OBS once and stop it again."
        )
    if platform == "darwin":
        if "could not be started" in text or "couldn't start" in text or "could not start" in text:
            return (
                "Only one program can drive the virtual camera: if OBS's own 'Virtual Camera' is "
                "started, stop it in OBS and try again. Otherwise restart OBS once, so that its camera "
                "extension is running."
            )
        return (
            "Install OBS Studio 30 or newer, click 'Start Virtual Camera' in OBS once and stop it again, "
            "then approve the system extension in System Settings → Privacy & Security "
            "(a restart may be needed)."
        )
    return f"No virtual camera driver is supported on this system ({platform})."


# pyvirtualcam's backends and the systems they exist on (a name from another OS is not "unknown").
_BACKENDS_BY_OS: Mapping[str, str] = MappingProxyType(
    {"obs": "Windows and macOS", "unitycapture": "Windows", "v4l2loopback": "Linux"}
)


class VirtualCameraSink:
    """Sends letterboxed BGR frames to a pyvirtualcam device at a size and rate fixed at open()."""

    def __init__(
        self,
        width: int | None = None,
        height: int | None = None,
        fps: float | None = None,
        backend: str | None = None,
        device: str | None = None,
        pace: bool = True,
        camera_factory: Callable[..., CameraLike] = pyvirtualcam.Camera,
    ) -> None:
        self._requested = (width, height, fps)
        self._backend = backend
        self._device = device
        self.pace = pace
        self._camera_factory = camera_factory
        self._camera: CameraLike | None = None
        self._buffer: ImageBGR | None = None
        self._fps = 0.0
        self._device_name = ""
        self.frames_sent = 0

    @property
    def size(self) -> tuple[int, int]:
        return (0, 0) if self._buffer is None else (int(self._buffer.shape[1]), int(self._buffer.shape[0]))

    @property
    def fps(self) -> float:
        return self._fps

    @property
    def description(self) -> str:
        w, h = self.size
        device = self._device_name or self._device or "virtual camera"
        return f"virtual camera {device} ({w}x{h} @ {self._fps:g} fps)"

    def open(self, width: int, height: int, fps: float) -> None:
        req_w, req_h, req_fps = self._requested
        # Even sizes: v4l2loopback converts to I420, and odd widths break in Chrome.
        w, h = _even(req_w or width), _even(req_h or height)
        rate = req_fps or fps or DEFAULT_FPS
        self._check_backend_name()
        try:
            camera = self._camera_factory(
                w, h, rate, fmt=pyvirtualcam.PixelFormat.BGR, device=self._device, backend=self._backend
            )
        except KeyError as err:
            raise SinkError(
                f"Unknown virtual camera backend '{self._backend}'.",
                hint="Leave the backend unset to try every installed one.",
            ) from err
        except RuntimeError as err:
            raise _unavailable(str(err)) from err
        self._camera = camera
        self._device_name = str(getattr(camera, "device", "") or "")
        self._fps = float(rate)
        self._buffer = np.zeros((h, w, 3), np.uint8)  # reused for every frame
        self.frames_sent = 0

    def _check_backend_name(self) -> None:
        # pyvirtualcam looks an unknown name up before it is fully constructed, and its __del__ then
        # prints a stray AttributeError; checking first gives the user one clean message instead.
        if self._backend is None or self._camera_factory is not pyvirtualcam.Camera:
            return
        installed = sorted(pyvirtualcam.camera.BACKENDS)
        if self._backend not in installed:
            known = self._backend in _BACKENDS_BY_OS
            raise SinkError(
                f"The virtual camera backend '{self._backend}' is not available on this system"
                f" (it is for {_BACKENDS_BY_OS[self._backend]})."
                if known
                else f"Unknown virtual camera backend '{self._backend}'.",
                hint=f"Installed backends: {', '.join(installed) or 'none'}; or leave it unset to try each.",
            )

    def send(self, frame: VideoFrame) -> None:
        if self._camera is None or self._buffer is None:
            raise RuntimeError("VirtualCameraSink.send() called before open()")
        letterbox_into(frame.image, self._buffer)
        try:
            self._camera.send(self._buffer)
        except RuntimeError as err:
            raise SinkError(
                f"The virtual camera stopped accepting frames ({err}).",
                hint="Restart FaceCast; on Linux check that v4l2loopback is still loaded.",
            ) from err
        self.frames_sent += 1
        if self.pace:
            self._camera.sleep_until_next_frame()

    def close(self) -> None:
        camera, self._camera = self._camera, None
        if camera is not None:
            camera.close()

    def abort(self) -> None:
        # A virtual camera keeps nothing half-written: aborting is closing.
        self.close()


def _unavailable(error_text: str) -> VirtualCameraUnavailableError:
    reason = "; ".join(line.strip() for line in error_text.splitlines() if line.strip()) or "no backend"
    from realtime.io.cameras import list_loopback_devices  # sysfs only; Linux

    fix = virtual_camera_fix(sys.platform, error_text, len(list_loopback_devices()))
    if not reason.endswith((".", "?", "!")):
        reason += "."
    message = f"Virtual camera unavailable: {reason} Fix: {fix}"
    return VirtualCameraUnavailableError(message, hint=ALTERNATIVES_HINT)


# ------------------------------------------------------------------------------------------ file sinks


def _partial_path(path: Path) -> Path:
    """A new hidden temp name in the target's own folder (same file system, so the rename is
    atomic), this writer's own: `.NAME.PID-TAG.partial.EXT` (two recordings of one name, in one
    process or two, must not share, nor take over, a partial file). The real extension stays last
    because the muxer is chosen from it."""
    return path.with_name(f".{path.stem}.{os.getpid()}-{uuid.uuid4().hex[:8]}.partial{path.suffix}")


_PARTIAL_TAG = re.compile(r"\d+(-[0-9a-f]{8})?")  # PID-TAG, or PID alone (written before the tag)


def _prepare_target(path: Path, temp: Path) -> None:
    """Create the folder and prove the temp file can be written."""
    if path.is_dir():
        raise SinkError(f"Output {path} is a folder.", hint=f"Give a file name, e.g. {path / 'out.mp4'}.")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(temp, "wb"):
            pass  # only proving that a file can be created here; the writer fills it
    except OSError as err:
        raise SinkError(f"Cannot write output {path} ({_reason(err)}).") from err


def _write_error(path: Path, err: BaseException, *, kept: bool = False) -> SinkError:
    what = (
        "the recording stopped there; what was recorded is kept in it"
        if kept
        else "the partial file was removed"
    )
    if isinstance(err, OSError) and err.errno == errno.ENOSPC:
        return SinkError(
            f"Disk full while writing {path}; {what}.",
            hint="Free some space or write the output to another drive.",
        )
    return SinkError(f"Could not write {path} ({_reason(err)}); {what}.")


_FRAGMENTED = (".mp4", ".mov", ".m4v")  # written fragmented: readable without the muxer's ending
_STREAMABLE = (".mkv", ".ts")  # readable up to where they were cut by design


def _container_options(path: Path) -> dict[str, str]:
    """Muxer options: fragmented MP4/MOV, and every packet flushed to the file as it is muxed
    (with the default 32 KB buffer a crash lost the last packets, and a short file entirely)."""
    options = {"flush_packets": "1"}
    if path.suffix.lower() in _FRAGMENTED:
        options["movflags"] = "frag_keyframe+empty_moov+default_base_moof+negative_cts_offsets"
    return options


def _disk_full(folder: Path) -> bool:
    try:
        return shutil.disk_usage(folder).free < 256 * 1024
    except OSError:
        return False


def _survives_truncation(path: Path) -> bool:
    return path.suffix.lower() in _FRAGMENTED + _STREAMABLE


_STALE_PARTIAL_S = 10.0  # a partial file untouched this long has no writer (a live one flushes each frame)


def _recover_partial(path: Path) -> None:
    """Hidden partial recordings left by a crash (or a kill) hold playable video for the
    containers that survive truncation: give them a visible name instead of leaving them hidden.
    Another FaceCast still writing one (its file changes every frame) is left alone."""
    if not _survives_truncation(path):
        return
    for temp in _stale_partials(path):
        if _size(temp) < _EMPTY_PARTIAL_BYTES:
            # Killed before its first frame: only a header, nothing to keep. Left there, these
            # hidden files piled up for good.
            _remove(temp)
            continue
        n, target = 1, path.with_name(f"{path.stem}.recovered{path.suffix}")
        while target.exists():
            n += 1
            target = path.with_name(f"{path.stem}.recovered-{n}{path.suffix}")
        try:
            os.replace(temp, target)
        except OSError as err:
            log.warning("Could not keep the interrupted recording %s: %s", temp, err)
            continue
        log.warning("A recording that was interrupted earlier (%s) was kept as %s.", path.name, target)


def _stale_partials(path: Path) -> list[Path]:
    """Partial files of `path` (`.NAME.PID-TAG.partial.EXT`, or the older `.NAME.partial.EXT`)
    that nobody has written to for a while: a live writer touches its file with every frame."""
    legacy = f".{path.stem}.partial{path.suffix}"
    prefix, suffix = f".{path.stem}.", f".partial{path.suffix}"
    found: list[Path] = []
    try:
        entries = list(path.parent.iterdir())
    except OSError:
        return []
    now = time.time()
    for entry in entries:
        name = entry.name
        tag = name[len(prefix) : -len(suffix)] if name.startswith(prefix) and name.endswith(suffix) else ""
        if not (name == legacy or _PARTIAL_TAG.fullmatch(tag)):
            continue
        try:
            st = entry.stat()
        except OSError:
            continue
        if now - st.st_mtime > _STALE_PARTIAL_S:
            found.append(entry)
    return sorted(found)


_EMPTY_PARTIAL_BYTES = 1024  # a container header with no frame in it is smaller


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _reason(err: BaseException) -> str:
    return str(getattr(err, "strerror", None) or err)


def _remove(path: Path) -> None:
    try:
        path.unlink(missing_ok=True)
    except OSError as err:
        log.warning("Could not remove the partial file %s: %s", path, err)


def codec_available(name: str) -> bool:
    try:
        av.Codec(name, "w")
    except ValueError:  # av.codec.codec.UnknownCodecError
        return False
    return True


def _fraction(fps: float) -> Fraction:
    # limit_denominator(1001) turns 29.97002997… back into 30000/1001.
    return Fraction(fps).limit_denominator(1001)


class VideoFileSink:
    """An H.264 (or MPEG-4 part 2 when libx264 is missing) video file written with PyAV.

    Timing: a file or clip's frames are placed by their index (exact media time; dropped frames
    leave gaps instead of speeding the video up); a live source's by its capture clock, because a
    camera may deliver fewer frames than the rate it reports (low light: 15 of "30" fps) or pause
    to reconnect, and an index timeline would then play too fast.

    Nothing recorded is lost to a crash or a full disk: MP4/MOV are written fragmented (a fragment
    per keyframe, one every 2 s) and every packet reaches the disk as it is muxed, so the file
    plays up to the last fragment whatever happens; on a full disk what was written is kept; a
    hidden partial file left by a crash is renamed `NAME.recovered.EXT` by the next recording.
    """

    def __init__(
        self,
        path: str | Path,
        codec: str = "libx264",
        crf: int = 20,
        bitrate: int | None = None,
        pix_fmt: str = "yuv420p",
        preset: str = "veryfast",
    ) -> None:
        self.path = Path(path)
        self.codec = codec
        self.crf = crf
        self.bitrate = bitrate
        self.pix_fmt = pix_fmt
        self.preset = preset
        self.frames_written = 0
        self._packets_written = 0  # encoded packets in the file (the encoder holds the first frames)
        self._keep_temp = False  # a failed write left the recording in the temp file (see _stop_writing)
        self._existed = False  # whether `path` was there at open() (see _final_path)
        self._temp = _partial_path(self.path)
        self._container: av.container.OutputContainer | None = None
        self._stream: av.VideoStream | None = None
        self._buffer: ImageBGR | None = None
        self._first_index: int | None = None
        self._first_capture: float | None = None
        self._rate = float(DEFAULT_FPS)
        self._last_pts = -1

    @property
    def description(self) -> str:
        return f"video file {self.path} ({self.codec})"

    def open(self, width: int, height: int, fps: float) -> None:
        _recover_partial(self.path)
        self._keep_temp = False
        self._existed = self.path.exists()
        self._temp = _partial_path(self.path)
        _prepare_target(self.path, self._temp)
        try:
            container = av.open(str(self._temp), mode="w", options=_container_options(self.path))
        except (ValueError, OSError, av.error.FFmpegError) as err:
            _remove(self._temp)
            raise SinkError(
                f"Cannot write video {self.path} ({_reason(err)}).",
                hint="Use a video extension such as .mp4, .mkv or .mov.",
            ) from err
        try:
            self._stream = self._add_stream(container, _even(width), _even(height), fps or DEFAULT_FPS)
        except (ValueError, av.error.FFmpegError) as err:
            container.close()
            _remove(self._temp)
            raise SinkError(f"Cannot encode video for {self.path} ({_reason(err)}).") from err
        self._container = container
        # Sized to the encoded (even) picture; odd sources and other sizes are fitted into it.
        self._buffer = np.zeros((self._stream.height, self._stream.width, 3), np.uint8)
        self._first_index = None
        self._first_capture = None
        self._rate = float(fps or DEFAULT_FPS)
        self._last_pts = -1
        self.frames_written = 0
        self._packets_written = 0

    def _add_stream(
        self, container: av.container.OutputContainer, w: int, h: int, fps: float
    ) -> av.VideoStream:
        codec = self.codec
        if not codec_available(codec):
            log.warning("Encoder %s is not available in this PyAV build; using mpeg4.", codec)
            codec = "mpeg4"
        stream = container.add_stream(codec, rate=_fraction(fps))
        if not isinstance(stream, av.VideoStream):
            raise ValueError(f"{codec} is not a video encoder")
        stream.width, stream.height, stream.pix_fmt = w, h, self.pix_fmt
        # Say which YUV the file holds (BT.601, limited range: OpenCV's and swscale's default).
        # Untagged HD video is shown as BT.709 by browsers and most players: reds and greens shift.
        stream.codec_context.colorspace = AVCOL_SPC_SMPTE170M
        stream.codec_context.color_range = AVCOL_RANGE_MPEG
        # A keyframe every 2 s: each starts a fragment, so a crash loses at most that much.
        stream.codec_context.gop_size = max(1, round(2.0 * fps))
        if codec == "libx264" and self.bitrate is None:
            stream.options = {"crf": str(self.crf), "preset": self.preset}
        else:
            # mpeg4 has no CRF and defaults to 200 kb/s, which smears faces; ~0.2 bit per pixel looks fine.
            stream.bit_rate = self.bitrate or int(w * h * fps * 0.2)
        self.codec = codec
        return stream

    def send(self, frame: VideoFrame) -> None:
        container, stream, buffer = self._container, self._stream, self._buffer
        if container is None or stream is None or buffer is None:
            raise RuntimeError("VideoFileSink.send() called before open() or after close()")
        image = self._fit(frame.image, buffer)
        # A fresh av.VideoFrame per frame on purpose: encoders keep references to queued input frames
        # (x264 lookahead), so refilling one frame object would corrupt frames not yet encoded.
        if self.pix_fmt == "yuv420p":
            # OpenCV's BT.601 conversion round-trips colours within 1-2 levels through standard
            # decoders; swscale's default bgr24 path shifts flat greys by ~4 levels.
            yuv = np.asarray(cv2.cvtColor(image, cv2.COLOR_BGR2YUV_I420), dtype=np.uint8)
            av_frame = av.VideoFrame.from_ndarray(yuv, format="yuv420p")
        else:
            av_frame = av.VideoFrame.from_ndarray(image, format="bgr24")
        av_frame.colorspace, av_frame.color_range = AVCOL_SPC_SMPTE170M, AVCOL_RANGE_MPEG
        av_frame.pts = max(self._timeline(frame), self._last_pts + 1)
        self._last_pts = av_frame.pts
        try:
            packets = stream.encode(av_frame)
            container.mux(packets)
        except (OSError, av.error.FFmpegError) as err:
            raise self._stop_writing(err) from err
        self.frames_written += 1
        self._packets_written += len(packets)

    def _timeline(self, frame: VideoFrame) -> int:
        """The frame's place in the file, in frame periods of the stream's rate (see the class doc)."""
        if frame.pts is not None:  # a file or clip: its own index is exact
            if self._first_index is None:
                self._first_index = frame.index
            return frame.index - self._first_index
        if self._first_capture is None:
            self._first_capture = frame.capture_ts
        return round((frame.capture_ts - self._first_capture) * self._rate)

    def _stop_writing(self, err: BaseException) -> SinkError:
        """A write failed (a full disk): keep what the file holds when its container can be read
        without a proper ending (fragmented MP4, MKV, TS) and frames are in it, else remove it."""
        container = self._container
        if self._packets_written == 0 or not _survives_truncation(self.path) or container is None:
            self.abort()
            return _write_error(self.path, err)
        self._container = self._stream = None
        try:
            container.close()  # writes what it can; on a full disk the last fragment may be cut
        except (OSError, av.error.FFmpegError) as close_err:
            log.debug("Error while closing %s after a failed write: %s", self._temp, close_err)
        try:
            os.replace(self._temp, self._final_path())
        except OSError as move_err:
            log.warning("Could not move %s to %s: %s", self._temp, self.path, move_err)
            self._keep_temp = True  # the message says the recording is in it: abort() must not delete it
            return _write_error(self._temp, err, kept=True)
        return _write_error(self.path, err, kept=True)

    @staticmethod
    def _fit(image: ImageBGR, buffer: ImageBGR) -> ImageBGR:
        h, w = image.shape[:2]
        bh, bw = buffer.shape[:2]
        if (h, w) == (bh, bw):
            return image
        if bh - 1 <= h <= bh and bw - 1 <= w <= bw:
            # Odd size padded to even by repeating the last row/column (a black line would show).
            buffer[:h, :w] = image
            buffer[h:, :w] = image[h - 1 :]
            buffer[:, w:] = buffer[:, w - 1 : w]
            return buffer
        letterbox_into(image, buffer)
        return buffer

    def close(self) -> None:
        container, stream = self._container, self._stream
        if container is None or stream is None:
            return
        if self.frames_written == 0:
            # Not an error of its own: the run stopped before a frame came (the cause is reported
            # elsewhere), and an empty video would only be a broken file under the user's name.
            log.warning("No frames were produced, so %s was not written.", self.path)
            self.abort()
            return
        try:
            container.mux(stream.encode(None))  # flush the frames the encoder still holds
            container.close()
            self._container = self._stream = None
            os.replace(self._temp, self._final_path())
        except (OSError, av.error.FFmpegError) as err:
            self.abort()
            raise _write_error(self.path, err) from err
        if _disk_full(self.path.parent):
            # The muxer writes the last fragment inside close() and PyAV does not raise a failed
            # write there: a full disk is the only sign that the file's end may be cut.
            raise SinkError(
                f"The disk holding {self.path} is full: the last seconds of the recording may be cut.",
                hint="Free some space before the next recording, or record to another drive.",
            )

    def _final_path(self) -> Path:
        """Where the finished file goes: `path`, unless a file of that name appeared while this
        one was recorded (another FaceCast writing the same take): then `NAME-2.EXT`, ... — the
        other recording is not replaced. (A file that was there at open() is replaced, as asked.)"""
        if self._existed or not self.path.exists():
            return self.path
        n, target = 2, self.path.with_name(f"{self.path.stem}-2{self.path.suffix}")
        while target.exists():
            n += 1
            target = self.path.with_name(f"{self.path.stem}-{n}{self.path.suffix}")
        log.warning("%s appeared while recording; this recording is kept as %s.", self.path, target)
        self.path = target
        return target

    def abort(self) -> None:
        container = self._container
        self._container = self._stream = None
        if container is not None:
            try:
                container.close()
            except (OSError, av.error.FFmpegError) as err:
                # The file is deleted next; the error only matters for the log.
                log.debug("Error while discarding %s: %s", self._temp, err)
        if not self._keep_temp:
            _remove(self._temp)


class ImageFileSink:
    """Writes the last frame it received as an image when closed (for image inputs)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._temp = _partial_path(self.path)
        self._last: ImageBGR | None = None
        self.frames_received = 0

    @property
    def description(self) -> str:
        return f"image file {self.path}"

    def open(self, width: int, height: int, fps: float) -> None:
        if not cv2.haveImageWriter(str(self.path)):
            raise SinkError(
                f"Cannot write {self.path}: unknown image type.", hint="Use .png, .jpg, .bmp, .webp or .tif."
            )
        self._temp = _partial_path(self.path)
        _prepare_target(self.path, self._temp)
        _remove(self._temp)  # proves the folder is writable; the file comes at close()
        self._last = None
        self.frames_received = 0

    def send(self, frame: VideoFrame) -> None:
        # The frame owns its image (see VideoFrame), so keeping a reference is safe and free.
        self._last = frame.image
        self.frames_received += 1

    def close(self) -> None:
        image, self._last = self._last, None
        if image is None:
            if self.frames_received == 0:
                log.warning("No frame was produced, so %s was not written.", self.path)
            return
        ok, encoded = cv2.imencode(self.path.suffix, image)
        if not ok:
            raise SinkError(f"Could not encode the image for {self.path}.")
        temp = self._temp
        try:
            # A Python write + rename rather than imwrite (no non-ASCII paths) or ndarray.tofile
            # (its OSError on a full disk has no errno, so "disk full" could not be said).
            with open(temp, "wb") as f:
                f.write(encoded.tobytes())
            os.replace(temp, self.path)
        except OSError as err:
            _remove(temp)
            raise _write_error(self.path, err) from err

    def abort(self) -> None:
        self._last = None
        _remove(self._temp)


class NullSink:
    """Discards frames and counts them (benchmarks, dry runs)."""

    def __init__(self) -> None:
        self.frames_sent = 0
        self.size = (0, 0)

    @property
    def description(self) -> str:
        return "null (frames discarded)"

    def open(self, width: int, height: int, fps: float) -> None:
        self.size = (width, height)
        self.frames_sent = 0

    def send(self, frame: VideoFrame) -> None:
        self.frames_sent += 1

    def close(self) -> None:
        """Nothing to finalise."""

    def abort(self) -> None:
        """Nothing to discard."""


def open_sink(
    spec: str,
    *,
    width: int | None = None,
    height: int | None = None,
    fps: float | None = None,
    vcam_backend: str | None = None,
    vcam_device: str | None = None,
    pace: bool = True,
    **file_options: Any,
) -> FrameSink:
    """The sink a command-line output names; the caller calls open(). `file_options` go to VideoFileSink.

    "vcam", "null", "window" (built by the GUI layer), an image path, or else a video path.
    """
    keyword = spec.strip().lower()
    if keyword == "vcam":
        return VirtualCameraSink(width, height, fps, backend=vcam_backend, device=vcam_device, pace=pace)
    if keyword == "null":
        return NullSink()
    if keyword == "window":
        raise SinkError(
            "The window output needs the Qt GUI.",
            hint="Create it with gui.window_sink.WindowSink on the Qt thread.",
        )
    path = Path(spec)
    if path.suffix.lower() in IMAGE_EXTENSIONS:
        return ImageFileSink(path)
    return VideoFileSink(path, **file_options)
