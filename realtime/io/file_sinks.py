"""File sinks: a video (PyAV) or an image (OpenCV), each written to a hidden partial file and
renamed into place on close(), so an interrupted run never leaves a half-written file under the
name the user asked for (see realtime/io/partial_files.py)."""

from __future__ import annotations

import io
import logging
import os
from collections.abc import Callable, Mapping
from fractions import Fraction
from pathlib import Path

import av
import av.error
import cv2
import numpy as np

from models.ops.yuv import AVCOL_RANGE_MPEG, AVCOL_SPC_SMPTE170M
from models.types import ImageBGR
from realtime.core.errors import SinkError
from realtime.core.frames import VideoFrame
from realtime.io.frame_fit import DEFAULT_FPS, _even, letterbox_into
from realtime.io.output_info import OutputInfo
from realtime.io.partial_files import (
    PartialFile,
    _partial_path,
    _prepare_target,
    _reason,
    _remove,
    _write_error,
    final_path,
)

log = logging.getLogger(__name__)

IMAGE_EXTENSIONS = frozenset({".png", ".jpg", ".jpeg", ".bmp", ".webp", ".tif", ".tiff"})

# Told the finished file's path once it has its name (the router signs it: realtime.io.provenance).
Finalise = Callable[[Path], object]


def codec_available(name: str) -> bool:
    try:
        av.Codec(name, "w")
    except ValueError:  # av.codec.codec.UnknownCodecError
        return False
    return True


def check_video_container(path: Path) -> None:
    """Refuse a video output whose container cannot hold the H.264 video FaceCast writes (`.xyz`,
    `.webm`, `.gif`), before any frame is processed: a file job found out only when it joined its
    chunks at the end. Nothing is written: the muxer is only looked up and tried in memory."""
    try:
        # Guessed from the name alone: opening for writing touches no file before encoding starts.
        muxer = av.open(str(path.with_name(f".{path.stem}.facecast-check{path.suffix}")), "w").format.name
        container = av.open(io.BytesIO(), "w", format=muxer)
        try:
            stream = container.add_stream("libx264" if codec_available("libx264") else "mpeg4", rate=25)
            stream.width, stream.height, stream.pix_fmt = 64, 64, "yuv420p"
            container.start_encoding()
        finally:
            container.close()
    except (ValueError, av.error.FFmpegError) as err:
        raise SinkError(
            f"Cannot write video {path}: {_reason(err)}.",
            hint="Use a video extension such as .mp4, .mkv or .mov.",
        ) from err


# cv2.rotate codes that turn an upright picture back to how a file with this display rotation
# stores it (the inverse of the source's turn; PyAV's rotation is degrees counterclockwise).
_UNDO_ROTATION = {90: cv2.ROTATE_90_CLOCKWISE, 180: cv2.ROTATE_180, 270: cv2.ROTATE_90_COUNTERCLOCKWISE}


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
        time_base: Fraction | None = None,
        b_frames: bool = True,
        tags: Mapping[str, str] | None = None,
        finalise: Finalise | None = None,
        stored_rotation: int = 0,
        new_take: bool = False,
    ) -> None:
        self._file = PartialFile(Path(path))  # the partial file, its lock, its name when finished
        # A display rotation to keep (degrees counterclockwise, as the input had it): upright
        # frames are turned back and stored as the input stored them, with the same tag.
        self.stored_rotation = stored_rotation
        # True: a file of that name is never replaced; the recording takes `NAME-2.EXT`, ... instead.
        self.new_take = new_take
        self.tags = dict(tags or {})  # container metadata (comment, description, ...)
        self.finalise = finalise
        # Set (a file job): each frame is placed at its own media time (frame.pts) in this time
        # base, so a variable-frame-rate input keeps its timing exactly.
        self.time_base = time_base
        # False: no B-frames, so packets decode in the order they show and chunks written apart
        # join into one stream with rising timestamps.
        self.b_frames = b_frames
        self.codec = codec
        self.crf = crf
        self.bitrate = bitrate
        self.pix_fmt = pix_fmt
        self.preset = preset
        self.frames_written = 0
        self._packets_written = 0  # encoded packets in the file (the encoder holds the first frames)
        self._container: av.container.OutputContainer | None = None
        self._stream: av.VideoStream | None = None
        self._buffer: ImageBGR | None = None
        self._turned: ImageBGR | None = None  # a frame turned back to the stored rotation
        self._first_index: int | None = None
        self._first_capture: float | None = None
        self._rate = float(DEFAULT_FPS)
        self._last_pts = -1

    @property
    def path(self) -> Path:
        """The file's name: the one asked for, or `NAME-2.EXT` when another took it meanwhile."""
        return self._file.path

    @property
    def description(self) -> str:
        return f"video file {self.path} ({self.codec})"

    def output_info(self) -> OutputInfo:
        return OutputInfo(record_path=self.path)

    def open(self, width: int, height: int, fps: float) -> None:
        temp = self._file.begin(self.new_take)
        try:
            container = av.open(str(temp), mode="w", options=self._file.container_options)
            if self.tags:
                container.metadata.update(self.tags)
        except (ValueError, OSError, av.error.FFmpegError) as err:
            self._file.discard()
            raise SinkError(
                f"Cannot write video {self.path} ({_reason(err)}).",
                hint="Use a video extension such as .mp4, .mkv or .mov.",
            ) from err
        rotation = self.stored_rotation % 360
        if rotation in (90, 270):
            width, height = height, width
        try:
            self._stream = self._add_stream(container, _even(width), _even(height), fps or DEFAULT_FPS)
            if rotation in _UNDO_ROTATION:
                self._stream.set_display_rotation(rotation)
        except (ValueError, av.error.FFmpegError) as err:
            container.close()
            self._file.discard()
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
        if self.time_base is not None:
            stream.time_base = self.time_base
            stream.codec_context.time_base = self.time_base
        if not self.b_frames:
            stream.codec_context.max_b_frames = 0
        # Say which YUV the file holds (BT.601, limited range: OpenCV's and swscale's default).
        # Untagged HD video is shown as BT.709 by browsers and most players: reds and greens shift.
        stream.codec_context.colorspace = AVCOL_SPC_SMPTE170M
        stream.codec_context.color_range = AVCOL_RANGE_MPEG
        # A keyframe every 2 s: each starts a fragment, so a crash loses at most that much.
        stream.codec_context.gop_size = max(1, round(2.0 * fps))
        if codec == "libx264" and self.bitrate is None:
            stream.options = {"crf": str(self.crf), "preset": self.preset}
            if not self.b_frames:
                stream.options = {**stream.options, "bf": "0"}
        else:
            # mpeg4 has no CRF and defaults to 200 kb/s, which smears faces; ~0.2 bit per pixel looks fine.
            stream.bit_rate = self.bitrate or int(w * h * fps * 0.2)
        self.codec = codec
        return stream

    def send(self, frame: VideoFrame) -> None:
        container, stream, buffer = self._container, self._stream, self._buffer
        if container is None or stream is None or buffer is None:
            raise RuntimeError("VideoFileSink.send() called before open() or after close()")
        undo = _UNDO_ROTATION.get(self.stored_rotation % 360)
        picture = frame.image
        if undo is not None:
            h, w = frame.image.shape[:2]
            shape = (w, h, 3) if undo != cv2.ROTATE_180 else (h, w, 3)
            if self._turned is None or self._turned.shape != shape:
                self._turned = np.empty(shape, np.uint8)  # reused: one per frame size
            cv2.rotate(frame.image, undo, dst=self._turned)
            picture = self._turned
        image = self._fit(picture, buffer)
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
        if frame.pts is not None and self.time_base is not None:
            return round(frame.pts / self.time_base)
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
        if self._packets_written == 0 or not self._file.survives_truncation or container is None:
            self.abort()
            return _write_error(self.path, err)
        self._container = self._stream = None
        try:
            container.close()  # writes what it can; on a full disk the last fragment may be cut
        except (OSError, av.error.FFmpegError) as close_err:
            log.debug("Error while closing %s after a failed write: %s", self._file.temp, close_err)
        return self._file.keep_cut(err)

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
            self._file.finish()
        except (OSError, av.error.FFmpegError) as err:
            self.abort()
            raise _write_error(self.path, err) from err
        self._file.check_end()
        if self.finalise is not None:
            self.finalise(self.path)

    def abort(self) -> None:
        container = self._container
        self._container = self._stream = None
        if container is not None:
            try:
                container.close()
            except (OSError, av.error.FFmpegError) as err:
                # The file is deleted next; the error only matters for the log.
                log.debug("Error while discarding %s: %s", self._file.temp, err)
        self._file.discard()


class ImageFileSink:
    """Writes the last frame it received as an image when closed (for image inputs)."""

    def __init__(self, path: str | Path, finalise: Finalise | None = None) -> None:
        self.path = Path(path)
        self.finalise = finalise
        self._temp = _partial_path(self.path)
        self._existed = False  # whether `path` was there at open() (partial_files.final_path)
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
        self._existed = self.path.exists()
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
            # (its OSError on a full disk has no errno, so "disk full" cannot be said).
            with open(temp, "wb") as f:
                f.write(encoded.tobytes())
            self.path = final_path(self.path, self._existed)
            os.replace(temp, self.path)
        except OSError as err:
            _remove(temp)
            raise _write_error(self.path, err) from err
        if self.finalise is not None:
            self.finalise(self.path)

    def abort(self) -> None:
        self._last = None
        _remove(self._temp)
