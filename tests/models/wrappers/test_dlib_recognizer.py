"""dlib's recogniser on real photos: the same person stays close across a moving clip, different
people of the group photo stay far apart, so reference lock and --map can tell people apart."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from models.wrappers.dlib_recognizer import DlibRecognizer, dlib_available, face_box
from tests.real_faces import (
    astronaut_bgr,
    astronaut_face,
    group_photo_bgr,
    group_photo_faces,
    make_moving_clip,
    transform_points,
)

pytestmark = pytest.mark.skipif(not dlib_available(), reason="dlib / face-recognition-models not installed")

SAME_MAX = 0.04  # cosine distance: the same face moved, turned a little, resampled
OTHERS_MIN = 0.09  # between any two people of the group photo and the astronaut


@pytest.fixture(scope="module")
def recognizer() -> DlibRecognizer:
    return DlibRecognizer()


def test_the_same_person_moving_stays_close_to_their_photo(recognizer: DlibRecognizer) -> None:
    """If this broke, a locked person would read as someone else while moving and lose the swap."""
    image, face = astronaut_bgr(), astronaut_face()
    reference = recognizer.embed(image, face.kps)
    clip = make_moving_clip(image, 8)
    worst = max(
        1.0 - float(recognizer.embed(frame, transform_points(face.kps, m)) @ reference)
        for frame, m in zip(clip.frames, clip.matrices, strict=True)
    )
    assert worst < SAME_MAX, f"the same face moved reads {worst:.3f} away"


def test_different_people_are_far_apart(recognizer: DlibRecognizer) -> None:
    """If this broke, the swap could move from the locked person to someone else."""
    photo = group_photo_bgr()
    vectors = [recognizer.embed(photo, f.kps) for f in group_photo_faces()]
    vectors.append(recognizer.embed(astronaut_bgr(), astronaut_face().kps))
    closest = min(1.0 - float(a @ b) for a, b in itertools.combinations(vectors, 2))
    assert closest > OTHERS_MIN, f"two different people read only {closest:.3f} apart"
    assert all(v.shape == (128,) and abs(float(np.linalg.norm(v)) - 1.0) < 1e-4 for v in vectors)


def test_the_box_dlib_expects_sits_on_the_face() -> None:
    x1, y1, x2, y2 = face_box(astronaut_face().kps)
    kx1, _, kx2, _ = (float(v) for v in astronaut_face().box)
    assert x1 < 210 and x2 > 240 and y1 < 100 and y2 > 140  # around eyes and mouth
    assert abs((x2 - x1) - (kx2 - kx1)) < 0.25 * (kx2 - kx1)


def test_a_face_outside_the_frame_is_an_error(recognizer: DlibRecognizer) -> None:
    kps = astronaut_face().kps + np.float32(5000.0)
    with pytest.raises(ValueError):
        recognizer.embed(astronaut_bgr(), kps)
