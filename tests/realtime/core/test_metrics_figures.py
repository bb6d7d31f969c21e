"""The figures `--stats`, the GUI's panel and the bench print, against values known by hand: a
wrong percentile, a median shown as a mean or an fps taken from the wrong clock would all still
"look like numbers"."""

from __future__ import annotations

import numpy as np
import pytest

from realtime.core.metrics import Metrics, Summary


def test_summary_of_known_values() -> None:
    s = Summary.of(np.arange(1.0, 101.0))
    assert (s.mean, s.p50, s.p95, s.p99) == pytest.approx((50.5, 50.5, 95.05, 99.01))


def test_latency_percentiles_and_a_spiky_stage_s_mean_as_printed() -> None:
    """100 frames 1..100 ms glass-to-glass; a stage at 1 ms with ten 100 ms spikes: its mean is
    10.9 ms (a median would show 1 and hide the spikes)."""
    m = Metrics()
    for k in range(1, 101):
        m.frame_out(capture_ts=0.0, now=k / 1000.0)
        m.stage("swap", 1.0 if k <= 90 else 100.0)
    snap = m.snapshot(now=0.1)
    assert (snap.latency_ms.p50, snap.latency_ms.p95, snap.latency_ms.p99) == pytest.approx(
        (50.5, 95.05, 99.01)
    )
    assert snap.stages_ms["swap"].mean == pytest.approx(10.9)
    assert "p50 50 / p95 95 / p99 99" in snap.format_line()


def test_fps_in_and_out_differ_when_half_the_frames_are_dropped() -> None:
    m = Metrics()
    for i in range(120):
        m.frame_in(100 + i / 30)
        if i % 2 == 0:
            m.frame_out(100 + i / 30, now=100 + i / 30 + 0.05)
        else:
            m.frame_dropped()
    snap = m.snapshot(now=100 + 119 / 30)
    assert snap.fps_in == pytest.approx(30.0, rel=0.05)
    assert snap.fps_out == pytest.approx(15.0, rel=0.1)


def test_three_frames_a_thirtieth_apart_are_30_fps() -> None:
    m = Metrics()
    for i in range(3):
        m.frame_in(100 + i / 30)
    assert m.snapshot(now=100 + 2 / 30).fps_in == pytest.approx(30.0)


def test_output_fps_falls_soon_after_the_pipeline_freezes() -> None:
    """A frozen run must not go on showing 30 fps for seconds."""
    m = Metrics()
    for i in range(60):
        m.frame_out(100 + i / 30, now=100 + i / 30)
    assert m.snapshot(now=100 + 59 / 30 + 1.5).fps_out < 20.0


def test_live_latency_is_the_recent_latency_not_the_whole_run_s() -> None:
    """After 600 slow frames (300 ms) and 600 fast ones (40 ms) the panel shows the 40 ms of now."""
    m = Metrics()
    for i in range(1200):
        m.frame_out(0.0, now=(300.0 if i < 600 else 40.0) / 1000)
    assert m.snapshot(now=1.0).latency_ms.p50 == pytest.approx(40.0)


def test_face_counts_add_up_per_kind() -> None:
    m = Metrics()
    for _ in range(10):
        m.faces(2, 1, 3)
    snap = m.snapshot()
    assert (snap.faces_swapped, snap.faces_passthrough, snap.faces_seen) == (20, 10, 30)


def test_fps_is_steady_for_a_camera_with_jittery_timestamps() -> None:
    """A webcam's frames arrive 25-42 ms apart around 30 fps: the figure shown stays near 30, not
    the rate of the last interval or two (a display that jumps between 24 and 40)."""
    rng = np.random.default_rng(3)
    m = Metrics()
    t = 100.0
    shown = []
    for _ in range(300):
        t += 1 / 30 + rng.uniform(-0.008, 0.008)
        m.frame_in(t)
        shown.append(m.snapshot(now=t).fps_in)
    assert all(28.0 <= fps <= 32.0 for fps in shown[130:]), (min(shown[130:]), max(shown[130:]))
