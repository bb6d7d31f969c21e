"""Paste-back geometry: the fast paste (one 4-channel warp, one compiled blend) stays inside the
face's region, leaves every pixel outside the mask exactly as it was, and matches float maths on the
feathered mask within rounding."""

from __future__ import annotations

import math

import cv2
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from models.ops.align import Matrix2x3, invert_affine
from realtime.face.host import compositor as comp
from realtime.face.host.compositor import Compositor, paste_region

FRAME_W, FRAME_H = 320, 240


def _similarity(size: int, scale: float, angle_deg: float, cx: float, cy: float) -> Matrix2x3:
    """frame -> crop matrix: the crop's centre lands on (cx, cy), `scale` crop px per frame px."""
    a = math.radians(angle_deg)
    lin = scale * np.array([[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]])
    m = np.zeros((2, 3), dtype=np.float64)
    m[:, :2] = lin
    m[:, 2] = np.array([size / 2.0, size / 2.0]) - lin @ np.array([cx, cy])
    return m


def _frame_and_crop(size: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    frame = rng.integers(0, 256, (FRAME_H, FRAME_W, 3), dtype=np.uint8)
    crop = rng.integers(0, 256, (size, size, 3), dtype=np.uint8)
    return frame, crop


geometry = st.tuples(
    st.sampled_from([128, 256]),
    st.floats(0.4, 3.0),  # crop px per frame px: faces from ~40 to ~640 px
    st.floats(-180.0, 180.0),
    st.floats(-40.0, FRAME_W + 40.0),  # centre, partly off the frame included
    st.floats(-40.0, FRAME_H + 40.0),
    st.integers(0, 2**16),
)


@settings(max_examples=40, deadline=None)
@given(params=geometry)
@example(params=(128, 1.0, 10.0, -400.0, -300.0, 5))  # wholly off the frame: nothing may change
def test_paste_matches_float_blending_and_never_writes_outside(
    params: tuple[int, float, float, float, float, int],
) -> None:
    size, scale, angle, cx, cy, seed = params
    frame, crop = _frame_and_crop(size, seed)
    m = _similarity(size, scale, angle, cx, cy)
    compositor = Compositor()
    out = compositor.paste(frame, crop, m)

    # Reference: the float mask and the crop warped into the same region, blended in float64.
    region = paste_region(frame.shape, size, m)
    if region.empty:  # the face lies wholly off the frame: nothing to paste
        np.testing.assert_array_equal(out, frame)
        return
    im_roi = invert_affine(m)
    im_roi[0, 2] -= region.x0
    im_roi[1, 2] -= region.y0
    roi_size = (region.x1 - region.x0, region.y1 - region.y0)
    mask = compositor.crop_mask(size, m)
    alpha = np.zeros((*frame.shape[:2], 1), dtype=np.float64)
    fake = np.zeros(frame.shape, dtype=np.float64)
    rows, cols = slice(region.y0, region.y1), slice(region.x0, region.x1)
    alpha[rows, cols, 0] = cv2.warpAffine(mask, im_roi, roi_size, borderValue=0.0)
    fake[rows, cols] = cv2.warpAffine(crop, im_roi, roi_size, borderValue=0.0)
    ref = fake * alpha + frame.astype(np.float64) * (1.0 - alpha)
    diff = np.abs(out.astype(np.float64) - ref)
    # uint8 alpha (1/255 steps) and one rounding: within 2 levels everywhere.
    assert diff.max() <= 2.0, f"max diff {diff.max():.2f}"

    outside = np.ones(frame.shape[:2], dtype=bool)
    outside[rows, cols] = False
    untouched = outside | (alpha[..., 0] == 0.0)
    np.testing.assert_array_equal(out[untouched], frame[untouched])


def test_opacity_and_foreign_masks_blend_everywhere() -> None:
    """A half-faded face is blended half way; a caller's own hard mask shows the crop itself."""
    size = 128
    frame, crop = _frame_and_crop(size, 7)
    m = _similarity(size, 0.8, 12.0, 150.0, 120.0)
    half = Compositor().paste(frame, crop, m, opacity=0.5)
    full = Compositor().paste(frame, crop, m)
    centre = (120, 150)
    a, b, f = (int(v) for v in (half[centre][0], full[centre][0], frame[centre][0]))
    assert abs(a - (b + f) / 2.0) <= 1.0

    ones = np.ones((size, size), dtype=np.float32)
    hard = Compositor().paste(frame, crop, m, mask=ones)
    # Inside the crop's footprint the hard mask shows the crop itself.
    fake = cv2.warpAffine(crop, invert_affine(m), (FRAME_W, FRAME_H))
    np.testing.assert_array_equal(hard[centre], fake[centre])


@pytest.mark.parametrize(("face_px", "roll"), [(200, 0), (200, 30), (200, 45), (60, 0), (60, 30)])
def test_the_feather_is_sized_by_insightfaces_rule(face_px: int, roll: int) -> None:
    """insightface erodes by max(side // 10, 10) px and blurs with a (2 * max(side // 20, 5) + 1)
    kernel, `side` from the pasted square's bounding box (which grows with roll). A feather sized
    from the face alone was 1/sqrt(2) of it at 45 degrees (the edge moved by up to 125 levels); the
    10 px floor keeps a small face's box edge hidden."""
    m = _similarity(128, 128 / face_px, roll, 320, 240)
    inset_x8, sigma_x8 = comp.crop_mask_kernels(128, m, comp.MaskSettings())
    side = int(face_px * (abs(math.cos(math.radians(roll))) + abs(math.sin(math.radians(roll)))))
    erode, half = max(side // 10, 10), max(side // 20, 5)
    scale = 128 / face_px  # crop px per frame px
    one_px = 8 * scale / 2 + 1  # one px of erosion moves the inset by half a px (x8 fixed point)
    assert abs(inset_x8 - erode / 2 * scale * 8) <= one_px
    assert abs(sigma_x8 - (0.3 * (half - 1) + 0.8) * scale * 8) <= 0.3 * 8 * scale + 1


def test_a_face_changing_size_for_long_gets_its_own_feather_every_frame() -> None:
    """Someone walking to and from the camera: far more face sizes than the mask cache holds. Each
    paste must use its own size's feather (a stale uint8 alpha, found by a freed mask's reused id,
    drew another size's feather: a halo or a box) and the cache must stay bounded."""
    rng = np.random.default_rng(0)
    frame = rng.integers(0, 256, (480, 640, 3), dtype=np.uint8)
    crop = rng.integers(0, 256, (128, 128, 3), dtype=np.uint8)
    worker = Compositor()
    for i in range(160):
        face_px = 80 + 2.5 * (i if i < 120 else 240 - i)  # 80 -> 377 px and back: ~50 feathers
        m = _similarity(128, 128 / face_px, 5 * math.sin(i / 7), 320, 240)
        got = worker.paste(frame, crop, m)
        # The same mask handed in as a foreign array: its alpha made afresh, never looked up.
        want = worker.paste(frame, crop, m, mask=worker.crop_mask(128, m).copy())
        assert np.array_equal(got, want), f"frame {i}: pasted with another size's feather"
    assert len(worker._alphas) <= worker.max_cached_masks


def test_a_faint_opacity_still_pastes_a_faint_face() -> None:
    size = 128
    frame, crop = _frame_and_crop(size, 7)
    m = _similarity(size, 0.8, 12.0, 150.0, 120.0)
    faint = Compositor().paste(frame, crop, m, opacity=0.05).astype(np.float64) - frame
    full = Compositor().paste(frame, crop, m).astype(np.float64) - frame
    face = np.abs(full) > 60  # where the face differs clearly from the frame
    assert face.sum() > 1000
    assert np.abs(faint[face] - 0.05 * full[face]).max() <= 1.0  # 5 % of it is pasted there
