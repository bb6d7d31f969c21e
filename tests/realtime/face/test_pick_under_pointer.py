"""The face picked in the preview is the one under the pointer, in a real group photo with the
real built-in detector: with dlib's real recogniser and with the ArcFace double the offline
try-out uses. Clicking the man in the centre of the group gave the swap to his neighbour."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from models.fakes.doubles import write_all
from models.runtime.session import SessionConfig, SessionFactory
from models.wrappers.dlib_recognizer import DlibRecognizer, dlib_available
from models.wrappers.mtcnn import MTCNN
from realtime.core.settings import load_preset
from realtime.face.analyser import FaceAnalyser
from realtime.face.model_api import AnalysisModels
from realtime.face.picks import LivePicks
from realtime.tools.leak_scenes import group_photo
from realtime.wiring.model_loading import load_recognizer
from tests.real_faces import GROUP_FACE_COUNT, group_photo_faces


@pytest.fixture(scope="module")
def arcface_double(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = Path(tmp_path_factory.mktemp("doubles"))
    write_all(folder)
    return folder / "w600k_r50.onnx"


def _person_at(kps: np.ndarray) -> int | None:
    """Which of the six people landmarks are on (their nose inside that person's box)."""
    nose = kps[2]
    for i, face in enumerate(group_photo_faces()):
        x1, y1, x2, y2 = face.box
        if x1 <= nose[0] <= x2 and y1 <= nose[1] <= y2:
            return i
    return None


def _swapped_after_picking(person: int, recognizer_kind: str, arcface_double: Path) -> set[int]:
    photo = group_photo()
    mtcnn = MTCNN(min_face_size=40)
    arcface = load_recognizer(arcface_double, SessionFactory(SessionConfig(provider="cpu")))
    identifier = DlibRecognizer() if recognizer_kind == "dlib" else None
    settings = load_preset("balanced").with_overrides(
        {"detector.model": "mtcnn", "swap.recognizer": "dlib" if identifier else "arcface"}
    )
    picks = LivePicks()
    analyser = FaceAnalyser(AnalysisModels(mtcnn, arcface, "mtcnn", identifier), settings, picks=picks)
    # What the panel's picker does: the built-in detector on the shown picture, the face under the
    # pointer (the person's nose) clicked.
    found = mtcnn.detect(photo)
    nose = group_photo_faces()[person].kps[2]
    clicked = min(found, key=lambda d: float(np.linalg.norm(d.kps[2] - nose)))
    swapped: set[int] = set()
    for i in range(8):
        if i == 2:
            picks.pick(photo, clicked.kps)
        plan = analyser.analyse(photo, i / 30.0, settings)
        if i >= 3:
            swapped |= {p for t in plan.targets if t.weight > 0.0 and (p := _person_at(t.kps)) is not None}
    return swapped


@pytest.mark.parametrize("recognizer_kind", ["dlib", "arcface double"])
@pytest.mark.parametrize("person", range(GROUP_FACE_COUNT))
def test_the_person_clicked_gets_the_swap(person: int, recognizer_kind: str, arcface_double: Path) -> None:
    if recognizer_kind == "dlib" and not dlib_available():
        pytest.skip("dlib / face-recognition-models not installed")
    assert _swapped_after_picking(person, recognizer_kind, arcface_double) == {person}


def test_a_click_where_the_runs_detector_finds_no_face_is_said_and_swaps_no_neighbour(
    arcface_double: Path,
) -> None:
    """The detector double of the offline try-out finds one face in the group photo (the man left of
    centre): a click on another person gave him the swap. Now the face under the pointer gets it,
    and a click where the run's detector finds nobody is said so."""
    from realtime.wiring.model_loading import load_detector

    photo = group_photo()
    factory = SessionFactory(SessionConfig(provider="cpu"))
    detector = load_detector(arcface_double.with_name("det_10g.onnx"), factory, input_size=(640, 640))
    found_by_run = {_person_at(d.kps) for d in detector.detect(photo)}
    assert len(found_by_run) == 1
    (seen,) = found_by_run
    unseen = next(p for p in range(GROUP_FACE_COUNT) if p != seen)
    mtcnn = MTCNN(min_face_size=40)
    arcface = load_recognizer(arcface_double, factory)
    settings = load_preset("balanced")
    for person, expected in ((seen, {seen}), (unseen, set())):
        picks = LivePicks()
        analyser = FaceAnalyser(AnalysisModels(detector, arcface, "det_10g"), settings, picks=picks)
        nose = group_photo_faces()[person].kps[2]
        clicked = min(mtcnn.detect(photo), key=lambda d: float(np.linalg.norm(d.kps[2] - nose)))
        swapped: set[int | None] = set()
        for i in range(8):
            if i == 2:
                picks.pick(photo, clicked.kps)
            plan = analyser.analyse(photo, i / 30.0, settings)
            if i >= 3:
                swapped |= {_person_at(t.kps) for t in plan.targets if t.weight > 0.0}
        assert swapped == expected, person
        notes = picks.take_notes()
        assert bool(notes) == (person == unseen) and all(
            "finds no face where you clicked" in n for n in notes
        )
