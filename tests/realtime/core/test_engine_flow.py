"""The engine's drop policy end to end: a live source outpacing a slow worker."""

from __future__ import annotations

from itertools import pairwise

from realtime.core.contracts import PassthroughAnalyser
from realtime.core.engine import Engine
from realtime.core.settings import Settings
from realtime.core.stage_set import StageSet
from tests.engine_fakes import FakeSource, RecordingSink, SlowWorker


def test_a_live_source_faster_than_the_worker_gets_its_newest_frame_processed() -> None:
    """Frames arrive every 10 ms, each takes the worker 80 ms: whenever the worker frees up it must
    get the frame that arrived last, and the ones before it are dropped. Keeping the stale frame
    instead (dropping the newest) serves frames 0, 1, 2, ... ever later and never the last one."""
    frames = 40
    worker = SlowWorker(base_delay_s=0.08)
    source = FakeSource(frames=frames, fps=100.0, is_live=True, pace=True)
    sink = RecordingSink()
    one = Settings().with_overrides({"pipeline.frames_in_flight": 1})

    def stages(s: Settings) -> StageSet:
        return StageSet(PassthroughAnalyser(), (worker,), "slow")

    engine = Engine(source, sink, one, stages)
    engine.start()
    assert engine.wait(20)
    out = sink.indices
    stats = engine.stats()
    assert out[-1] == frames - 1  # the input's last frame was the newest when the worker freed up
    assert out == sorted(set(out)) and len(out) < frames / 2
    assert stats.frames_dropped == frames - len(out)  # every frame not processed was dropped
    gaps = [b - a for a, b in pairwise(out)]
    assert sum(gap > 1 for gap in gaps) >= len(gaps) - 1  # skipped ahead, not one by one
