"""How a command-line run ends: by signal, with its output finalised, whatever happened to stdout.

- StopSignals: the first Ctrl+C, `kill` (SIGTERM) or closed terminal (SIGHUP) asks the run to stop;
  later ones while the output is being finalised are told to wait (a second Ctrl+C 1 ms after the
  first used to kill the process with the recording unfinished); a third gives up on finishing.
- SafeOutput: progress lines that cannot be shown any more (`| head -1`, a dropped SSH session) are
  dropped instead of raising BrokenPipeError through the run and losing its recording.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import TextIO

log = logging.getLogger(__name__)

QUIT_CODE = 130  # the third signal: exit without finishing (128 + SIGINT, as a shell reports)


class SafeOutput:
    """`print` to a stream that may close under us: after the first failed write nothing more is
    written (and a broken stdout is pointed at the null device, so Python's own flush at exit does
    not print a BrokenPipeError either)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.broken = False

    def __call__(self, text: str) -> None:
        if self.broken:
            return
        try:
            print(text, file=self.stream, flush=True)
        except (OSError, ValueError):  # EPIPE, EIO from a dead tty; ValueError: a closed file
            self.broken = True
            if self.stream is sys.stdout:
                _silence_stdout()


def _silence_stdout() -> None:
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    except (OSError, ValueError, AttributeError) as exc:
        # Not a real file descriptor (tests): nothing will flush into a dead pipe anyway.
        log.debug("could not point stdout at %s: %s", os.devnull, exc)


class StopSignals:
    """While active (main thread only): the first SIGINT/SIGTERM/SIGHUP calls `stop` (by default
    it raises KeyboardInterrupt, which ends the wait); after `finishing()`, or after that first
    signal, the next one says to wait, and a third exits with QUIT_CODE."""

    def __init__(self, say: Callable[[str], None], stop: Callable[[], None] | None = None) -> None:
        self._say = say
        self._stop = stop if stop is not None else _interrupt
        self._count = 0
        self._finishing = False
        self._previous: dict[int, object] = {}

    @property
    def stopped_by_signal(self) -> bool:
        return self._count > 0

    def finishing(self) -> None:
        """From now on the output is being finalised: signals no longer stop, they wait."""
        self._finishing = True

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            wanted = [signal.SIGINT, signal.SIGTERM] + ([signal.SIGHUP] if hasattr(signal, "SIGHUP") else [])
            self._previous = {int(sig): signal.signal(sig, self._on_signal) for sig in wanted}
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]
        self._previous = {}

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        self._count += 1
        if self._count >= 3:
            self._say("quitting without finishing the output")
            raise SystemExit(QUIT_CODE)
        if self._finishing or self._count > 1:
            self._say("finishing the output; please wait (once more quits without it)")
            return
        self._finishing = True
        self._stop()


def _interrupt() -> None:
    raise KeyboardInterrupt
