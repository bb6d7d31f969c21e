"""models.ops.align on real detected landmarks, against insightface's reference implementation.

insightface's estimate_norm hands skimage a float32 template (arcface_dst is float32), so skimage
solves the similarity in float32: its matrix is off from the exact float64 solution by ~1e-5. That
moves warpAffine's sampling grid by ~1e-3 px, which flips a handful of OpenCV's 1/32 px
interpolation bins: a few dozen channel values (< 0.1 %) differ by 1-2 grey levels. With the same
matrix precision (skimage in float64) our crop equals insightface's warp pixel for pixel.
"""

from __future__ import annotations

import cv2
import numpy as np
import numpy.typing as npt
import pytest
from insightface.utils import face_align
from skimage import transform as sk_transform

from models.ops.align import arcface_template, estimate_norm, norm_crop, transform_points
from models.runtime.session import SessionConfig, SessionFactory
from models.wrappers.mtcnn import MTCNN
from tests import real_faces as rf

# insightface calls skimage's deprecated SimilarityTransform.estimate; that is its business.
pytestmark = pytest.mark.filterwarnings("ignore:`estimate` is deprecated:FutureWarning")

Image = npt.NDArray[np.uint8]


def _real_faces() -> list[tuple[str, Image, npt.NDArray[np.float32]]]:
    astronaut = rf.astronaut_bgr()
    group = rf.group_photo_bgr()
    cases = [("astronaut", astronaut, rf.astronaut_face().kps)]
    cases += [(f"t1-face{i}", group, face.kps) for i, face in enumerate(rf.group_photo_faces())]
    return cases


@pytest.fixture(scope="module")
def real_faces() -> list[tuple[str, Image, npt.NDArray[np.float32]]]:
    return _real_faces()


@pytest.mark.parametrize("size", [112, 128])
def test_norm_crop_matches_insightface(
    real_faces: list[tuple[str, Image, npt.NDArray[np.float32]]], size: int
) -> None:
    for name, image, kps in real_faces:
        ours, m = norm_crop(image, kps, size)
        theirs = face_align.norm_crop(image, kps, image_size=size)
        assert ours.shape == theirs.shape == (size, size, 3), name
        np.testing.assert_allclose(m, face_align.estimate_norm(kps, size), atol=1e-4, err_msg=name)
        diff = np.abs(ours.astype(np.int16) - theirs.astype(np.int16))
        # See the module docstring: float32 rounding inside insightface, not a different transform.
        assert int(diff.max()) <= 2, name
        assert float((diff > 0).mean()) < 0.002, name


@pytest.mark.parametrize("size", [112, 128])
def test_norm_crop_is_pixel_exact_against_float64_skimage(
    real_faces: list[tuple[str, Image, npt.NDArray[np.float32]]], size: int
) -> None:
    for name, image, kps in real_faces:
        tform = sk_transform.SimilarityTransform()
        tform.estimate(kps.astype(np.float64), arcface_template(size).astype(np.float64))
        reference_m = tform.params[:2]
        np.testing.assert_allclose(estimate_norm(kps, size), reference_m, atol=1e-9, err_msg=name)
        # insightface's own warp call, fed the exact matrix.
        theirs = cv2.warpAffine(image, reference_m, (size, size), borderValue=0.0)
        ours, _ = norm_crop(image, kps, size)
        np.testing.assert_array_equal(ours, theirs, err_msg=name)


def test_aligned_astronaut_has_the_eyes_on_the_template() -> None:
    kps = rf.astronaut_face().kps
    _, m = norm_crop(rf.astronaut_bgr(), kps, 112)
    err = np.abs(transform_points(kps, m) - arcface_template(112))
    # A similarity transform cannot fit five real landmarks exactly; on this face the residual sits
    # mostly in the mouth (about 4.5 px) while the eyes land within about 2 px.
    assert float(err[:2].mean()) < 3.0
    assert float(err.mean()) < 4.0


def test_detector_finds_the_eyes_on_the_template_in_the_aligned_crop() -> None:
    """Independent check: re-detect on the aligned crop (224 px, padded so the whole head is in view)
    and compare with the template, scaled back to 112 px."""
    size, pad = 224, 48
    crop, _ = norm_crop(rf.astronaut_bgr(), rf.astronaut_face().kps, size)
    framed = np.asarray(
        cv2.copyMakeBorder(crop, pad, pad, pad, pad, cv2.BORDER_CONSTANT, value=(48, 48, 48)), dtype=np.uint8
    )
    # One ORT thread: faster than spin-waiting thread pools on a shared 2-core machine.
    dets = MTCNN(SessionFactory(SessionConfig(provider="cpu", intra_op_threads=1))).detect(framed)
    assert len(dets) == 1
    err = (dets[0].kps - pad - arcface_template(size)) * (112 / size)
    assert float(np.abs(err[:2]).mean()) < 3.0
