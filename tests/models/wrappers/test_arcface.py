"""ArcFace wrapper: alignment, normalisation, equivalence with insightface, contract checks."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from models.errors import ModelContractError
from models.fakes.doubles import FakeArg, FakeSession
from models.fakes.pixel_doubles import build_arcface
from models.ops.align import arcface_template, estimate_norm, norm_crop
from models.runtime.session import SessionConfig, SessionFactory
from models.wrappers.arcface import ArcFace

FACTORY = SessionFactory(SessionConfig(provider="cpu"))


@pytest.fixture(scope="module")
def model_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("arcface") / "w600k_r50.onnx"
    path.write_bytes(build_arcface(seed=0).SerializeToString())
    return path


@pytest.fixture(scope="module")
def arcface(model_path: Path) -> ArcFace:
    return ArcFace(FACTORY.create(model_path))


def face_texture(seed: int, size: int = 112) -> np.ndarray:
    """A smooth random picture (survives resampling), standing in for an aligned face."""
    rng = np.random.default_rng(seed)
    small = rng.integers(0, 256, (14, 14, 3), dtype=np.uint8)
    return np.asarray(cv2.resize(small, (size, size), interpolation=cv2.INTER_CUBIC), dtype=np.uint8)


def place_face(
    face: np.ndarray, frame_wh: tuple[int, int], scale: float, angle_deg: float, centre: tuple[float, float]
) -> tuple[np.ndarray, np.ndarray]:
    """Put an aligned 112 crop into a frame with a similarity transform; (frame, its 5 landmarks)."""
    a = np.deg2rad(angle_deg)
    rot = scale * np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]])
    t = np.asarray(centre) - rot @ np.array([56.0, 56.0])
    m = np.hstack([rot, t[:, None]])
    frame = cv2.warpAffine(face, m, frame_wh, flags=cv2.INTER_CUBIC, borderValue=(40, 40, 40))
    kps = arcface_template(112).astype(np.float64) @ rot.T + t
    return np.asarray(frame, dtype=np.uint8), kps.astype(np.float32)


def test_embedding_is_unit_512_float32_and_deterministic(arcface: ArcFace) -> None:
    frame, kps = place_face(face_texture(1), (640, 480), 2.0, 10.0, (300, 250))
    e1 = arcface.embed(frame, kps)
    e2 = arcface.embed(frame.copy(), kps.copy())
    assert e1.shape == (512,) and e1.dtype == np.float32
    assert np.linalg.norm(e1) == pytest.approx(1.0, abs=1e-5)
    np.testing.assert_array_equal(e1, e2)


def test_embed_is_normalised_raw(arcface: ArcFace) -> None:
    frame, kps = place_face(face_texture(2), (640, 480), 1.5, -5.0, (320, 240))
    raw = arcface.embed_raw(frame, kps)
    assert abs(float(np.linalg.norm(raw)) - 1.0) > 0.05  # the raw vector really is unnormalised
    np.testing.assert_allclose(arcface.embed(frame, kps), raw / np.linalg.norm(raw), rtol=1e-6, atol=1e-7)


def test_same_face_anywhere_in_the_frame_same_identity(arcface: ArcFace) -> None:
    face = face_texture(3)
    a = arcface.embed(*place_face(face, (640, 480), 2.0, 0.0, (200, 200)))
    b = arcface.embed(*place_face(face, (1280, 720), 3.0, 25.0, (800, 400)))
    other = arcface.embed(*place_face(face_texture(4), (640, 480), 2.0, 0.0, (200, 200)))
    assert float(a @ b) > 0.99  # alignment undoes position, size and roll
    assert float(a @ other) < 0.9  # a different face is a different identity


def test_matches_insightface_arcface_onnx(arcface: ArcFace, model_path: Path) -> None:
    from insightface.model_zoo.arcface_onnx import ArcFaceONNX

    ref = ArcFaceONNX(model_file=str(model_path), session=FACTORY.create(model_path))
    frame, kps = place_face(face_texture(5), (640, 480), 1.7, 12.0, (330, 260))
    raw_ref = ref.get_feat(norm_crop(frame, kps, 112)[0])[0]
    np.testing.assert_allclose(arcface.embed_raw(frame, kps), raw_ref, rtol=1e-5, atol=1e-5)


def test_aligned_crop_is_the_arcface_crop(arcface: ArcFace) -> None:
    frame, kps = place_face(face_texture(6), (640, 480), 1.3, 30.0, (300, 240))
    crop = cv2.warpAffine(frame, estimate_norm(kps, 112), (112, 112), borderValue=0.0)
    np.testing.assert_array_equal(arcface.embed_aligned_raw(np.asarray(crop)), arcface.embed_raw(frame, kps))
    with pytest.raises(ValueError):
        arcface.embed_aligned_raw(np.zeros((128, 128, 3), np.uint8))


@pytest.mark.parametrize(
    "inputs, outputs",
    [
        ([FakeArg("input.1", ["N", 3, 128, 128])], [FakeArg("fc", ["N", 512])]),  # wrong crop size
        ([FakeArg("input.1", ["N", 3, 112, 112])], [FakeArg("fc", ["N", 128])]),  # wrong embedding size
        ([FakeArg("data", ["N", 3, 192, 192])], [FakeArg("fc1", ["N", 212])]),  # 2d106 landmarks
        (
            [FakeArg("target", [1, 3, 128, 128]), FakeArg("source", [1, 512])],
            [FakeArg("o", [1, 3, 128, 128])],
        ),
        ([FakeArg("input.1", ["N", 3, 112, 112], "tensor(uint8)")], [FakeArg("fc", ["N", 512])]),
    ],
)
def test_wrong_contract_rejected(inputs: list[FakeArg], outputs: list[FakeArg]) -> None:
    with pytest.raises(ModelContractError, match=r"ArcFace recogniser"):
        ArcFace(FakeSession(inputs, outputs))
