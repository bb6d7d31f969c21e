"""The numbers behind the live display and the benchmark's claims."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from realtime.core.metrics import Metrics, RingBuffer, RunRecord


@given(capacity=st.integers(1, 50), n=st.integers(0, 200))
def test_the_ring_buffer_gives_the_last_samples_oldest_first(capacity: int, n: int) -> None:
    """Once full it gives the last samples oldest first, not its rotated storage order (the bench's
    drift would compare scrambled thirds)."""
    buf = RingBuffer(capacity)
    for i in range(n):
        buf.add(float(i))
    assert buf.values().tolist() == [float(i) for i in range(max(0, n - capacity), n)]
    assert buf.total == n


@settings(max_examples=30)
@given(n=st.integers(1, 30_000))
def test_the_run_record_spans_the_whole_run_in_order_in_fixed_memory(n: int) -> None:
    rec = RunRecord(256)
    for i in range(n):
        rec.add(float(i))
    kept = rec.values()
    assert 1 <= kept.size <= 256
    assert np.all(np.diff(kept) > 0) and kept[0] == 0.0
    if n > 256:
        assert kept.size >= 128 and kept[-1] >= n - 2 * (n / 128)  # reaches the end of the run
        steps = np.diff(kept)
        assert steps.max() == steps.min()  # evenly spaced


def test_latency_drift_over_a_long_run_is_seen_from_start_to_end() -> None:
    """Latency growing by 36 ms over a 2-minute run shows between the run's first and last thirds
    (the last 600 samples alone would show ~4 ms of it)."""
    metrics = Metrics()
    for i in range(3600):  # 2 minutes at 30 fps, latency 20 -> 56 ms
        metrics.frame_out(capture_ts=0.0, now=(20.0 + 36.0 * i / 3599) / 1000.0)
    lat = metrics.latencies_ms(whole_run=True)
    third = lat.size // 3
    drift = float(np.median(lat[-third:]) - np.median(lat[:third]))
    assert 20.0 < drift < 30.0  # medians of the first and last thirds: 2/3 of the whole rise
    assert metrics.latencies_ms().size == 600  # the live window stays the last 20 s


def test_stage_counts_cover_the_whole_run() -> None:
    metrics = Metrics()
    for _ in range(1500):
        metrics.stage("detect", 1.0)
    assert metrics.stage_count("detect") == 1500 and metrics.stage_count("nothing") == 0


def test_stage_means_cover_the_whole_run() -> None:
    """The bench's per-stage figures cover the whole run, like its latency, not the last 600 samples."""
    metrics = Metrics()
    for i in range(1200):
        metrics.stage("paste", 1.0 if i < 600 else 3.0)
    assert metrics.stage_means() == {"paste": 2.0}
    assert metrics.snapshot().stages_ms["paste"].mean == 3.0  # the live window: the last 600
