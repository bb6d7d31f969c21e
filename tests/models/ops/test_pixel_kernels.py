"""The compiled pixel loops against exact integer and float references."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from models.ops.pixel_kernels import (
    bgr_into_rgb_planes,
    blend_bgra_into,
    normalise_into_blob,
    rgb_planes_into_bgr,
)


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


def test_bgr_to_rgb_planes_matches_numpy_bit_for_bit() -> None:
    rng = np.random.default_rng(11)
    frame = rng.integers(0, 256, (40, 60, 3), dtype=np.uint8)
    image = frame[5:37, 10:42]  # a view, not contiguous
    blob = np.full((1, 3, 32, 32), -1.0, dtype=np.float32)
    bgr_into_rgb_planes(image, blob, 1.0 / 255.0)
    want = image[..., ::-1].transpose(2, 0, 1) * np.float32(1.0 / 255.0)
    np.testing.assert_array_equal(blob[0], want)


def test_rgb_planes_to_bgr_matches_insightfaces_decode() -> None:
    rng = np.random.default_rng(12)
    pred = rng.uniform(-0.5, 1.5, (1, 3, 32, 32)).astype(np.float32)
    pred[0, 0, 0, :4] = [0.0, 1.0, 1e30, -1e30]  # the ends, and finite values far past them
    out = np.zeros((32, 32, 3), dtype=np.uint8)
    assert rgb_planes_into_bgr(pred, out, 255.0)
    want = np.clip(255.0 * pred[0].transpose(1, 2, 0)[..., ::-1], 0, 255).astype(np.uint8)
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_a_non_finite_prediction_is_refused_before_anything_is_written(bad: float) -> None:
    pred = np.full((1, 3, 8, 8), 0.5, dtype=np.float32)
    pred[0, 2, 7, 7] = bad  # the last value looked at
    out = np.full((8, 8, 3), 9, dtype=np.uint8)
    assert not rgb_planes_into_bgr(pred, out, 255.0)
    assert np.all(out == 9)


def test_planes_refuse_mismatched_shapes() -> None:
    with pytest.raises(ValueError, match="planes"):
        bgr_into_rgb_planes(np.zeros((8, 8, 3), np.uint8), np.zeros((1, 3, 8, 9), np.float32), 1.0)
    with pytest.raises(ValueError, match="planes"):
        rgb_planes_into_bgr(np.zeros((1, 3, 8, 8), np.float16), np.zeros((8, 8, 3), np.uint8), 255.0)


@pytest.mark.parametrize("swap_rb", [True, False])
def test_normalising_matches_numpy_bit_for_bit_and_leaves_the_padding(swap_rb: bool) -> None:
    rng = np.random.default_rng(5)
    canvas = rng.integers(0, 256, (64, 80, 3), dtype=np.uint8)
    image = canvas[:40, :70]  # a view, as the letterbox hands it over
    blob = np.full((1, 3, 64, 80), -7.0, dtype=np.float32)
    normalise_into_blob(image, blob, swap_rb=swap_rb, mean=127.5, std=128.0)
    planes = image[..., ::-1] if swap_rb else image
    want = (planes.astype(np.float32) - np.float32(127.5)) * np.float32(1 / 128)
    np.testing.assert_array_equal(blob[0, :, :40, :70], want.transpose(2, 0, 1))
    assert np.all(blob[0, :, 40:, :] == -7.0) and np.all(blob[0, :, :, 70:] == -7.0)


@pytest.mark.parametrize(
    ("image", "blob"),
    [
        (np.zeros((8, 8), np.uint8), np.zeros((1, 3, 8, 8), np.float32)),  # grey
        (np.zeros((8, 8, 3), np.uint8), np.zeros((1, 3, 8, 8), np.float16)),  # fp16 blob
        (np.zeros((9, 8, 3), np.uint8), np.zeros((1, 3, 8, 8), np.float32)),  # does not fit
    ],
)
def test_normalising_refuses_what_it_cannot_fill(image: np.ndarray, blob: np.ndarray) -> None:
    with pytest.raises(ValueError, match="normalise"):
        normalise_into_blob(image, blob, swap_rb=True, mean=127.5, std=128.0)


def _read_only(a: np.ndarray) -> np.ndarray:
    b = a.copy()
    b.flags.writeable = False
    return b


def test_read_only_inputs_are_read_like_writable_ones() -> None:
    """A caller's read-only picture (a decoder's buffer, a cached photo) must not need a copy."""
    rng = np.random.default_rng(13)
    image = rng.integers(0, 256, (16, 16, 3), dtype=np.uint8)
    warped = rng.integers(0, 256, (16, 16, 4), dtype=np.uint8)
    pred = rng.uniform(0, 1, (1, 3, 16, 16)).astype(np.float32)
    for conv in (np.copy, _read_only):
        roi = image.copy()
        blend_bgra_into(conv(warped), roi)
        planes = np.zeros((1, 3, 16, 16), np.float32)
        bgr_into_rgb_planes(conv(image), planes, 1.0 / 255.0)
        norm = np.zeros((1, 3, 16, 16), np.float32)
        normalise_into_blob(conv(image), norm, swap_rb=True, mean=127.5, std=128.0)
        out = np.zeros((16, 16, 3), np.uint8)
        assert rgb_planes_into_bgr(conv(pred), out, 255.0)
        if conv is np.copy:
            want = (roi, planes, norm, out)
        else:
            for got, ref in zip((roi, planes, norm, out), want, strict=True):
                np.testing.assert_array_equal(got, ref)
