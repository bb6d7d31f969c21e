"""aiortc's defaults and the fixes: a frame leaves the jitter buffer at its marked last packet, a
burst of decoded frames drains into a bounded hand-off, the VP8 encoder aims for a clean picture's
rate and follows a full link's estimate, colour conversions round-trip."""

from __future__ import annotations

import asyncio
import fractions
import time

import av
import numpy as np
from aiortc import RTCPeerConnection, RTCRtpSender
from aiortc.rtp import RtpPacket

from realtime.remote.encoder import MIN_RATE, SentRate, TunedVp8Encoder, VideoRate, tuned_senders
from realtime.remote.media import HandOff, Received, bgr_of, i420_of, pump_track
from realtime.remote.timeline import ReturnGaps
from realtime.remote.transport import MarkerJitterBuffer, quicken_receivers
from tests.realtime.remote.conftest import frame_image


def packet(seq: int, ts: int, data: bytes, marker: bool = False) -> RtpPacket:
    p = RtpPacket(payload_type=96, sequence_number=seq, timestamp=ts, marker=int(marker))
    p._data = data  # type: ignore[attr-defined]
    return p


def test_a_frame_leaves_at_its_marked_last_packet_not_at_the_next_frame() -> None:
    jb = MarkerJitterBuffer()
    assert jb.add(packet(10, 1000, b"a"))[1] is None
    _, frame = jb.add(packet(11, 1000, b"b", marker=True))
    assert frame is not None and frame.data == b"ab" and frame.timestamp == 1000
    _, frame = jb.add(packet(12, 4000, b"c", marker=True))
    assert frame is not None and frame.data == b"c" and jb.early == 2


def test_a_frame_with_a_missing_packet_waits_for_it() -> None:
    jb = MarkerJitterBuffer()
    assert jb.add(packet(20, 1000, b"a"))[1] is None
    assert jb.add(packet(22, 1000, b"c", marker=True))[1] is None  # 21 is missing
    _, frame = jb.add(packet(21, 1000, b"b"))  # retransmitted
    assert frame is not None and frame.data == b"abc"


def test_a_packet_lost_for_good_is_given_up_and_a_keyframe_asked_for() -> None:
    jb = MarkerJitterBuffer(hole_wait_s=0.2)
    assert jb.add(packet(30, 1000, b"a", marker=True), now=0.0)[1] is not None
    # 31 (the first half of the frame at 4000) is lost, and its retransmission with it.
    assert jb.add(packet(32, 4000, b"c", marker=True), now=0.01) == (False, None)
    assert jb.add(packet(33, 7000, b"d", marker=True), now=0.05) == (False, None)  # held back
    pli, frame = jb.add(packet(34, 10000, b"e", marker=True), now=0.3)  # waited long enough
    assert pli and frame is not None and frame.timestamp == 7000  # the next whole frame goes on
    assert jb.holes_skipped == 1
    _, frame = jb.add(packet(35, 13000, b"f", marker=True), now=0.31)
    assert frame is not None and frame.timestamp == 10000  # and on, one by one


KEY = b"\x00\x00\x00\x9d\x01\x2a" + b"k"  # a VP8 keyframe's frame tag and start code
INTER = b"\x01\x00\x00" + b"p"  # an inter frame's tag (lowest bit 1)


def test_after_a_gap_a_vp8_stream_is_held_still_until_its_keyframe_comes() -> None:
    jb = MarkerJitterBuffer(hole_wait_s=0.2)
    assert jb.add(packet(60, 0, KEY, marker=True), now=0.0)[1] is not None  # the call's keyframe
    assert jb.add(packet(61, 3000, INTER, marker=True), now=0.03)[1] is not None
    # 62 is lost for good; 63.. are inter frames that refer to it.
    for seq, t in ((63, 0.1), (64, 0.15)):
        assert jb.add(packet(seq, seq * 3000, INTER, marker=True), now=t) == (False, None)
    pli, frame = jb.add(packet(65, 65 * 3000, INTER, marker=True), now=0.35)  # the gap is given up
    assert pli and frame is None and jb.holes_skipped == 1  # a keyframe asked for; nothing smeared
    assert jb.add(packet(66, 66 * 3000, INTER, marker=True), now=0.4) == (False, None)
    pli, frame = jb.add(packet(67, 67 * 3000, INTER, marker=True), now=0.9)
    assert pli and frame is None  # still none: asked again
    jb.add(packet(68, 68 * 3000, KEY, marker=True), now=1.0)  # the keyframe (out with the next)
    _, frame = jb.add(packet(69, 69 * 3000, INTER, marker=True), now=1.03)
    assert frame is not None and frame.data == KEY and jb.frames_held >= 3
    assert jb.add(packet(70, 70 * 3000, INTER, marker=True), now=1.06)[1] is not None  # and on


def test_after_a_gap_a_stream_that_is_not_vp8_goes_on_at_once() -> None:
    jb = MarkerJitterBuffer(hole_wait_s=0.2)
    h264 = b"\x65\x88abc"  # an H.264 IDR slice: no VP8 start code
    jb.add(packet(70, 0, h264, marker=True), now=0.0)
    jb.add(packet(72, 6000, b"\x41x", marker=True), now=0.05)  # 71, and so where 6000 starts, lost
    pli, frame = jb.add(packet(73, 9000, b"\x41y", marker=True), now=0.3)
    assert pli and frame is not None and frame.timestamp == 9000  # the next frame known whole


def test_the_calls_first_frame_goes_on_even_damaged_so_timestamps_count_from_it() -> None:
    jb = MarkerJitterBuffer(hole_wait_s=0.2)
    assert jb.add(packet(50, 0, b"a"), now=0.0) == (False, None)  # 51, the rest of it, is lost
    assert jb.add(packet(52, 3000, b"c", marker=True), now=0.01) == (False, None)
    pli, frame = jb.add(packet(53, 6000, b"d", marker=True), now=0.3)
    assert pli and frame is not None and (frame.timestamp, frame.data) == (0, b"a")
    _, frame = jb.add(packet(54, 9000, b"e", marker=True), now=0.31)
    assert frame is not None and frame.timestamp == 3000


def test_a_late_packet_within_the_wait_fills_its_hole() -> None:
    jb = MarkerJitterBuffer(hole_wait_s=0.2)
    jb.add(packet(40, 1000, b"a", marker=True), now=0.0)
    assert jb.add(packet(42, 4000, b"c", marker=True), now=0.01)[1] is None
    _, frame = jb.add(packet(41, 4000, b"b"), now=0.1)  # the retransmission
    assert frame is not None and frame.data == b"bc" and jb.holes_skipped == 0


def test_unmarked_frames_still_leave_as_aiortc_hands_them_on() -> None:
    jb = MarkerJitterBuffer()
    assert jb.add(packet(1, 1000, b"a"))[1] is None
    _, frame = jb.add(packet(2, 4000, b"b"))
    assert frame is not None and frame.data == b"a" and jb.early == 0


def test_every_video_receiver_of_a_connection_gets_it() -> None:
    async def main() -> int:
        pc = RTCPeerConnection()
        pc.addTransceiver("video")
        try:
            return quicken_receivers(pc) + quicken_receivers(pc)  # the second changes nothing
        finally:
            await pc.close()

    assert asyncio.run(main()) == 1


def test_a_burst_of_decoded_frames_drains_into_the_hand_off_and_the_end_still_arrives() -> None:
    """Four frames decoded while the loop was busy: the hand-off keeps the last two (the consumer
    works through a one-off burst), the oldest two are counted as dropped, and the track's end
    still ends the pump."""

    class Track:
        def __init__(self) -> None:
            self.queue: asyncio.Queue[av.VideoFrame | None] = asyncio.Queue()

        async def recv(self) -> av.VideoFrame:
            from aiortc.mediastreams import MediaStreamError

            item = await self.queue.get()
            if item is None:
                raise MediaStreamError
            return item

    hand_off: HandOff[Received] = HandOff()

    async def main() -> None:
        track = Track()
        for i in range(4):
            frame = av.VideoFrame(16, 16, "yuv420p")
            frame.pts = i * 3000
            track.queue.put_nowait(frame)
        track.queue.put_nowait(None)
        await asyncio.wait_for(pump_track(track, hand_off.put), 5)  # type: ignore[arg-type]

    asyncio.run(main())
    taken = [hand_off.take(0.1) for _ in range(3)]
    assert [t.pts if t is not None else None for t in taken] == [6000, 9000, None]
    assert hand_off.dropped == 2


def test_colour_conversions_round_trip() -> None:
    image = frame_image(320, 240)
    frame = i420_of(image)
    assert frame.format.name == "yuv420p" and (frame.width, frame.height) == (320, 240)
    back = bgr_of(frame)
    assert back.shape == image.shape and back.dtype == np.uint8
    assert np.abs(back.astype(int) - image.astype(int)).mean() < 4.0
    frame.pts = 90
    received = Received(frame)
    assert received.size == (320, 240) and received.pts == 90
    assert received.image is received.image  # converted once
    odd = i420_of(np.zeros((11, 13, 3), np.uint8))
    assert (odd.width, odd.height) == (13, 11) and bgr_of(odd).shape == (11, 13, 3)


def test_a_frame_that_never_came_back_is_counted_once_and_the_last_ones_in_flight_are_not() -> None:
    gaps = ReturnGaps(settle_s=1.0)
    returned = [5, 6, 8, 9, 9, 7, 12]  # 7, 10 and 11 lost; a repeat or a late one changes nothing
    captured = [0.0, 0.1, 0.2, 0.3, 0.3, 0.15, 1.2]  # 12 after the call's first second
    got = [gaps.back(i, t) for i, t in zip(returned, captured, strict=True)]
    assert [lost for lost, _ in got] == [0, 0, 1, 0, 0, 0, 2]
    assert [settled for lost, settled in got if lost] == [False, True]  # 7 in the start-up
    # Frames 13.. were sent and the call ended: nothing more is counted without a later return.


def first_frame(encoder: TunedVp8Encoder, width: int, height: int) -> None:
    frame = av.VideoFrame(width, height, "yuv420p")
    frame.pts, frame.time_base = 0, fractions.Fraction(1, 90_000)
    payloads, _ = encoder.encode(frame)
    assert payloads  # a keyframe went out


def sending_at(encoder: TunedVp8Encoder, bps: float) -> None:
    """As if the encoder had produced `bps` over the last second and a half."""
    encoder.sent = SentRate()
    now = time.monotonic()
    for i in range(45):
        encoder.sent.add(int(bps / 8 / 30), now - 1.5 + i / 30)


def test_the_encoder_aims_for_a_clean_pictures_rate_from_half_of_it_and_a_users_ceiling_lowers_it() -> None:
    small = TunedVp8Encoder()
    first_frame(small, 320, 240)
    assert (small.ceiling_bps, small.target_bitrate) == (600_000, 300_000)
    large = TunedVp8Encoder()
    first_frame(large, 1280, 720)
    assert (large.ceiling_bps, large.target_bitrate) == (3_000_000, 1_500_000)  # twice aiortc's cap
    capped = TunedVp8Encoder(VideoRate(max_bps=1_000_000))
    first_frame(capped, 1280, 720)
    assert capped.ceiling_bps == 1_000_000
    assert VideoRate().clean_bps(3840, 2160) > VideoRate().clean_bps(1920, 1080) > 3_000_000


def test_the_encoder_follows_a_full_links_estimate_down_and_back_up_in_big_steps() -> None:
    encoder = TunedVp8Encoder()
    encoder.target_bitrate = 900_000  # before the first frame: the picture's size decides
    first_frame(encoder, 1280, 720)
    assert encoder.target_bitrate == 1_500_000
    encoder.target_bitrate = 8_000_000  # a good link: to the ceiling, no further
    assert encoder.target_bitrate == 3_000_000 and encoder.rate_changes == 1
    sending_at(encoder, 1_800_000)  # an easy picture: libvpx uses less than it may
    encoder.target_bitrate = 1_800_000  # aiortc's estimator starting from what arrives
    assert encoder.target_bitrate == 3_000_000 and encoder.rate_changes == 1
    sending_at(encoder, 3_000_000)
    encoder.target_bitrate = 1_700_000  # below what is sent: the link is full
    assert encoder.target_bitrate == 1_700_000 and encoder.rate_changes == 2
    sending_at(encoder, 1_700_000)
    encoder.target_bitrate = 1_500_000  # a small move: not followed (each is a keyframe)
    encoder.target_bitrate = 2_000_000
    assert encoder.target_bitrate == 1_700_000 and encoder.rate_changes == 2
    encoder.target_bitrate = 2_500_000  # the link recovers
    assert encoder.target_bitrate == 2_500_000
    encoder.target_bitrate = 3_500_000  # past the ceiling: to it, though that is a smaller step
    assert encoder.target_bitrate == 3_000_000 and encoder.rate_changes == 4
    sending_at(encoder, 3_000_000)
    encoder.target_bitrate = 10
    assert encoder.target_bitrate == MIN_RATE


def negotiated(codec: str) -> int:
    """Offer a video track from one connection to another on loopback with `codec` preferred;
    how many senders of the offering side got the tuned encoder."""

    async def main() -> int:
        caller, callee = RTCPeerConnection(), RTCPeerConnection()
        try:
            transceiver = caller.addTransceiver("video", direction="sendonly")
            caps = [c for c in RTCRtpSender.getCapabilities("video").codecs if c.mimeType == codec]
            transceiver.setCodecPreferences(caps)
            await caller.setLocalDescription(await caller.createOffer())
            await callee.setRemoteDescription(caller.localDescription)
            await callee.setLocalDescription(await callee.createAnswer())
            await caller.setRemoteDescription(callee.localDescription)
            changed = len(tuned_senders(caller))
            encoder = transceiver.sender._RTCRtpSender__encoder
            assert isinstance(encoder, TunedVp8Encoder) == (changed == 1)
            return changed + len(tuned_senders(caller))  # the second changes nothing
        finally:
            await caller.close()
            await callee.close()

    return asyncio.run(main())


def test_a_vp8_sender_gets_the_tuned_encoder_and_an_h264_one_keeps_aiortcs() -> None:
    assert negotiated("video/VP8") == 1
    assert negotiated("video/H264") == 0
