"""What a video file holds, read without decoding it: every video frame's time, its keyframes,
the other streams, and how long its header says it is (to tell a truncated file)."""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field
from fractions import Fraction
from itertools import pairwise
from pathlib import Path

import av
import av.error

from realtime.api import SourceError

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class MediaInfo:
    """frame_pts: every video frame's pts in `time_base`, in presentation order. keyframes: the
    pts of the frames a decoder can start at. expected_frames: what the header promises (0: it
    does not say). damaged_at_s: where reading stopped on an error (None: the file read to its end)."""

    path: str
    time_base: Fraction
    frame_pts: tuple[int, ...]
    keyframes: tuple[int, ...]
    fps: float
    width: int
    height: int
    expected_frames: int
    duration_s: float
    other_streams: tuple[str, ...] = field(default=())
    damaged_at_s: float | None = None
    ends_early: bool = True  # the damage cut the file short (False: frames are missing inside it)

    @property
    def frames(self) -> int:
        return len(self.frame_pts)

    def seconds(self, pts: int) -> float:
        return float(pts * self.time_base)

    @property
    def variable_rate(self) -> bool:
        steps = {b - a for a, b in zip(self.frame_pts, self.frame_pts[1:], strict=False)}
        return len(steps) > 1 and max(steps) > 1.5 * max(min(steps), 1)


def probe(path: Path) -> MediaInfo:
    """Demux the whole file (packets only: seconds for an hour of video)."""
    try:
        container = av.open(str(path), mode="r")
    except (av.error.FFmpegError, OSError) as err:
        raise SourceError(f"{path} is not a readable video file ({_reason(err)}).") from err
    with container:
        if not container.streams.video:
            raise SourceError(f"{path} contains no video stream.")
        stream = container.streams.video[0]
        time_base = stream.time_base or Fraction(1, 90000)
        rate = stream.average_rate or stream.guessed_rate or stream.base_rate
        fps = float(rate) if rate else 25.0
        pts: list[int] = []
        keys: list[int] = []
        damaged: float | None = None
        try:
            for packet in container.demux(stream):
                if packet.pts is None or packet.size == 0:
                    continue
                pts.append(packet.pts)
                if packet.is_keyframe:
                    keys.append(packet.pts)
        except av.error.FFmpegError as err:
            log.warning("%s: reading stopped on a damaged part (%s).", path, _reason(err))
            damaged = float(max(pts, default=0) * time_base)
        duration = _duration_s(container, stream)
        expected = int(stream.frames or 0) or (round(duration * fps) if duration > 0 else 0)
        others = tuple(
            f"{s.type}:{s.codec_context.name}" for s in container.streams if s.index != stream.index
        )
        codec = stream.codec_context
        width, height = codec.width, codec.height
    pts.sort()
    if not pts:
        raise SourceError(f"{path} contains no video frames.")
    if not 0 < fps <= 240 and len(pts) >= 2 and pts[-1] > pts[0]:
        # A header's rate can be wrong (a remuxed stream claimed 12800 fps): the frames' own then.
        fps = (len(pts) - 1) / float((pts[-1] - pts[0]) * time_base)
        if not stream.frames:
            expected = round(duration * fps) if duration > 0 else 0
    ends_early = True
    if damaged is None and expected and len(pts) < expected - max(2, expected // 50):
        gap = _largest_gap(pts, fps, time_base)
        ends_early = gap is None
        damaged = float(pts[-1] * time_base) + 1.0 / fps if gap is None else float(gap * time_base)
    keys = sorted(set(keys) & set(pts)) or [pts[0]]
    if keys[0] != pts[0]:
        keys.insert(0, pts[0])  # an open GOP at the start: decoding begins there anyway
    return MediaInfo(
        str(path), time_base, tuple(pts), tuple(keys), fps, width, height, expected, duration, others,
        damaged, ends_early,
    )  # fmt: skip


def _largest_gap(pts: list[int], fps: float, time_base: Fraction) -> int | None:
    """Where the longest jump between frames begins, when it is many frames long (damage the
    demuxer resynced after without a word); None when the frames follow each other."""
    steps = [(b - a, a) for a, b in pairwise(pts)]
    if not steps:
        return None
    longest, at = max(steps)
    if float(longest * time_base) > max(0.5, 3.0 / fps):
        return at
    return None


def _duration_s(container: av.container.InputContainer, stream: av.VideoStream) -> float:
    if stream.duration and stream.time_base:
        return float(stream.duration * stream.time_base)
    if container.duration:
        return container.duration / 1_000_000
    return 0.0


def file_identity(path: Path) -> str:
    """Size, modification time and a hash of the first and last MiB: a changed input is noticed."""
    st = path.stat()
    digest = hashlib.sha256(f"{st.st_size}:{st.st_mtime_ns}".encode())
    with open(path, "rb") as f:
        digest.update(f.read(1 << 20))
        if st.st_size > 2 << 20:
            f.seek(-(1 << 20), 2)
            digest.update(f.read(1 << 20))
    return digest.hexdigest()[:32]


def _reason(err: BaseException) -> str:
    return str(getattr(err, "strerror", None) or err)
