"""The bench's Deep-Live-Cam-style loop does what that project's live loop does: a swap that lands
only inside the face's box, detection every 2nd frame with the last landmarks reused in between,
and no swap before the first detection."""

from __future__ import annotations

import math
from pathlib import Path

import cv2
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from models.fakes.doubles import write_all
from realtime.tools.bench import astronaut_bgr, make_clip
from realtime.tools.bench_peers import dlc_fast_paste, dlc_soft_alpha, load_insightface_models, run_dlc_style


def similarity(scale: float, angle: float, centre: tuple[float, float]) -> np.ndarray:
    """frame -> 128 px crop, the crop's middle at `centre`."""
    c, s = math.cos(angle) / scale, math.sin(angle) / scale
    m = np.array([[c, -s, 0.0], [s, c, 0.0]])
    m[:, 2] = np.array([64.0, 64.0]) - m[:, :2] @ np.asarray(centre)
    return m


def test_the_soft_alpha_is_opaque_inside_and_clear_at_the_border() -> None:
    alpha = dlc_soft_alpha()
    assert alpha.shape == (128, 128) and alpha.dtype == np.uint8
    assert alpha[64, 64] == 255 and alpha[0, 0] == 0 and alpha[0, 64] < 8
    assert 0 < alpha[64, 8] < 255  # feathered between


@settings(max_examples=25, deadline=None)
@given(
    scale=st.floats(0.5, 3.0),
    angle=st.floats(-0.6, 0.6),
    cx=st.floats(-40.0, 360.0),
    cy=st.floats(-40.0, 220.0),
)
def test_the_paste_writes_only_inside_the_face_box(scale: float, angle: float, cx: float, cy: float) -> None:
    rng = np.random.default_rng(0)
    frame = rng.integers(0, 256, (180, 320, 3), dtype=np.uint8)
    face = np.full((128, 128, 3), (10, 200, 30), dtype=np.uint8)
    m = similarity(scale, angle, (cx, cy))
    out = dlc_fast_paste(frame.copy(), face, m, dlc_soft_alpha())
    # The crop's corners in the frame, +2 px: nothing outside that box may change.
    im = cv2.invertAffineTransform(m)
    corners = np.array([[0, 0, 1], [128, 0, 1], [0, 128, 1], [128, 128, 1]], dtype=np.float64) @ im.T
    outside = np.ones(frame.shape[:2], dtype=bool)
    x0, y0 = np.floor(corners.min(axis=0)).astype(int) - 2
    x1, y1 = np.ceil(corners.max(axis=0)).astype(int) + 2
    outside[max(y0, 0) : max(y1, 0), max(x0, 0) : max(x1, 0)] = False
    np.testing.assert_array_equal(out[outside], frame[outside])
    # The crop's middle (fully opaque) shows the face wherever it is in the frame.
    mx, my = int(round(cx)), int(round(cy))
    if 0 <= mx < 320 and 0 <= my < 180:
        np.testing.assert_allclose(out[my, mx], (10, 200, 30), atol=1)


@pytest.fixture(scope="module")
def dlc_models(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    d = tmp_path_factory.mktemp("dlc-models")
    write_all(d)
    return load_insightface_models(Path(d), astronaut_bgr(), 640)


def test_detects_every_second_frame_and_swaps_from_the_first_detection_on(dlc_models) -> None:  # type: ignore[no-untyped-def]
    clip = make_clip(4, 320, 180)
    seen: dict[int, np.ndarray] = {}
    run = run_dlc_style(clip, 7, dlc_models, on_frame=lambda i, img: seen.__setitem__(i, img.copy()))
    assert sorted(seen) == list(range(7))
    assert run.detections == 3  # frames 2, 4, 6 (Deep-Live-Cam counts from 1)
    # Frame 1 comes before any detection: it passes through untouched.
    np.testing.assert_array_equal(seen[0], clip[0])
    # Every later frame carries a swap, including the ones between detections (stale landmarks).
    for i in range(1, 7):
        changed = np.any(seen[i] != clip[i % len(clip)], axis=2)
        assert changed.sum() > 1000, f"frame {i} was not swapped"
    assert run.latencies_ms.shape == (7,) and np.all(run.latencies_ms > 0)
    assert set(run.stages_ms) == {"detect", "swap", "paste", "copies"}


def test_an_error_in_the_loop_does_not_leave_the_capture_thread_blocked(dlc_models) -> None:  # type: ignore[no-untyped-def]
    clip = make_clip(2, 320, 180)

    def boom(i: int, img: np.ndarray) -> None:
        raise RuntimeError("sink failed")

    with pytest.raises(RuntimeError, match="sink failed"):
        run_dlc_style(clip, 50, dlc_models, on_frame=boom)
    import threading

    assert not [t for t in threading.enumerate() if t.name == "dlc-capture"]
