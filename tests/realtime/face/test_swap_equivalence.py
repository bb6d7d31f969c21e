"""Our swap path (models.ops.align crop + InSwapper.swap + region-limited paste) vs insightface's own
INSwapper.get on the same double, the same photo and the same landmarks.

Where the two may differ, and why (everything else must match):
* Alignment: insightface keeps its ArcFace template in float32, which moves its crop matrix by
  ~1.5e-6 px; OpenCV's fixed-point warp can turn that into a 1-level change in a few crop pixels.
  With insightface's template widened to float64 the swapped crops are identical.
* Paste: insightface warps the crop and a white mask over the WHOLE frame, erodes it by
  max(size//10, 10), blurs it with max(size//20, 5)*2+1 (size from the visible mask's bounding box)
  and blends with truncation. realtime.face.host.compositor builds the feathered mask in crop space (same
  kernel sizes, scaled into the crop), warps only into the face's region and blends with rounding.
  So: outside the region both leave the frame untouched; in the face's core (beyond the feather)
  the two agree within 3 levels (warp offsets + truncation vs rounding); in the feather band the
  alpha ramps differ slightly and the difference is bounded on average, not per pixel.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from types import SimpleNamespace

import cv2
import numpy as np
import pytest

from models.fakes.pixel_doubles import build_inswapper
from models.ops.align import estimate_norm, invert_affine, warp_crop
from models.runtime.session import SessionConfig, SessionFactory
from models.wrappers.swappers.inswapper import InSwapper

FACTORY = SessionFactory(SessionConfig(provider="cpu"))

# skimage's astronaut photo: eyes as MTCNN finds them (docs/model-contracts.md), nose and mouth by eye.
ASTRONAUT_KPS = np.array([[205, 100], [247, 103], [226, 125], [210, 148], [243, 150]], dtype=np.float64)

# (roll in degrees, scale, shift in px): frontal, rotated+moved, a close-up, a face partly outside
# the frame (top-left corner), a small face.
POSES = [
    (0, 1.0, (0, 0)),
    (20, 1.3, (30, 40)),
    (-15, 2.5, (0, 0)),
    (0, 1.0, (-190, -70)),
    (10, 0.5, (100, 200)),
]


def pose_kps(roll: float, scale: float, shift: tuple[int, int]) -> np.ndarray:
    c = ASTRONAUT_KPS.mean(axis=0)
    a = np.deg2rad(roll)
    rot = scale * np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]])
    return ((ASTRONAUT_KPS - c) @ rot.T + c + np.asarray(shift)).astype(np.float32)


@pytest.fixture(scope="module")
def frame() -> np.ndarray:
    from skimage import data

    return np.ascontiguousarray(data.astronaut()[:, :, ::-1])  # RGB photo -> BGR frame


@pytest.fixture(scope="module")
def model_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("swap") / "inswapper_128.onnx"
    path.write_bytes(build_inswapper(seed=0).SerializeToString())
    return path


@pytest.fixture(scope="module")
def ours(model_path: Path) -> InSwapper:
    return InSwapper.from_file(model_path, FACTORY)


@pytest.fixture(scope="module")
def ref(model_path: Path):  # type: ignore[no-untyped-def]
    from insightface.model_zoo.inswapper import INSwapper

    return INSwapper(model_file=str(model_path), session=FACTORY.create(model_path))


@pytest.fixture(scope="module")
def source() -> SimpleNamespace:
    v = np.random.default_rng(1).standard_normal(512).astype(np.float32)
    return SimpleNamespace(normed_embedding=v / np.linalg.norm(v))


def our_swap(
    ours: InSwapper, frame: np.ndarray, kps: np.ndarray, emb: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    m = estimate_norm(kps, ours.input_size)
    crop = warp_crop(frame, m, ours.input_size)
    return ours.swap(crop, ours.latent(emb)), m


def ref_get(ref, frame, kps, source, paste_back):  # type: ignore[no-untyped-def]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # skimage's SimilarityTransform.estimate deprecation notice
        return ref.get(frame, SimpleNamespace(kps=kps), source, paste_back=paste_back)


@pytest.mark.parametrize("pose", POSES)
def test_swapped_crop_identical_to_insightface(  # type: ignore[no-untyped-def]
    pose, frame, ours, ref, source, monkeypatch: pytest.MonkeyPatch
) -> None:
    from insightface.utils import face_align

    kps = pose_kps(*pose)
    # Stock insightface: same matrix within 1e-4, crops within 1 level in a handful of pixels.
    ref_fake, ref_m = ref_get(ref, frame, kps, source, paste_back=False)
    fake, m = our_swap(ours, frame, kps, source.normed_embedding)
    np.testing.assert_allclose(m, ref_m, atol=1e-4)
    diff = np.abs(fake.astype(np.int16) - ref_fake)
    assert diff.max() <= 1 and (diff > 0).mean() < 0.001

    # insightface with a float64 template (see module docstring): bit-identical swapped crops.
    monkeypatch.setattr(face_align, "arcface_dst", face_align.arcface_dst.astype(np.float64))
    ref_fake, ref_m = ref_get(ref, frame, kps.astype(np.float64), source, paste_back=False)
    np.testing.assert_array_equal(fake, ref_fake)
    np.testing.assert_allclose(m, ref_m, rtol=0, atol=1e-9)


def zones(frame_shape: tuple[int, ...], m: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(outside, core, band) masks of the frame for a face pasted through `m`.

    core: inside the pasted square by more than insightface's erosion + blur kernel, where both
    masks are 1; band: the rest of the square (the feather); outside: beyond the square + 2 px.
    """
    h, w = frame_shape[:2]
    square = cv2.warpAffine(np.full((128, 128), 255, np.float32), invert_affine(m), (w, h)) > 20
    ys, xs = np.nonzero(square)
    size = int(np.sqrt((ys.max() - ys.min()) * (xs.max() - xs.min())))
    reach = max(size // 10, 10) + 2 * (max(size // 20, 5) * 2 + 1)
    core = cv2.erode(square.astype(np.uint8), np.ones((reach, reach), np.uint8)) > 0
    near = cv2.dilate(square.astype(np.uint8), np.ones((5, 5), np.uint8)) > 0
    return ~near, core, square & ~core


@pytest.mark.parametrize("pose", POSES)
def test_pasted_frame_close_to_insightface(pose, frame, ours, ref, source) -> None:  # type: ignore[no-untyped-def]
    compositor = pytest.importorskip("realtime.face.host.compositor")
    kps = pose_kps(*pose)
    fake, m = our_swap(ours, frame, kps, source.normed_embedding)
    before = frame.copy()
    pasted = compositor.paste_back(frame, fake, m)
    expected = ref_get(ref, frame, kps, source, paste_back=True)
    np.testing.assert_array_equal(frame, before)  # a new frame: the input is not touched
    assert pasted.shape == frame.shape and pasted.dtype == np.uint8

    outside, core, band = zones(frame.shape, m)
    diff = np.abs(pasted.astype(np.int16) - expected).max(axis=2)
    # Outside the face's region: both untouched.
    np.testing.assert_array_equal(pasted[outside], frame[outside])
    np.testing.assert_array_equal(expected[outside], frame[outside])
    # The face itself: the same pixels (<= 3 levels: warp rounding, truncation vs rounding).
    assert core.sum() > 1000
    assert diff[core].max() <= 3
    # The feather: different mask construction (crop space vs frame space), bounded on average.
    # Measured with this photo, per pose: 3.3, 5.2, 2.7, 13.9 (face cut by the frame edge: insightface
    # sizes its kernels from the visible part only), 2.7 levels.
    assert diff[band].mean() <= 16.0
    # About the same amount of the frame is replaced (measured: within 5%).
    ours_changed = int((pasted != frame).any(axis=2).sum())
    ref_changed = int((expected != frame).any(axis=2).sum())
    assert abs(ours_changed - ref_changed) <= 0.06 * ref_changed


def test_paste_would_catch_a_channel_or_offset_error(frame, ours, ref, source) -> None:  # type: ignore[no-untyped-def]
    # The tolerances above must be tight enough to fail on real mistakes.
    compositor = pytest.importorskip("realtime.face.host.compositor")
    kps = pose_kps(*POSES[0])
    fake, m = our_swap(ours, frame, kps, source.normed_embedding)
    expected = ref_get(ref, frame, kps, source, paste_back=True)
    _, core, _ = zones(frame.shape, m)
    swapped_rb = compositor.paste_back(frame, np.ascontiguousarray(fake[:, :, ::-1]), m)
    shifted = m.copy()
    shifted[:, 2] += 1.0  # a one-pixel slip in the crop
    slipped = compositor.paste_back(frame, fake, shifted)
    for wrong in (swapped_rb, slipped):
        assert np.abs(wrong.astype(np.int16) - expected).max(axis=2)[core].max() > 3
