"""Masks (models/wrappers/maskers.py, realtime/face/steps/masks.py): model pre/post-processing
against numpy, the combination rule (elementwise minimum), the mouth polygon, and what a user
sees: an occluding hand keeps its own pixels, hair is not swapped with the region mask on, the
target keeps its mouth."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from models.errors import ModelContractError
from models.fakes.doubles import FakeArg, FakeSession, write_all
from models.fakes.pixel_doubles import PARSER_PALETTE
from models.ops.align import estimate_norm, transform_points
from models.runtime.session import SessionConfig, SessionFactory
from models.wrappers.maskers import IMAGENET_MEAN, IMAGENET_STD, FaceParser, Occluder
from models.wrappers.swappers.inswapper import InSwapper
from realtime.core.contracts import FramePlan, SwapTarget
from realtime.core.settings import DEFAULT_REGION_CLASSES, MasksSettings, Settings
from realtime.face.host.compositor import Compositor, scale_crop_matrix
from realtime.face.source_face import SourceIdentity
from realtime.face.steps.masks import (
    MOUTH_DOWN,
    MOUTH_HALF_WIDTH,
    MOUTH_UP,
    FaceMasks,
    classes_mask,
    combine_min,
    face_core_mask,
    mouth_mask,
    mouth_polygon,
    soften,
)
from realtime.face.swap_worker import FaceSwapWorker
from realtime.tools.bench import astronaut_bgr
from tests.real_faces import astronaut_face

FACTORY = SessionFactory(SessionConfig(provider="cpu"))
GREEN = (0, 255, 0)  # BGR: the xseg double's "hand"


class RecordingSession(FakeSession):
    def __init__(self, inputs: list[FakeArg], outputs: list[FakeArg], reply: np.ndarray) -> None:
        super().__init__(inputs, outputs)
        self.reply = reply
        self.feeds: list[dict[str, np.ndarray]] = []

    def run(self, names: Any, feeds: dict[str, np.ndarray], *args: Any, **kwargs: Any) -> list[np.ndarray]:
        self.feeds.append({k: np.array(v, copy=True) for k, v in feeds.items()})
        return [self.reply]


@pytest.fixture(scope="module")
def doubles(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return write_all(tmp_path_factory.mktemp("masks"))


@pytest.fixture(scope="module")
def occluder(doubles: dict[str, Path]) -> Occluder:
    return Occluder.from_file(doubles["xseg_1.onnx"], FACTORY)


@pytest.fixture(scope="module")
def parser(doubles: dict[str, Path]) -> FaceParser:
    return FaceParser.from_file(doubles["bisenet_resnet_34.onnx"], FACTORY)


def crop_of(size: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (size, size, 3), dtype=np.uint8)


# ------------------------------------------------------------------- model pre/post-processing


def test_occluder_feeds_nhwc_bgr_over_255_and_clips() -> None:
    reply = np.random.default_rng(0).uniform(-0.5, 1.5, (1, 256, 256, 1)).astype(np.float32)
    session = RecordingSession(
        [FakeArg("input", [1, 256, 256, 3])], [FakeArg("output", [1, 256, 256, 1])], reply
    )
    crop = crop_of(256)
    mask = Occluder(session).mask(crop)
    np.testing.assert_allclose(session.feeds[0]["input"], crop[None].astype(np.float64) / 255.0, atol=1e-7)
    np.testing.assert_array_equal(mask, np.clip(reply[0, :, :, 0], 0, 1))


def test_parser_feeds_rgb_imagenet_normalised_nchw() -> None:
    reply = np.zeros((1, 19, 512, 512), np.float32)
    session = RecordingSession(
        [FakeArg("input", ["N", 3, 512, 512])], [FakeArg("output", ["N", 19, 512, 512])], reply
    )
    crop = crop_of(512, 1)
    FaceParser(session).logits(crop)
    rgb = crop[:, :, ::-1].astype(np.float64) / 255.0
    expected = ((rgb - IMAGENET_MEAN) / IMAGENET_STD).transpose(2, 0, 1)[None]
    np.testing.assert_allclose(session.feeds[0]["input"], expected, atol=2e-6)


def test_parser_labels_are_the_argmax() -> None:
    reply = np.random.default_rng(2).standard_normal((1, 19, 512, 512)).astype(np.float32)
    session = RecordingSession(
        [FakeArg("input", [1, 3, 512, 512])], [FakeArg("output", [1, 19, 512, 512])], reply
    )
    labels = FaceParser(session).labels(crop_of(512))
    np.testing.assert_array_equal(labels, np.argmax(reply[0], axis=0))


@pytest.mark.parametrize(
    ("cls", "inputs", "outputs"),
    [
        (Occluder, [FakeArg("input", [1, 3, 256, 256])], [FakeArg("output", [1, 256, 256, 1])]),  # NCHW
        (Occluder, [FakeArg("input", [1, 128, 128, 3])], [FakeArg("output", [1, 128, 128, 1])]),
        (
            FaceParser,
            [FakeArg("input", [1, 3, 512, 512])],
            [FakeArg("output", [1, 3, 512, 512])],
        ),  # a restorer
        (FaceParser, [FakeArg("input", [1, 3, 256, 256])], [FakeArg("output", [1, 19, 256, 256])]),
    ],
)
def test_mask_models_refuse_other_signatures(cls: type, inputs: list, outputs: list) -> None:
    with pytest.raises(ModelContractError, match="expected"):
        cls(FakeSession(inputs, outputs))


def test_the_parser_double_labels_each_palette_colour_as_its_class(parser: FaceParser) -> None:
    crop = np.zeros((512, 512, 3), np.uint8)
    for k in range(19):
        crop[k * 26 : (k + 1) * 26] = PARSER_PALETTE[k][::-1]  # palette is RGB, crop is BGR
    labels = parser.labels(crop)
    for k in range(19):
        assert (labels[k * 26 + 2 : (k + 1) * 26 - 2] == k).all(), k


# ------------------------------------------------------------------------------ mask maths


@settings(max_examples=60, deadline=None)
@given(
    logits=hnp.arrays(np.float32, (19, 6, 7), elements=st.floats(-50, 50, width=32)),
    classes=st.lists(st.integers(0, 18), min_size=1, max_size=19, unique=True),
)
def test_classes_mask_equals_argmax_in_classes(logits: np.ndarray, classes: list[int]) -> None:
    # Hypothesis likes repeated values: without a per-class offset most pixels were exact ties,
    # which the assertion skips (on average 3 of 42 pixels were checked).
    logits = logits + np.arange(19, dtype=np.float32)[:, None, None] * np.float32(0.01)
    best = logits.max(axis=0)
    got = classes_mask(logits, classes, best)
    labels = np.argmax(logits, axis=0)
    expected = np.isin(labels, classes)
    # Only an exact tie between a listed and an unlisted class may differ (argmax takes the first).
    ties = (logits == best).sum(axis=0) > 1
    assert np.array_equal(got[~ties] > 0.5, expected[~ties])
    assert ties.mean() < 0.2  # the comparison above covers most pixels
    assert set(np.unique(got)) <= {0.0, 1.0}


@settings(max_examples=60, deadline=None)
@given(
    masks=st.lists(hnp.arrays(np.float32, (5, 4), elements=st.floats(0, 1, width=32)), min_size=1, max_size=5)
)
def test_combination_is_the_elementwise_minimum(masks: list[np.ndarray]) -> None:
    originals = [m.copy() for m in masks]
    out = np.empty((5, 4), np.float32)
    np.testing.assert_array_equal(combine_min(masks, out), np.minimum.reduce(masks))
    for m, o in zip(masks, originals, strict=True):
        np.testing.assert_array_equal(m, o)  # the inputs are not touched


def test_soften_matches_its_definition() -> None:
    mask = np.zeros((64, 64), np.float32)
    mask[16:48, 16:48] = 1.0
    got = soften(mask.copy(), 3.0)
    blurred = cv2.GaussianBlur(mask, (0, 0), 3.0, borderType=cv2.BORDER_REPLICATE).astype(np.float64)
    np.testing.assert_allclose(got, (np.clip(blurred, 0.5, 1.0) - 0.5) * 2.0, atol=1e-6)
    assert got[32, 32] == 1.0 and got[2, 2] == 0.0


def test_scale_crop_matrix_keeps_pixel_centres() -> None:
    frame = astronaut_bgr()
    m = estimate_norm(astronaut_face().kps, 128)
    small = cv2.warpAffine(frame, m, (128, 128)).astype(np.float64)
    big = cv2.warpAffine(frame, scale_crop_matrix(m, 4.0), (512, 512))
    down = cv2.resize(big, (128, 128), interpolation=cv2.INTER_AREA).astype(np.float64)
    naive = cv2.resize(cv2.warpAffine(frame, 4.0 * m, (512, 512)), (128, 128), interpolation=cv2.INTER_AREA)
    err = np.abs(down - small)[8:-8, 8:-8].mean()
    err_naive = np.abs(naive.astype(np.float64) - small)[8:-8, 8:-8].mean()
    # Aligned within resampling noise; the uncorrected 4x matrix is shifted by 3/8 px and measurably worse.
    assert err < 0.6 * err_naive, (err, err_naive)


# ------------------------------------------------------------------------------ mouth mask


def rotated_kps(kps: np.ndarray, degrees: float, centre: np.ndarray) -> np.ndarray:
    a = np.deg2rad(degrees)
    rot = np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]])
    return ((kps - centre) @ rot.T + centre).astype(np.float64)


@pytest.mark.parametrize("roll", [0.0, 25.0, -40.0])
def test_mouth_polygon_is_two_half_ellipses_around_the_corners(roll: float) -> None:
    kps0 = transform_points(astronaut_face().kps, estimate_norm(astronaut_face().kps, 128)).astype(np.float64)
    kps = rotated_kps(kps0, roll, np.array([64.0, 64.0]))
    poly = mouth_polygon(kps, scale=1.2, points=8)
    # Reference: the mouth's axes from the landmarks, written out again here.
    left, right, nose = kps[3], kps[4], kps[2]
    c, w = (left + right) / 2, np.linalg.norm(right - left)
    u = (right - left) / w
    n = np.array([-u[1], u[0]])
    assert n @ (c - nose) > 0  # "down" = away from the nose, whatever the roll
    h = n @ (c - nose)
    # Points 0, 2, 4, 6 (theta 0, 90, 180, 270 deg): right tip, bottom, left tip, top.
    np.testing.assert_allclose(poly[0], c + u * MOUTH_HALF_WIDTH * w * 1.2, atol=1e-9)
    np.testing.assert_allclose(poly[2], c + n * MOUTH_DOWN * w * 1.2, atol=1e-9)
    np.testing.assert_allclose(poly[4], c - u * MOUTH_HALF_WIDTH * w * 1.2, atol=1e-9)
    np.testing.assert_allclose(poly[6], c - n * MOUTH_UP * h * 1.2, atol=1e-9)


def analytic_mouth(kps: np.ndarray, size: int) -> np.ndarray:
    ys, xs = np.mgrid[:size, :size].astype(np.float64)
    left, right, nose = kps[3], kps[4], kps[2]
    w = np.linalg.norm(right - left)
    u = (right - left) / w
    n = np.array([-u[1], u[0]])
    c = (left + right) / 2
    du = (xs - c[0]) * u[0] + (ys - c[1]) * u[1]
    dn = (xs - c[0]) * n[0] + (ys - c[1]) * n[1]
    reach = np.where(dn >= 0, MOUTH_DOWN * w, MOUTH_UP * (n @ (c - nose)))
    return (du / (MOUTH_HALF_WIDTH * w)) ** 2 + (dn / reach) ** 2 <= 1.0


def test_mouth_mask_covers_the_mouth_not_the_nose_and_follows_head_roll() -> None:
    face = astronaut_face()
    kps = transform_points(face.kps, estimate_norm(face.kps, 128)).astype(np.float64)
    mask = mouth_mask(kps, 128)
    mouth_c = ((kps[3] + kps[4]) / 2).round().astype(int)
    assert mask[mouth_c[1], mouth_c[0]] > 0.99
    for eye in kps[:2].round().astype(int):
        assert mask[eye[1], eye[0]] == 0.0
    # The astronaut's nose tip is only ~10 px above her mouth corners in the crop.
    nose = kps[2].round().astype(int)
    assert mask[nose[1], nose[0]] < 0.05
    # Against the analytic shape: the rasterised polygon is the two half-ellipses.
    hard, analytic = mask > 0.5, analytic_mouth(kps, 128)
    iou = (hard & analytic).sum() / (hard | analytic).sum()
    assert iou > 0.9, iou
    # Roll the head 30 degrees about the mouth: the mask rolls with it.
    c = (kps[3] + kps[4]) / 2
    rolled = mouth_mask(rotated_kps(kps, 30.0, c), 128)
    rot = cv2.getRotationMatrix2D((float(c[0]), float(c[1])), -30.0, 1.0)
    expected = cv2.warpAffine(mask, rot, (128, 128))
    assert np.abs(rolled - expected).mean() < 0.01


# --------------------------------------------------------------------------- FaceMasks.build


def aligned_frame() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    frame = astronaut_bgr()
    kps = astronaut_face().kps
    return frame, kps, estimate_norm(kps, 128)


def test_default_masks_are_the_box_itself_and_cost_nothing() -> None:
    frame, kps, m = aligned_frame()
    box = Compositor().crop_mask(128, m)
    timings: dict[str, float] = {}
    got = FaceMasks(128).build(frame, m, kps, box, MasksSettings(), timings)
    assert got.alpha is box and got.skin is None and timings == {}


def test_all_masks_combine_to_their_minimum(occluder: Occluder, parser: FaceParser) -> None:
    frame, kps, m = aligned_frame()
    box = Compositor().crop_mask(128, m)
    masks = FaceMasks(128, occluder, parser)
    single: dict[str, np.ndarray] = {}
    for name in ("occlusion", "regions", "mouth"):
        cfg = MasksSettings(**{name: True})
        single[name] = masks.build(frame, m, kps, box, cfg, {}).alpha.copy()
    timings: dict[str, float] = {}
    both = masks.build(frame, m, kps, box, MasksSettings(occlusion=True, regions=True, mouth=True), timings)
    np.testing.assert_array_equal(both.alpha, np.minimum.reduce(list(single.values())))
    assert set(timings) == {"mask.occlusion", "mask.regions", "mask.mouth"}
    assert all(v >= 0 for v in timings.values())
    # Each single mask was itself min(box, that mask): none exceeds the box.
    for got in single.values():
        assert (got <= box + 1e-7).all()


def test_occlusion_mask_is_zero_on_the_hand(occluder: Occluder) -> None:
    frame, kps, m = aligned_frame()
    mouth = kps[3:].mean(axis=0).astype(int)
    cv2.circle(frame, (int(mouth[0]), int(mouth[1])), 14, GREEN, -1)
    box = Compositor().crop_mask(128, m)
    alpha = FaceMasks(128, occluder).build(frame, m, kps, box, MasksSettings(occlusion=True), {}).alpha
    hand = transform_points(mouth[None].astype(np.float32), m)[0].round().astype(int)
    eye = transform_points(kps[:1], m)[0].round().astype(int)
    assert alpha[hand[1], hand[0]] == 0.0
    assert alpha[eye[1], eye[0]] > 0.99


def test_region_mask_leaves_out_hair(parser: FaceParser) -> None:
    # A synthetic aligned face: skin everywhere, a band of hair over the forehead.
    frame, kps, m = aligned_frame()
    face = np.zeros_like(frame)
    face[:] = PARSER_PALETTE[1][::-1]
    hair_top = int(kps[:2, 1].min()) - 45
    face[: hair_top + 25] = PARSER_PALETTE[17][::-1]
    box = Compositor().crop_mask(128, m)
    cfg = MasksSettings(regions=True)
    alpha = FaceMasks(128, parser=parser).build(face, m, kps, box, cfg, {}).alpha
    hair = (
        transform_points(np.array([[kps[:2, 0].mean(), hair_top + 5]], np.float32), m)[0].round().astype(int)
    )
    cheek = transform_points(kps[2:3], m)[0].round().astype(int)
    assert alpha[hair[1], hair[0]] == 0.0
    assert alpha[cheek[1], cheek[0]] > 0.9
    # Hair counted as face when the user lists class 17.
    cfg_hair = MasksSettings(regions=True, region_classes=(*DEFAULT_REGION_CLASSES, 17))
    alpha_hair = FaceMasks(128, parser=parser).build(face, m, kps, box, cfg_hair, {}).alpha
    assert alpha_hair[hair[1], hair[0]] > 0.9


# ------------------------------------------------------------------- in the worker: pixels


@pytest.fixture(scope="module")
def swapper(doubles: dict[str, Path]) -> InSwapper:
    return InSwapper.from_file(doubles["inswapper_128.onnx"], FACTORY)


class Quality:
    def __init__(self, occluder: Occluder, parser: FaceParser) -> None:
        self._occluder, self._parser = occluder, parser

    def restorer(self, name: str) -> Any:
        raise AssertionError("no enhancer in these tests")

    def occluder(self) -> Occluder:
        return self._occluder

    def parser(self) -> FaceParser:
        return self._parser


def identity(seed: int = 5) -> SourceIdentity:
    v = np.random.default_rng(seed).standard_normal(512).astype(np.float32)
    return SourceIdentity(v / np.linalg.norm(v), ())


def test_a_hand_over_the_mouth_stays_in_front_of_the_swapped_face(
    swapper: InSwapper, occluder: Occluder, parser: FaceParser
) -> None:
    frame, kps, _ = aligned_frame()
    mouth = kps[3:].mean(axis=0).astype(int)
    cv2.circle(frame, (int(mouth[0]), int(mouth[1])), 16, GREEN, -1)
    plan = FramePlan([SwapTarget(kps, 1.0, 1)])
    results = {}
    for on in (False, True):
        s = Settings().with_overrides({"masks.occlusion": on})
        out = frame.copy()
        FaceSwapWorker(swapper, identity(), s, Quality(occluder, parser)).apply(out, plan, s)
        results[on] = out
    hand = (slice(mouth[1] - 6, mouth[1] + 6), slice(mouth[0] - 6, mouth[0] + 6))
    between_eyes = ((kps[0] + kps[1]) / 2).round().astype(int)
    cheek = (slice(between_eyes[1] - 3, between_eyes[1] + 4), slice(between_eyes[0] - 3, between_eyes[0] + 4))
    # Without the occlusion mask the swap paints over the hand; with it the hand's pixels are kept.
    assert np.abs(results[False][hand].astype(int) - frame[hand]).mean() > 20
    np.testing.assert_array_equal(results[True][hand], frame[hand])
    # Away from the hand's soft edge (FaceFusion's: sigma 5 at the 128 px crop, ~10 crop px wide)
    # the face is swapped the same either way (a level off where the soft mask is 0.99).
    assert np.abs(results[True][cheek].astype(int) - results[False][cheek]).max() <= 1
    assert np.abs(results[True][cheek].astype(int) - frame[cheek]).mean() > 20


def test_mouth_mask_keeps_the_targets_mouth(
    swapper: InSwapper, occluder: Occluder, parser: FaceParser
) -> None:
    frame, kps, _ = aligned_frame()
    plan = FramePlan([SwapTarget(kps, 1.0, 1)])
    outs, timings = {}, {}
    for on in (False, True):
        s = Settings().with_overrides({"masks.mouth": on})
        outs[on] = frame.copy()
        timings[on] = FaceSwapWorker(swapper, identity(), s, Quality(occluder, parser)).apply(
            outs[on], plan, s
        )
    c = kps[3:].mean(axis=0).round().astype(int)
    mouth = (slice(c[1] - 2, c[1] + 3), slice(c[0] - 8, c[0] + 9))
    before = np.abs(outs[False][mouth].astype(int) - frame[mouth])
    kept = np.abs(outs[True][mouth].astype(int) - frame[mouth])
    # The swap changes the mouth by tens of levels; with the mask the target's own mouth stays
    # (the feather's tail may move a pixel at the edge by a level or two).
    assert before.mean() > 20
    assert kept.max() <= 2 and kept.mean() < 0.5
    eye = kps[0].round().astype(int)
    np.testing.assert_array_equal(outs[True][eye[1], eye[0]], outs[False][eye[1], eye[0]])
    assert "mask.mouth" in timings[True] and "mask.mouth" not in timings[False]


def test_colour_is_measured_on_skin_only(parser: FaceParser) -> None:
    frame, kps, m = aligned_frame()
    face = np.zeros_like(frame)
    face[:] = PARSER_PALETTE[1][::-1]  # skin ...
    lips = kps[3:].mean(axis=0).astype(int)
    cv2.circle(face, (int(lips[0]), int(lips[1])), 12, PARSER_PALETTE[12][::-1].tolist(), -1)  # ... red lips
    box = Compositor().crop_mask(128, m)
    masks = FaceMasks(128, parser=parser)
    with_parser = masks.build(face, m, kps, box, MasksSettings(regions=True), {}, want_skin=True)
    assert with_parser.skin is not None
    lip = transform_points(lips[None].astype(np.float32), m)[0].round().astype(int)
    cheek = transform_points(((kps[0] + kps[2]) / 2)[None], m)[0].round().astype(int)
    # Lips count as face for the paste (a default region class) but not as skin for the colour.
    assert with_parser.alpha[lip[1], lip[0]] > 0.9
    assert with_parser.skin[lip[1], lip[0]] == 0.0 and with_parser.skin[cheek[1], cheek[0]] > 0.9
    assert (with_parser.skin <= with_parser.alpha + 1e-7).all()
    # Without the parser: a fixed ellipse of the aligned face, cut by the face mask.
    plain = FaceMasks(128).build(face, m, kps, box, MasksSettings(), {}, want_skin=True)
    assert plain.skin is not None
    np.testing.assert_array_equal(plain.skin, np.minimum(face_core_mask(128), box))


class HalfPlaneOccluder:
    """An xseg stand-in: visible (1) left of the middle, occluded (0) right of it, at 256 px."""

    size = 256

    def mask(self, crop: Any) -> Any:
        out = np.zeros((256, 256), np.float32)
        out[:, :128] = 1.0
        return out


def test_occlusion_edges_are_as_soft_as_facefusions() -> None:
    """FaceFusion resizes the xseg mask to the 128 px swap crop and blurs it there with sigma 5
    (facefusion/face_masker.py); an earlier sigma scaled by the model size gave edges 2-4x harder."""
    masks = FaceMasks(128, HalfPlaneOccluder())  # type: ignore[arg-type]
    frame, kps, m = aligned_frame()
    got = masks.build(frame, m, kps, np.ones((128, 128), np.float32), MasksSettings(occlusion=True), {}).alpha
    step = np.zeros((128, 128), np.float32)
    step[:, :64] = 1.0
    facefusion = (cv2.GaussianBlur(step, (0, 0), 5).clip(0.5, 1) - 0.5) * 2
    row = 64
    assert np.abs(got[row] - facefusion[row]).max() < 0.02
    assert int(np.argmax(got[row] < 0.95)) < 64 - 8  # soft for ~10 crop px inside the edge
