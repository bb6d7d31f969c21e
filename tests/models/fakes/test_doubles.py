"""The doubles see their input: the detector finds faces in the picture (none in a blank or wrongly
prepared one), and the per-pixel doubles answer a transposed or flipped crop, undone on the way out,
differently from the crop itself, so a wrapper making either mistake fails."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from models.fakes.detector_double import (
    DEFAULT_FACE,
    build_scrfd,
    face_in_frame,
    frame_with_faces,
    paint_face,
)
from models.fakes.doubles import write_all
from models.runtime.session import SessionConfig, SessionFactory
from models.wrappers.enhancers import GPEN256, FaceRestorer
from models.wrappers.maskers import FaceParser, Occluder
from models.wrappers.scrfd import INPUT_MEAN, INPUT_STD, SCRFD
from models.wrappers.swappers.inswapper import InSwapper

FACTORY = SessionFactory(SessionConfig(provider="cpu"))
U8 = npt.NDArray[np.uint8]


@pytest.fixture(scope="module")
def doubles(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return write_all(tmp_path_factory.mktemp("doubles"))


@pytest.fixture(scope="module")
def detector(doubles: dict[str, Path]) -> SCRFD:
    return SCRFD(FACTORY.create(doubles["det_10g.onnx"]))


def noise(h: int, w: int, seed: int = 0) -> U8:
    return np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)


# ------------------------------------------------------------------------------ the detector


def test_a_blank_picture_has_no_face(detector: SCRFD) -> None:
    for value in (0, 90, 128, 255):
        assert detector.detect(np.full((720, 1280, 3), value, np.uint8)) == []
    assert detector.detect(noise(720, 1280)) == []  # noise is no face either


def test_a_face_moved_in_the_picture_moves_the_detection(detector: SCRFD) -> None:
    moved = DEFAULT_FACE._replace(
        box=[v + d for v, d in zip(DEFAULT_FACE.box, (-150.0, 40.0, -150.0, 40.0), strict=True)],
        kps=np.asarray(DEFAULT_FACE.kps, dtype=np.float64) + np.array([-150.0, 40.0]),
    )
    for spec in (DEFAULT_FACE, moved):
        (face,) = detector.detect(frame_with_faces([spec], 1280, 720))
        box, _ = face_in_frame(spec, 1280, 720)
        np.testing.assert_allclose(face.box, box, atol=2.0)


def test_the_astronaut_is_found_where_she_is(detector: SCRFD) -> None:
    from realtime.tools.bench import astronaut_bgr

    photo = astronaut_bgr()
    (face,) = detector.detect(photo)
    (mirrored,) = detector.detect(np.ascontiguousarray(photo[:, ::-1]))
    centre = (face.box[0] + face.box[2]) / 2
    mirrored_centre = (mirrored.box[0] + mirrored.box[2]) / 2
    assert 180 < centre < 270  # her face spans x 182..268
    assert abs(mirrored_centre - (512 - 1 - centre)) < 3 and abs(mirrored_centre - centre) > 30


def blob_detections(det: SCRFD, blob: npt.NDArray[np.float32]) -> list[npt.NDArray[np.float32]]:
    """Boxes (detector pixels) the double reports for a blob fed as it is."""
    outs = det.session.run(det.output_names, {det.input_name: blob})
    boxes, _, _ = det._decode(outs)
    return list(boxes)


@pytest.mark.parametrize(
    "prepare",
    [
        pytest.param(lambda rgb: rgb / 255.0, id="x/255, no mean"),
        pytest.param(lambda rgb: (rgb - 127.5) / 255.0, id="half scale"),
        pytest.param(lambda rgb: rgb / 128.0, id="no mean"),
        pytest.param(lambda rgb: rgb - 127.5, id="no scale"),
        pytest.param(lambda rgb: (rgb[::-1] - INPUT_MEAN) / INPUT_STD, id="BGR fed to an RGB model"),
    ],
)
def test_a_wrongly_prepared_blob_has_no_face(
    detector: SCRFD, prepare: Callable[[npt.NDArray[np.float64]], npt.NDArray[np.float64]]
) -> None:
    frame = frame_with_faces([DEFAULT_FACE], 640, 640)
    rgb = frame[:, :, ::-1].transpose(2, 0, 1).astype(np.float64)
    right = ((rgb - INPUT_MEAN) / INPUT_STD)[None].astype(np.float32)
    assert len(blob_detections(detector, right)) == 1
    assert blob_detections(detector, prepare(rgb)[None].astype(np.float32)) == []


def test_a_wrapper_feeding_a_blank_or_swapped_blob_finds_nothing(detector: SCRFD) -> None:
    frame = frame_with_faces([DEFAULT_FACE], 1280, 720)

    class Blank(SCRFD):
        def preprocess(self, image_bgr: Any) -> tuple[npt.NDArray[Any], float]:
            blob, scale = super().preprocess(image_bgr)
            blob.fill(0.0)
            return blob, scale

    blank = Blank(detector.session)
    swapped = SCRFD(detector.session, swap_rb=False)  # `input.1` wants RGB
    assert len(detector.detect(frame)) == 1
    assert blank.detect(frame) == [] and swapped.detect(frame) == []


def test_the_double_answers_at_any_letterboxed_size(doubles: dict[str, Path]) -> None:
    session = FACTORY.create(doubles["det_10g.onnx"])
    frame = frame_with_faces([DEFAULT_FACE], 1280, 720)
    want, _ = face_in_frame(DEFAULT_FACE, 1280, 720)
    for size in ((320, 320), (480, 480), (640, 384)):
        (face,) = SCRFD(session, input_size=size).detect(frame)
        centre = (face.box[:2] + face.box[2:]) / 2
        np.testing.assert_allclose(centre, (want[:2] + want[2:]) / 2, atol=4.0, err_msg=str(size))


def test_each_face_is_found_by_its_own_key() -> None:
    a = DEFAULT_FACE
    b = a._replace(box=[100.0, 100.0, 200.0, 220.0], kps=np.asarray(a.kps) - [160.0, 0.0], score=0.8)
    det = SCRFD(FACTORY.create(build_scrfd([a, b]).SerializeToString(), "d"))
    assert [round(f.score, 2) for f in det.detect(frame_with_faces([a, b], 640, 640))] == [0.92, 0.8]
    only_b = np.full((640, 640, 3), 90, np.uint8)
    paint_face(only_b, b, 1)
    assert [round(f.score, 2) for f in det.detect(only_b)] == [0.8]
    swapped_keys = np.full((640, 640, 3), 90, np.uint8)
    paint_face(swapped_keys, b, 0)  # b painted in a's key: a is reported, at b's place
    (face,) = det.detect(swapped_keys)
    assert round(face.score, 2) == 0.92
    assert abs((face.box[0] + face.box[2]) / 2 - 150.0) < 1.5


# ------------------------------------------------------------- per-pixel doubles: transposes


def transposed(fn: Callable[[U8], Any]) -> Callable[[U8], Any]:
    """The wrapper's mistake: the crop transposed on the way in, the answer transposed back."""

    def wrong(crop: U8) -> Any:
        out = fn(np.ascontiguousarray(crop.transpose(1, 0, 2)))
        return np.ascontiguousarray(np.swapaxes(out, 0, 1))

    return wrong


def flipped(fn: Callable[[U8], Any], axis: int) -> Callable[[U8], Any]:
    def wrong(crop: U8) -> Any:
        return np.ascontiguousarray(np.flip(fn(np.ascontiguousarray(np.flip(crop, axis))), axis))

    return wrong


def mistakes(fn: Callable[[U8], Any]) -> dict[str, Callable[[U8], Any]]:
    return {
        "transpose": transposed(fn),
        "flip left-right": flipped(fn, 1),
        "flip up-down": flipped(fn, 0),
    }


def smooth_crop(size: int, seed: int = 0) -> U8:
    import cv2

    small = noise(12, 12, seed)
    return np.asarray(cv2.resize(small, (size, size), interpolation=cv2.INTER_LINEAR), dtype=np.uint8)


def assert_mistakes_show(fn: Callable[[U8], Any], crop: U8, min_mean: float) -> None:
    right = np.asarray(fn(crop), dtype=np.float64)
    for name, wrong in mistakes(fn).items():
        diff = np.abs(np.asarray(wrong(crop), dtype=np.float64) - right)
        assert diff.mean() > min_mean, f"{name}: mean difference {diff.mean():.3f}"


def test_a_swapper_wrapper_that_transposes_or_flips_the_crop_is_caught(doubles: dict[str, Path]) -> None:
    swapper = InSwapper.from_file(doubles["inswapper_128.onnx"], FACTORY)
    latent = swapper.latent(np.random.default_rng(3).standard_normal(512) / np.sqrt(512))
    for crop in (smooth_crop(128), np.full((128, 128, 3), 128, np.uint8)):  # even a plain crop
        assert_mistakes_show(lambda c: swapper.swap(c, latent), crop, min_mean=2.0)


def test_a_restorer_wrapper_that_transposes_or_flips_the_crop_is_caught(doubles: dict[str, Path]) -> None:
    restorer: FaceRestorer = GPEN256.from_file(doubles["GPEN-BFR-256.onnx"], FACTORY)
    for crop in (smooth_crop(256), np.full((256, 256, 3), 128, np.uint8)):
        assert_mistakes_show(restorer.enhance, crop, min_mean=2.0)


def hand_crop(size: int) -> U8:
    """Skin with a saturated green "hand" off-centre: the occluder's 0 inside, 1 around it."""
    import cv2

    crop = np.empty((size, size, 3), np.uint8)
    crop[:] = (140, 170, 220)
    cv2.rectangle(
        crop, (size // 3, size // 2), (size // 3 + size // 4, size // 2 + size // 5), (0, 255, 0), -1
    )
    cv2.circle(crop, (2 * size // 3, size // 4), size // 10, (0, 255, 0), -1)
    return crop


def test_an_occluder_wrapper_that_transposes_or_flips_the_crop_is_caught(doubles: dict[str, Path]) -> None:
    occluder = Occluder.from_file(doubles["xseg_1.onnx"], FACTORY)
    crop = hand_crop(256)
    mask = occluder.mask(crop).copy()
    assert mask[256 // 2 + 10, 256 // 3 + 10] == 0.0 and mask[10, 10] == 1.0  # hand 0, skin 1
    assert_mistakes_show(lambda c: occluder.mask(c).copy(), crop, min_mean=0.005)


def test_a_parser_wrapper_that_transposes_or_flips_the_crop_is_caught(doubles: dict[str, Path]) -> None:
    parser = FaceParser.from_file(doubles["bisenet_resnet_34.onnx"], FACTORY)

    def changed(crop: U8) -> Any:
        return parser.labels(crop).copy()

    crop = noise(512, 512, 4)
    right = changed(crop)
    for name, wrong in mistakes(changed).items():
        assert (wrong(crop) != right).mean() > 0.2, name


def test_the_benchmarks_fixed_detector_reports_its_face_where_the_seeing_one_finds_it() -> None:
    """The overhead benchmark's detector answers without looking, with the same face as the one
    that finds it in the picture (so the benchmark's pipeline does the same work)."""
    from models.fakes.detector_double import build_scrfd_fixed

    fixed = SCRFD(FACTORY.create(build_scrfd_fixed([DEFAULT_FACE]).SerializeToString()))
    seeing = SCRFD(FACTORY.create(build_scrfd([DEFAULT_FACE]).SerializeToString()))
    picture = frame_with_faces([DEFAULT_FACE], 640, 640)
    (a,) = fixed.detect(np.zeros((640, 640, 3), np.uint8))
    (b,) = seeing.detect(picture)
    np.testing.assert_allclose(a.box, b.box, atol=1.5)
    np.testing.assert_allclose(a.kps, b.kps, atol=1.5)
