"""Where aiortc's defaults cost a live call time, and the fixes for one peer connection.

aiortc's video jitter buffer hands a frame to the decoder only once the first packet of the *next*
frame arrives, although the sender marks a frame's last packet (the RTP marker bit, which aiortc's
own sender and every browser set). That holds every frame back one frame period (33 ms at 30 fps)
per direction. MarkerJitterBuffer hands a frame on as soon as its marked last packet is in and
every packet before it is; the rest (reordering, loss, overflow, PLI) stays aiortc's.

Its decoded frames then wait in an unbounded queue behind the track: media.pump_track drains it
into a bounded hand-off, so a slow moment never turns into lasting delay.

The VP8 sender's rate and settings are encoder.py's.
"""

from __future__ import annotations

import logging

from aiortc import RTCPeerConnection
from aiortc.jitterbuffer import JitterBuffer, JitterFrame
from aiortc.rtp import RtpPacket

log = logging.getLogger(__name__)

VIDEO_CAPACITY = 512  # as aiortc's own for video
# Where aiortc 1.x keeps a receiver's jitter buffer and a sender's encoder (name-mangled private
# attributes), and a transceiver's negotiated codecs.
RECEIVER_BUFFER_ATTR = "_RTCRtpReceiver__jitter_buffer"
SENDER_ENCODER_ATTR = "_RTCRtpSender__encoder"
NEGOTIATED_CODECS_ATTR = "_codecs"


class MarkerJitterBuffer(JitterBuffer):
    """aiortc's video jitter buffer, plus: a frame whose marked last packet is in goes out at once."""

    def __init__(self, capacity: int = VIDEO_CAPACITY) -> None:
        super().__init__(capacity=capacity, is_video=True)
        self.early = 0  # frames handed on at their marker packet
        self.bytes_in = 0  # RTP payload received, for the bitrate a call used

    def add(self, packet: RtpPacket) -> tuple[bool, JitterFrame | None]:
        self.bytes_in += len(packet.payload)
        return super().add(packet)

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
        current = getattr(receiver, RECEIVER_BUFFER_ATTR, None)
        if isinstance(current, MarkerJitterBuffer):
            continue
        if not isinstance(current, JitterBuffer):
            log.info("this aiortc keeps its jitter buffer elsewhere: frames wait one frame period longer")
            continue
        setattr(receiver, RECEIVER_BUFFER_ATTR, MarkerJitterBuffer())
        changed += 1
    return changed


def bytes_received(pc: RTCPeerConnection) -> int:
    """The video payload the marker-aware jitter buffers of `pc` took in so far."""
    total = 0
    for transceiver in pc.getTransceivers():
        buffer = getattr(transceiver.receiver, RECEIVER_BUFFER_ATTR, None)
        if isinstance(buffer, MarkerJitterBuffer):
            total += buffer.bytes_in
    return total
