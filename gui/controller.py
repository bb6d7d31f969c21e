"""Runs the engine for the window without ever blocking the GUI thread.

Start and stop open and close devices, which can take seconds (a camera, the virtual camera), so
they run one after another on a single control thread. Models load in the engine's background
loader (load_in_background=True): the preview starts in passthrough at once. Everything the engine
reports from its own threads reaches the GUI thread through queued signals.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from PyQt6.QtCore import QObject, Qt, QTimer, pyqtSignal

from gui.config import InputConfig, OutputConfig, default_record_path
from gui.preview import PreviewFeed, TappedSource
from realtime.api import (
    ActiveFace,
    Engine,
    EngineEvent,
    FaceCastError,
    FanOutSink,
    FrameSource,
    GalleryFaceSwap,
    ModelOptions,
    OutputInfo,
    OutputRequest,
    Run,
    Settings,
    SourceError,
    SourceIdentity,
    StageFactory,
    StatsSnapshot,
    VirtualCameraUnavailableError,
    auto_provider,
    collect_output_info,
    new_run_id,
    open_input,
    open_outputs,
    passthrough_stages,
    told,
)

log = logging.getLogger(__name__)

# Makes the run's engine from its source, sink and event callback: the remote panel's, for a server.
EngineMaker = Callable[[FrameSource, FanOutSink, Settings, Callable[[EngineEvent], None]], Engine]

QUEUED = Qt.ConnectionType.QueuedConnection


class RunState(StrEnum):
    IDLE = "idle"
    STARTING = "starting"
    RUNNING = "running"
    STOPPING = "stopping"


class ModelsState(StrEnum):
    NONE = "none"
    LOADING = "loading"
    READY = "ready"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class RunPlan:
    """Everything one start needs, captured on the GUI thread.

    faces: the usable source faces (gallery order); the active one is picked per frame through the
    controller's ActiveFace. None at all: the input passes through unchanged.
    """

    input: InputConfig
    output: OutputConfig
    settings: Settings
    faces: tuple[SourceIdentity, ...] = ()


def make_source(config: InputConfig, provider: str = "cpu") -> FrameSource:
    """The run's input. A video file is decoded by NVDEC when the models run on an NVIDIA GPU and
    NVDEC can read it (on the CPU otherwise, or if NVDEC then fails to open it)."""
    if config.kind != "video":
        spec = str(config.camera_index) if config.kind == "camera" else ""
        source, _ = open_input(
            spec, realtime=True, loop=True, width=config.width, height=config.height, fps=config.fps,
            kind=config.kind,
        )  # fmt: skip
        return source
    if not config.video_path:
        raise SourceError("No video file chosen.", hint="Pick one under Input, or use the test pattern.")
    if provider == "auto":  # resolved only here: only a video's decoder depends on it
        provider = auto_provider()
    source, note = open_input(config.video_path, realtime=True, loop=True, provider=provider, kind="video")
    if note:
        log.info("%s: %s", config.video_path, note)
    return source


def make_sink(
    config: OutputConfig,
    on_vcam_unavailable: Callable[[VirtualCameraUnavailableError], None],
    vcam_backend: str | None = None,
    on_recording_failed: Callable[[FaceCastError], None] | None = None,
    on_vcam_lost: Callable[[FaceCastError], None] | None = None,
    run_id: str | None = None,
) -> FanOutSink:
    """Recording (on its own thread) and the virtual camera. Neither paces: every GUI source
    (camera, test pattern, video in real time) delivers frames at its own rate, and a second clock
    in the virtual camera would hold each frame up to one frame period (docs/PERFORMANCE.md). A
    recording that fails (a full disk) stops alone: `on_recording_failed` is told."""
    requests: list[OutputRequest] = []
    if config.record:
        path = Path(config.record_path) if config.record_path else default_record_path()
        # A new take: never replaces a recording (NAME-2.mp4, ...); a folder it cannot write stops
        # the recording alone, said through on_recording_failed (the preview and camera go on).
        failed = on_recording_failed or _log_failure
        requests.append(
            OutputRequest(str(path), file_kind="video", on_failed=failed, new_take=True, run_id=run_id)
        )
    if config.vcam:
        requests.append(
            OutputRequest(
                "vcam",
                width=config.vcam_width,
                height=config.vcam_height,
                fps=config.vcam_fps,
                vcam_backend=vcam_backend,
                pace=False,
                on_unavailable=on_vcam_unavailable,
                on_lost=on_vcam_lost or _log_failure,
            )
        )
    return open_outputs(requests)


def _log_failure(error: FaceCastError) -> None:
    log.error("%s", error.user_message())


class EngineController(QObject):
    """Owns at most one Engine. All public methods are for the GUI thread and return at once."""

    state_changed = pyqtSignal(str)  # RunState value
    models_changed = pyqtSignal(str, str)  # ModelsState value, label/message
    message = pyqtSignal(str, str)  # level ("info"/"warning"/"error"), text
    # An error of the input or output: a Start that could not open them, a recording or virtual
    # camera that stopped. Apart from `message`, so the window can drop it once a later run works.
    io_error = pyqtSignal(str)
    vcam_unavailable = pyqtSignal(str)  # the driver error, with its fix
    # Once started: "test pattern (...) → virtual camera (...)" and what the outputs write (OutputInfo).
    described = pyqtSignal(str, object)

    _engine_event = pyqtSignal(int, object)
    _started = pyqtSignal(int, object, str, object)
    _start_failed = pyqtSignal(int, str)
    _stopped = pyqtSignal(int)

    def __init__(
        self,
        options: ModelOptions,
        active: ActiveFace,
        feed: PreviewFeed,
        vcam_backend: str | None = None,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self._options = options
        self._active = active
        self._feed = feed
        self._vcam_backend = vcam_backend
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="engine-control")
        self._opening: TappedSource | None = None  # the source a start is opening (control thread)
        self._stopped_engines: list[Engine] = []  # whose model loads may still be running
        self._control_run: Run | None = None  # touched only on the control thread
        self._engine: Engine | None = None  # touched only on the GUI thread
        self._state = RunState.IDLE
        self._models = ModelsState.NONE
        self._generation = 0
        self._settings: Settings | None = None
        # A restart asked for: how to build its plan, called when the old run has stopped, so that
        # every change made meanwhile (a second setting, another photo) is in it.
        self._pending: Callable[[], RunPlan] | None = None
        self._ready_this_run = False  # models became ready at least once in this run
        self.remote: Callable[[], EngineMaker | None] | None = None  # set by the remote panel
        self._engine_event.connect(self._on_engine_event, QUEUED)  # type: ignore[call-arg]
        self._started.connect(self._on_started, QUEUED)  # type: ignore[call-arg]
        self._start_failed.connect(self._on_start_failed, QUEUED)  # type: ignore[call-arg]
        self._stopped.connect(self._on_stopped, QUEUED)  # type: ignore[call-arg]
        self._watchdog = QTimer(self)
        self._watchdog.setInterval(200)
        self._watchdog.timeout.connect(self._check_engine)

    # ---- state ---------------------------------------------------------------------------------------

    @property
    def state(self) -> RunState:
        return self._state

    @property
    def models(self) -> ModelsState:
        return self._models

    @property
    def previous_models_running(self) -> bool:
        """A reload is loading (or failed) while the models loaded earlier in this run keep
        swapping: the output is not passthrough."""
        return self._ready_this_run and self._models in (ModelsState.LOADING, ModelsState.FAILED)

    @property
    def stages_label(self) -> str:
        return self._engine.stages_label if self._engine is not None else ""

    @property
    def engine_settings(self) -> Settings | None:
        """The settings the running engine uses (None when idle)."""
        return self._engine.settings if self._engine is not None else None

    def stats(self) -> StatsSnapshot | None:
        return self._engine.stats() if self._engine is not None else None

    # ---- commands -------------------------------------------------------------------------------------

    def start(self, plan: RunPlan) -> None:
        if self._state != RunState.IDLE:
            return
        self._generation += 1
        self._settings = plan.settings
        self._models = ModelsState.NONE
        self._ready_this_run = False
        self._set_state(RunState.STARTING)
        maker = self.remote() if self.remote is not None else None
        self._executor.submit(self._control_start, plan, self._generation, maker)

    def stop(self) -> None:
        self._pending = None  # Stop during a restart means stop, not start again
        if self._state in (RunState.IDLE, RunState.STOPPING):
            return
        self._set_state(RunState.STOPPING)
        self._watchdog.stop()
        self._engine = None
        self._executor.submit(self._control_stop, self._generation)

    def restart(self, plan: Callable[[], RunPlan]) -> None:
        """Stop (if running) and start again (new input or output) with the plan `plan()` gives once
        the old run has stopped; restarts asked for meanwhile fold into this one."""
        if self._state == RunState.IDLE:
            self.start(plan())
            return
        if self._state != RunState.STOPPING:
            self.stop()
        self._pending = plan

    def set_model_options(self, options: ModelOptions) -> None:
        """Another models folder: used from the next Start."""
        self._options = options

    def update_settings(self, settings: Settings) -> None:
        """Applied live at the next frame; model changes reload in the background, no restart."""
        self._settings = settings
        if self._state == RunState.RUNNING and self._engine is not None:
            try:
                self._engine.update_settings(settings)
            except FaceCastError as exc:
                self.message.emit("error", exc.user_message())

    def loads_finished(self, timeout: float) -> bool:
        """At exit, after shutdown(): whether every model load of the stopped runs has returned
        (waiting up to `timeout` s in all)."""
        deadline = time.monotonic() + timeout
        engines, self._stopped_engines = self._stopped_engines, []
        return all(engine.loads_finished(max(deadline - time.monotonic(), 0.0)) for engine in engines)

    def shutdown(self) -> None:
        """At exit: stop the engine and wait for the control thread (the window is already closing;
        Engine.stop is bounded, about a second)."""
        self._pending = None
        opening = self._opening
        if opening is not None:
            # Closing while a camera is still opening: its warm-up wait ends now (else the window
            # freezes for the rest of it, up to ~3 s).
            opening.interrupt()
        self.stop()
        self._executor.shutdown(wait=True, cancel_futures=False)

    # ---- control thread -------------------------------------------------------------------------------

    def _control_start(self, plan: RunPlan, generation: int, maker: EngineMaker | None = None) -> None:
        def on_vcam_unavailable(exc: VirtualCameraUnavailableError) -> None:
            self.vcam_unavailable.emit(exc.user_message())

        def on_note(note: str) -> None:
            self.message.emit("warning", note)

        def on_recording_failed(error: FaceCastError) -> None:  # from the recorder's thread
            self.io_error.emit(
                f"Recording stopped: {error.user_message()} The virtual camera and preview carry on."
            )

        def on_vcam_lost(error: FaceCastError) -> None:  # from the engine's sink thread
            self.io_error.emit(
                f"Virtual camera stopped: {error.user_message()} Preview and recording carry on."
            )

        def on_event(event: EngineEvent) -> None:
            self._engine_event.emit(generation, event)

        try:
            source = TappedSource(make_source(plan.input, plan.settings.pipeline.provider), self._feed.tap)
            # The recording's manifest names the run whose watermark its frames carry.
            run_id = new_run_id()
            sink = make_sink(
                plan.output,
                on_vcam_unavailable,
                self._vcam_backend,
                on_recording_failed,
                on_vcam_lost,
                run_id,
            )
            factory: StageFactory = (
                GalleryFaceSwap(self._options, plan.faces, self._active, on_note)
                if plan.faces
                else passthrough_stages
            )
            # The remote panel's maker builds an engine whose stages run on a server.
            remote = None if maker is None else (lambda _src, _sink, st, ev: maker(source, sink, st, ev))
            run = Run(source, sink, plan.settings, factory, on_event=on_event, make_engine=remote,
                      load_in_background=True, run_id=run_id)  # fmt: skip
            run.engine.subscribe_preview(self._feed.offer)
            self._opening = source
            try:
                run.start()  # the user's error, whatever failed (realtime.lifecycle)
            finally:
                self._opening = None
        except Exception as exc:  # told() words it: ours as they are, a system error in one line
            failure = told(exc)
            if not isinstance(exc, FaceCastError):
                log.debug("starting failed", exc_info=exc)
            self._start_failed.emit(generation, failure.message)
            return
        self._control_run = run
        description = f"{source.description} → {sink.description}"
        self._started.emit(generation, run.engine, description, collect_output_info(sink))

    def _control_stop(self, generation: int) -> None:
        run, self._control_run = self._control_run, None
        engine = run.engine if run is not None else None
        if run is not None:
            try:
                # A recording still writing finishes on its own thread (BackgroundSink): not waited for.
                run.stop(timeout=1.0, finish_s=0.0)
            except Exception as exc:
                self.message.emit("error", f"Stopping failed: {told(exc).message}")
        # Stopped engines are kept only while a model load of theirs runs (a stopped engine holds
        # its models' memory), so that the exit can wait for it: pruned at every stop.
        self._stopped_engines = [e for e in self._stopped_engines if not e.loads_finished(0.0)]
        if engine is not None and not engine.loads_finished(0.0):
            self._stopped_engines.append(engine)
        self._stopped.emit(generation)

    # ---- GUI-thread slots -----------------------------------------------------------------------------

    def _set_state(self, state: RunState) -> None:
        self._state = state
        self.state_changed.emit(state.value)

    def _on_started(self, generation: int, engine: Engine, description: str, outputs: OutputInfo) -> None:
        if generation != self._generation or self._state != RunState.STARTING:
            return  # a stop was asked for meanwhile; the queued stop releases this engine
        self._engine = engine
        self._set_state(RunState.RUNNING)
        self.described.emit(description, outputs)
        self._watchdog.start()
        if self._settings is not None and self._settings != engine.settings:
            self.update_settings(self._settings)  # changed while the devices were opening

    def _on_start_failed(self, generation: int, text: str) -> None:
        if generation != self._generation:
            return
        self.io_error.emit(text)
        self._set_state(RunState.IDLE)
        self._start_pending()

    def _on_stopped(self, generation: int) -> None:
        if generation != self._generation:
            return
        self._engine = None
        self._models = ModelsState.NONE
        self._set_state(RunState.IDLE)
        self._start_pending()

    def _start_pending(self) -> None:
        plan, self._pending = self._pending, None
        if plan is not None:
            self.start(plan())

    def _on_engine_event(self, generation: int, event: EngineEvent) -> None:
        if generation != self._generation:
            return
        if event.kind.startswith("models_") and self._state not in (RunState.STARTING, RunState.RUNNING):
            return  # a load that ended after Stop: the idle window must not show models as ready
        if event.kind == "models_loading":
            self._models = ModelsState.LOADING
            self.models_changed.emit(self._models.value, event.message)
        elif event.kind == "models_ready":
            self._models = ModelsState.READY
            self._ready_this_run = True
            self.models_changed.emit(self._models.value, event.message)
        elif event.kind == "error":
            if self._models == ModelsState.LOADING:
                self._models = ModelsState.FAILED
                self.models_changed.emit(self._models.value, event.message)
            self.message.emit("error", event.message)
        elif event.kind in ("warning", "info"):
            self.message.emit(event.kind, event.message)

    def _check_engine(self) -> None:
        """The engine ends on its own when the input ends or a device fails: release it and say why."""
        engine = self._engine
        if self._state != RunState.RUNNING or engine is None or engine.running:
            return
        if engine.error is None:
            self.message.emit("info", "The input ended; stopped.")
        self.stop()
