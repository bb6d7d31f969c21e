"""What the sources share: their reported format, the pacer that plays media in real time, and
the wording of an OS or decoder error."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Literal

from realtime.core.source_base import SourceBase

DEFAULT_FPS = 30.0
# auto: NVDEC where it pays off and can read the input; cpu: never; nvdec: NVDEC or an error.
Decoder = Literal["auto", "cpu", "nvdec"]


class KnownFormat(SourceBase):
    """`size` and `fps` of a source, read from what open() found (0 before it)."""

    _size: tuple[int, int] = (0, 0)
    _fps: float = 0.0

    @property
    def size(self) -> tuple[int, int]:
        return self._size

    @property
    def fps(self) -> float:
        return self._fps


class Pacer:
    """Sleeps until a media time is due, measured from one absolute start time.

    Anchoring on a single start (rather than sleeping 1/fps after each frame) keeps rounding errors
    from accumulating into drift. A consumer that stalls for longer than `resync_after_s` re-anchors
    the clock instead of receiving a burst of overdue frames afterwards, as a camera would behave.
    """

    def __init__(
        self,
        resync_after_s: float = 0.25,
        clock: Callable[[], float] = time.perf_counter,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        self._resync_after_s = resync_after_s
        self._clock = clock
        self._interrupted = threading.Event()
        self._sleep = sleep or self._sleep_interruptibly
        self._start: float | None = None

    def interrupt(self) -> None:
        """End the current and every later wait at once (the source is being closed)."""
        self._interrupted.set()

    def rearm(self) -> None:
        """Pace again from the next frame on (a source opened again after an interrupt)."""
        self._interrupted.clear()
        self._start = None

    def _sleep_interruptibly(self, seconds: float) -> None:
        # time.sleep in short slices, not Event.wait: on Windows an event wait is rounded to the
        # ~15.6 ms system tick (jitter at 30 fps), time.sleep uses a high-resolution timer.
        deadline = self._clock() + seconds
        while not self._interrupted.is_set():
            remaining = deadline - self._clock()
            if remaining <= 0:
                return
            time.sleep(min(remaining, 0.05))

    def reset(self) -> None:
        self._start = None

    def wait_until(self, media_time_s: float) -> None:
        now = self._clock()
        if self._start is None:
            self._start = now - media_time_s
            return
        delay = self._start + media_time_s - now
        if delay > 0:
            self._sleep(delay)
        elif -delay > self._resync_after_s:
            self._start = now - media_time_s


def reason(err: Exception) -> str:
    """An OS or FFmpeg error's own words (its strerror where it has one)."""
    return str(getattr(err, "strerror", None) or err)
