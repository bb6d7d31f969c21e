"""The VP8 sender of a call: the rate it aims for and the encoder settings, chosen by measurement
(docs/PERFORMANCE.md, "Remote picture").

aiortc's own VP8 encoder turns on libvpx's temporal noise filter (`noise-sensitivity` 4): it
blends each frame with the ones before, which on moving pictures leaves ghosts and smears (the
background came back at 34 dB PSNR through the two encoders of a call, 39-41 dB without it at the
same rate). It also caps every call at 1.5 Mbit/s, starts at 0.5 and rebuilds its codec (a
keyframe) at every 10 % move of the receiver's estimate.

TunedVp8Encoder aims for the rate a clean picture of its size needs (`VideoRate`: a table by
picture size, lowered by a user's ceiling). It starts at half of it (a picture within ~0.5 dB of
the full rate here, and no flood on a link that carries less: started at the full rate, a 2 Mbit/s
link lost a third of its packets for the second before the estimate came), rises to it as the
receiver's estimate (REMB) allows, follows it down when the link carries less, in steps big enough
that the codec, which cannot change its rate without a new keyframe, is rebuilt rarely. aiortc's
estimator starts, 3 s into a call, from the rate that arrives, which is below the target whenever
libvpx needs fewer bits than it may use: an estimate is taken as a full link only when it is below
what the sender actually sends (`SentRate`), so an easy picture keeps its rate. A keyframe may be
at most three frames' share of the rate (`max-intra-rate`): a bigger one, sent at a receiver's
request on a full link, overflowed the link's queue, was lost and was asked for again.
"""

from __future__ import annotations

import logging
import multiprocessing
import threading
import time
from collections import deque
from dataclasses import dataclass

import av
from aiortc import RTCPeerConnection
from aiortc.codecs.vpx import Vp8Encoder, number_of_threads
from aiortc.mediastreams import VIDEO_TIME_BASE, convert_timebase
from av.frame import Frame
from av.video.codeccontext import VideoCodecContext

from realtime.remote.transport import NEGOTIATED_CODECS_ATTR, SENDER_ENCODER_ATTR

log = logging.getLogger(__name__)

# The rate a clean picture needs at 30 fps, by picture size (pixels up to, bit/s): measured on a
# smooth, moving background through both encoders of a call, where more bits stop buying PSNR
# (640x480: 39.1 dB at 1.2 Mbit/s, 39.3 at 2; 1280x720: 41.6 at 2.5, 41.8 at 3.5), plus headroom for
# a camera's noise; a call starts at half. libvpx spends less on a picture that needs less.
DEFAULT_RATES: tuple[tuple[int, int], ...] = (
    (320 * 240, 600_000),
    (640 * 360, 1_200_000),
    (640 * 480, 2_000_000),
    (1280 * 720, 3_000_000),
    (1920 * 1080, 5_000_000),
)
LARGEST_RATE = 8_000_000  # above 1920x1080
MIN_RATE = 150_000  # the floor a bad link's estimate can push a sender to
UP_STEP = 1.4  # the estimate must rise this much over the rate in use before it is followed
DOWN_STEP = 1.25  # ... or fall this much below it (a congested link is followed sooner)
NEAR_LIMIT_STEP = 1.1  # a move to the ceiling or the floor needs only this much
FULL_LINK = 0.9  # an estimate below this share of the rate sent says the link is full
START_SHARE = 0.5  # a call starts at this share of the clean rate, and rises as the estimate allows


@dataclass(frozen=True, slots=True)
class VideoRate:
    """What a sender aims for: the table's rate for its picture's size, or `max_bps` (a user's
    ceiling: `--max-bitrate`) when that is lower."""

    max_bps: int | None = None

    def clean_bps(self, width: int, height: int) -> int:
        pixels = width * height
        rate = next((bps for limit, bps in DEFAULT_RATES if pixels <= limit), LARGEST_RATE)
        if self.max_bps is not None:
            rate = min(rate, self.max_bps)
        return max(MIN_RATE, rate)


class SentRate:
    """The bit rate an encoder actually produced over the last `window_s` (any thread)."""

    def __init__(self, window_s: float = 1.0) -> None:
        self._window_s = window_s
        self._sizes: deque[tuple[float, int]] = deque()
        self._lock = threading.Lock()

    def add(self, size: int, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        with self._lock:
            self._sizes.append((now, size))
            while self._sizes and now - self._sizes[0][0] > self._window_s:
                self._sizes.popleft()

    def bps(self, now: float | None = None) -> float | None:
        """The rate over the window, or None before a whole window has passed."""
        now = time.monotonic() if now is None else now
        with self._lock:
            if not self._sizes or now - self._sizes[0][0] < self._window_s * 0.9:
                return None
            return sum(size for _, size in self._sizes) * 8 / (now - self._sizes[0][0])


# libvpx's real-time settings (aiortc's, but for the noise filter and the keyframe cap).
VP8_OPTIONS: dict[str, str] = {
    "cpu-used": "-6",  # -4 took twice the time for the same PSNR here; -8 lost 1.5 dB
    "deadline": "realtime",
    "lag-in-frames": "0",
    "noise-sensitivity": "0",  # 4 (aiortc's) smears moving pictures: see the module's doc
    "max-intra-rate": "300",  # a keyframe at most 3 frames' share: one fits a slow link's queue
    "overshoot-pct": "15",
    "undershoot-pct": "100",
    "partitions": "0",
    "static-thresh": "1",
}
GOP = 3000  # keyframes only when asked (a receiver's PLI) or at a rate change
QMIN, QMAX = 2, 56


class TunedVp8Encoder(Vp8Encoder):
    """A VP8 encoder for aiortc's sender (it calls `encode` on a worker thread and sets
    `target_bitrate` from the receiver's estimates on its event loop)."""

    def __init__(self, rate: VideoRate | None = None) -> None:
        super().__init__()
        self.rate = rate or VideoRate()
        self.ceiling_bps = 0  # the clean rate for the picture's size, once the first frame is here
        self._target = 0
        self.rate_changes = 0  # estimates followed (each makes a new codec: a keyframe)
        self.bytes_out = 0  # encoded video, for the bitrate a call used
        self.sent = SentRate()

    @property
    def target_bitrate(self) -> int:
        return self._target

    @target_bitrate.setter
    def target_bitrate(self, estimate: int) -> None:
        if not self.ceiling_bps:
            return  # before the first frame: the picture's size decides where it starts
        current = self._target
        wanted = max(MIN_RATE, min(int(estimate), self.ceiling_bps))
        if wanted < current:
            sent = self.sent.bps()
            if sent is None or estimate >= FULL_LINK * sent:
                return  # the estimate follows what arrives: not a full link
        ratio = max(wanted, current) / max(min(wanted, current), 1)
        at_limit = wanted in (MIN_RATE, self.ceiling_bps)
        step = UP_STEP if wanted > current else DOWN_STEP
        if ratio >= step or (at_limit and ratio >= NEAR_LIMIT_STEP):
            log.debug("VP8 sender: %d -> %d bit/s (estimate %d)", current, wanted, estimate)
            self._target = wanted
            self.rate_changes += 1

    def encode(self, frame: Frame, force_keyframe: bool = False) -> tuple[list[bytes], int]:
        assert isinstance(frame, av.VideoFrame)
        if frame.format.name != "yuv420p":
            frame = frame.reformat(format="yuv420p")
        if not self.ceiling_bps:
            self.ceiling_bps = self.rate.clean_bps(frame.width, frame.height)
            self._target = max(MIN_RATE, round(self.ceiling_bps * START_SHARE))
        codec = self.codec
        if codec is None or (codec.width, codec.height) != (frame.width, frame.height) or (
            codec.bit_rate != self._target
        ):
            codec = self.codec = self._new_codec(frame.width, frame.height, self._target)
        if force_keyframe:
            frame.pict_type = av.video.frame.PictureType.I
        data = b"".join(bytes(packet) for packet in codec.encode(frame))
        self.bytes_out += len(data)
        self.sent.add(len(data))
        payloads = self._packetize(data, self.picture_id)
        assert frame.pts is not None and frame.time_base is not None  # the tracks stamp every frame
        timestamp = convert_timebase(frame.pts, frame.time_base, VIDEO_TIME_BASE)
        self.picture_id = (self.picture_id + 1) % (1 << 15)
        return payloads, timestamp

    @staticmethod
    def _new_codec(width: int, height: int, bitrate: int) -> VideoCodecContext:
        codec = av.CodecContext.create("libvpx", "w")
        assert isinstance(codec, VideoCodecContext)
        codec.width, codec.height = width, height
        codec.bit_rate = bitrate
        codec.pix_fmt = "yuv420p"
        codec.gop_size = GOP
        codec.qmin, codec.qmax = QMIN, QMAX
        # minrate = maxrate = bit_rate is constant-bitrate mode; the buffer holds one second.
        rate = str(bitrate)
        codec.options = {**VP8_OPTIONS, "bufsize": rate, "minrate": rate, "maxrate": rate}
        codec.thread_count = number_of_threads(width * height, multiprocessing.cpu_count())
        return codec


def tuned_senders(pc: RTCPeerConnection, rate: VideoRate | None = None) -> list[TunedVp8Encoder]:
    """Give every video sender of `pc` that negotiated VP8 the tuned encoder (after the
    negotiation, before media flows); the encoders given. An aiortc that keeps these elsewhere
    keeps its own encoder, with a log line."""
    given: list[TunedVp8Encoder] = []
    for transceiver in pc.getTransceivers():
        if transceiver.kind != "video":
            continue
        codecs = getattr(transceiver, NEGOTIATED_CODECS_ATTR, None)
        sender = transceiver.sender
        if not codecs or not hasattr(sender, SENDER_ENCODER_ATTR):
            log.info("this aiortc keeps its encoder elsewhere: the picture is aiortc's default")
            continue
        if str(codecs[0].mimeType).lower() != "video/vp8" or getattr(sender, SENDER_ENCODER_ATTR) is not None:
            continue  # another codec (a browser's H.264), or already encoding
        encoder = TunedVp8Encoder(rate)
        setattr(sender, SENDER_ENCODER_ATTR, encoder)
        given.append(encoder)
    return given
