"""The scheduler: order, bounded frames in flight, drops, stop latency, errors, live changes."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import numpy as np
import pytest

from models.errors import FaceCastError
from realtime.core.contracts import FramePlan, PassthroughAnalyser
from realtime.core.engine import Engine
from realtime.core.errors import SinkError, SourceError
from realtime.core.settings import Settings, SettingsError
from realtime.core.stage_set import StageSet, passthrough_stages
from tests.engine_fakes import FakeSource, RecordingSink, SlowWorker, index_of


def settings(in_flight: int = 2) -> Settings:
    return Settings().with_overrides({"pipeline.frames_in_flight": in_flight})


def slow_stages(worker: SlowWorker):  # type: ignore[no-untyped-def]
    def factory(s: Settings) -> StageSet:
        # The same worker object for every slot so concurrency is counted across threads.
        return StageSet(
            PassthroughAnalyser(), tuple(worker for _ in range(s.pipeline.frames_in_flight)), "slow"
        )

    return factory


def test_every_frame_of_a_file_arrives_in_order_even_when_workers_finish_out_of_order() -> None:
    worker = SlowWorker(delays={0: 0.02, 1: 0.0, 2: 0.01, 3: 0.0})
    source, sink = FakeSource(frames=60), RecordingSink()
    engine = Engine(source, sink, settings(3), slow_stages(worker))
    engine.start()
    assert engine.wait(20)
    assert sink.indices == list(range(60))
    assert sink.closed and not sink.aborted and source.closed
    assert 1 < worker.max_active[0] <= 3  # ran in parallel, never more than frames in flight
    assert engine.stats().frames_dropped == 0


def test_live_source_drops_stale_frames_and_bounds_frames_in_flight() -> None:
    worker = SlowWorker(base_delay_s=0.03)  # ~33 fps per worker vs a 200 fps camera
    source = FakeSource(frames=200, fps=200.0, is_live=True, pace=True)
    sink = RecordingSink()
    engine = Engine(source, sink, settings(2), slow_stages(worker))
    engine.start()
    assert engine.wait(20)
    stats = engine.stats()
    assert stats.frames_dropped > 50  # stale frames replaced at the source, never queued
    assert stats.frames_out + stats.frames_dropped == 200
    assert sink.indices == sorted(sink.indices)  # order kept
    assert worker.max_active[0] <= 2
    # Nothing queued behind: latency stays near the processing time, not growing with the run.
    assert stats.latency_ms.p99 < 500


def test_stop_returns_within_one_second_and_releases_devices() -> None:
    worker = SlowWorker(base_delay_s=0.05)
    source = FakeSource(frames=10_000, fps=30.0, is_live=True, pace=True)
    sink = RecordingSink(send_delay_s=0.03)
    engine = Engine(source, sink, settings(2), slow_stages(worker))
    engine.start()
    time.sleep(0.3)
    t0 = time.perf_counter()
    engine.stop()
    assert time.perf_counter() - t0 < 1.0
    assert source.closed and sink.closed


def test_repeated_start_stop_leaks_no_threads() -> None:
    baseline = threading.active_count()
    for _ in range(15):
        engine = Engine(
            FakeSource(frames=10_000, is_live=True, pace=True, fps=500), RecordingSink(), settings(2)
        )
        engine.start()
        time.sleep(0.02)
        engine.stop()
    time.sleep(0.2)
    assert threading.active_count() <= baseline + 1


def test_camera_vanishing_mid_run_finalises_the_output_and_reports_why() -> None:
    events = []
    source, sink = FakeSource(frames=100, fail_after=12), RecordingSink()
    engine = Engine(source, sink, settings(2), on_event=events.append)
    engine.start()
    assert engine.wait(10)
    assert sink.indices == list(range(12))  # everything captured before the loss is kept
    assert sink.closed and not sink.aborted  # finalised, not discarded
    assert isinstance(engine.error, SourceError)
    assert any(e.kind == "error" and "disconnected" in e.message for e in events)


def test_finish_output_waits_for_a_write_that_outlived_stop_and_its_late_close() -> None:
    """Ctrl+C during a slow write: stop() returns in 1 s, before the sink thread has finalised the
    recording; finish_output() lets the CLI wait until it has."""
    source, sink = FakeSource(frames=100), RecordingSink(send_delay_s=2.5)
    engine = Engine(source, sink, settings(1))
    engine.start()
    time.sleep(0.3)  # the first send is under way
    t0 = time.monotonic()
    engine.stop()
    assert time.monotonic() - t0 < 1.5 and not sink.closed  # stop() keeps its promise of 1 s
    assert engine.finish_output(5.0)
    assert sink.closed and not sink.aborted  # finalised by the sink thread itself


def test_sink_failure_stops_the_run_and_discards_the_partial_output() -> None:
    source, sink = FakeSource(frames=100), RecordingSink(fail_at=5)
    engine = Engine(source, sink, settings(2))
    engine.start()
    assert engine.wait(10)
    assert isinstance(engine.error, SinkError)
    assert sink.aborted and not sink.closed


def test_failing_frame_passes_through_and_the_stream_continues() -> None:
    class Flaky:
        def apply(self, image, plan, s):  # type: ignore[no-untyped-def]
            if index_of(image) == 3:
                raise RuntimeError("boom")
            return {}

    def factory(s: Settings) -> StageSet:
        return StageSet(PassthroughAnalyser(), (Flaky(), Flaky()), "flaky")

    sink = RecordingSink()
    engine = Engine(FakeSource(frames=10), sink, settings(2), factory)
    engine.start()
    assert engine.wait(10)
    assert sink.indices == list(range(10))
    assert engine.stats().errors == 1 and engine.error is None


def test_model_reload_happens_in_the_background_while_frames_keep_flowing() -> None:
    loaded = threading.Event()
    events = []

    def slow_factory(s: Settings) -> StageSet:
        time.sleep(0.5)  # a model load
        loaded.set()
        return StageSet(PassthroughAnalyser(), (SlowWorker(), SlowWorker()), f"loaded {s.swap.model}")

    sink = RecordingSink()
    source = FakeSource(frames=10_000, fps=100.0, is_live=True, pace=True)
    engine = Engine(source, sink, settings(2), slow_factory, load_in_background=True, on_event=events.append)
    engine.start()
    time.sleep(0.2)
    assert engine.stages_label == "passthrough"  # shown as such while loading
    flowing_before = len(sink.indices)
    assert flowing_before > 0
    assert loaded.wait(3)
    time.sleep(0.1)
    assert engine.stages_label == "loaded inswapper_128"
    engine.update_settings(engine.settings.with_overrides({"swap.model": "inswapper_128_fp16"}))
    time.sleep(0.2)
    assert engine.stages_label == "loaded inswapper_128"  # old models keep working during the reload
    time.sleep(0.6)
    assert engine.stages_label == "loaded inswapper_128_fp16"
    engine.stop()
    assert [e.kind for e in events].count("models_ready") == 2


def test_cheap_settings_change_applies_at_the_next_frame() -> None:
    seen = []

    class Recorder:
        def analyse(self, image, ts, s):  # type: ignore[no-untyped-def]
            seen.append(s.detector.interval)
            from realtime.core.contracts import FramePlan

            return FramePlan()

    def factory(s: Settings) -> StageSet:
        return StageSet(Recorder(), passthrough_stages(s).workers, "rec")

    source = FakeSource(frames=10_000, fps=200.0, is_live=True, pace=True)
    engine = Engine(source, RecordingSink(), settings(1), factory)
    engine.start()
    time.sleep(0.1)
    engine.update_settings(engine.settings.with_overrides({"detector.interval": 7}))
    time.sleep(0.1)
    engine.stop()
    assert seen[0] != 7 and seen[-1] == 7


@pytest.mark.parametrize("in_flight", [1, 2, 4])
def test_output_count_equals_input_for_files_at_any_depth(in_flight: int) -> None:
    sink = RecordingSink()
    engine = Engine(FakeSource(frames=37), sink, settings(in_flight))
    engine.start()
    assert engine.wait(10)
    assert sink.indices == list(range(37))


def test_disclosure_label_marks_every_output_frame_when_on() -> None:
    from tests.engine_fakes import FakeSource

    frames: list = []

    class Keep(RecordingSink):
        def send(self, frame):  # type: ignore[no-untyped-def]
            frames.append(frame.image.copy())
            super().send(frame)

    on = Settings().with_overrides({"composite.disclosure_label": True})
    engine = Engine(FakeSource(frames=5, size=(640, 360)), Keep(), on)
    engine.start()
    assert engine.wait(10)
    corner = np.stack([f[-40:, -200:] for f in frames])
    assert all((c.max(axis=-1) > 200).sum() > 40 for c in corner)  # white text in every frame
    frames.clear()
    engine = Engine(FakeSource(frames=5, size=(640, 360)), Keep(), Settings())
    engine.start()
    assert engine.wait(10)
    assert not (np.stack([f[-40:, -200:] for f in frames]) > 200).any()


def test_a_model_that_rejects_every_frame_passes_frames_through_and_says_so_once() -> None:
    from models.errors import ModelContractError

    class Rejecting:
        def analyse(self, image, ts, s):  # type: ignore[no-untyped-def]
            raise ModelContractError("det_10g.onnx takes 640x640 input only.")

    def factory(s: Settings) -> StageSet:
        return StageSet(Rejecting(), passthrough_stages(s).workers, "rejecting")

    events = []
    sink = RecordingSink()
    engine = Engine(FakeSource(frames=30), sink, settings(2), factory, on_event=events.append)
    engine.start()
    assert engine.wait(10)
    assert engine.error is None and sink.indices == list(range(30))  # the stream kept going
    warnings = [e for e in events if e.kind == "warning"]
    assert len(warnings) == 1 and "640x640" in warnings[0].message
    assert engine.stats().errors == 30


class InFlightProbe:
    """An analyser that records how many frames are between capture and sink when it starts one."""

    def __init__(self, sink: RecordingSink) -> None:
        self.sink = sink
        self.started = 0
        self.seen: list[int] = []

    def analyse(self, image, ts, s):  # type: ignore[no-untyped-def]
        from realtime.core.contracts import FramePlan

        self.started += 1
        self.seen.append(self.started - len(self.sink.indices))  # never more than truly in flight
        return FramePlan()


def run_probe(source: FakeSource, s: Settings) -> tuple[InFlightProbe, SlowWorker, RecordingSink]:
    sink = RecordingSink()
    probe, worker = InFlightProbe(sink), SlowWorker(base_delay_s=0.02)

    def factory(st: Settings) -> StageSet:
        return StageSet(probe, tuple(worker for _ in range(st.pipeline.frames_in_flight)), "probe")

    engine = Engine(source, sink, s, factory)
    engine.start()
    assert engine.wait(20)
    return probe, worker, sink


@pytest.mark.parametrize("read_ahead", [0, 2])
def test_files_analyse_up_to_read_ahead_frames_beyond_the_swaps(read_ahead: int) -> None:
    s = settings(2).with_overrides({"pipeline.read_ahead": read_ahead})
    probe, worker, sink = run_probe(FakeSource(frames=40), s)
    assert sink.indices == list(range(40))
    assert worker.max_active[0] <= 2  # still two swaps at once: one per worker
    # The analysis runs ahead while both workers are busy, but never further than allowed.
    assert max(probe.seen) == 2 + read_ahead


def test_live_sources_ignore_read_ahead_so_latency_stays_low() -> None:
    s = settings(2).with_overrides({"pipeline.read_ahead": 4})
    probe, worker, _sink = run_probe(FakeSource(frames=120, fps=200.0, is_live=True, pace=True), s)
    assert max(probe.seen) <= 2
    assert worker.max_active[0] <= 2


def test_read_ahead_is_validated() -> None:
    with pytest.raises(SettingsError, match=r"pipeline\.read_ahead"):
        settings(2).with_overrides({"pipeline.read_ahead": 9})


# ------------------------------------------------------------------ reloads, listeners, late closes


def test_overlapping_reloads_end_with_the_newest_settings_loaded() -> None:
    """A slow load asked first must not finish last and win; requests coalesce to the newest."""
    loads: list[str] = []

    def factory(s: Settings) -> StageSet:
        loads.append(s.swap.model)
        time.sleep(0.4 if s.swap.model == "inswapper_128_fp16" else 0.05)
        return StageSet(PassthroughAnalyser(), (SlowWorker(), SlowWorker()), f"loaded {s.swap.model}")

    source = FakeSource(frames=10_000, fps=100.0, is_live=True, pace=True)
    engine = Engine(source, RecordingSink(), settings(2), factory)
    engine.start()
    engine.update_settings(engine.settings.with_overrides({"swap.model": "inswapper_128_fp16"}))  # slow
    time.sleep(0.05)
    for _ in range(3):  # back, and forth, and back while the slow one loads
        engine.update_settings(engine.settings.with_overrides({"swap.model": "inswapper_128_fp16"}))
        engine.update_settings(engine.settings.with_overrides({"swap.model": "inswapper_128"}))
    time.sleep(1.2)
    label = engine.stages_label
    engine.stop()
    assert engine.settings.swap.model == "inswapper_128"
    assert label == "loaded inswapper_128"
    assert len(loads) <= 3  # the start, the slow one, and one load for all the requests after it


def test_a_threshold_or_frames_in_flight_change_does_not_reload_the_models() -> None:
    loads: list[Settings] = []
    seen: list[float] = []

    class Recorder:
        def analyse(self, image, ts, s):  # type: ignore[no-untyped-def]
            seen.append(s.detector.threshold)
            from realtime.core.contracts import FramePlan

            return FramePlan()

    def factory(s: Settings) -> StageSet:
        loads.append(s)
        return StageSet(Recorder(), passthrough_stages(s).workers, "rec")

    source = FakeSource(frames=10_000, fps=200.0, is_live=True, pace=True)
    engine = Engine(source, RecordingSink(), settings(2), factory)
    engine.start()
    engine.update_settings(engine.settings.with_overrides({"detector.threshold": 0.7}))
    engine.update_settings(engine.settings.with_overrides({"pipeline.frames_in_flight": 4}))
    time.sleep(0.2)
    engine.stop()
    assert len(loads) == 1  # tracks survive: a reload would reset them (the swap blinks)
    assert seen[-1] == 0.7 and engine.settings.pipeline.frames_in_flight == 2


def test_running_stages_never_see_model_settings_they_were_not_built_for() -> None:
    """While the new enhancer loads, the old workers keep the model settings they were built for
    (handed the new one, each would load it inline and freeze the output); other changes apply."""
    seen: list[tuple[str, str, float]] = []

    class Worker:
        def __init__(self, label: str) -> None:
            self.label = label

        def apply(self, image, plan, s, *, device_picture=None):  # type: ignore[no-untyped-def]
            seen.append((self.label, s.enhancer.model, s.composite.opacity))
            return {}

    def factory(s: Settings) -> StageSet:
        if s.enhancer.model != "none":
            time.sleep(0.3)  # the restorer loads
        label = f"built for {s.enhancer.model}"
        return StageSet(PassthroughAnalyser(), (Worker(label), Worker(label)), label)

    source = FakeSource(frames=10_000, fps=200.0, is_live=True, pace=True)
    engine = Engine(source, RecordingSink(), settings(2), factory)
    engine.start()
    time.sleep(0.05)
    engine.update_settings(
        engine.settings.with_overrides({"enhancer.model": "gpen_256", "composite.opacity": 0.5})
    )
    time.sleep(0.6)
    engine.stop()
    assert all(f"built for {model}" == label for label, model, _ in seen)
    assert ("built for none", "none", 0.5) in seen  # the cheap change applied at once all the same
    assert seen[-1][:2] == ("built for gpen_256", "gpen_256")


def test_a_listener_that_raises_does_not_hang_the_run() -> None:
    def listener(event: object) -> None:
        raise BrokenPipeError("stderr closed")  # e.g. the CLI printing into a closed pipe

    sink = RecordingSink(fail_at=5)  # the disk fills up: the run must end, and say why
    engine = Engine(FakeSource(frames=50), sink, settings(2), on_event=listener)
    engine.start()
    assert engine.wait(3)
    assert isinstance(engine.error, SinkError) and sink.aborted


def test_a_load_that_finishes_after_stop_says_nothing() -> None:
    events: list[str] = []

    def slow(s: Settings) -> StageSet:
        time.sleep(0.5)
        return passthrough_stages(s)

    source = FakeSource(frames=10_000, fps=100.0, is_live=True, pace=True)
    engine = Engine(source, RecordingSink(), settings(2), slow, load_in_background=True)
    engine._on_event = lambda e: events.append(e.kind)
    engine.start()
    time.sleep(0.1)
    engine.stop()
    time.sleep(0.7)
    assert "models_ready" not in events and events[-1] == "finished"


class StuckSource(FakeSource):
    """A camera whose read sticks in its driver for `stuck_s`; records a close during a read."""

    stuck_s: float = 1.5
    reading: bool = False
    closed_during_read: bool = False

    def read(self):  # type: ignore[no-untyped-def]
        if self._next >= 3:
            self.reading = True
            time.sleep(self.stuck_s)
            self.reading = False
        return super().read()

    def close(self) -> None:
        self.closed_during_read |= self.reading
        super().close()


def test_stop_leaves_a_stuck_source_to_its_own_thread_to_close() -> None:
    source = StuckSource(frames=10_000, is_live=True)
    engine = Engine(source, RecordingSink(), settings(2))
    engine.start()
    time.sleep(0.3)
    t0 = time.perf_counter()
    engine.stop()
    assert time.perf_counter() - t0 < 1.3  # stop still returns within about a second
    time.sleep(1.5)
    assert source.closed and not source.closed_during_read


def test_fps_falls_when_the_pipeline_freezes() -> None:
    from realtime.core.metrics import Metrics

    metrics = Metrics()
    for i in range(60):  # two seconds at 30 fps
        metrics.frame_in(100.0 + i / 30)
        metrics.frame_out(100.0 + i / 30, now=100.0 + i / 30 + 0.01)
    assert metrics.snapshot(now=102.0).fps_out == pytest.approx(30.0, rel=0.02)
    frozen = metrics.snapshot(now=106.0)  # then nothing for four seconds
    assert frozen.fps_in < 12.0 and frozen.fps_out < 12.0  # the status bar must not say 30


def test_files_are_analysed_on_their_own_timeline_not_the_wall_clock() -> None:
    """Smoothing steps by the time between frames: a file read as fast as the machine goes must not
    be smoothed differently on a fast and a slow machine."""
    seen: list[float] = []

    class Recorder:
        def analyse(self, image, ts, s):  # type: ignore[no-untyped-def]
            from realtime.core.contracts import FramePlan

            seen.append(ts)
            time.sleep(0.002)
            return FramePlan()

    def factory(s: Settings) -> StageSet:
        return StageSet(Recorder(), passthrough_stages(s).workers, "rec")

    engine = Engine(FakeSource(frames=20, fps=25.0), RecordingSink(), settings(2), factory)
    engine.start()
    assert engine.wait(10)
    assert seen == pytest.approx([i / 25.0 for i in range(20)])  # frames without pts: index / fps


def test_a_worker_model_reload_keeps_the_running_analyser_and_its_tracks() -> None:
    used: list[int] = []

    class Numbered:
        def __init__(self, number: int) -> None:
            self.number = number

        def analyse(self, image, ts, s):  # type: ignore[no-untyped-def]
            from realtime.core.contracts import FramePlan

            used.append(self.number)
            return FramePlan()

    made: list[int] = []

    def factory(s: Settings) -> StageSet:
        made.append(len(made))
        return StageSet(Numbered(made[-1]), passthrough_stages(s).workers, f"stages {made[-1]}")

    source = FakeSource(frames=10_000, fps=200.0, is_live=True, pace=True)
    engine = Engine(source, RecordingSink(), settings(2), factory)
    engine.start()
    time.sleep(0.1)
    engine.update_settings(engine.settings.with_overrides({"swap.model": "inswapper_128_fp16"}))
    time.sleep(0.3)
    assert engine.stages_label == "stages 1" and used[-1] == 0  # new workers, the same analyser
    engine.update_settings(engine.settings.with_overrides({"detector.model": "mtcnn"}))
    time.sleep(0.3)
    assert engine.stages_label == "stages 2" and used[-1] == 2  # a new detector: a new analysis
    engine.update_settings(engine.settings.with_overrides({"swap.recognizer": "dlib"}))
    time.sleep(0.3)
    engine.stop()
    assert engine.stages_label == "stages 3" and used[-1] == 3  # another recogniser: a new analysis


def test_a_detector_size_change_under_mtcnn_reloads_nothing() -> None:
    from realtime.core.reload import needs_reload

    mtcnn = Settings().with_overrides({"detector.model": "mtcnn"})
    assert not needs_reload(mtcnn, mtcnn.with_overrides({"detector.size": 320}))  # MTCNN has no size
    assert needs_reload(Settings(), Settings().with_overrides({"detector.size": 320}))  # SCRFD does
    assert needs_reload(
        mtcnn, mtcnn.with_overrides({"detector.size": 320, "swap.model": "inswapper_128_fp16"})
    )


def test_switching_between_auto_and_the_provider_it_picks_reloads_nothing() -> None:
    from realtime.core.reload import analysis_differs, needs_reload

    auto = Settings().with_overrides({"pipeline.provider": "auto"})
    cpu = Settings().with_overrides({"pipeline.provider": "cpu"})
    assert not needs_reload(auto, cpu, "cpu") and not needs_reload(cpu, auto, "cpu")
    assert not analysis_differs(auto, cpu, "cpu")
    cuda = Settings().with_overrides({"pipeline.provider": "cuda"})
    assert needs_reload(auto, cuda, "cpu") and analysis_differs(cuda, auto, "cpu")
    assert needs_reload(auto, cpu)  # not known what "auto" runs on: compared as written


def test_the_engine_learns_what_auto_runs_on_from_its_stage_sets() -> None:
    """The stage builder resolves "auto" (the engine imports nothing from the model runtime):
    switching to the provider it picked, and back, loads nothing."""
    made: list[str] = []

    def factory(s: Settings) -> StageSet:
        made.append(s.pipeline.provider)
        return StageSet(PassthroughAnalyser(), passthrough_stages(s).workers, "rec", auto_provider="cpu")

    source = FakeSource(frames=10_000, fps=200.0, is_live=True, pace=True)
    engine = Engine(
        source, RecordingSink(), Settings().with_overrides({"pipeline.provider": "auto"}), factory
    )
    engine.start()
    engine.update_settings(engine.settings.with_overrides({"pipeline.provider": "cpu"}))
    engine.update_settings(engine.settings.with_overrides({"pipeline.provider": "auto"}))
    time.sleep(0.1)
    assert made == ["auto"]
    engine.update_settings(engine.settings.with_overrides({"pipeline.provider": "cuda"}))
    deadline = time.monotonic() + 5
    while len(made) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    engine.stop()
    assert made == ["auto", "cuda"]


def test_the_core_imports_nothing_from_the_model_runtime() -> None:
    from pathlib import Path

    import realtime.core

    core = Path(realtime.core.__file__).parent
    importing = [p.name for p in sorted(core.glob("*.py")) if "import models.runtime" in p.read_text()
                 or "from models.runtime" in p.read_text()]  # fmt: skip
    assert importing == []


def test_stop_ends_a_camera_reconnect_instead_of_reopening_the_device_behind_the_run() -> None:
    """stop() during a reconnect returns at once, the capture thread stops reopening the camera
    (which would hold it against the next Start), and no error comes after 'finished'."""
    from realtime.io.camera_source import CameraSource
    from tests.fixtures_media import synthetic_frame

    opens: list[float] = []

    class DeadAfterTwo:
        reads = 0

        def isOpened(self) -> bool:
            return True

        def read(self) -> tuple[bool, object]:
            DeadAfterTwo.reads += 1
            return (True, synthetic_frame(0, (96, 64))) if DeadAfterTwo.reads <= 2 else (False, None)

        def set(self, prop: int, value: float) -> bool:
            return True

        def get(self, prop: int) -> float:
            return 30.0

        def release(self) -> None:
            return None

    def factory(*_args: object) -> DeadAfterTwo:
        opens.append(time.monotonic())
        return DeadAfterTwo()

    events: list[tuple[str, str]] = []
    source = CameraSource(0, capture_factory=factory, reconnect_s=30.0, retry_delay_s=0.1, first_frame_s=0.05)
    engine = Engine(
        source, RecordingSink(), Settings(), on_event=lambda e: events.append((e.kind, e.message))
    )
    engine.start()
    deadline = time.monotonic() + 5
    while not any("looking for it" in m for _, m in events) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert any(k == "warning" and "looking for it" in m for k, m in events)  # said while it looks
    t0 = time.monotonic()
    engine.stop()
    stopped = time.monotonic()
    assert stopped - t0 < 0.5  # the reconnect wait ends at once, not after stop's 1 s join
    time.sleep(0.6)
    assert [t for t in opens if t > stopped + 0.05] == []  # no reopening after stop()
    kinds = [k for k, _ in events]
    assert "error" not in kinds[kinds.index("finished") :]


def test_a_model_load_running_at_stop_can_be_waited_for_before_the_process_exits() -> None:
    """stop() does not wait for a running model load, but loads_finished() lets the process wait
    for it: exiting under ONNX Runtime's running load dies in native code ('terminate called
    without an active exception')."""
    loading = threading.Event()

    def slow(s: Settings) -> StageSet:
        loading.set()
        time.sleep(0.6)
        return passthrough_stages(s)

    source = FakeSource(frames=10_000, fps=100.0, is_live=True, pace=True)
    engine = Engine(source, RecordingSink(), settings(2), slow, load_in_background=True)
    engine.start()
    assert loading.wait(2)
    t0 = time.monotonic()
    engine.stop()
    assert time.monotonic() - t0 < 0.5  # stop itself does not wait for the load
    assert not engine.loads_finished(0.0)
    assert engine.loads_finished(3.0)


def _wait_for(predicate, timeout: float = 3.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.02)
    return bool(predicate())


def enhancer_factory(available: set[str], load_s: float = 0.0) -> Callable[[Settings], StageSet]:
    """Stages labelled by their enhancer; one not in `available` (read at each load) fails to load
    as a model not downloaded yet. A real enhancer takes `load_s` to load."""

    def factory(s: Settings) -> StageSet:
        if s.enhancer.model not in available:
            raise FaceCastError(f"{s.enhancer.model} is not downloaded.")
        if s.enhancer.model != "none":
            time.sleep(load_s)
        return StageSet(PassthroughAnalyser(), (SlowWorker(), SlowWorker()), f"enhancer={s.enhancer.model}")

    return factory


def test_choosing_again_a_model_whose_load_failed_tries_it_again() -> None:
    """Choosing a model whose load failed again loads it (the engine compares with what runs, not
    with the last request), but slider moves right after the failure do not retry it."""
    available: set[str] = {"none"}
    events: list[tuple[str, str]] = []
    factory = enhancer_factory(available)
    source = FakeSource(frames=10_000, fps=100.0, is_live=True, pace=True)
    engine = Engine(source, RecordingSink(), settings(2), factory, load_in_background=True)
    engine._on_event = lambda e: events.append((e.kind, e.message))
    engine.load_retry_s = 0.5
    engine.start()
    try:
        assert _wait_for(lambda: engine.stages_label == "enhancer=none")
        wanted = engine.settings.with_overrides({"enhancer.model": "gpen_256"})
        engine.update_settings(wanted)
        assert _wait_for(lambda: any(k == "error" for k, _ in events))
        # Slider moves right after the failure do not retry it (each would report an error).
        for opacity in (0.95, 0.9, 0.85):
            engine.update_settings(wanted.with_overrides({"composite.opacity": opacity}))
        time.sleep(0.2)
        assert sum(k == "error" for k, _ in events) == 1
        # Switching back to the model that runs, right after the failure, reloads nothing.
        loads = len([k for k, _ in events if k == "models_loading"])
        engine.update_settings(wanted.with_overrides({"enhancer.model": "none"}))
        time.sleep(0.2)
        assert len([k for k, _ in events if k == "models_loading"]) == loads
        available.add("gpen_256")  # the user downloads it and picks it again, a while later
        time.sleep(0.5)
        engine.update_settings(wanted.with_overrides({"composite.opacity": 0.8}))
        assert _wait_for(lambda: engine.stages_label == "enhancer=gpen_256")
    finally:
        engine.stop()


def test_a_model_that_failed_to_load_at_start_is_tried_again_when_chosen_again() -> None:
    """The first load of a run fails (the enhancer is not downloaded yet): the run goes on in
    passthrough. Once the user has it and picks it again, it loads, although nothing runs to compare
    with and the choice looks unchanged."""
    available: set[str] = {"none"}
    events: list[tuple[str, str]] = []
    factory = enhancer_factory(available)
    source = FakeSource(frames=10_000, fps=100.0, is_live=True, pace=True)
    wanted = settings(2).with_overrides({"enhancer.model": "gpen_256"})
    engine = Engine(source, RecordingSink(), wanted, factory, load_in_background=True)
    engine._on_event = lambda e: events.append((e.kind, e.message))
    engine.load_retry_s = 0.5
    engine.start()
    try:
        assert _wait_for(lambda: any(k == "error" for k, _ in events))
        engine.update_settings(wanted.with_overrides({"composite.opacity": 0.9}))  # right after: no retry
        time.sleep(0.2)
        assert sum(k == "error" for k, _ in events) == 1
        available.add("gpen_256")
        time.sleep(0.5)
        engine.update_settings(wanted)
        assert _wait_for(lambda: engine.stages_label == "enhancer=gpen_256")
    finally:
        engine.stop()


def test_going_back_to_a_failed_model_while_another_loads_is_not_ignored() -> None:
    """Model F fails; the user picks G (loading) and then F again at once (it has just been
    downloaded). F loads: going back to it is a choice, not a slider move, so G does not run
    while the settings, and the window, name F."""
    available: set[str] = {"none", "gfpgan_1.4"}
    factory = enhancer_factory(available, load_s=0.3)
    base = settings(2)
    failed, other = (base.with_overrides({"enhancer.model": m}) for m in ("gpen_256", "gfpgan_1.4"))
    engine = Engine(
        FakeSource(frames=10_000, fps=100.0, is_live=True, pace=True), RecordingSink(), base, factory
    )
    engine.start()
    try:
        engine.update_settings(failed)
        assert _wait_for(lambda: engine._failed is not None)
        available.add("gpen_256")
        engine.update_settings(other)
        time.sleep(0.05)
        engine.update_settings(failed)
        assert _wait_for(lambda: engine.stages_label == "enhancer=gpen_256")
    finally:
        engine.stop()


def test_a_settings_change_after_stop_loads_nothing() -> None:
    """After a failed first load, a change made once the run has stopped neither says "loading
    models" nor starts a loader thread."""
    events: list[str] = []

    def factory(s: Settings) -> StageSet:
        raise FaceCastError(f"{s.enhancer.model} is not downloaded.")

    source = FakeSource(frames=10_000, fps=100.0, is_live=True, pace=True)
    engine = Engine(source, RecordingSink(), settings(2), factory, load_in_background=True)
    engine._on_event = lambda e: events.append(e.kind)
    engine.start()
    assert _wait_for(lambda: engine._failed is not None)
    engine.stop()
    del events[:]
    engine.update_settings(settings(2).with_overrides({"enhancer.model": "gpen_256"}))
    time.sleep(0.1)
    assert "models_loading" not in events


def test_a_load_replaced_by_a_newer_choice_does_not_report_its_failure() -> None:
    events: list[tuple[str, str]] = []

    def factory(s: Settings) -> StageSet:
        time.sleep(0.2)
        if s.enhancer.model == "gfpgan_1.4":
            raise FaceCastError("gfpgan_1.4 is not downloaded.")
        return StageSet(PassthroughAnalyser(), (SlowWorker(), SlowWorker()), f"enhancer={s.enhancer.model}")

    source = FakeSource(frames=10_000, fps=100.0, is_live=True, pace=True)
    engine = Engine(source, RecordingSink(), settings(2), factory, load_in_background=True)
    engine._on_event = lambda e: events.append((e.kind, e.message))
    engine.start()
    try:
        assert _wait_for(lambda: engine.stages_label == "enhancer=none")
        engine.update_settings(engine.settings.with_overrides({"enhancer.model": "gfpgan_1.4"}))
        time.sleep(0.05)
        engine.update_settings(engine.settings.with_overrides({"enhancer.model": "gpen_256"}))
        assert _wait_for(lambda: engine.stages_label == "enhancer=gpen_256")
        assert not any(k == "error" for k, _ in events)
        # While models run, a reload does not claim that frames pass through unswapped.
        reloads = [m for k, m in events if k == "models_loading"][1:]
        assert reloads and all("keep working" in m for m in reloads)
    finally:
        engine.stop()


class _PreparingAnalyser:
    """Records which thread prepared each picture and what analyse() was handed."""

    def __init__(self, fail_on: int = -1) -> None:
        self.fail_on = fail_on
        self.prepared_on: list[str] = []
        self.received: list[object | None] = []

    def prepare(self, image: np.ndarray) -> object | None:
        self.prepared_on.append(threading.current_thread().name)
        if index_of(image) == self.fail_on:
            raise RuntimeError("cannot prepare this one")
        return ("prepared", index_of(image))

    def analyse(self, image, ts, s, *, prepared=None):  # type: ignore[no-untyped-def]
        self.received.append(prepared)
        return FramePlan()


def test_the_capture_thread_prepares_each_picture_for_the_analysis() -> None:
    """The analysis is the pipeline's one serial stage: per-picture work that needs no state (the
    flow's shrink) is done on the capture thread and travels with the frame."""
    analyser = _PreparingAnalyser(fail_on=3)
    source, sink = FakeSource(frames=8), RecordingSink()

    def factory(s: Settings) -> StageSet:
        return StageSet(analyser, tuple(SlowWorker() for _ in range(s.pipeline.frames_in_flight)), "prep")

    engine = Engine(source, sink, settings(2), factory)
    engine.start()
    assert engine.wait(20)
    assert sink.indices == list(range(8))  # a picture that could not be prepared still went through
    assert set(analyser.prepared_on) == {"capture"}
    want = [None if i == 3 else ("prepared", i) for i in range(8)]
    assert analyser.received == want  # each frame's own, and none for the one that failed
