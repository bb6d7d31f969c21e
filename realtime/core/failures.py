"""Exceptions that end a run, as the errors the user is told."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from models.errors import ExitCode, FaceCastError
from realtime.core.errors import SinkError, SourceError

log = logging.getLogger(__name__)


class OncePerReason:
    """Lets a per-frame failure be told once per distinct message every `repeat_s` seconds (not 30
    times a second). Thread-safe."""

    def __init__(self, repeat_s: float) -> None:
        self._repeat_s = repeat_s
        self._lock = threading.Lock()
        self._told: dict[str, float] = {}  # message -> when last told

    def first_in_a_while(self, message: str, now: float) -> bool:
        """True (and noted) when `message` was not told in the last `repeat_s` seconds."""
        with self._lock:
            last = self._told.get(message)
            if last is not None and now - last < self._repeat_s:
                return False
            if len(self._told) >= 64:
                # Messages that vary per frame (a number in the text) must not grow this for hours.
                self._told = {m: t for m, t in self._told.items() if now - t < self._repeat_s}
            self._told[message] = now
            return True


def as_failure(exc: Exception) -> FaceCastError:
    """An exception that ends the run, as the error the user is told: ours as they are, anything
    else (a bug) logged with its traceback and named as internal."""
    if isinstance(exc, FaceCastError):
        return exc
    log.exception("engine thread %s crashed", threading.current_thread().name)
    return FaceCastError(f"Internal error in {threading.current_thread().name}: {exc}")


def source_failure(exc: Exception) -> SourceError:
    """A source's unexpected exception (a driver's OSError, a custom source's bug) as the input
    failing: the frames in flight are finished and the output kept, as for a camera unplugged."""
    log.error("the input failed", exc_info=exc)
    return SourceError(f"The input failed: {type(exc).__name__}: {exc}")


def output_failure(description: str, exc: Exception) -> SinkError:
    """The output's unexpected exception while it was finished (a full disk as an OSError): named
    as the output failing, not as an internal error of whichever thread stopped the run."""
    log.error("finishing the output failed", exc_info=exc)
    return SinkError(f"Finishing {description} failed: {type(exc).__name__}: {exc}")


@dataclass(frozen=True, slots=True)
class Failure:
    """What ended a command, as its user is told: one line (empty when there is nothing to say,
    e.g. Ctrl+C before anything was opened) and the exit code (models.errors.ExitCode)."""

    message: str
    exit_code: int


def told(exc: BaseException) -> Failure:
    """The one place where whatever ended a command (an error of ours, a signal's stop, a system
    call that failed, a bug) becomes what the user reads and the exit status a script sees."""
    if isinstance(exc, FaceCastError):
        return Failure(exc.user_message(), exc.exit_code)
    if isinstance(exc, KeyboardInterrupt):  # Ctrl+C, or a stop a signal asked for during start-up
        return Failure("", int(getattr(exc, "exit_code", ExitCode.SIGINT)))
    if isinstance(exc, OSError):
        where = f" ({exc.filename})" if exc.filename else ""
        return Failure(f"{exc.strerror or exc}{where}.", ExitCode.USAGE)
    log.debug("internal error", exc_info=exc)
    return Failure(
        f"Internal error: {type(exc).__name__}: {exc}. Run it again with --debug for the details.",
        ExitCode.INTERNAL,
    )
