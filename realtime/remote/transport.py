"""Where aiortc's receiving side waits longer than it must, and the fix for one peer connection.

aiortc's video jitter buffer hands a frame to the decoder only once the first packet of the *next*
frame arrives, although the sender marks a frame's last packet (the RTP marker bit, which aiortc's
own sender and every browser set). That holds every frame back one frame period (33 ms at 30 fps)
per direction. MarkerJitterBuffer hands a frame on as soon as its marked last packet is in and
every packet before it is; the rest (reordering, loss, overflow, PLI) stays aiortc's.

Its decoded frames then wait in an unbounded queue behind the track: media.pump_track drains it
into a bounded hand-off, so a slow moment never turns into lasting delay.
"""

from __future__ import annotations

import logging

from aiortc import RTCPeerConnection
from aiortc.jitterbuffer import JitterBuffer, JitterFrame

log = logging.getLogger(__name__)

VIDEO_CAPACITY = 512  # as aiortc's own for video
# Where aiortc 1.x keeps a receiver's jitter buffer (name-mangled private attribute).
_RECEIVER_BUFFER = "_RTCRtpReceiver__jitter_buffer"


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
