"""A video file through a call, every frame of it: the client's file mode.

A camera is live: the newest picture wins and a late one is worth nothing. A file is not: each
frame must come back, in order, at its own timestamp. `AckedSending` lets at most `window` frames
be on their way (so no hand-off of the call ever holds two and drops one), sends the next when one
comes back, and sends again a frame that did not: one sent before a frame that came back was lost
(the call keeps order), and one not back within `resend_after_s` is tried again, up to
`max_tries` sends. `InOrderFrames` holds a frame that came back early until those before it are
written.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from realtime.api import VideoFrame

DEFAULT_WINDOW = 2  # frames on their way: one at the server while the next travels
RESEND_AFTER_S = 5.0
MAX_TRIES = 4


@dataclass(slots=True, eq=False)  # compared by identity: a frame is one object
class InFlight:
    """A frame of the file between its read and its return."""

    ordinal: int  # its place in the file (0 = the first frame read)
    frame: VideoFrame
    seq: int = -1  # the send that carries it now (sends are numbered in order)
    tries: int = 0
    sent_at: float = 0.0


class AckedSending:
    """Which frame of a file to send next, and when (the capture thread asks `next_frame`; the
    event loop reports returns with `returned` and a dropped link with `link_down`)."""

    def __init__(
        self, window: int = DEFAULT_WINDOW, resend_after_s: float = RESEND_AFTER_S, max_tries: int = MAX_TRIES
    ) -> None:
        self.window = window
        self.resend_after_s = resend_after_s
        self.max_tries = max_tries
        self._cond = threading.Condition()
        self._outstanding: dict[int, InFlight] = {}  # by ordinal: sent, not back
        self._again: deque[InFlight] = deque()  # to send again, oldest first
        self._read = 0  # frames read from the file
        self._input_ended = False
        self._next_seq = 0
        self.done: set[int] = set()  # ordinals back
        self.given_up: list[int] = []  # ordinals that never came back in max_tries sends
        self.resent = 0

    @property
    def frames_read(self) -> int:
        return self._read

    @property
    def input_ended(self) -> bool:
        return self._input_ended

    def finished(self) -> bool:
        """Every frame of the file is back or given up (and the file has ended)."""
        with self._cond:
            return self._finished()

    def _finished(self) -> bool:
        return self._input_ended and not self._outstanding and not self._again

    def next_frame(
        self, read: Callable[[], VideoFrame | None], stop: threading.Event, linked: threading.Event
    ) -> InFlight | None:
        """(Capture thread.) The frame to send now, numbered for this send: one to send again
        first, else the next of the file. Waits while the link is down or `window` frames are on
        their way; None once every frame is back (or given up) or `stop` is set."""
        with self._cond:
            while not stop.is_set():
                self._expire(time.monotonic())
                if self._finished():
                    return None
                room = len(self._outstanding) - len(self._again) < self.window
                if linked.is_set() and room and (self._again or not self._input_ended):
                    item = self._again.popleft() if self._again else self._read_one(read)
                    if item is not None:
                        item.seq, self._next_seq = self._next_seq, self._next_seq + 1
                        item.tries += 1
                        item.sent_at = time.monotonic()
                        self.resent += item.tries > 1
                        return item
                    continue  # the file ended just now
                self._cond.wait(0.1)
            return None

    def _read_one(self, read: Callable[[], VideoFrame | None]) -> InFlight | None:
        frame = read()  # under the lock: only the capture thread reads, the others wait briefly
        if frame is None:
            self._input_ended = True
            return None
        item = InFlight(self._read, frame)
        self._read += 1
        self._outstanding[item.ordinal] = item
        return item

    def returned(self, ordinal: int, seq: int) -> bool:
        """(Event loop.) The frame of send `seq` came back; every frame sent before it and not
        back was lost on the way and goes out again. False for one already back (a duplicate)."""
        with self._cond:
            item = self._outstanding.pop(ordinal, None)
            if item is None:
                return False
            if item in self._again:
                self._again.remove(item)  # an earlier send of it arrived after all
            self.done.add(ordinal)
            for other in sorted(self._outstanding.values(), key=lambda x: x.seq):
                if 0 <= other.seq < seq and other not in self._again:
                    self._again.append(other)
            self._cond.notify_all()
            return True

    def link_down(self) -> None:
        """(Event loop.) The connection dropped: every frame on its way goes out again on the next."""
        with self._cond:
            for item in sorted(self._outstanding.values(), key=lambda x: x.ordinal):
                if item not in self._again:
                    self._again.append(item)
            self._cond.notify_all()

    def _expire(self, now: float) -> None:
        for item in list(self._outstanding.values()):
            if item in self._again or now - item.sent_at < self.resend_after_s:
                continue
            if item.tries >= self.max_tries:
                del self._outstanding[item.ordinal]
                self.given_up.append(item.ordinal)
            else:
                self._again.append(item)


class InOrderFrames:
    """Frames by their place in the file: `add` one that came back, get those now in order."""

    def __init__(self) -> None:
        self.next = 0  # the ordinal to write next
        self._waiting: dict[int, VideoFrame] = {}

    def add(self, ordinal: int, frame: VideoFrame) -> list[VideoFrame]:
        if ordinal < self.next or ordinal in self._waiting:
            return []  # a duplicate (sent again, and the first send came back as well)
        self._waiting[ordinal] = frame
        ready: list[VideoFrame] = []
        while self.next in self._waiting:
            ready.append(self._waiting.pop(self.next))
            self.next += 1
        return ready

    @property
    def waiting(self) -> int:
        return len(self._waiting)
