"""One run from start to end: `Run` is what every client drives, so each handles every fault the
same way.

    run = Run(source, sink, settings, stages, on_event=...)
    run.start()                       # input and outputs opened, models ready (or loading)
    ending = run.watch(stop.wait, duration_s=10, on_tick=...)   # until it ends or is stopped
    outcome = run.stop(say=print)     # frames in flight dropped, the output finished
    sys.exit(outcome.exit_code)

- start() raises the user's error (a FaceCastError: failures.told words anything else) with
  nothing left open; an output that may fail alone (a recording, the virtual camera: see
  realtime.io.outputs.OutputRequest) is reported and the run goes on without it.
- watch() only watches: a stop request there (a signal) never cuts into a device call.
- stop() finishes the output even when a write outlives the engine's stop (a slow disk), up to
  `finish_s`, and says so when it waits.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from models.errors import ExitCode, FaceCastError
from realtime.core.contracts import BasicSource, FrameSink
from realtime.core.engine import Engine
from realtime.core.events import EngineEvent
from realtime.core.failures import told
from realtime.core.metrics import StatsSnapshot
from realtime.core.settings import Settings
from realtime.core.stage_set import StageFactory, passthrough_stages

OUTPUT_FINISH_S = 30.0  # how long a stopping run waits for an output still being written
FIRST_FINISH_S = 0.5  # waited silently; longer, and the user is told why the stop takes time

# Waits up to its argument in seconds for a stop request; True when one came (StopSignals.wait,
# threading.Event.wait).
StopWait = Callable[[float], bool]
# Builds the run's engine (the remote panel builds one whose stages run on a server).
EngineMaker = Callable[[BasicSource, FrameSink, Settings, Callable[[EngineEvent], None]], Engine]


class Runner(Protocol):
    """What a Run drives: the Engine, or another runner of frames (the remote client, whose
    faces are swapped on a server)."""

    @property
    def error(self) -> FaceCastError | None: ...

    def start(self) -> None: ...

    def stop(self, timeout: float = 1.0) -> None: ...

    def ended(self, timeout: float | None = None) -> bool: ...

    def finish_output(self, timeout: float) -> bool: ...

    def stats(self) -> StatsSnapshot: ...


class Ending(StrEnum):
    INPUT_ENDED = "input ended"  # a file or clip played to its end
    STOPPED = "stopped"  # asked to (a signal, Stop, a hang-up)
    DURATION = "duration"  # its --duration passed
    FAILED = "failed"  # the input, an output or the models failed


@dataclass(frozen=True, slots=True)
class RunOutcome:
    ending: Ending
    stats: StatsSnapshot
    error: FaceCastError | None
    output_finished: bool  # False: a write was still running after finish_s
    stop_code: int = ExitCode.OK  # what a stop request ends with (128 + a signal's number)

    @property
    def exit_code(self) -> int:
        """The command's exit status: the error's code, else the stop request's (0 when none)."""
        return self.error.exit_code if self.error is not None else self.stop_code


class Run:
    """One run of the engine on one input and its outputs. Not thread-safe: one owner drives it
    (start, watch, stop); ended() and stats() may be read from any thread."""

    def __init__(
        self,
        source: BasicSource,
        sink: FrameSink,
        settings: Settings | None,
        stages: StageFactory = passthrough_stages,
        *,
        on_event: Callable[[EngineEvent], None] | None = None,
        load_in_background: bool = False,
        make_engine: EngineMaker | None = None,
        runner: Runner | None = None,
        run_id: str | None = None,
    ) -> None:
        """`runner`: run that instead of an engine of this process (the remote client); `settings`
        may then be None (the runner's are elsewhere). `run_id`: the engine's (its watermark's)."""
        events = on_event or (lambda _event: None)
        self.runner: Runner
        self._engine: Engine | None = None  # the engine this run built (None: another runner)
        if runner is not None:
            self.runner = runner
        elif settings is None:
            raise ValueError("an engine of this process needs its settings")
        elif make_engine is not None:
            self.runner = self._engine = make_engine(source, sink, settings, events)
        else:
            self.runner = self._engine = Engine(
                source,
                sink,
                settings,
                stages,
                on_event=events,
                load_in_background=load_in_background,
                run_id=run_id,
            )
        self._settings = settings
        self.source, self.sink = source, sink
        self._started_at: float | None = None
        self._ending: Ending | None = None
        self._stopped = threading.Event()

    @property
    def engine(self) -> Engine:
        """The engine this run drives (a run of another runner has none)."""
        if self._engine is None:
            raise TypeError("this run drives no engine of this process")
        return self._engine

    @property
    def settings(self) -> Settings | None:
        return self._engine.settings if self._engine is not None else self._settings

    @property
    def description(self) -> str:
        return f"{self.source.description} -> {self.sink.description}"

    def stats(self) -> StatsSnapshot:
        return self.runner.stats()

    def start(self) -> None:
        """Open the input and the outputs and start. Raises the user's error, nothing left open."""
        try:
            self.runner.start()
        except FaceCastError:
            raise
        except Exception as exc:  # a device's OSError, a custom source's bug: worded once, here
            raise FaceCastError(f"Could not start: {told(exc).message}") from exc
        self._started_at = time.monotonic()

    def ended(self, timeout: float = 0.0) -> bool:
        """Whether the run has ended by itself (input over, a failure), waiting up to `timeout` s."""
        return self.runner.ended(timeout)

    def watch(
        self,
        stop: StopWait | None = None,
        *,
        duration_s: float | None = None,
        every_s: float = 1.0,
        on_tick: Callable[[], None] | None = None,
        poll_s: float = 0.1,
    ) -> Ending:
        """Until the run ends by itself, `stop` asks, or `duration_s` seconds have passed since
        start(); `on_tick` every `every_s` seconds meanwhile. Only watches: stop() ends the run."""
        wait = stop or (lambda timeout: self._stopped.wait(timeout))
        started = self._started_at if self._started_at is not None else time.monotonic()
        last_tick = time.monotonic()
        while True:
            if self.runner.ended(0.0):
                self._ending = Ending.FAILED if self.runner.error is not None else Ending.INPUT_ENDED
                return self._ending
            if duration_s is not None and time.monotonic() - started >= duration_s:
                self._ending = Ending.DURATION
                return self._ending
            if wait(poll_s):
                self._ending = Ending.STOPPED
                return self._ending
            if on_tick is not None and time.monotonic() - last_tick >= every_s:
                last_tick = time.monotonic()
                on_tick()

    def request_stop(self) -> None:
        """(Any thread.) Ends a watch() that has no stop request of its own."""
        self._stopped.set()

    def stop(
        self,
        *,
        timeout: float = 1.0,
        finish_s: float = OUTPUT_FINISH_S,
        say: Callable[[str], None] | None = None,
        stop_code: int = ExitCode.OK,
    ) -> RunOutcome:
        """Stop (frames in flight are dropped), finish the output and release the devices.
        `stop_code`: the exit status a stop request ends the command with (a signal's)."""
        tell = say or (lambda _text: None)
        self.runner.stop(timeout)
        finished = self.runner.finish_output(FIRST_FINISH_S)
        if not finished:
            tell("finishing the output ...")  # a write still running (a slow disk)
            finished = self.runner.finish_output(finish_s)
            if not finished:
                tell(f"warning: {self.sink.description} did not finish in {finish_s:.0f} s")
        error = self.runner.error
        ending = self._ending or (Ending.FAILED if error is not None else Ending.STOPPED)
        code = stop_code if ending == Ending.STOPPED else ExitCode.OK
        return RunOutcome(ending, self.runner.stats(), error, finished, code)
