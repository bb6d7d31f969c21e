"""The compiled pixel loops against exact integer and float references."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from models.pixel_kernels import blend_bgra_into


def _every_case() -> tuple[np.ndarray, np.ndarray]:
    """Every (face value, frame value, alpha) triple once: 256^3 pixels as a 4096 x 4096 image."""
    f, r, a = np.meshgrid(np.arange(256), np.arange(256), np.arange(256), indexing="ij")
    warped = np.empty((4096, 4096, 4), dtype=np.uint8)
    roi = np.empty((4096, 4096, 3), dtype=np.uint8)
    warped[..., 0] = f.reshape(4096, 4096)
    warped[..., 1] = 255 - f.reshape(4096, 4096)
    warped[..., 2] = r.reshape(4096, 4096)
    warped[..., 3] = a.reshape(4096, 4096)
    roi[..., 0] = r.reshape(4096, 4096)
    roi[..., 1] = r.reshape(4096, 4096)
    roi[..., 2] = f.reshape(4096, 4096)
    return warped, roi


def test_the_blend_rounds_every_value_to_nearest() -> None:
    warped, roi = _every_case()
    before = roi.copy()
    blend_bgra_into(warped, roi)
    a = warped[..., 3:].astype(np.float64) / 255.0
    ref = warped[..., :3] * a + before * (1.0 - a)
    err = np.abs(roi - ref)
    assert err.max() <= 0.5 + 1e-9  # rounded to nearest, every case
    opaque, clear = warped[..., 3] == 255, warped[..., 3] == 0
    np.testing.assert_array_equal(roi[opaque], warped[..., :3][opaque])  # the face exactly
    np.testing.assert_array_equal(roi[clear], before[clear])  # the frame exactly


@settings(max_examples=40, deadline=None)
@given(opacity=st.floats(0.0, 1.0), seed=st.integers(0, 2**16))
def test_opacity_scales_the_alpha(opacity: float, seed: int) -> None:
    rng = np.random.default_rng(seed)
    warped = rng.integers(0, 256, (40, 50, 4), dtype=np.uint8)
    roi = rng.integers(0, 256, (40, 50, 3), dtype=np.uint8)
    before = roi.copy()
    blend_bgra_into(warped, roi, opacity)
    a = warped[..., 3:].astype(np.float64) / 255.0 * opacity
    ref = warped[..., :3] * a + before * (1.0 - a)
    # Opacity rounded to 1/255 and alpha x opacity rounded to 1/255 (each up to half a level of a
    # full-contrast pixel), then one rounding of the result.
    assert np.abs(roi - ref).max() <= 1.5


def test_a_view_into_the_frame_is_blended_in_place_and_nothing_around_it() -> None:
    rng = np.random.default_rng(3)
    frame = rng.integers(0, 256, (60, 80, 3), dtype=np.uint8)
    warped = rng.integers(0, 256, (20, 30, 4), dtype=np.uint8)
    warped[..., 3] = 255
    before = frame.copy()
    blend_bgra_into(warped, frame[10:30, 40:70])
    np.testing.assert_array_equal(frame[10:30, 40:70], warped[..., :3])
    outside = np.ones(frame.shape[:2], dtype=bool)
    outside[10:30, 40:70] = False
    np.testing.assert_array_equal(frame[outside], before[outside])


def test_zero_opacity_changes_nothing() -> None:
    warped = np.full((8, 8, 4), 200, dtype=np.uint8)
    roi = np.zeros((8, 8, 3), dtype=np.uint8)
    blend_bgra_into(warped, roi, 0.0)
    assert not roi.any()


@pytest.mark.parametrize(
    ("warped", "roi"),
    [
        (np.zeros((8, 8, 3), np.uint8), np.zeros((8, 8, 3), np.uint8)),  # no alpha channel
        (np.zeros((8, 9, 4), np.uint8), np.zeros((8, 8, 3), np.uint8)),  # sizes differ
        (np.zeros((8, 8, 4), np.float32), np.zeros((8, 8, 3), np.uint8)),  # not 8-bit
        (np.zeros((8, 16, 4), np.uint8)[:, ::2], np.zeros((8, 8, 3), np.uint8)),  # strided source
    ],
)
def test_mismatched_images_are_refused(warped: np.ndarray, roi: np.ndarray) -> None:
    with pytest.raises(ValueError, match="blend"):
        blend_bgra_into(warped, roi)
