"""A connection's RTP clock on the client: which captured frame each returned one was made from,
and which sent frames never came back.

Timestamps go out in steps of 9 ticks (100 us): PyAV's encoder rebases a frame to its own
microsecond clock and aiortc truncates it back to 90 kHz, which turns 5969 into 5968 but keeps
every multiple of 9, so each returned frame finds the one it was made from.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

from realtime.remote.media import VIDEO_CLOCK

PTS_STEP = 9


@dataclass(frozen=True, slots=True)
class SentFrame:
    """What the client knows of a frame it sent: when its picture was captured, its index at the
    source, its place in the source's media (seconds; None for a camera), and for a file the
    number of its send (resends count) and of its read (`ordinal`, the order it is written in)."""

    capture_ts: float
    index: int
    media_pts: float | None = None
    seq: int = -1
    ordinal: int = -1


class Timeline:
    """One connection's RTP clock: the first frame sent is 0, later ones rise; `lookup` maps a
    returned frame's timestamp back to the frame it was made from."""

    def __init__(self, keep: int = 600) -> None:
        self._t0: float | None = None
        self._sent: OrderedDict[int, SentFrame] = OrderedDict()
        self._keep = keep
        self._last = -PTS_STEP
        self._lock = threading.Lock()

    def stamp(self, sent: SentFrame) -> int:
        with self._lock:
            if self._t0 is None:
                self._t0 = sent.capture_ts
            pts = round((sent.capture_ts - self._t0) * VIDEO_CLOCK / PTS_STEP) * PTS_STEP
            pts = max(pts, self._last + PTS_STEP)  # the encoder wants rising timestamps
            self._last = pts
            self._sent[pts] = sent
            while len(self._sent) > self._keep:
                self._sent.popitem(last=False)
            return pts

    def lookup(self, pts: int) -> SentFrame | None:
        with self._lock:
            return self._sent.get(pts)


class ReturnGaps:
    """One connection's lost frames, from the source indices of the frames that come back (every
    frame captured while linked is sent): a gap between two returned frames was lost on the way;
    the frames still on their way when the call ends are not counted. Losses among the frames
    captured in the call's first `settle_s` (after the first one back: the stream's engine and
    both codecs starting) are told apart from those of the running call."""

    def __init__(self, settle_s: float = 1.0) -> None:
        self._last = -1
        self._settle_s = settle_s
        self._first_ts: float | None = None

    def back(self, index: int, captured_ts: float) -> tuple[int, bool]:
        """Frame `index`, captured at `captured_ts`, came back: how many sent before it, after the
        last one back, never will, and whether the call had settled by then."""
        if self._first_ts is None:
            self._first_ts = captured_ts
        if index <= self._last:
            return 0, False  # an unknown or repeated index
        gap = index - self._last - 1 if self._last >= 0 else 0
        self._last = index
        return gap, captured_ts - self._first_ts >= self._settle_s


SPACING = 0.75  # of a frame period: closer frames would fall in one slot of a recording


class CaptureOrder:
    """A live output's frames in capture order, each once, at its capture time: what a virtual
    camera shows and a recording writes (a recording places each frame by its capture time, so a
    frame sent twice, or one older than the last, would stretch the take and double frames). A
    frame captured less than SPACING of a period after the last one shown (after a spell of the
    local picture: returned frames are older than the camera's newest) is left out; one whose
    original is unknown (the call's first, under RTP 0) is placed at its arrival, at least a
    period after the last, in a slot of its own."""

    def __init__(self, period_s: float) -> None:
        self.period_s = period_s
        self.shown = float("-inf")  # the capture time of the last frame placed
        self.late = 0  # frames left out as older than one shown

    def place(self, captured: float | None, arrived: float) -> float | None:
        """The capture time to show a frame at, or None to leave it out."""
        at = captured if captured is not None else max(arrived, self.shown + self.period_s)
        if at < self.shown + SPACING * self.period_s:
            self.late += 1
            return None
        self.shown = at
        return at
