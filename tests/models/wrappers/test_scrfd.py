"""SCRFD wrapper: letterbox, decode, NMS and contract checks, on contract-exact doubles."""

from __future__ import annotations

from typing import Any

import cv2
import numpy as np
import onnx
import pytest

from models.errors import ModelContractError
from models.fakes.detector_double import (
    DEFAULT_FACE,
    FaceSpec,
    build_scrfd,
    det_scale_for,
    face_in_frame,
    paint_face,
)
from models.fakes.doubles import FakeArg, FakeSession, scrfd_signature
from models.runtime.session import SessionConfig, SessionFactory
from models.wrappers.nms import nms
from models.wrappers.scrfd import SCRFD

FACTORY = SessionFactory(SessionConfig(provider="cpu"))

# (width, height): square, landscape 16:9 and 4:3 (down-scaled), portrait, small (up-scaled), odd.
FRAME_SIZES = [(640, 640), (1280, 720), (1920, 1080), (640, 480), (720, 1280), (320, 240), (333, 500)]


def make_detector(model: onnx.ModelProto, **kw: Any) -> SCRFD:
    return SCRFD(FACTORY.create(model.SerializeToString(), "scrfd double"), **kw)


def face_at(cx: float, cy: float, w: float, h: float, score: float) -> FaceSpec:
    """A face spec centred at (cx, cy) in detector pixels, landmarks laid out like a frontal face."""
    x1, y1 = cx - w / 2, cy - h / 2
    rel = np.array([[0.3, 0.4], [0.7, 0.4], [0.5, 0.6], [0.33, 0.8], [0.67, 0.8]])
    kps = rel * [w, h] + [x1, y1]
    return FaceSpec((x1, y1, x1 + w, y1 + h), kps, score)


def noise_frame(w: int, h: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)


def noise_with(faces: list[FaceSpec], w: int, h: int, seed: int = 0) -> np.ndarray:
    """A noise frame showing faces[i] in the double's colour key i, where face_in_frame puts it."""
    frame = noise_frame(w, h, seed)
    for i, face in enumerate(faces):
        paint_face(frame, face, i)
    return frame


# The double finds a painted face's centroid: within a detector pixel of where it was painted.
DET_TOL = 1.0


def portrait_safe(face: FaceSpec, w: int, h: int) -> FaceSpec:
    """DEFAULT_FACE lies outside a portrait frame's letterboxed picture; move it inside."""
    if h <= w:
        return face
    return face._replace(box=[v - 100.0 if i % 2 == 0 else v for i, v in enumerate(face.box)],
                         kps=np.asarray(face.kps, dtype=np.float64) - [100.0, 0.0])  # fmt: skip


def test_default_face_found_at_frame_coordinates_for_every_aspect() -> None:
    for w, h in FRAME_SIZES:
        face = portrait_safe(DEFAULT_FACE, w, h)
        det = make_detector(build_scrfd([face]))
        faces = det.detect(noise_with([face], w, h))
        assert len(faces) == 1, (w, h)
        box, kps = face_in_frame(face, w, h)
        tol = DET_TOL / det_scale_for(w, h)
        np.testing.assert_allclose(faces[0].box, box, atol=tol, err_msg=f"{w}x{h}")
        np.testing.assert_allclose(faces[0].kps, kps, atol=tol, err_msg=f"{w}x{h}")
        assert faces[0].box.dtype == np.float32 and faces[0].box.shape == (4,)
        assert faces[0].kps.dtype == np.float32 and faces[0].kps.shape == (5, 2)
        assert faces[0].score == pytest.approx(0.92, abs=1e-6)


@pytest.mark.parametrize("det_size", [320, 480])
def test_a_smaller_detector_input_finds_the_same_face_like_the_real_model(det_size: int) -> None:
    """Like det_10g, the double's outputs follow its input size (fewer anchors at 320), and the
    face lands at the same frame pixels; insightface's SCRFD at that size agrees."""
    from insightface.model_zoo.scrfd import SCRFD as InsightSCRFD

    model = build_scrfd([DEFAULT_FACE], det_size=det_size)
    det = make_detector(model, input_size=(det_size, det_size))
    ref = InsightSCRFD(session=FACTORY.create(model.SerializeToString(), "ref"))
    ref.prepare(-1, input_size=(det_size, det_size))
    assert [o.type.tensor_type.shape.dim[0].dim_value for o in model.graph.output[:3]] == [
        (det_size // s) ** 2 * 2 for s in (8, 16, 32)
    ]
    for w, h in ((1280, 720), (640, 480)):
        img = noise_with([DEFAULT_FACE], w, h)
        faces = det.detect(img)
        assert len(faces) == 1
        box, kps = face_in_frame(DEFAULT_FACE, w, h)
        # A coarser picture at a smaller size: within a detector pixel of the painted position.
        tol = DET_TOL / (det_scale_for(w, h) * det_size / 640)
        np.testing.assert_allclose(faces[0].box, box, atol=tol)
        np.testing.assert_allclose(faces[0].kps, kps, atol=tol)
        dets, kpss = ref.detect(img)
        np.testing.assert_allclose(faces[0].box, dets[0, :4], rtol=1e-6, atol=1e-3)
        np.testing.assert_allclose(faces[0].kps, kpss[0], rtol=1e-6, atol=1e-3)


def test_det_scale_is_new_height_over_image_height() -> None:
    # Restating the contract by hand for two sizes so a wrong formula in the helper is caught too.
    assert det_scale_for(1280, 720) == pytest.approx(0.5)
    assert det_scale_for(333, 500) == pytest.approx(640 / 500)  # portrait: height fills the canvas
    det = make_detector(build_scrfd([DEFAULT_FACE]))
    _, scale = det.preprocess(noise_frame(1000, 750))
    assert scale == pytest.approx(480 / 750)


def test_several_faces_on_all_strides_sorted_by_score() -> None:
    specs = [
        face_at(100, 100, 30, 36, 0.70),  # stride 8
        face_at(400, 300, 100, 120, 0.95),  # stride 16
        face_at(320, 500, 260, 200, 0.80),  # stride 32
    ]
    det = make_detector(build_scrfd(specs))
    faces = det.detect(noise_with(specs, 640, 640))
    assert [round(f.score, 2) for f in faces] == [0.95, 0.80, 0.70]
    for f, spec in zip(faces, [specs[1], specs[2], specs[0]], strict=True):
        np.testing.assert_allclose(f.box, spec.box, atol=DET_TOL)
        np.testing.assert_allclose(f.kps, np.asarray(spec.kps), atol=DET_TOL)


def test_nms_keeps_the_better_of_two_overlapping_faces_and_both_of_two_apart() -> None:
    a = face_at(300, 300, 100, 120, 0.90)
    b = face_at(310, 306, 100, 120, 0.80)  # IoU ~0.8 with a
    c = face_at(500, 150, 60, 70, 0.60)  # far away
    det = make_detector(build_scrfd([a, b, c]))
    # b as a small disc at its centre on top of a: both centroids stay where they are given.
    frame = noise_with([a], 1280, 720)
    paint_face(frame, b, 1, size=0.1)
    paint_face(frame, c, 2)
    faces = det.detect(frame)
    assert [round(f.score, 2) for f in faces] == [0.90, 0.60]
    np.testing.assert_allclose(faces[0].box, np.asarray(a.box) / 0.5, atol=DET_TOL / 0.5)

    # Slightly overlapping (IoU < 0.4): both stay.
    d = face_at(380, 300, 100, 120, 0.85)
    faces = make_detector(build_scrfd([a, d])).detect(noise_with([a, d], 640, 640))
    assert [round(f.score, 2) for f in faces] == [0.90, 0.85]


def test_nms_threshold_boundary_matches_greedy_definition() -> None:
    boxes = np.array([[0, 0, 9, 9], [0, 0, 9, 9], [5, 0, 14, 9], [20, 20, 29, 29]], dtype=np.float32)
    scores = np.array([0.5, 0.9, 0.8, 0.7], dtype=np.float32)
    # Box 2 overlaps box 1 with IoU 50/150 = 0.333 (pixel-inclusive), box 0 duplicates box 1.
    assert nms(boxes, scores, 0.4).tolist() == [1, 2, 3]
    assert nms(boxes, scores, 0.3).tolist() == [1, 3]


def test_score_threshold_is_respected() -> None:
    specs = [face_at(200, 200, 100, 120, 0.45), face_at(450, 400, 100, 120, 0.55)]
    model = build_scrfd(specs)
    img = noise_with(specs, 640, 640)
    faces = make_detector(model).detect(img)
    assert [round(f.score, 2) for f in faces] == [0.55]
    faces = make_detector(model, score_threshold=0.4).detect(img)
    assert [round(f.score, 2) for f in faces] == [0.55, 0.45]
    # The background anchors (score 0.01) never come through at a sane threshold.
    assert len(make_detector(model, score_threshold=0.02).detect(img)) == 2


def test_max_faces_keeps_the_best() -> None:
    specs = [face_at(100 + 200 * i, 320, 90, 110, s) for i, s in enumerate([0.6, 0.9, 0.7])]
    det = make_detector(build_scrfd(specs))
    faces = det.detect(noise_with(specs, 640, 640), max_faces=2)
    assert [round(f.score, 2) for f in faces] == [0.9, 0.7]
    assert make_detector(build_scrfd([])).detect(noise_frame(640, 480)) == []


def test_same_result_as_insightface_scrfd_on_the_same_double() -> None:
    from insightface.model_zoo.scrfd import SCRFD as InsightSCRFD

    specs = [
        face_at(300, 300, 100, 120, 0.90),
        face_at(310, 306, 100, 120, 0.80),
        face_at(100, 100, 30, 36, 0.70),
        face_at(500, 450, 220, 260, 0.66),
    ]
    model = build_scrfd(specs)
    ours = make_detector(model)
    ref = InsightSCRFD(session=FACTORY.create(model.SerializeToString(), "ref"))
    ref.prepare(-1, input_size=(640, 640))
    for w, h in FRAME_SIZES:
        img = noise_with([specs[0]], w, h)
        paint_face(img, specs[1], 1, size=0.1)  # small, on top of face 0: both centroids hold
        paint_face(img, specs[2], 2)
        paint_face(img, portrait_safe(specs[3], w, h), 3)
        dets, kpss = ref.detect(img)
        faces = ours.detect(img)
        assert len(faces) == len(dets) > 0
        for f, d, k in zip(faces, dets, kpss, strict=True):
            np.testing.assert_allclose(f.box, d[:4], rtol=1e-6, atol=1e-4)
            np.testing.assert_allclose(f.kps, k, rtol=1e-6, atol=1e-4)
            assert f.score == pytest.approx(float(d[4]))


def reference_blob(img: np.ndarray, swap_rb: bool) -> np.ndarray:
    """insightface's preprocessing written out: letterbox into a zero canvas, blobFromImage."""
    h, w = img.shape[:2]
    ratio = h / w
    if ratio > 1.0:
        nh, nw = 640, int(640 / ratio)
    else:
        nw, nh = 640, int(640 * ratio)
    canvas = np.zeros((640, 640, 3), np.uint8)
    canvas[:nh, :nw] = cv2.resize(img, (nw, nh))
    return np.asarray(cv2.dnn.blobFromImage(canvas, 1 / 128, (640, 640), (127.5,) * 3, swapRB=swap_rb))


def test_preprocess_matches_insightface_and_reuses_its_buffers() -> None:
    det = make_detector(build_scrfd([DEFAULT_FACE]))
    assert det.swap_rb is True  # `input.1`: insightface export, RGB
    first = None
    # Big landscape, then portrait, then small: stale pixels from an earlier frame must not leak.
    for w, h in [(1920, 1080), (720, 1280), (320, 240), (1920, 1080)]:
        img = noise_frame(w, h, seed=w + h)
        blob, _ = det.preprocess(img)
        np.testing.assert_allclose(blob, reference_blob(img, swap_rb=True), atol=1e-5)
        first = blob if first is None else first
        assert blob is first  # the same buffer every call: no per-frame allocation


def test_facefusion_input_name_means_bgr() -> None:
    det = make_detector(build_scrfd([DEFAULT_FACE], input_name="input"))
    assert det.swap_rb is False
    img = noise_with([DEFAULT_FACE], 640, 480)
    blob, _ = det.preprocess(img)
    np.testing.assert_allclose(blob, reference_blob(img, swap_rb=False), atol=1e-5)
    assert len(det.detect(img)) == 1
    assert make_detector(build_scrfd([DEFAULT_FACE], input_name="input"), swap_rb=True).swap_rb is True


def test_model_without_keypoints_is_rejected() -> None:
    with pytest.raises(ModelContractError, match="landmark"):
        make_detector(build_scrfd([DEFAULT_FACE], with_kps=False))
    with pytest.raises(ModelContractError, match="landmark"):
        SCRFD(scrfd_signature(6))


def test_wrong_output_order_is_rejected() -> None:
    sig = scrfd_signature(9)
    outs = sig.get_outputs()
    boxes_first = FakeSession(sig.get_inputs(), outs[3:6] + outs[0:3] + outs[6:9])
    with pytest.raises(ModelContractError, match=r"ordered scores x3, boxes x3, keypoints x3"):
        SCRFD(boxes_first)


@pytest.mark.parametrize(
    "session",
    [
        scrfd_signature(9, input_shape=(1, 1, "h", "w")),  # grey input
        scrfd_signature(9, input_shape=(1, 3, 640)),  # not 4-D
        FakeSession(
            [FakeArg("input.1", [1, 3, "h", "w"])],
            [FakeArg(f"o{i}", [12800, 1, 1]) for i in range(9)],  # 3-D outputs
        ),
        FakeSession([FakeArg("input.1", [1, 3, "h", "w"])], [FakeArg("o", [1, 512])]),  # a recogniser
    ],
)
def test_other_signatures_are_rejected(session: FakeSession) -> None:
    with pytest.raises(ModelContractError):
        SCRFD(session)


def test_fixed_size_model_must_run_at_its_size() -> None:
    fixed = scrfd_signature(9, input_shape=(1, 3, 640, 640))
    SCRFD(fixed)
    with pytest.raises(ModelContractError, match="fixed at 640x640"):
        SCRFD(fixed, input_size=(320, 320))
    with pytest.raises(ValueError):
        SCRFD(fixed, input_size=(630, 630))


def test_output_size_mismatch_at_run_time_is_a_contract_error() -> None:
    # A session whose outputs keep the 640x640 row counts, whatever the input size.
    fixed = make_detector(build_scrfd([DEFAULT_FACE]))
    session = fixed.session
    outs = session.run(fixed.output_names, {"input.1": np.zeros((1, 3, 640, 640), np.float32)})

    class FixedRows:
        def get_inputs(self) -> Any:
            return session.get_inputs()

        def get_outputs(self) -> Any:
            return session.get_outputs()

        def run(self, *args: Any, **kwargs: Any) -> Any:
            return outs

    det = SCRFD(FixedRows(), input_size=(320, 320))  # type: ignore[arg-type]
    with pytest.raises(ModelContractError, match="stride 8"):
        det.detect(noise_frame(640, 480))


def test_an_fp16_input_gets_the_same_blob_in_half_precision() -> None:
    """fp16 detectors keep numpy's plane-by-plane normalisation (the compiled pass writes float32)."""
    sig = scrfd_signature(9)
    half_in = FakeSession([FakeArg("input.1", [1, 3, "h", "w"], "tensor(float16)")], sig.get_outputs())
    half, full = SCRFD(half_in), SCRFD(sig)
    assert half.input_dtype == np.float16
    for w, h in [(1280, 720), (720, 1280)]:  # and a change of frame size: padding laid out again
        img = noise_frame(w, h, seed=w)
        got, scale_h = half.preprocess(img)
        want, scale_f = full.preprocess(img)
        assert got.dtype == np.float16 and scale_h == scale_f
        np.testing.assert_array_equal(got, want.astype(np.float16))


def test_a_read_only_picture_the_detector_size_is_detected_without_a_copy() -> None:
    """640x480 needs no letterbox resize: the picture itself is normalised, read-only or not."""
    det = make_detector(build_scrfd([DEFAULT_FACE]))
    img = noise_with([DEFAULT_FACE], 640, 480)
    want = det.preprocess(img)[0].copy()
    img.flags.writeable = False
    np.testing.assert_array_equal(det.preprocess(img)[0], want)
    assert len(det.detect(img)) == 1
