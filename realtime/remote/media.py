"""Between WebRTC tracks and the engine: latest-wins hand-offs, timestamps travelling with frames.

Frames never queue up: each hand-off is the engine's catch-up slot (at most two wait; a one-off
stall loses nothing, a consumer that stays behind gets the newest and every frame left out is
counted as a drop). The RTP timestamp (90 kHz) of a frame the server receives goes back out on the
swapped frame made from it, so a client can match what comes back to what it sent.

Colour conversions stay off the event loop (it carries every packet of every stream): a received
frame is converted to BGR by whoever takes it from its slot (a dropped one never is), and a frame
to send is converted to I420 by the thread that hands it over, so the encoder takes it as it is.
"""

from __future__ import annotations

import asyncio
import fractions
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import av
import cv2
import numpy as np
from aiortc import MediaStreamTrack
from aiortc.mediastreams import MediaStreamError

from realtime.api import CatchUpSlot, ImageBGR, VideoFrame

VIDEO_CLOCK = 90_000
TIME_BASE = fractions.Fraction(1, VIDEO_CLOCK)

T = TypeVar("T")


@dataclass(slots=True)
class Tagged:
    """A picture and the RTP timestamp it travels under; `frame`, when set, is the picture already
    converted for the encoder."""

    image: ImageBGR
    pts: int
    arrived: float = field(default_factory=time.perf_counter)
    frame: av.VideoFrame | None = None


class Received:
    """A decoded frame as it came in; `image` converts it to BGR once, on first use."""

    __slots__ = ("_frame", "_image", "arrived", "pts")

    def __init__(self, frame: av.VideoFrame, arrived: float | None = None) -> None:
        self._frame: av.VideoFrame | None = frame
        self._image: ImageBGR | None = None
        self.pts = int(frame.pts or 0)
        self.arrived = time.perf_counter() if arrived is None else arrived

    @property
    def size(self) -> tuple[int, int]:
        if self._image is not None:
            return int(self._image.shape[1]), int(self._image.shape[0])
        assert self._frame is not None
        return int(self._frame.width), int(self._frame.height)

    @property
    def image(self) -> ImageBGR:
        if self._image is None:
            assert self._frame is not None
            self._image = bgr_of(self._frame)
            self._frame = None
        return self._image


class HandOff(Generic[T]):
    """A live hand-off between threads: the engine's catch-up slot (two at most; a one-off stall
    loses nothing, a consumer that stays behind gets the newest) behind a condition."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._slot: CatchUpSlot[T] = CatchUpSlot()
        self._closed = False

    @property
    def dropped(self) -> int:
        return self._slot.dropped

    def put(self, item: T) -> None:
        with self._cond:
            self._slot.offer(item)
            self._cond.notify_all()

    def take(self, timeout: float) -> T | None:
        """The next item (removed), or None after `timeout` s or once closed."""
        with self._cond:
            deadline = time.monotonic() + timeout
            while not self._slot.full and not self._closed:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._cond.wait(left)
            return self._slot.take()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    @property
    def closed(self) -> bool:
        return self._closed


class Fifo(Generic[T]):
    """HandOff's interface without its dropping: every item is kept, in order (a file's frames
    coming back, which the client's file pacing bounds)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._items: deque[T] = deque()
        self._closed = False
        self.dropped = 0  # never: for HandOff's readers

    def put(self, item: T) -> None:
        with self._cond:
            self._items.append(item)
            self._cond.notify_all()

    def take(self, timeout: float) -> T | None:
        """The oldest item (removed), or None after `timeout` s or once closed and empty."""
        with self._cond:
            deadline = time.monotonic() + timeout
            while not self._items and not self._closed:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._cond.wait(left)
            return self._items.popleft() if self._items else None

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    @property
    def closed(self) -> bool:
        return self._closed


class AsyncHandOff(Generic[T]):
    """The same hand-off from any thread into an event loop (the slot is touched on the loop only)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._slot: CatchUpSlot[T] = CatchUpSlot()
        self._event = asyncio.Event()
        self._closed = False

    @property
    def dropped(self) -> int:
        return self._slot.dropped

    def put_threadsafe(self, item: T) -> None:
        if not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._put, item)

    def _put(self, item: T) -> None:
        self._slot.offer(item)
        self._event.set()

    def close_threadsafe(self) -> None:
        if not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._close)

    def _close(self) -> None:
        self._closed = True
        self._event.set()

    async def get(self) -> T | None:
        """The next item, or None once closed."""
        while not self._slot.full and not self._closed:
            self._event.clear()
            await self._event.wait()
        return self._slot.take()


def i420_of(image: ImageBGR) -> av.VideoFrame:
    """The picture as the encoder takes it (I420; OpenCV's conversion, which releases the GIL)."""
    h, w = image.shape[:2]
    if w % 2 or h % 2:  # I420 needs even sizes: the encoder's own conversion copes with odd ones
        return av.VideoFrame.from_ndarray(np.ascontiguousarray(image), format="bgr24")
    planes = np.asarray(cv2.cvtColor(image, cv2.COLOR_BGR2YUV_I420), dtype=np.uint8)
    return av.VideoFrame.from_ndarray(planes, format="yuv420p")


def bgr_of(frame: av.VideoFrame) -> ImageBGR:
    if frame.format.name == "yuv420p" and frame.width % 2 == 0 and frame.height % 2 == 0:
        planes = frame.to_ndarray()  # Y, U, V stacked: (h * 3 / 2, w)
        return np.asarray(cv2.cvtColor(planes, cv2.COLOR_YUV2BGR_I420), dtype=np.uint8)
    return np.ascontiguousarray(frame.to_ndarray(format="bgr24"), dtype=np.uint8)


def to_av(image: ImageBGR, pts: int, frame: av.VideoFrame | None = None) -> av.VideoFrame:
    frame = frame if frame is not None else i420_of(image)
    frame.pts = pts
    frame.time_base = TIME_BASE
    return frame


class OutgoingTrack(MediaStreamTrack):
    """A video track that sends the newest picture handed to it (nothing is sent twice, except the
    first picture: it goes out first under timestamp 0, so the receiver's RTP timeline starts at 0
    and every later frame arrives under the timestamp it was given)."""

    kind = "video"

    def __init__(self, slot: AsyncHandOff[Tagged], origin_frame: bool = True) -> None:
        super().__init__()
        self._slot = slot
        self._pending: Tagged | None = None
        self._origin_frame = origin_frame
        self._last_pts = -1

    async def recv(self) -> av.VideoFrame:
        if self._pending is not None:
            item, self._pending = self._pending, None
        else:
            got = await self._slot.get()
            if got is None or self.readyState != "live":
                self.stop()
                raise MediaStreamError
            item = got
            if self._origin_frame:
                self._origin_frame = False
                if item.pts != 0:
                    self._pending = item
                    item = Tagged(
                        item.image, 0, item.arrived
                    )  # converted anew: the pending one keeps its frame
        pts = max(item.pts, self._last_pts + 1)  # the encoder wants rising timestamps
        self._last_pts = pts
        return to_av(item.image, pts, item.frame)


async def pump_track(track: MediaStreamTrack, on_frame: Callable[[Received], None]) -> None:
    """Read `track` until it ends, handing each decoded frame on at once (the receiver's hand-off
    decides what is kept: aiortc's queue behind the track is unbounded, so it is drained here)."""
    while True:
        try:
            frame = await track.recv()
        except MediaStreamError:
            return
        if isinstance(frame, av.VideoFrame):
            on_frame(Received(frame))


class TrackSource:
    """The engine's FrameSource for a stream: the pictures that came in over WebRTC, through a
    live hand-off.

    `size` is the first picture's; the server opens the engine only once that one is here."""

    def __init__(self, first: Received, fps: float = 30.0, idle_s: float = 30.0) -> None:
        self.slot: HandOff[Received] = HandOff()
        self._size = first.size
        self._fps = fps
        self._index = 0
        self.idle_s = idle_s  # read() ends the stream after this long without a picture
        self.last_arrival = time.monotonic()
        self.slot.put(first)

    def feed(self, item: Received) -> None:
        self.last_arrival = time.monotonic()
        self.slot.put(item)

    def open(self) -> None:
        return None

    def read(self) -> VideoFrame | None:
        while True:
            item = self.slot.take(0.25)
            if item is not None:
                break
            if self.slot.closed or time.monotonic() - self.last_arrival > self.idle_s:
                return None
        frame = VideoFrame(item.image, self._index, item.arrived, pts=item.pts / VIDEO_CLOCK)
        self._index += 1
        return frame

    def interrupt(self) -> None:
        self.slot.close()

    def close(self) -> None:
        self.slot.close()

    @property
    def dropped(self) -> int:
        return self.slot.dropped

    @property
    def size(self) -> tuple[int, int]:
        return self._size

    @property
    def fps(self) -> float:
        return self._fps

    @property
    def is_live(self) -> bool:
        return True

    @property
    def description(self) -> str:
        return "WebRTC video in"


class TrackSink:
    """The engine's FrameSink for a stream: hands each swapped frame to the outgoing track."""

    def __init__(self, slot: AsyncHandOff[Tagged]) -> None:
        self._slot = slot

    def open(self, width: int, height: int, fps: float) -> None:
        return None

    def send(self, frame: VideoFrame) -> None:
        pts = round(frame.pts * VIDEO_CLOCK) if frame.pts is not None else 0
        self._slot.put_threadsafe(Tagged(frame.image, pts, frame.capture_ts, i420_of(frame.image)))

    def close(self) -> None:
        self._slot.close_threadsafe()

    def abort(self) -> None:
        self._slot.close_threadsafe()

    @property
    def description(self) -> str:
        return "WebRTC video out"
