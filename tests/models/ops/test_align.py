"""models.ops.align against its definition (similarity transforms) and against insightface's face_align."""

from __future__ import annotations

import warnings

import cv2
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from models.ops.align import arcface_template, estimate_norm, norm_crop

SIZES = [112, 128, 256, 512]
FAST = settings(max_examples=60, deadline=None)


def insightface_align():  # type: ignore[no-untyped-def]
    from insightface.utils import face_align

    return face_align


def reference_norm(kps: np.ndarray, size: int) -> np.ndarray:
    """insightface's estimate_norm on the same landmark VALUES, widened to float64.

    skimage keeps float32 input in float32 arithmetic, so insightface fed float32 landmarks is itself
    off by ~2e-4 px in the translation for points ~1000 px from the origin (float32 eps x magnitude);
    we always compute in float64. Widening the input compares the algorithms, not the precisions.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # skimage's SimilarityTransform.estimate deprecation notice
        return np.asarray(insightface_align().estimate_norm(np.asarray(kps, np.float64), size))


def similarity(scale: float, angle: float, tx: float, ty: float) -> np.ndarray:
    c, s = scale * np.cos(angle), scale * np.sin(angle)
    return np.array([[c, -s, tx], [s, c, ty]], dtype=np.float64)


def apply(m: np.ndarray, pts: np.ndarray) -> np.ndarray:
    return np.asarray(pts, np.float64) @ m[:, :2].T + m[:, 2]


def invert(m: np.ndarray) -> np.ndarray:
    full = np.vstack([m, [0.0, 0.0, 1.0]])
    return np.linalg.inv(full)[:2]


transforms = st.tuples(
    st.floats(0.2, 8.0),  # scale: tiny faces to close-ups
    st.floats(-np.pi, np.pi),  # any roll
    st.floats(-2000, 2000),
    st.floats(-2000, 2000),
)


@FAST
@given(transforms, st.sampled_from(SIZES))
def test_estimate_norm_recovers_a_similarity_transform(params: tuple[float, ...], size: int) -> None:
    # Landmarks that are an exact similarity image of the template: the crop matrix must undo it.
    t = similarity(*params)
    template = arcface_template(size).astype(np.float64)
    kps = apply(t, template)
    m = estimate_norm(kps, size)
    np.testing.assert_allclose(m, invert(t), rtol=1e-6, atol=1e-6 * (1 + np.abs(invert(t)).max()))
    np.testing.assert_allclose(apply(m, kps), template, atol=1e-6)


landmarks = st.tuples(
    transforms,
    st.lists(st.floats(-0.25, 0.25), min_size=10, max_size=10),  # per-point jitter, in template units
)


@FAST
@given(landmarks, st.sampled_from(SIZES))
def test_estimate_norm_equals_insightface(params: tuple[tuple[float, ...], list[float]], size: int) -> None:
    (scale, angle, tx, ty), jitter = params
    # Realistic but imperfect faces: the template under a random similarity, each point moved by up
    # to a quarter of the face width (a rigid fit is then only approximate).
    base = arcface_template(112).astype(np.float64)
    pts = base + np.asarray(jitter).reshape(5, 2) * 40.0
    kps = apply(similarity(scale, angle, tx, ty), pts).astype(np.float32)
    np.testing.assert_allclose(estimate_norm(kps, size), reference_norm(kps, size), atol=1e-4)


def test_estimate_norm_equals_insightface_for_random_points() -> None:
    rng = np.random.default_rng(0)
    for _ in range(200):
        kps = rng.uniform(0, 1920, (5, 2)).astype(np.float32)
        size = int(rng.choice(SIZES))
        np.testing.assert_allclose(estimate_norm(kps, size), reference_norm(kps, size), atol=1e-4)


def test_templates_match_insightface() -> None:
    ref = insightface_align().arcface_dst
    shift = np.array([8.0, 0.0])  # the 128 px crop sits 8 px further right
    np.testing.assert_allclose(arcface_template(112), ref)
    np.testing.assert_allclose(arcface_template(128), ref + shift, atol=1e-5)
    np.testing.assert_allclose(arcface_template(256), (ref + shift) * 2.0, atol=1e-4)
    with pytest.raises(ValueError):
        arcface_template(100)


def test_estimate_norm_matches_skimage_umeyama() -> None:
    # insightface runs skimage's SimilarityTransform (Umeyama's SVD, no reflection); the closed
    # form must land on the same matrix, also for mirrored landmarks (where Umeyama flips a sign)
    # and nearly collinear ones.
    from skimage.transform import SimilarityTransform

    rng = np.random.default_rng(1)
    template = arcface_template(112).astype(np.float64)
    cases = [rng.uniform(0, 1280, (5, 2)) for _ in range(20)]
    cases.append(template[:, ::-1] * 3.0 + 40.0)  # x and y swapped: a mirror image of the template
    cases.append(np.c_[np.linspace(0, 100, 5), np.linspace(0, 50, 5) + rng.normal(0, 1e-3, 5)])
    for i, kps in enumerate(cases):
        size = SIZES[i % len(SIZES)]
        tform = SimilarityTransform()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert tform.estimate(kps, arcface_template(size).astype(np.float64))
        np.testing.assert_allclose(estimate_norm(kps, size), tform.params[:2], rtol=0, atol=1e-9)


def test_coincident_landmarks_are_refused() -> None:
    with pytest.raises(ValueError, match="degenerate"):
        estimate_norm(np.full((5, 2), 7.0), 112)


def face_frame(rng: np.random.Generator, smooth: bool) -> tuple[np.ndarray, list[np.ndarray]]:
    img = rng.integers(0, 256, (480, 640, 3), dtype=np.uint8)
    if smooth:  # closer to a photo: neighbouring pixels alike
        img = np.asarray(cv2.GaussianBlur(img, (0, 0), 3.0), dtype=np.uint8)
    faces = []
    for _ in range(10):
        t = similarity(
            rng.uniform(0.8, 3.0), rng.uniform(-0.6, 0.6), rng.uniform(150, 450), rng.uniform(100, 300)
        )
        pts = arcface_template(112).astype(np.float64) - 56.0 + rng.normal(0, 2.0, (5, 2))
        faces.append(apply(t, pts).astype(np.float32))  # float32, as a detector returns them
    return img, faces


@pytest.mark.parametrize("size", [112, 128, 256])
def test_norm_crop_equals_insightface_pixel_for_pixel(size: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # insightface keeps its template in float32, which moves its matrix by ~1.5e-6 px; OpenCV's
    # fixed-point warp can turn that into a different sample on a noise image. With the template
    # (and landmarks) widened to float64 the matrices agree to 1e-9 and the crops pixel for pixel.
    face_align = insightface_align()
    monkeypatch.setattr(face_align, "arcface_dst", face_align.arcface_dst.astype(np.float64))
    img, faces = face_frame(np.random.default_rng(size), smooth=False)
    for kps in faces:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref_crop, ref_m = face_align.norm_crop2(img, kps.astype(np.float64), size)
        crop, m = norm_crop(img, kps, size)
        assert crop.shape == (size, size, 3)
        np.testing.assert_array_equal(crop, ref_crop)
        np.testing.assert_allclose(m, ref_m, rtol=0, atol=1e-9)


@pytest.mark.parametrize("size", [112, 128])
def test_norm_crop_close_to_unmodified_insightface(size: int) -> None:
    # Stock insightface (float32 template and landmarks): its matrix differs from ours by < 1e-4, so
    # on a photo-like picture at most 1 level in a few pixels.
    img, faces = face_frame(np.random.default_rng(100 + size), smooth=True)
    for kps in faces:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref_crop, ref_m = insightface_align().norm_crop2(img, kps, size)
        crop, m = norm_crop(img, kps, size)
        np.testing.assert_allclose(m, ref_m, atol=1e-4)
        diff = np.abs(crop.astype(np.int16) - ref_crop)
        assert diff.max() <= 1
        assert (diff > 0).mean() < 0.005
