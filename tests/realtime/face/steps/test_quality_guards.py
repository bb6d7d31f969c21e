"""Pictures that must not come out of the swap, whatever the settings or the input."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from models.ops.align import arcface_template, estimate_norm, plausible_landmarks
from realtime.face.host.colour import colour_transfer
from realtime.face.host.compositor import Compositor, MaskSettings
from realtime.face.steps.masks import soften


def _face_kps(
    roll_deg: float, scale: float = 2.0, centre: tuple[float, float] = (320.0, 240.0)
) -> np.ndarray:
    t = arcface_template(112).astype(np.float64) - 56.0
    a = math.radians(roll_deg)
    rot = np.array([[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]])
    return t @ rot.T * scale + np.asarray(centre)


@given(roll=st.floats(-180.0, 180.0), scale=st.floats(0.2, 8.0))
def test_a_face_at_any_roll_and_size_can_be_aligned(roll: float, scale: float) -> None:
    assert plausible_landmarks(_face_kps(roll, scale))


@given(roll=st.floats(-180.0, 180.0))
def test_mirrored_or_broken_landmarks_are_refused(roll: float) -> None:
    """Left and right swapped: the fit's scale collapsed and the crop took in the whole frame,
    which the paste then smeared over every pixel."""
    kps = _face_kps(roll)
    assert not plausible_landmarks(kps[[1, 0, 2, 4, 3]])
    broken = kps.copy()
    broken[2, 0] = np.nan
    assert not plausible_landmarks(broken)
    assert not plausible_landmarks(np.repeat(kps[:1], 5, axis=0))


@pytest.mark.parametrize(("erode", "blur"), [(0.1, 0.05), (0.1, 0.1), (0.1, 0.3), (0.0, 0.3), (0.2, 0.3)])
def test_the_feather_fades_out_inside_the_crop_at_any_setting(erode: float, blur: float) -> None:
    """A wide blur left the mask at 22-96/255 at the crop's border, then 0: a hard box round the face."""
    m = estimate_norm(_face_kps(0.0, 3.0), 128)
    mask = Compositor(MaskSettings(erode_ratio=erode, blur_ratio=blur)).crop_mask(128, m)
    border = np.concatenate([mask[0], mask[-1], mask[:, 0], mask[:, -1]])
    assert border.max() * 255 <= 3.5  # (was 22-96 with a wide blur; the defaults give ~1)
    assert mask[64, 64] > 0.99  # still a face in the middle
    if erode <= 0.1:  # (more erosion shrinks it on purpose)
        assert (mask > 0.5).mean() > 0.6  # the swapped area is not shrunk to make the edge fade


def test_colour_match_does_not_amplify_a_dark_frame_s_noise() -> None:
    """The unbounded gain multiplied the face's colour detail 3-7x in a dark, noisy frame: a smooth
    swap (little colour detail) matched to a dark, noisy webcam face. (An earlier version matched
    a strongly coloured face, whose gain was below 1: it passed with the bound removed.)"""
    import cv2

    rng = np.random.default_rng(0)
    smooth = np.full((128, 128, 3), (110, 130, 170), np.uint8)
    smooth = cv2.add(smooth, rng.integers(0, 3, smooth.shape, dtype=np.uint8))
    noisy = np.clip(rng.normal((60, 70, 90), 12, smooth.shape), 0, 255).astype(np.uint8)
    out = colour_transfer(smooth, noisy)
    lab_out = cv2.cvtColor(out, cv2.COLOR_BGR2LAB).astype(np.float32)
    lab_in = cv2.cvtColor(smooth, cv2.COLOR_BGR2LAB).astype(np.float32)
    for ch in (1, 2):  # a, b: the colour detail is at most 1.5x the swap's own
        assert lab_out[32:96, 32:96, ch].std() <= 1.5 * lab_in[32:96, 32:96, ch].std() + 1.0


def test_colour_match_with_no_skin_left_returns_the_crop_unchanged() -> None:
    """A hand over the face leaves (almost) no skin to measure: the swap is pasted as it is, not
    matched to four pixels' statistics (or to 0/0)."""
    rng = np.random.default_rng(1)
    crop = rng.integers(0, 255, (128, 128, 3), dtype=np.uint8)
    ref = rng.integers(0, 255, (128, 128, 3), dtype=np.uint8)
    mask = np.zeros((128, 128), np.float32)
    mask[60:62, 60:62] = 1.0
    np.testing.assert_array_equal(colour_transfer(crop, ref, mask), crop)
    np.testing.assert_array_equal(colour_transfer(crop, ref, np.zeros_like(mask)), crop)


@settings(max_examples=20)
@given(width=st.integers(1, 12))
def test_an_occluder_of_any_width_keeps_all_its_pixels(width: int) -> None:
    """A pen or a glasses frame thinner than ~10 px blurred away to over 0.5 and was swapped over."""
    mask = np.ones((128, 128), np.float32)
    mask[:, 60 : 60 + width] = 0.0  # a vertical bar in front of the face
    out = soften(mask, 5.0, out=mask)
    assert out[:, 60 : 60 + width].max() == 0.0
    assert out[:, :40].min() > 0.99  # the face away from it is kept


def test_colour_match_measures_the_face_not_what_covers_the_middle_of_its_crop(tmp_path: Path) -> None:
    """Colour match measures the skin (the parser's, else an ellipse between the eyes and the
    mouth): a green hand or microphone in the crop's middle but off the skin must not tint the
    swapped face (the central square of the crop, measured instead, shifted it by ~6 levels)."""
    from models.fakes.doubles import write_all
    from models.runtime.session import SessionConfig, SessionFactory
    from models.wrappers.swappers.inswapper import InSwapper
    from realtime.core.contracts import FramePlan, SwapTarget
    from realtime.core.settings import Settings
    from realtime.face.source_face import SourceIdentity
    from realtime.face.steps.masks import face_core_mask
    from realtime.face.swap_worker import FaceSwapWorker
    from tests.real_faces import astronaut_bgr, astronaut_face

    write_all(tmp_path)
    swapper = InSwapper.from_file(
        tmp_path / "inswapper_128.onnx", SessionFactory(SessionConfig(provider="cpu"))
    )
    v = np.random.default_rng(5).standard_normal(512).astype(np.float32)
    who = SourceIdentity(v / np.linalg.norm(v), ())
    s = Settings().with_overrides({"composite.colour_match": True})
    kps = astronaut_face().kps.astype(np.float32)
    frame = astronaut_bgr()
    # The frame pixels in the crop's central square but off the skin ellipse.
    m = estimate_norm(kps, 128)
    yy, xx = np.mgrid[0 : frame.shape[0], 0 : frame.shape[1]]
    u = np.round(m[0, 0] * xx + m[0, 1] * yy + m[0, 2]).astype(int)
    w = np.round(m[1, 0] * xx + m[1, 1] * yy + m[1, 2]).astype(int)
    middle = (u >= 32) & (u < 96) & (w >= 32) & (w < 96)
    off_skin = np.zeros_like(middle)
    off_skin[middle] = face_core_mask(128)[w[middle], u[middle]] < 0.05
    assert off_skin.sum() > 1000
    covered = frame.copy()
    covered[off_skin] = (0, 255, 0)

    def swapped_core(image: np.ndarray) -> np.ndarray:
        out = image.copy()
        FaceSwapWorker(swapper, who, s).apply(out, FramePlan([SwapTarget(kps, 1.0, 1)]), s)
        cx, cy = (int(c) for c in kps.mean(axis=0))
        return out[cy - 10 : cy + 10, cx - 10 : cx + 10].astype(np.float64).mean(axis=(0, 1))

    assert np.abs(swapped_core(frame) - swapped_core(covered)).max() <= 2.5
