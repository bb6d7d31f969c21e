"""The receiving side's shortcuts: a frame leaves the jitter buffer at its marked last packet, the
newest decoded frame wins, colour conversions round-trip."""

from __future__ import annotations

import asyncio

import av
import numpy as np
from aiortc import RTCPeerConnection
from aiortc.rtp import RtpPacket

from realtime.remote.media import Received, bgr_of, i420_of
from realtime.remote.transport import MarkerJitterBuffer, newest_frame, quicken_receivers
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


def test_the_newest_decoded_frame_wins_and_the_end_still_arrives() -> None:
    class Track:
        def __init__(self) -> None:
            self._queue: asyncio.Queue[av.VideoFrame | None] = asyncio.Queue()

        async def recv(self) -> av.VideoFrame:
            from aiortc.mediastreams import MediaStreamError

            item = await self._queue.get()
            if item is None:
                raise MediaStreamError
            return item

    async def main() -> tuple[int | None, int, bool]:
        track = Track()
        frames = [av.VideoFrame(16, 16, "yuv420p") for _ in range(3)]
        for i, f in enumerate(frames):
            f.pts = i
            track._queue.put_nowait(f)
        track._queue.put_nowait(None)
        newest, dropped = await newest_frame(track)  # type: ignore[arg-type]
        ended, _ = await newest_frame(track)  # type: ignore[arg-type]
        return (newest.pts if newest else None), dropped, ended is None

    assert asyncio.run(main()) == (2, 2, True)


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
