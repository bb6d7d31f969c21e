"""How a command-line run ends: by signal, with its output finalised, whatever happened to stdout.

- StopSignals: Ctrl+C, `kill` (SIGTERM) or a closed terminal (SIGHUP) only *ask* the run to stop:
  the handler records the request and the waiting loop acts on it, so no exception is ever raised
  into the middle of opening a device, finalising a file or a Qt slot (a KeyboardInterrupt there
  lost the recording, or aborted the process). A second signal is told to wait; a third quits at
  once without finishing. A run stopped by a signal still exits with the shell's code for it
  (128 + the signal's number: 130 for Ctrl+C, 143 for SIGTERM, 129 for SIGHUP), so a script can
  tell a stopped run from one whose input ended.
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

SIGINT_CODE = 128 + signal.SIGINT  # 130, as a shell reports a process ended by Ctrl+C


def signal_exit_code(signum: int) -> int:
    """The exit status a shell reports for a process ended by `signum` (128 + its number)."""
    return 128 + int(signum)


class Stopped(KeyboardInterrupt):
    """A stop asked for while nothing needed finishing yet: exits with `exit_code` (a
    KeyboardInterrupt, so whatever already ends a run on Ctrl+C ends it on this too)."""

    def __init__(self, exit_code: int) -> None:
        super().__init__(exit_code)
        self.exit_code = exit_code


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
    """While active (main thread only), SIGINT/SIGTERM/SIGHUP set `requested`; the code waiting on
    the run polls it. The second signal says to wait; the third exits at once (128 + its number)."""

    def __init__(self, say: Callable[[str], None]) -> None:
        self._say = say
        self._count = 0
        self._previous: dict[int, object] = {}
        self._event = threading.Event()
        self._first: int | None = None  # the signal that asked to stop

    @property
    def requested(self) -> bool:
        return self._event.is_set()

    @property
    def exit_code(self) -> int:
        """The exit status for a run this stopped: 128 + the first signal's number (0 if none came)."""
        return 0 if self._first is None else signal_exit_code(self._first)

    def checkpoint(self) -> None:
        """Raise Stopped (a KeyboardInterrupt carrying exit_code) if a stop was asked for: start-up
        calls this between its steps, where nothing needs finishing yet."""
        if self._event.is_set():
            raise Stopped(self.exit_code)

    def wait(self, timeout: float) -> bool:
        """Sleep up to `timeout` s, waking early on a stop request; True when one came."""
        return self._event.wait(timeout)

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            wanted = [signal.SIGINT, signal.SIGTERM] + ([signal.SIGHUP] if hasattr(signal, "SIGHUP") else [])
            # A signal the process was started ignoring (a background job's Ctrl+C, `nohup`'s hang-up)
            # stays ignored, as the panel leaves it.
            wanted = [sig for sig in wanted if signal.getsignal(sig) != signal.SIG_IGN]
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
        if self._count == 1:
            self._first = signum
            self._event.set()
            return
        if self._count == 2:
            self._say("finishing the output; please wait (once more quits without it)")
            return
        self._say("quitting without finishing the output")
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError) as exc:
                log.debug("flush before quitting failed: %s", exc)
        os._exit(signal_exit_code(signum))  # not SystemExit: raised inside a Qt slot, that aborts the process
