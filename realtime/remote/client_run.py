"""The remote client on the run lifecycle (realtime/lifecycle): started, watched, stopped by a
signal and its output finished as every other client's run, with the same exit codes.

The call itself (connect, stream, reconnect, hang up) is RemoteClient's, on a thread of its own;
the command's main thread only watches it and asks it to stop, as for a local run.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable

from realtime.api import FaceCastError, Run, StatsSnapshot, StopSignals, told
from realtime.remote.client import ClientStats, RemoteClient


class RemoteRun:
    """A RemoteClient as the lifecycle's Runner."""

    def __init__(self, client: RemoteClient, say: Callable[[str], None]) -> None:
        self.client = client
        self._say = say
        self._done = threading.Event()
        self._error: FaceCastError | None = None
        self._thread: threading.Thread | None = None

    @property
    def error(self) -> FaceCastError | None:
        return self._error

    def start(self) -> None:
        self._thread = threading.Thread(target=self._call, name="remote-call", daemon=True)
        self._thread.start()

    def _call(self) -> None:
        try:
            self.client.run()
        except FaceCastError as exc:
            self._error = exc
        except Exception as exc:  # a fault of the call itself: worded once (its traceback in --debug)
            self._error = FaceCastError(f"The call failed: {told(exc).message}")
        finally:
            self._done.set()

    def stopped_by_signal(self, signum: int) -> None:
        """A signal asked the call to end: it hangs up, and its exit status says the signal's."""
        if self.client.stopped_by is None:
            self.client.stopped_by = signum
            self._say(f"stopping ({signal.Signals(signum).name}): hanging up ...")

    def stop(self, timeout: float = 1.0) -> None:
        self.client.stop_event.set()
        self._done.wait(timeout)

    def ended(self, timeout: float | None = None) -> bool:
        return self._done.wait(timeout)

    def finish_output(self, timeout: float) -> bool:
        return self._done.wait(timeout)  # the call closes (or drops) its output as it ends

    def stats(self) -> StatsSnapshot:
        return self.client.metrics.snapshot()


def run_call(client: RemoteClient, say: Callable[[str], None]) -> tuple[ClientStats, int]:
    """The call from start to end on the lifecycle: the client's stats and the exit status a
    signal's stop ends the command with (0 when none came). Raises the call's error."""
    runner = RemoteRun(client, say)
    with StopSignals(say) as signals:
        run = Run(client.source, client.sink, None, runner=runner)
        run.start()
        run.watch(signals.wait)  # until the call ends by itself (input, duration, the link) or a signal
        if signals.requested:
            runner.stopped_by_signal(signals.exit_code - 128)
        outcome = run.stop(say=say, stop_code=signals.exit_code)
    if outcome.error is not None:
        raise outcome.error
    return client.stats, outcome.exit_code
