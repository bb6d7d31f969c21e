"""Where aiortc's defaults cost a live call time, and the fixes for one peer connection.

aiortc's video jitter buffer hands a frame to the decoder only once the first packet of the *next*
frame arrives, although the sender marks a frame's last packet (the RTP marker bit, which aiortc's
own sender and every browser set). That holds every frame back one frame period (33 ms at 30 fps)
per direction. MarkerJitterBuffer hands a frame on as soon as its marked last packet is in and
every packet before it is; the rest (reordering, loss, overflow, PLI) stays aiortc's.

A lost packet blocks aiortc's buffer until it comes in again (a NACK's retransmission) or the
buffer overflows: 512 packets, seconds of video, during which nothing is decoded. On a link that
drops packets (a full queue) a retransmission may be lost as well, and the call froze until the
client gave the link up. MarkerJitterBuffer waits HOLE_WAIT_S for a missing packet, then goes on
from the next whole frame after it and asks the sender for a keyframe (a PLI): the picture is
held still until that keyframe (a VP8 frame after a gap refers to what was lost: decoded, it
smears), instead of frozen until the link is given up. The call's first frame is handed on even
damaged: the receiver counts timestamps from the first frame it hands to the decoder, and the
client matches returned frames to its own by those timestamps.

Its decoded frames then wait in an unbounded queue behind the track: media.pump_track drains it
into a bounded hand-off, so a slow moment never turns into lasting delay.

The VP8 sender's rate and settings are encoder.py's.
"""

from __future__ import annotations

import logging
import time

from aiortc import RTCPeerConnection
from aiortc.jitterbuffer import JitterBuffer, JitterFrame
from aiortc.rtp import RtpPacket
from aiortc.utils import uint16_add, uint16_gt

log = logging.getLogger(__name__)

VIDEO_CAPACITY = 512  # as aiortc's own for video
HOLE_WAIT_S = 0.2  # a missing packet's retransmission is waited for this long (a few round trips)
KEYFRAME_WAIT_S = 0.5  # after a gap, a keyframe is asked for again this often until it comes
VP8_START_CODE = b"\x9d\x01\x2a"  # bytes 3-5 of every VP8 keyframe (RFC 6386, 9.1)


def is_vp8_keyframe(data: bytes) -> bool:
    """A VP8 keyframe: its frame tag's lowest bit is 0 and the start code follows the tag."""
    return len(data) >= 6 and not data[0] & 1 and data[3:6] == VP8_START_CODE
# Where aiortc 1.x keeps a receiver's jitter buffer and a sender's encoder (name-mangled private
# attributes), and a transceiver's negotiated codecs.
RECEIVER_BUFFER_ATTR = "_RTCRtpReceiver__jitter_buffer"
SENDER_ENCODER_ATTR = "_RTCRtpSender__encoder"
NEGOTIATED_CODECS_ATTR = "_codecs"


class MarkerJitterBuffer(JitterBuffer):
    """aiortc's video jitter buffer, plus: a frame whose marked last packet is in goes out at once."""

    def __init__(self, capacity: int = VIDEO_CAPACITY, hole_wait_s: float = HOLE_WAIT_S) -> None:
        super().__init__(capacity=capacity, is_video=True)
        self.early = 0  # frames handed on at their marker packet
        self.bytes_in = 0  # RTP payload received, for the bitrate a call used
        self.holes_skipped = 0  # missing packets given up on (each followed by a keyframe request)
        self._hole_wait_s = hole_wait_s
        self._newest: int | None = None  # the highest sequence number in
        self._stuck_since: float | None = None  # since when a missing packet holds the frames back
        self._handed_on = False  # whether a frame has gone to the decoder yet
        self._vp8 = False  # a VP8 keyframe has come: the stream is VP8
        self._keyframe_asked: float | None = None  # when a keyframe was asked for after a gap
        self.frames_held = 0  # VP8 frames after a gap not decoded, the keyframe awaited

    def add(self, packet: RtpPacket, now: float | None = None) -> tuple[bool, JitterFrame | None]:
        self.bytes_in += len(packet.payload)
        now = time.monotonic() if now is None else now
        if self._newest is None or uint16_gt(packet.sequence_number, self._newest):
            self._newest = packet.sequence_number
        pli, frame = super().add(packet)
        if frame is not None or self._first_hole() is None:
            self._stuck_since = None
            return self._screen(pli, frame, now)
        if self._stuck_since is None:
            self._stuck_since = now
        if now - self._stuck_since < self._hole_wait_s:
            return self._screen(pli, None, now)
        first = None if self._handed_on else self._damaged_first()
        if first is None and not self._skip_hole():
            return self._screen(pli, None, now)
        self._stuck_since = None
        self.holes_skipped += 1
        log.debug("%s: a missing packet given up on (%d so far)", id(self), self.holes_skipped)
        if first is not None:
            self._handed_on = True
            return True, first
        # The frames after the gap refer to what was lost: a VP8 stream waits for the keyframe.
        self._keyframe_asked = now if self._vp8 else None
        return True, self._screen(False, self._remove_frame(packet.sequence_number), now)[1]

    def _screen(self, pli: bool, frame: JitterFrame | None, now: float) -> tuple[bool, JitterFrame | None]:
        """`frame`, unless it is a VP8 inter frame while a keyframe is awaited after a gap (asked
        for again every KEYFRAME_WAIT_S, in case a request or the keyframe itself was lost)."""
        if frame is None:
            return pli, None
        key = is_vp8_keyframe(frame.data)
        self._vp8 = self._vp8 or key
        if self._keyframe_asked is not None and not key:
            self.frames_held += 1
            if now - self._keyframe_asked >= KEYFRAME_WAIT_S:
                self._keyframe_asked = now
                pli = True
            return pli, None
        if self._keyframe_asked is not None:
            log.debug("%s: the keyframe came after %d frames held", id(self), self.frames_held)
        self._keyframe_asked = None
        self._handed_on = True
        return pli, frame

    def _first_hole(self) -> int | None:
        """How far from the origin the first missing packet is, if one is missing before the
        newest packet."""
        if self._origin is None or self._newest is None:
            return None
        span = uint16_add(self._newest, -self._origin)
        if span >= self._capacity:
            return None
        for count in range(span):
            if self._packets[(self._origin + count) % self._capacity] is None:
                return count
        return None

    def _damaged_first(self) -> JitterFrame | None:
        """The call's first frame as far as it came, removed with the hole after it (up to the
        next frame's first packet in)."""
        hole = self._first_hole()
        assert self._origin is not None and self._newest is not None and hole is not None
        first = self._packets[self._origin % self._capacity]
        if first is None:
            return None  # nothing of it is in: the skip finds the next whole frame
        data: list[bytes] = []
        span = uint16_add(self._newest, -self._origin)
        count = 0
        while count <= span:
            packet = self._packets[(self._origin + count) % self._capacity]
            if packet is not None and packet.timestamp != first.timestamp:
                break
            if packet is not None:
                data.append(packet._data)  # type: ignore[attr-defined]
            count += 1
        self.remove(count)
        return JitterFrame(data=b"".join(data), timestamp=first.timestamp)

    def _skip_hole(self) -> bool:
        """Drop the packets up to the first whole frame's start after the first hole (a packet
        whose predecessor is in and ends a frame); False while there is none yet."""
        hole = self._first_hole()
        assert self._origin is not None and self._newest is not None and hole is not None
        span = uint16_add(self._newest, -self._origin)
        for count in range(hole + 2, span + 1):
            before = self._packets[(self._origin + count - 1) % self._capacity]
            packet = self._packets[(self._origin + count) % self._capacity]
            if packet is None or before is None:
                continue
            if before.marker or before.timestamp != packet.timestamp:
                self.remove(count)
                return True
        return False

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
