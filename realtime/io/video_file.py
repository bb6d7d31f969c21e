"""A video file decoded on the CPU with PyAV, as fast as it is read or paced like a camera."""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path

import av
import av.error
import cv2
import numpy as np

from models.types import ImageBGR
from realtime.core.errors import SourceError
from realtime.core.frames import VideoFrame
from realtime.io.source_parts import DEFAULT_FPS, KnownFormat, Pacer, reason

log = logging.getLogger(__name__)


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

    def __init__(
        self,
        path: str | Path,
        realtime: bool = False,
        loop: bool = False,
        *,
        start_pts: int | None = None,
        end_pts: int | None = None,
    ) -> None:
        self.path = Path(path)
        self.realtime = realtime
        self.loop = loop
        # A part of the file (a file job's chunk): the frames whose pts, in the video stream's
        # time base, lie in [start_pts, end_pts); None: from the start, to the end.
        self.start_pts = start_pts
        self.end_pts = end_pts
        self.time_base: Fraction | None = None  # the video stream's, known once open
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
        # The file's display rotation (degrees counterclockwise), read at open(): frames come upright.
        self.rotation = 0
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
        self.rotation = round(self._pending.rotation or 0) % 360
        self._rotate = _ROTATE_CODES.get(self.rotation)
        w, h = self._pending.width, self._pending.height
        self._size = (h, w) if self._rotate in _QUARTER_TURNS else (w, h)

    def _open_container(self) -> None:
        try:
            container = av.open(str(self.path), mode="r")
        except (av.error.FFmpegError, OSError) as err:
            raise SourceError(f"{self.path} is not a readable video file ({reason(err)}).") from err
        if not container.streams.video:
            container.close()
            raise SourceError(f"{self.path} contains no video stream.")
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"  # frame threading: whole-file decode runs several times faster
        self.time_base = stream.time_base
        if self.start_pts is not None and self.start_pts > (stream.start_time or 0):
            try:  # to the keyframe at or before the part's start; the frames before it are skipped
                container.seek(self.start_pts, stream=stream, backward=True, any_frame=False)
            except av.error.FFmpegError as err:
                container.close()
                at = float(self.start_pts * (stream.time_base or 0))
                raise SourceError(f"{self.path} cannot be read from {at:.1f} s ({reason(err)}).") from err
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
            for frame in frames:
                if frame.pts is not None and self.start_pts is not None and frame.pts < self.start_pts:
                    continue
                if frame.pts is not None and self.end_pts is not None and frame.pts >= self.end_pts:
                    return
                yield frame
        log.warning("%s: %d damaged packets in a row; treating it as the end.", self.path, consecutive_errors)

    def _count_bad_packet(self, err: Exception) -> None:
        self.bad_packets += 1
        n = self.bad_packets
        # The first few, then 10, 100, 1000, ...: a long damaged recording wrote a line per packet.
        if n <= 3 or (n >= 10 and str(n).rstrip("0") == "1"):
            log.warning("%s: skipped a damaged packet (%s); %d so far.", self.path, reason(err), n)
