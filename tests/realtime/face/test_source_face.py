"""The source identity: several photos of one person are averaged, and in a group photo the
largest face is the one used."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from models.fakes.doubles import write_all
from models.runtime.session import SessionConfig, SessionFactory
from models.wrappers.arcface import ArcFace
from models.wrappers.mtcnn import MTCNN
from models.wrappers.router import load_recognizer
from realtime.face.source_face import load_identity
from realtime.tools.bench import astronaut_bgr

FACTORY = SessionFactory(SessionConfig(provider="cpu"))


@pytest.fixture(scope="module")
def recognizer(tmp_path_factory: pytest.TempPathFactory) -> ArcFace:
    d = Path(tmp_path_factory.mktemp("rec"))
    write_all(d)
    return load_recognizer(d / "w600k_r50.onnx", FACTORY)


def test_several_photos_are_averaged(tmp_path: Path, recognizer: ArcFace) -> None:
    a, b = tmp_path / "a.png", tmp_path / "b.png"
    cv2.imwrite(str(a), astronaut_bgr())
    cv2.imwrite(str(b), np.ascontiguousarray(astronaut_bgr()[:, ::-1]))  # mirrored: another embedding
    detector = MTCNN()
    ea = load_identity([a], detector, recognizer).embedding
    eb = load_identity([b], detector, recognizer).embedding
    assert float(ea @ eb) < 0.99  # the test needs two different embeddings to mean anything
    both = load_identity([a, b], detector, recognizer)
    mean = (ea + eb) / np.linalg.norm(ea + eb)
    np.testing.assert_allclose(both.embedding, mean, atol=1e-5)
    assert [p.path for p in both.photos] == [a, b]


def test_a_group_photo_uses_its_largest_face(tmp_path: Path, recognizer: ArcFace) -> None:
    from insightface.data import get_image

    group = tmp_path / "group.jpg"
    image = get_image("t1")
    cv2.imwrite(str(group), image)
    detector = MTCNN()
    faces = detector.detect(cv2.imread(str(group)))
    assert len(faces) >= 3
    identity = load_identity([group], detector, recognizer)
    (photo,) = identity.photos
    assert photo.detection.area == max(f.area for f in faces)
    assert photo.faces_found == len(faces) and "using the largest" in identity.notes[0]
