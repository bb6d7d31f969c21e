"""The engine: capture -> analyse -> swap workers -> in-order sink, with bounded frames in flight.

Threads and hand-offs (nothing unbounded anywhere):
- capture: reads the source. Live sources offer each frame to a catch-up slot of two (a one-off
  stall is absorbed, an analyser slower than the source gets the newest; every dropped frame is
  counted, nothing queues up); file sources read every frame and wait for the slot to empty.
- analyser: one thread, every frame in order (tracking needs it). It takes a frame only when one
  of the permits is free, so at most that many frames are between capture and sink: live sources
  have `frames_in_flight` permits; files and clips `read_ahead` more, so the serial analysis of the
  next frames overlaps the swaps instead of waiting for them (throughput, where latency is moot).
- swap workers: `frames_in_flight` threads, each owning its own swapper session.
- sink: sends frames in capture order (a reorder buffer of at most as many entries as permits),
  records glass-to-glass latency, and releases the permit. One clock paces a run, never two: a
  live source's (a camera delivers at its rate), else the virtual camera's frame clock (callers
  build it with pace=not source.is_live; two clocks would hold each frame up to a frame period).
Control (stop, new settings) never waits behind video: it is read by every thread each frame.
The slot, the permits and the reorder buffer are realtime.core.flow's policies.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Literal

from models.errors import FaceCastError
from realtime.core.contracts import BasicSource, FramePlan, FrameSink, FrameSource, PreparingAnalyser
from realtime.core.errors import SinkError
from realtime.core.events import EngineEvent
from realtime.core.failures import OncePerReason, as_failure, output_failure, source_failure
from realtime.core.frames import VideoFrame, conform_picture, fit_processing_size
from realtime.core.metrics import Metrics, StatsSnapshot
from realtime.core.overlay import draw_disclosure_label
from realtime.core.pipes import Job, Pipes, permits
from realtime.core.reload import analysis_differs, for_loaded_models, load_wanted
from realtime.core.settings import Provider, Settings
from realtime.core.source_base import complete_source
from realtime.core.stage_set import StageFactory, StageSet, passthrough_stages
from realtime.core.swap_call import swap_frame
from realtime.core.version import facecast_version
from realtime.core.watermark.embed import Watermarker
from realtime.core.watermark.payload import Payload

# Where the rest of the code imports them from.
__all__ = [
    "Engine",
]

log = logging.getLogger(__name__)

POLL_S = 0.05  # how often blocked threads re-check the stop flag
REPEAT_REPORT_S = 10.0  # a per-frame failure with the same reason is reported again after this
WATERMARK_OFF = (
    "The invisible watermark is off (watermark.enabled = false): this run's frames carry no "
    "machine-readable mark that they were modified by AI. Where the law asks for one (the EU AI Act, "
    "Art. 50), turn it back on."
)


class Engine:
    """Runs one source into one sink. Public API used by the CLI, the GUI and the benchmark."""

    def __init__(
        self,
        source: BasicSource,
        sink: FrameSink,
        settings: Settings,
        stage_factory: StageFactory = passthrough_stages,
        *,
        metrics: Metrics | None = None,
        on_event: Callable[[EngineEvent], None] | None = None,
        load_in_background: bool = False,
        run_id: str | None = None,
    ) -> None:
        self._source: FrameSource = complete_source(source)
        # What every output frame's invisible mark says; run_id (8 hex digits) is the one a
        # recording's C2PA manifest names too (a new one when not given).
        self.mark = Payload.for_run(facecast_version(), run_id)
        self._marker = Watermarker(self.mark)
        self._sink = sink
        self._settings = settings.validate()
        self._factory = stage_factory
        self.metrics = metrics or Metrics()
        self._on_event = on_event
        self._background = load_in_background
        self._stop = threading.Event()
        self._finished = threading.Event()
        self._live = False  # the source's is_live, read once it is open
        self._pipes = Pipes(lambda: permits(self._settings, self._live))
        self._stages: StageSet | None = None
        # The settings the running stages were built with (None: passthrough, built for nothing).
        self._built_with: Settings | None = None
        self._pending_stages: tuple[StageSet, Settings] | None = None
        self._load_request: Settings | None = None  # the newest reload asked for, not yet started
        self._loader_running = False
        self._loader_thread: threading.Thread | None = None
        self._loading: Settings | None = None  # what the loader is building now
        self._failed: tuple[Settings, float] | None = None  # the last load that failed, and when
        self.load_retry_s = 5.0  # a failed model choice is tried again only after this long
        self._frame_settings_cache: tuple[Settings, Settings | None, Provider | None, Settings] | None = None
        self._auto_provider: Provider | None = None  # what "auto" runs on, as the stage sets say
        self._threads: list[threading.Thread] = []
        self._io_threads: tuple[threading.Thread, ...] = ()  # capture and sink (see finish_output)
        self._preview: list[Callable[[VideoFrame], None]] = []
        self.error: FaceCastError | None = None
        self._sink_failed = False  # the sink raised a SinkError: abort it, not finalise it
        self._lock = threading.Lock()
        self._reported = OncePerReason(REPEAT_REPORT_S)  # per-frame failures already told
        # Who releases the source and the sink (see _close): guarded by _io_lock.
        self._io_lock = threading.Lock()
        self._capture_running = False
        self._sink_running = False
        self._closing = False

    # ---- public API ----------------------------------------------------------------------------

    @property
    def settings(self) -> Settings:
        return self._settings

    @property
    def stages_label(self) -> str:
        stages = self._stages
        return stages.label if stages else "loading"

    def start(self) -> None:
        """Open the source and sink, load models (or start in passthrough), start the threads."""
        # A camera looking for itself after an unplug says so while it looks, not only when it
        # gives up.
        self._source.notify = self._source_news
        self._source.open()
        self._live = self._source.is_live
        try:
            w, h = self._source.size
            # A frame enhancer that upscales makes every output frame that many times larger.
            k = self._settings.frame_enhancer.output_scale
            self._sink.open(w * k, h * k, self._source.fps)
        except BaseException:
            self._source.close()
            raise
        if self._background:
            self._stages = passthrough_stages(self._settings)
            self._built_with = None
            self._load_async(self._settings)
        else:
            try:
                self._stages = self._factory(self._settings)
                self._built_with = self._settings
                self._learn_auto(self._stages)
            except BaseException:
                self._source.close()
                self._sink.abort()
                raise
        with self._io_lock:
            self._capture_running = self._sink_running = True
            self._closing = False
        self._io_threads = (
            threading.Thread(target=self._guard(self._capture_loop), name="capture", daemon=True),
            threading.Thread(target=self._guard(self._sink_loop), name="sink", daemon=True),
        )
        self._threads = [
            self._io_threads[0],
            threading.Thread(target=self._guard(self._analyse_loop), name="analyse", daemon=True),
            self._io_threads[1],
        ]
        for i in range(self._settings.pipeline.frames_in_flight):
            self._threads.append(
                threading.Thread(target=self._guard(self._worker_loop, i), name=f"swap-{i}", daemon=True)
            )
        for t in self._threads:
            t.start()
        self._emit(EngineEvent("started", self.stages_label))
        if not self._settings.watermark.enabled:
            self._emit(EngineEvent("warning", WATERMARK_OFF))

    def _source_news(self, level: str, message: str) -> None:
        self._emit(EngineEvent("info" if level == "info" else "warning", message))

    def stop(self, timeout: float = 1.0) -> None:
        """Stop now (frames in flight are discarded), finalise the sink, release the devices."""
        self._stop.set()
        # A capture thread waiting in the source (a camera looking for itself, a paced frame)
        # stops waiting now, not after the join below has timed out.
        self._source.interrupt()
        with self._pipes.lock:
            self._pipes.wake_everyone()
        self._join(timeout)
        self._close()

    def ended(self, timeout: float | None = None) -> bool:
        """Whether the run has ended (input over, an error, or stop()), waiting up to `timeout` s.
        Unlike wait(), closes nothing: a caller that must not be interrupted while the output is
        finalised (the CLI under Ctrl+C) calls stop() itself afterwards."""
        return self._finished.wait(timeout)

    def finish_output(self, timeout: float) -> bool:
        """After stop(): wait up to `timeout` s for a sink call that outlived it (a slow disk) to
        return and finalise the output itself — a process exiting first loses the recording.
        True when it has (a camera stuck in its driver is not waited for)."""
        sink_thread = self._io_threads[1] if len(self._io_threads) > 1 else None
        if sink_thread is None:
            return True
        sink_thread.join(timeout)
        return not sink_thread.is_alive()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the source ends (or an error/stop); True when finished."""
        if not self._finished.wait(timeout):
            return False
        self._join(1.0)
        self._close()
        return True

    def update_settings(self, settings: Settings) -> None:
        """Apply at the next frame. Model/provider changes load in the background meanwhile."""
        settings = settings.validate()
        old = self._settings
        stopped = self._stop.is_set()
        if settings.pipeline.frames_in_flight != old.pipeline.frames_in_flight:
            # The number of worker threads is fixed for a run; keep it (it applies at the next Start).
            settings = settings.with_overrides({"pipeline.frames_in_flight": old.pipeline.frames_in_flight})
        self._settings = settings
        if old.watermark.enabled and not settings.watermark.enabled and not stopped:
            self._emit(EngineEvent("warning", WATERMARK_OFF))
        with self._lock:
            pending = self._pending_stages[1] if self._pending_stages is not None else None
            on_its_way = self._load_request or self._loading or pending
            built, failed, auto = self._built_with, self._failed, self._auto_provider
        if stopped:
            return  # the run is over: nothing to load for
        if load_wanted(settings, old, on_its_way, built, failed, time.monotonic(), self.load_retry_s, auto):
            self._load_async(settings)

    def subscribe_preview(self, callback: Callable[[VideoFrame], None]) -> None:
        """Called from the sink thread with each output frame; it must return quickly."""
        self._preview.append(callback)

    def stats(self) -> StatsSnapshot:
        return self.metrics.snapshot()

    @property
    def running(self) -> bool:
        return bool(self._threads) and not self._finished.is_set()

    # ---- model (re)loading ---------------------------------------------------------------------

    def _load_async(self, settings: Settings) -> None:
        """Load stages for `settings` on the one loader thread. Requests made while a load runs are
        coalesced to the newest: loads never overlap (each costs every model's memory), and an
        older load cannot finish last and win."""
        running = self._built_with is not None
        self._emit(
            EngineEvent(
                "models_loading",
                "loading models; the current ones keep working meanwhile"
                if running
                else "loading models; frames pass through meanwhile",
            )
        )
        with self._lock:
            self._load_request = settings
            if self._loader_running:
                return
            self._loader_running = True
            self._loader_thread = threading.Thread(target=self._loader, name="model-loader", daemon=True)
            self._loader_thread.start()

    def loads_finished(self, timeout: float) -> bool:
        """After stop(): wait up to `timeout` s for a model load still inside ONNX Runtime (it cannot
        be interrupted) to return. A process that exits under a running load dies in native code
        ('terminate called without an active exception')."""
        thread = self._loader_thread
        if thread is None:
            return True
        thread.join(timeout)
        return not thread.is_alive()

    def _loader(self) -> None:
        while True:
            with self._lock:
                settings, self._load_request = self._load_request, None
                self._loading = settings
                if settings is None or self._stop.is_set():
                    self._loader_running = False
                    return
            try:
                stages = self._factory(settings)
            except Exception as exc:
                with self._lock:
                    self._loading = None
                    superseded = self._load_request is not None
                if self._stop.is_set() or superseded:
                    continue  # a newer choice replaces this one: its failure is no news
                with self._lock:
                    self._failed = (settings, time.monotonic())
                if not isinstance(exc, FaceCastError):
                    log.exception("model load failed")
                err = (
                    exc if isinstance(exc, FaceCastError) else FaceCastError(f"Loading models failed: {exc}")
                )
                self._emit(EngineEvent("error", err.user_message(), err))
                continue
            with self._lock:
                self._loading = None
                self._failed = None
                self._learn_auto(stages)
                if self._load_request is not None or self._stop.is_set():
                    continue  # a newer request replaces this load (or the run ended): drop it
                self._pending_stages = (stages, settings)
            self._emit(EngineEvent("models_ready", stages.label))

    def _stages_and_settings(self) -> tuple[StageSet, Settings]:
        """The stage set for the next frame and the settings to hand it, taken together: read apart,
        a reload swapping in between could give a worker another model set's fields, which it would
        then load inline on the frame path (a freeze)."""
        with self._lock:
            stages = self._swap_in_pending()
            return stages, self._frame_settings()

    def _swap_in_pending(self) -> StageSet:
        """(Under self._lock.) A finished reload becomes the running stage set."""
        if self._pending_stages is not None:
            stages, built = self._pending_stages
            old, old_built, auto = self._stages, self._built_with, self._auto_provider
            if old is not None and old_built is not None and not analysis_differs(old_built, built, auto):
                # Only worker models changed (swapper, enhancer, masks): keep the running analyser
                # and its tracks. A new one would restart every face at weight 0 (the swap blinks)
                # and choose the target again (in "largest" mode, possibly another person).
                stages = replace(stages, analyser=old.analyser)
            self._stages, self._built_with = stages, built
            self._pending_stages = None
        assert self._stages is not None
        return self._stages

    def _frame_settings(self) -> Settings:
        """The settings for the running stages this frame: the newest, but with the model fields
        they were built for (see for_loaded_models). Cached: the same object while nothing changes,
        which is what lets stages spot a change by identity."""
        latest, built, auto = self._settings, self._built_with, self._auto_provider
        cached = self._frame_settings_cache
        if cached is not None and cached[0] is latest and cached[1] is built and cached[2] == auto:
            return cached[3]
        result = latest if built is None else for_loaded_models(latest, built, auto)
        self._frame_settings_cache = (latest, built, auto, result)
        return result

    def _learn_auto(self, stages: StageSet) -> None:
        """(Under self._lock, or before the threads start.) What "auto" runs on, from a new stage set."""
        if stages.auto_provider is not None:
            self._auto_provider = stages.auto_provider

    # ---- threads ---------------------------------------------------------------------------------

    def _guard(self, fn: Callable[..., None], *args: object) -> Callable[[], None]:
        def run() -> None:
            try:
                fn(*args)
            except Exception as exc:
                self._fail(as_failure(exc))

        return run

    def _fail(self, exc: FaceCastError) -> None:
        self._note_failure(exc)
        self._finished.set()
        self._emit(EngineEvent("error", exc.user_message(), exc))

    def _note_failure(self, exc: FaceCastError) -> None:
        """Record why the run ends and stop it (before anyone can see it ended: a run seen over with
        no error yet reads as "the input ended"). Telling comes after: a listener that raises must
        not leave the run hanging."""
        if self.error is None:
            self.error = exc
        self.metrics.error()
        self._stop.set()
        with self._pipes.lock:
            self._pipes.wake_everyone()

    def _capture_loop(self) -> None:
        pipes = self._pipes
        live = self._source.is_live
        try:
            while not self._stop.is_set():
                try:
                    frame = self._source.read()
                    if frame is not None:
                        frame = conform_picture(frame)  # a custom source's grey, BGRA, 16-bit or view
                except Exception as exc:
                    if self._stop.is_set():
                        break  # stopped meanwhile: a failure after "finished" is no news to anyone
                    # A camera that vanished: report it, then finish cleanly with what we have.
                    failure = exc if isinstance(exc, FaceCastError) else source_failure(exc)
                    if self.error is None:
                        self.error = failure
                    self.metrics.error()
                    self._emit(EngineEvent("error", failure.user_message(), failure))
                    break
                if frame is None:
                    break
                # Here, on the capture thread, so the shrink overlaps the face stages' work.
                frame = fit_processing_size(frame, self._settings.pipeline.processing_size)
                self._prepare(frame)
                self.metrics.frame_in(frame.capture_ts)
                with pipes.lock:
                    if live:
                        if pipes.slot.offer(frame) is not None:
                            self.metrics.frame_dropped()
                    else:
                        while pipes.slot.full and not self._stop.is_set():
                            pipes.capture_wake.wait(POLL_S)
                        if self._stop.is_set():
                            break
                        pipes.slot.put(frame)
                    pipes.analyser_wake.notify()
        finally:
            with pipes.lock:
                pipes.source_done = True
                pipes.analyser_wake.notify()
            self._io_thread_done("capture")

    def _analyse_loop(self) -> None:
        pipes = self._pipes
        live = self._source.is_live
        while not self._stop.is_set():
            with pipes.lock:
                while not self._stop.is_set():
                    if pipes.slot.full and pipes.permits.try_acquire():
                        break
                    if not pipes.slot.full and pipes.source_done:
                        pipes.analysed_all = True
                        pipes.wake_everyone()
                        return
                    pipes.analyser_wake.wait(POLL_S)
                if self._stop.is_set():
                    return
                behind_before = pipes.slot.dropped
                frame = pipes.slot.take()
                assert frame is not None
                if pipes.slot.dropped != behind_before:
                    self.metrics.frame_dropped()  # the analyser was behind: the older one went
                seq = pipes.next_seq
                pipes.next_seq += 1
                pipes.capture_wake.notify()
            stages, settings = self._stages_and_settings()
            try:
                analyser = stages.analyser
                if frame.prepared is not None and isinstance(analyser, PreparingAnalyser):
                    plan = analyser.analyse(
                        frame.image, self._timeline(frame, live), settings, prepared=frame.prepared
                    )
                else:
                    plan = analyser.analyse(frame.image, self._timeline(frame, live), settings)
            except Exception as exc:
                # A bad frame (or a model that rejects this input) must not end the stream:
                # the frame passes through unswapped and the user is told why.
                self._frame_failed("face analysis", frame.index, exc)
                plan = FramePlan()
            self.metrics.stages(plan.timings.items())
            self.metrics.fallbacks(plan.fallbacks())
            with pipes.lock:
                pipes.jobs.append(Job(seq, frame, plan))
                pipes.worker_wake.notify()

    def _prepare(self, frame: VideoFrame) -> None:
        """(Capture thread.) Let the analyser do its stateless per-picture work here, off the
        analysis thread, the pipeline's one serial stage: the flow's shrink of a frame this thread
        just wrote costs a third as much here as on the analysis thread, which reads the frame from
        another core's cache while the swaps run (docs/PERFORMANCE.md). GPU frames are left alone
        (their picture is downloaded where it is first needed)."""
        if frame.device_picture is not None:
            return
        with self._lock:
            stages = self._stages  # not swapped in here: the analysis thread does that
        analyser = stages.analyser if stages is not None else None
        if not isinstance(analyser, PreparingAnalyser):
            return
        try:
            frame.prepared = analyser.prepare(frame.image)
        except Exception:
            # The analysis makes it again from the frame, meets the same problem and reports it
            # for that frame; the capture goes on.
            log.debug("preparing frame %d for the analysis failed", frame.index, exc_info=True)

    def _timeline(self, frame: VideoFrame, live: bool) -> float:
        """The time the analysis (smoothing, fades) sees: when the picture was taken for live input,
        the video's own time for files. A file is read as fast as the machine goes, so wall-clock
        steps would make smoothing depend on the machine (6.5x the jitter at 5 fps)."""
        if live:
            return frame.capture_ts
        if frame.pts is not None:
            return frame.pts
        return frame.index / (self._source.fps or 30.0)

    def _worker_loop(self, index: int) -> None:
        pipes = self._pipes
        while not self._stop.is_set():
            with pipes.lock:
                while not pipes.jobs and not self._stop.is_set():
                    if pipes.analysed_all:
                        return
                    pipes.worker_wake.wait(POLL_S)
                if self._stop.is_set():
                    return
                job = pipes.jobs.popleft()
            stages, settings = self._stages_and_settings()
            workers = stages.workers
            worker = workers[index % len(workers)]
            t0 = time.perf_counter()
            try:
                timings = swap_frame(worker, job.frame, job.plan, settings, stages, self._marker)
                self.metrics.faces(len(job.plan.targets), job.plan.passthrough, job.plan.faces)
            except Exception as exc:
                self._frame_failed("face swap", job.frame.index, exc)
                timings = {}
            if stages.frame_stages:
                timings.update(self._finish_picture(stages, index, job.frame, settings))
            self.metrics.stages(timings.items())
            self.metrics.stage("worker", (time.perf_counter() - t0) * 1000.0)
            with pipes.lock:
                pipes.done.add(job.seq, job.frame)
                pipes.sink_wake.notify()

    def _finish_picture(
        self, stages: StageSet, index: int, frame: VideoFrame, settings: Settings
    ) -> dict[str, float]:
        """The worker's whole-picture stages (super-resolution) on its frame; a failure passes the
        picture on as the faces left it, and is told like a failed swap."""
        stage = stages.frame_stages[index % len(stages.frame_stages)]
        try:
            frame.image, timings = stage.process(frame.image, settings)
        except Exception as exc:
            self._frame_failed("frame enhancer", frame.index, exc)
            return {}
        return timings

    def _sink_loop(self) -> None:
        failure: FaceCastError | None = None
        try:
            self._send_frames()
        except Exception as exc:
            failure = as_failure(exc)
            # The output itself failed: it is discarded, whatever error ended the run first (an
            # input failing while its last frames were written out).
            self._sink_failed = isinstance(exc, SinkError)
            self._note_failure(failure)  # before _finished, so the error is there when the end is seen
        finally:
            self._io_thread_done("sink")  # before _finished: wait() then closes the sink itself
            self._finished.set()
        if failure is not None:
            self._emit(EngineEvent("error", failure.user_message(), failure))

    def _send_frames(self) -> None:
        pipes = self._pipes
        while not self._stop.is_set():
            with pipes.lock:
                while not pipes.done.ready and not self._stop.is_set():
                    if pipes.analysed_all and pipes.done.next_index >= pipes.next_seq:
                        return
                    pipes.sink_wake.wait(POLL_S)
                if self._stop.is_set():
                    return
                frame = pipes.done.pop_next()
                assert frame is not None
            t0 = time.perf_counter()
            settings = self._settings
            if settings.composite.disclosure_label:
                draw_disclosure_label(frame.image)
            if settings.watermark.enabled and not frame.marked:
                # Here, once, after the swap and the label and before every output alike (a GPU
                # worker's frames carry it already: realtime/core/swap_call.py).
                t_mark = time.perf_counter()
                self._marker.mark(frame.image)
                t1 = time.perf_counter()
                self.metrics.stage("watermark", (t1 - t_mark) * 1000.0)
                t0 += t1 - t_mark  # the sink's time is its own
            self._sink.send(frame)
            sent = time.perf_counter()
            self.metrics.stage("sink", (sent - t0) * 1000.0)
            self.metrics.frame_out(frame.capture_ts, sent)
            self._show_preview(frame)
            with pipes.lock:
                pipes.permits.release()
                pipes.analyser_wake.notify()

    def _show_preview(self, frame: VideoFrame) -> None:
        """Hand the frame to the preview callbacks. One that raises (a closed preview window) is
        dropped with a log entry: the virtual camera and the recording go on."""
        for callback in list(self._preview):
            try:
                callback(frame)
            except Exception:
                log.exception("a preview callback raised; it gets no more frames")
                self._preview.remove(callback)

    def _frame_failed(self, stage: str, index: int, exc: Exception) -> None:
        """Count a per-frame failure; say so once per distinct reason (not 30 times a second)."""
        self.metrics.error()
        text = exc.user_message() if isinstance(exc, FaceCastError) else f"{type(exc).__name__}: {exc}"
        message = f"{stage} failed, frames pass through unswapped: {text}"
        if not self._reported.first_in_a_while(message, time.monotonic()):
            return
        log.warning("%s (frame %d)", message, index, exc_info=not isinstance(exc, FaceCastError))
        self._emit(EngineEvent("warning", message))

    # ---- shutdown ------------------------------------------------------------------------------

    def _join(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for t in self._threads:
            t.join(max(deadline - time.monotonic(), 0.0))

    def _close(self) -> None:
        with self._lock:
            if not self._threads:
                return
            self._threads = []
        self._finished.set()
        # A capture or sink thread still inside read()/send() after the join (a camera stuck in its
        # driver, a slow disk) releases its own device when that call returns: closing it from here
        # under the running call can crash or leak the device.
        with self._io_lock:
            self._closing = True
            close_source, close_sink = not self._capture_running, not self._sink_running
        if not close_source:
            # Still inside read(): a source that can be told to stop waiting (a camera looking for
            # itself after an unplug, a paced file asleep until its next frame) stops now, instead
            # of reopening the device behind a run that has ended.
            self._source.interrupt()
        try:
            if close_source:
                self._source.close()
        finally:
            if close_sink:
                self._close_sink_reporting()
        self._emit(EngineEvent("finished", ""))

    def _close_sink_reporting(self) -> None:
        """Close the sink; a failure (a full disk at the file's end) becomes the run's error and is
        told like any other, instead of escaping stop() and leaving the run never "finished"."""
        try:
            self._close_sink()
        except Exception as exc:
            failure = exc if isinstance(exc, FaceCastError) else output_failure(self._sink.description, exc)
            if self.error is None:
                self.error = failure
            self._emit(EngineEvent("error", failure.user_message(), failure))

    def _close_sink(self) -> None:
        if self._sink_failed or isinstance(self.error, SinkError):
            self._sink.abort()  # the sink failed mid-write: leave nothing half-written
        else:
            self._sink.close()  # finalise: a camera that vanished still leaves a playable file

    def _io_thread_done(self, which: Literal["capture", "sink"]) -> None:
        """The capture or sink thread's last act: release its device if the engine closed meanwhile."""
        with self._io_lock:
            if which == "capture":
                self._capture_running = False
            else:
                self._sink_running = False
            late = self._closing
        if not late:
            return
        if which == "sink":
            self._close_sink_reporting()
            return
        try:
            self._source.close()
        except FaceCastError as exc:
            if self.error is None:
                self.error = exc
            self._emit(EngineEvent("error", exc.user_message(), exc))

    def _emit(self, event: EngineEvent) -> None:
        if self._on_event is None:
            return
        try:
            self._on_event(event)
        except Exception:
            # A listener's bug (a closed stderr pipe, a deleted Qt object) must not stop the video.
            log.exception("an engine event listener raised on %s", event.kind)
