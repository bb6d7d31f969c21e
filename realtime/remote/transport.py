"""Where aiortc's defaults cost a live call time, and the fixes for one peer connection.

aiortc's video jitter buffer hands a frame to the decoder only once the first packet of the *next*
frame arrives, although the sender marks a frame's last packet (the RTP marker bit, which aiortc's
own sender and every browser set). That holds every frame back one frame period (33 ms at 30 fps)
per direction. MarkerJitterBuffer hands a frame on as soon as its marked last packet is in and
every packet before it is; the rest (reordering, loss, overflow, PLI) stays aiortc's.

Its decoded frames then wait in an unbounded queue behind the track: media.pump_track drains it
into a bounded hand-off, so a slow moment never turns into lasting delay.

aiortc's VP8 encoder starts at 500 kbit/s and makes a new codec (so a keyframe, several times a
normal frame's size and encoding time, at both ends) whenever the receiver's estimate moves its
target by more than 10 %: on a good link that is every 0.5-1.5 s for the first ~20 s of a call, as
the estimate climbs to aiortc's 1.5 Mbit/s cap, and each one stalls both machines for a moment.
SteadyVp8Encoder starts at a rate for the picture's size (0.1 bit a pixel at 30 fps, within aiortc's
limits: 250 kbit/s at 320x240, 0.9 Mbit/s at 640x480, the 1.5 Mbit/s cap from 1280x720) and follows
the estimate only when it moves by 40 % or more.
"""

from __future__ import annotations

import logging

import av
from aiortc import RTCPeerConnection
from aiortc.codecs.vpx import MAX_BITRATE, MIN_BITRATE, Vp8Encoder
from aiortc.jitterbuffer import JitterBuffer, JitterFrame
from av.frame import Frame

log = logging.getLogger(__name__)

VIDEO_CAPACITY = 512  # as aiortc's own for video
# Where aiortc 1.x keeps a receiver's jitter buffer and a sender's encoder (name-mangled private
# attributes), and a transceiver's negotiated codecs.
_RECEIVER_BUFFER = "_RTCRtpReceiver__jitter_buffer"
_SENDER_ENCODER = "_RTCRtpSender__encoder"
_NEGOTIATED_CODECS = "_codecs"
BITRATE_STEP = 1.4  # the estimate must move by this factor before the codec is made anew
BITS_PER_PIXEL = 0.1  # the starting rate, per pixel of a frame at 30 fps


def start_bitrate(width: int, height: int) -> int:
    return max(MIN_BITRATE, min(round(width * height * 30 * BITS_PER_PIXEL), MAX_BITRATE))


class MarkerJitterBuffer(JitterBuffer):
    """aiortc's video jitter buffer, plus: a frame whose marked last packet is in goes out at once."""

    def __init__(self, capacity: int = VIDEO_CAPACITY) -> None:
        super().__init__(capacity=capacity, is_video=True)
        self.early = 0  # frames handed on at their marker packet

    def _remove_frame(self, sequence_number: int) -> JitterFrame | None:
        frame = super()._remove_frame(sequence_number)
        if frame is not None:
            return frame
        return self._marked_frame()

    def _marked_frame(self) -> JitterFrame | None:
        """The oldest frame, when its packets from the start of the buffer up to a marker are in."""
        if self._origin is None:
            return None
        timestamp: int | None = None
        data: list[bytes] = []
        for count in range(self._capacity):
            packet = self._packets[(self._origin + count) % self._capacity]
            if packet is None:
                return None
            if timestamp is None:
                timestamp = packet.timestamp
            elif packet.timestamp != timestamp:
                return None  # the base class hands this one on
            data.append(packet._data)  # type: ignore[attr-defined]
            if packet.marker:
                self.remove(count + 1)
                self.early += 1
                return JitterFrame(data=b"".join(data), timestamp=timestamp)
        return None


def quicken_receivers(pc: RTCPeerConnection) -> int:
    """Give every video receiver of `pc` the marker-aware jitter buffer (before media flows);
    the number changed. An aiortc without that attribute keeps its own, with a log line."""
    changed = 0
    for transceiver in pc.getTransceivers():
        if transceiver.kind != "video":
            continue
        receiver = transceiver.receiver
        current = getattr(receiver, _RECEIVER_BUFFER, None)
        if isinstance(current, MarkerJitterBuffer):
            continue
        if not isinstance(current, JitterBuffer):
            log.info("this aiortc keeps its jitter buffer elsewhere: frames wait one frame period longer")
            continue
        setattr(receiver, _RECEIVER_BUFFER, MarkerJitterBuffer())
        changed += 1
    return changed


class SteadyVp8Encoder(Vp8Encoder):
    """aiortc's VP8 encoder, starting at a rate for the first frame's size and following the
    receiver's estimate only in steps of 40 % or more (or to the limits), so a call's first
    seconds are not a keyframe every second."""

    def __init__(self) -> None:
        super().__init__()
        self._started = False
        self.rate_changes = 0  # the estimates followed (each makes a new codec: a keyframe)

    def encode(self, frame: Frame, force_keyframe: bool = False) -> tuple[list[bytes], int]:
        if not self._started:  # before the codec is made for the first frame
            self._started = True
            assert isinstance(frame, av.VideoFrame)
            Vp8Encoder.target_bitrate.fset(self, start_bitrate(frame.width, frame.height))  # type: ignore[attr-defined]
        return super().encode(frame, force_keyframe)

    @property
    def target_bitrate(self) -> int:
        return int(Vp8Encoder.target_bitrate.fget(self))  # type: ignore[attr-defined]

    @target_bitrate.setter
    def target_bitrate(self, bitrate: int) -> None:
        current = self.target_bitrate
        wanted = max(MIN_BITRATE, min(int(bitrate), MAX_BITRATE))
        big_move = wanted >= current * BITRATE_STEP or wanted * BITRATE_STEP <= current
        to_a_limit = wanted != current and wanted in (MIN_BITRATE, MAX_BITRATE)
        if big_move or to_a_limit:
            Vp8Encoder.target_bitrate.fset(self, wanted)  # type: ignore[attr-defined]
            self.rate_changes += 1


def steady_senders(pc: RTCPeerConnection) -> int:
    """Give every video sender of `pc` that negotiated VP8 the steady encoder (after the
    negotiation, before media flows); the number changed. An aiortc that keeps these elsewhere
    keeps its own encoder, with a log line."""
    changed = 0
    for transceiver in pc.getTransceivers():
        if transceiver.kind != "video":
            continue
        codecs = getattr(transceiver, _NEGOTIATED_CODECS, None)
        sender = transceiver.sender
        if not codecs or not hasattr(sender, _SENDER_ENCODER):
            log.info("this aiortc keeps its encoder elsewhere: its bitrate steps make more keyframes")
            continue
        if str(codecs[0].mimeType).lower() != "video/vp8" or getattr(sender, _SENDER_ENCODER) is not None:
            continue  # another codec (a browser's H.264), or already encoding
        setattr(sender, _SENDER_ENCODER, SteadyVp8Encoder())
        changed += 1
    return changed
