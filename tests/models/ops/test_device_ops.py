"""models.ops.device_ops: each graph on the CPU provider against its OpenCV/numpy twin, and the graph
checks that keep them CUDA/TensorRT-legal without a GPU.

Tolerances (uint8 levels, 0..255):
* warp_crop vs an exact float64 bilinear reference (OpenCV's pixel-centre convention, black
  outside): <= 0.15 everywhere, borders included. That is float32 rounding only: sample
  coordinates up to ~2000 px carry ~2e-4 px of error, times noise gradients of up to 255 levels/px.
  This is the test that pins the convention: half a pixel off shows up as tens of levels on noise.
* warp_crop vs cv2.warpAffine: OpenCV rounds sample positions to 1/32 px and its result to uint8,
  so the gap is <= 0.5 + (|dI/dx| + |dI/dy|) / 64. Interior pixels (all four bilinear taps inside
  the frame) on smooth frames (gradient <= 12 levels/px): <= 1.0. Border pixels (taps straddling
  the frame edge, where the image steps to black): <= 8.5 (= 0.5 + 2 * 255/64).
* nv12_to_bgr vs cv2.cvtColor(COLOR_YUV2BGR_NV12): <= 1, and equal on >= 99.9 % of pixels (a
  difference only where OpenCV's fixed point lands exactly on a rounding tie).
* paste_blend vs realtime.face.host.compositor.Compositor.paste: <= 2 (observed 1: OpenCV rounds the
  warped crop to uint8 before blending, the graph does not), and identical outside the region.
"""

from __future__ import annotations

import math
from typing import Any

import cv2
import numpy as np
import numpy.typing as npt
import onnx
import onnxruntime as ort
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

from models.ops.align import invert_affine
from models.ops.crop_geometry import ARCFACE_CROP, INSWAPPER_CROP, CropSpec, sample_box, shift_target
from models.ops.device_graphs import (
    OPSET,
    build_crop_for_arcface,
    build_crop_for_inswapper,
    build_nv12_to_bgr,
    build_paste_blend,
    build_warp_crop,
)
from models.ops.device_ops import DeviceOps, Nv12ToBgr, PasteBlend, WarpCrop
from models.ops.device_twins import decode_crop, nv12_to_bgr_cv2, paste_blend_cv2, warp_crop_cv2
from models.ops.graph_rules import device_graph_problems
from models.runtime.session import SessionConfig, SessionFactory
from realtime.face.host.compositor import Compositor, paste_region

FACTORY = SessionFactory(SessionConfig(provider="cpu", intra_op_threads=2))
FEW = settings(max_examples=25, deadline=None, derandomize=True)
CROP_SIZES = (112, 128, 256)
# Odd sizes, a 1-column sliver, and 720p/1080p.
FRAME_SIZES = ((241, 317), (37, 53), (480, 641), (719, 1279), (1080, 1920), (9, 1))

INTERIOR_TOL = 1.0
BORDER_TOL = 8.5
EXACT_TOL = 0.15
PASTE_TOL = 2


# ------------------------------------------------------------------------------------------
# Frames, matrices and references
# ------------------------------------------------------------------------------------------


def smooth_frame(h: int, w: int, seed: int) -> npt.NDArray[np.uint8]:
    """Sums of long-wavelength sinusoids: |gradient| <= ~12 levels/px, values spread over 0..255."""
    rng = np.random.default_rng(seed)
    x = np.arange(w, dtype=np.float32)[None, :]
    y = np.arange(h, dtype=np.float32)[:, None]
    chans = []
    for _ in range(3):
        fx, fy, fxy = rng.uniform(1 / 60, 1 / 30, 3)
        px, py = rng.uniform(0, 2 * np.pi, 2)
        c = 127.5 + 50 * np.sin(x * fx + px) + 40 * np.cos(y * fy + py) + 30 * np.sin((x + y) * fxy)
        chans.append(c)
    return np.ascontiguousarray(np.clip(np.stack(chans, axis=-1), 0, 255).astype(np.uint8))


def noise_frame(h: int, w: int, seed: int) -> npt.NDArray[np.uint8]:
    return np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)


def similarity_to_crop(
    size: int, scale: float, angle: float, cx: float, cy: float
) -> npt.NDArray[np.float64]:
    """frame->crop similarity: `scale` crop px per frame px, rotated, frame point (cx, cy) to the
    crop centre."""
    c, s = scale * math.cos(angle), scale * math.sin(angle)
    m = np.array([[c, -s, 0.0], [s, c, 0.0]])
    m[:, 2] = np.array([size / 2.0, size / 2.0]) - m[:, :2] @ np.array([cx, cy])
    return m


@st.composite
def crop_case(draw: st.DrawFn) -> tuple[int, int, int, npt.NDArray[np.float64], int]:
    h, w = draw(st.sampled_from(FRAME_SIZES))
    size = draw(st.sampled_from(CROP_SIZES))
    scale = draw(st.floats(0.3, 3.0))
    angle = draw(st.floats(-math.pi, math.pi))
    # The face centre anywhere from a quarter frame outside to a quarter frame outside the far side.
    cx = draw(st.floats(-0.25, 1.25)) * w
    cy = draw(st.floats(-0.25, 1.25)) * h
    seed = draw(st.integers(0, 2**16))
    return h, w, size, similarity_to_crop(size, scale, angle, cx, cy), seed


def sample_positions(m: npt.NDArray[np.float64], size: int) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
    a = invert_affine(m)
    ys, xs = np.mgrid[0:size, 0:size].astype(np.float64)
    return a[0, 0] * xs + a[0, 1] * ys + a[0, 2], a[1, 0] * xs + a[1, 1] * ys + a[1, 2]


def bilinear_reference(
    img: npt.NDArray[Any], m: npt.NDArray[np.float64], size: int, *, replicate: bool = False
) -> npt.NDArray[np.float64]:
    """cv2.warpAffine's definition in float64: pixel centres at integers, black outside (or, with
    `replicate`, the nearest edge pixel: BORDER_REPLICATE)."""
    src = img.astype(np.float64)
    if src.ndim == 2:
        src = src[:, :, None]
    h, w = src.shape[:2]
    sx, sy = sample_positions(m, size)
    x0, y0 = np.floor(sx), np.floor(sy)
    fx, fy = sx - x0, sy - y0
    out = np.zeros((size, size, src.shape[2]))
    for dy in (0, 1):
        for dx in (0, 1):
            xi, yi = x0 + dx, y0 + dy
            weight = (fx if dx else 1 - fx) * (fy if dy else 1 - fy)
            inside = (xi >= 0) & (xi < w) & (yi >= 0) & (yi < h) | replicate
            vals = src[np.clip(yi, 0, h - 1).astype(int), np.clip(xi, 0, w - 1).astype(int)]
            out += (weight * inside)[..., None] * vals
    return out


def interior_mask(m: npt.NDArray[np.float64], size: int, h: int, w: int) -> npt.NDArray[np.bool_]:
    """Crop pixels whose four taps are inside the frame, with OpenCV's 1/32 px rounding as margin."""
    sx, sy = sample_positions(m, size)
    e = 1.0 / 32.0
    return (sx >= e) & (sx <= w - 1 - e) & (sy >= e) & (sy <= h - 1 - e)


def hwc(crop: Any) -> npt.NDArray[Any]:
    arr = crop.numpy() if not isinstance(crop, np.ndarray) else crop
    return np.asarray(arr[0].transpose(1, 2, 0), dtype=np.float64)


# ------------------------------------------------------------------------------------------
# Runners (built once per module: session creation is the slow part)
# ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def plain_crops() -> dict[int, WarpCrop]:
    """Plain crops with the default border: edge pixels repeated beyond the frame."""
    return {s: WarpCrop(FACTORY, CropSpec(s)) for s in CROP_SIZES}


@pytest.fixture(scope="module")
def black_border_crops() -> dict[int, WarpCrop]:
    """Plain crops with black beyond the frame (the embeddings' crop, as insightface's)."""
    return {s: WarpCrop(FACTORY, CropSpec(s, replicate=False)) for s in CROP_SIZES}


@pytest.fixture(scope="module")
def model_crops() -> dict[str, WarpCrop]:
    return {
        "inswapper": WarpCrop(FACTORY, INSWAPPER_CROP),
        "arcface": WarpCrop(FACTORY, ARCFACE_CROP),
        "inswapper_fp16": WarpCrop(FACTORY, CropSpec(128, rgb=True, scale=1 / 255.0, fp16=True)),
    }


@pytest.fixture(scope="module")
def graph_ops() -> DeviceOps:
    return DeviceOps(FACTORY, use_graphs=True)


# ------------------------------------------------------------------------------------------
# warp_crop
# ------------------------------------------------------------------------------------------


@FEW
@given(crop_case(), st.booleans(), st.booleans())
def test_warp_crop_is_exact_bilinear_with_opencv_pixel_centres(
    plain_crops: dict[int, WarpCrop],
    black_border_crops: dict[int, WarpCrop],
    case: tuple[int, int, int, npt.NDArray[np.float64], int],
    roi: bool,
    replicate: bool,
) -> None:
    h, w, size, m, seed = case
    frame = noise_frame(h, w, seed)  # noise: any convention error shows up at full strength
    runner = (plain_crops if replicate else black_border_crops)[size]
    got = hwc(runner.run(frame, m, roi=roi))
    assert np.abs(got - bilinear_reference(frame, m, size, replicate=replicate)).max() <= EXACT_TOL


@FEW
@given(crop_case(), st.booleans())
def test_warp_crop_matches_cv2_warp_affine(
    plain_crops: dict[int, WarpCrop],
    black_border_crops: dict[int, WarpCrop],
    case: tuple[int, int, int, npt.NDArray[np.float64], int],
    replicate: bool,
) -> None:
    h, w, size, m, seed = case
    frame = smooth_frame(h, w, seed)
    runner = (plain_crops if replicate else black_border_crops)[size]
    got = hwc(runner.run(frame, m))
    border = cv2.BORDER_REPLICATE if replicate else cv2.BORDER_CONSTANT
    ref = cv2.warpAffine(frame, m, (size, size), borderMode=border, borderValue=0.0).astype(np.float64)
    diff = np.abs(got - ref).max(axis=2)
    inner = interior_mask(m, size, h, w)
    assert diff[inner].max(initial=0.0) <= INTERIOR_TOL
    assert diff[~inner].max(initial=0.0) <= BORDER_TOL


def test_warp_crop_fully_outside_is_black_or_the_nearest_edge(
    plain_crops: dict[int, WarpCrop], black_border_crops: dict[int, WarpCrop]
) -> None:
    frame = smooth_frame(120, 160, 1)
    for cx, cy in ((-400.0, 60.0), (900.0, 60.0), (80.0, -500.0), (80.0, 700.0), (-300.0, -300.0)):
        m = similarity_to_crop(128, 1.0, 0.4, cx, cy)
        assert not np.any(black_border_crops[128].run(frame, m).numpy())
        edge = cv2.warpAffine(frame, m, (128, 128), borderMode=cv2.BORDER_REPLICATE).astype(np.float64)
        assert np.abs(hwc(plain_crops[128].run(frame, m)) - edge).max() <= INTERIOR_TOL


def test_warp_crop_reuses_its_output_buffer(plain_crops: dict[int, WarpCrop]) -> None:
    frame = smooth_frame(200, 300, 2)
    m = similarity_to_crop(128, 1.2, 0.1, 150, 100)
    first = plain_crops[128].run(frame, m)
    second = plain_crops[128].run(frame, similarity_to_crop(128, 0.8, -0.3, 120, 90))
    assert first.data_ptr() == second.data_ptr()
    assert first.data_ptr() == plain_crops[128].bound.static_output("crop").data_ptr()


def test_warp_crop_from_an_ortvalue_frame_binds_a_row_band(plain_crops: dict[int, WarpCrop]) -> None:
    """An OrtValue frame (the device case) is cut to whole rows by pointer: same crop as numpy."""
    frame = noise_frame(481, 643, 3)
    frame_ov = ort.OrtValue.ortvalue_from_numpy(frame)
    for m in (similarity_to_crop(128, 1.3, 0.7, 300, 200), similarity_to_crop(128, 0.9, -2.0, 20, 470)):
        from_numpy = hwc(plain_crops[128].run(frame, m))
        from_ov = hwc(plain_crops[128].run(frame_ov, m))
        assert np.abs(from_numpy - from_ov).max() <= EXACT_TOL  # float32 grid rounding differs
        assert np.abs(from_ov - bilinear_reference(frame, m, 128, replicate=True)).max() <= EXACT_TOL


def test_sample_box_covers_every_tap() -> None:
    """Every in-frame pixel a bilinear sample reads lies inside the box the graph is fed."""
    rng = np.random.default_rng(4)
    h, w = 480, 640
    for _ in range(200):
        m = similarity_to_crop(128, rng.uniform(0.3, 3), rng.uniform(-3.2, 3.2), *rng.uniform(-100, 700, 2))
        box = sample_box(m, 128, h, w)
        assert 0 <= box.x0 < box.x1 <= w and 0 <= box.y0 < box.y1 <= h
        sx, sy = sample_positions(m, 128)
        for tx, ty in ((np.floor(sx), np.floor(sy)), (np.floor(sx) + 1, np.floor(sy) + 1)):
            tx_in = tx[(tx >= 0) & (tx < w)]
            ty_in = ty[(ty >= 0) & (ty < h)]
            assert np.all((tx_in >= box.x0) & (tx_in < box.x1))
            assert np.all((ty_in >= box.y0) & (ty_in < box.y1))


def test_singular_matrix_is_refused(plain_crops: dict[int, WarpCrop]) -> None:
    with pytest.raises(ValueError, match="singular"):
        plain_crops[128].run(smooth_frame(50, 50, 0), np.zeros((2, 3)))
    with pytest.raises(ValueError, match="uint8"):
        plain_crops[128].run(np.zeros((50, 50, 3), np.float32), similarity_to_crop(128, 1, 0, 25, 25))


@FEW
@given(crop_case())
def test_fused_model_crops_equal_the_plain_crop_and_the_numpy_preprocessing(
    plain_crops: dict[int, WarpCrop],
    model_crops: dict[str, WarpCrop],
    case: tuple[int, int, int, npt.NDArray[np.float64], int],
) -> None:
    h, w, _, _, seed = case
    frame = smooth_frame(h, w, seed)
    for name, spec in (("inswapper", INSWAPPER_CROP), ("arcface", ARCFACE_CROP)):
        # Same geometry as the drawn case, re-targeted to the model's crop size.
        m = case[3] * (spec.size / case[2])
        got = np.asarray(model_crops[name].run(frame, m).numpy(), dtype=np.float64)
        plain = plain_crops[128].run(frame, m).numpy() if spec.size == 128 else None
        if plain is not None:  # the fused Conv is exactly swap + scale + offset of the plain crop
            np.testing.assert_allclose(got, plain[:, ::-1] * spec.scale + spec.offset, atol=1e-6)
        ref = warp_crop_cv2(frame, m, spec).astype(np.float64)
        inner = interior_mask(m, spec.size, h, w)
        diff = np.abs(got - ref)[0].max(axis=0) / spec.scale  # back in uint8 levels
        assert diff[inner].max(initial=0.0) <= INTERIOR_TOL + 1e-3
        assert diff[~inner].max(initial=0.0) <= BORDER_TOL + 1e-3


def test_fp16_crop_for_fp16_io_models(model_crops: dict[str, WarpCrop]) -> None:
    frame = smooth_frame(300, 400, 5)
    m = similarity_to_crop(128, 1.1, 0.2, 200, 150)
    half = model_crops["inswapper_fp16"].run(frame, m).numpy()
    full = model_crops["inswapper"].run(frame, m).numpy()
    assert half.dtype == np.float16
    np.testing.assert_allclose(half.astype(np.float32), full, atol=1e-3)


# ------------------------------------------------------------------------------------------
# NV12 -> BGR
# ------------------------------------------------------------------------------------------


def bgr_to_nv12(bgr: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint8]:
    """OpenCV's BGR -> I420 (BT.601 limited range), with U and V interleaved into NV12."""
    h, w = bgr.shape[:2]
    i420 = cv2.cvtColor(bgr, cv2.COLOR_BGR2YUV_I420)
    u = i420[h : h + h // 4].reshape(-1)
    v = i420[h + h // 4 :].reshape(-1)
    nv12 = np.empty((h * 3 // 2, w), dtype=np.uint8)
    nv12[:h] = i420[:h]
    nv12[h:] = np.stack([u, v], axis=1).reshape(h // 2, w)
    return nv12


@pytest.mark.parametrize(("h", "w"), [(2, 2), (6, 10), (240, 320), (1080, 1920)])
def test_nv12_to_bgr_matches_cv2(h: int, w: int) -> None:
    nv12 = np.random.default_rng(h + w).integers(0, 256, (h * 3 // 2, w), dtype=np.uint8)
    got = Nv12ToBgr(FACTORY, h, w).run(nv12).numpy()
    diff = np.abs(got.astype(np.int16) - nv12_to_bgr_cv2(nv12))
    assert got.shape == (h, w, 3) and got.dtype == np.uint8
    assert diff.max() <= 1
    assert (diff > 0).mean() <= 1e-3


def test_nv12_round_trip() -> None:
    """BGR -> NV12 (OpenCV) -> BGR (graph). With colour constant over 2x2 blocks, 4:2:0 loses
    nothing, so only limited-range quantisation is left: <= 2 levels."""
    small = smooth_frame(240, 320, 6)
    bgr = np.ascontiguousarray(np.repeat(np.repeat(small, 2, axis=0), 2, axis=1))
    nv12 = bgr_to_nv12(bgr)
    back = DeviceOps(FACTORY, use_graphs=True).nv12_to_bgr(nv12).numpy()
    assert np.abs(back.astype(np.int16) - bgr).max() <= 2
    assert np.abs(back.astype(np.int16) - bgr).mean() <= 0.5
    # And on a frame with detail inside the 2x2 blocks, exactly OpenCV's own round trip (<= 1).
    detailed = bgr_to_nv12(smooth_frame(480, 640, 7))
    graph = Nv12ToBgr(FACTORY, 480, 640).run(detailed).numpy()
    assert np.abs(graph.astype(np.int16) - nv12_to_bgr_cv2(detailed)).max() <= 1


def test_nv12_from_an_ortvalue_and_a_resolution_change() -> None:
    ops = DeviceOps(FACTORY, use_graphs=True)
    for h, w in ((120, 160), (240, 320)):
        nv12 = np.random.default_rng(w).integers(0, 256, (h * 3 // 2, w), dtype=np.uint8)
        got = ops.nv12_to_bgr(ort.OrtValue.ortvalue_from_numpy(nv12)).numpy()
        assert np.abs(got.astype(np.int16) - nv12_to_bgr_cv2(nv12)).max() <= 1


def test_nv12_rejects_odd_sizes_and_wrong_shapes() -> None:
    with pytest.raises(ValueError, match="even"):
        build_nv12_to_bgr(481, 640)
    with pytest.raises(ValueError, match="NV12"):
        Nv12ToBgr(FACTORY, 4, 4).run(np.zeros((4, 4), np.uint8))


# ------------------------------------------------------------------------------------------
# paste_blend
# ------------------------------------------------------------------------------------------


def swapped_crop(size: int, seed: int) -> npt.NDArray[np.float32]:
    """A smooth [1,3,S,S] RGB crop in [0,1], as the swapper returns it."""
    return np.ascontiguousarray(
        (smooth_frame(size, size, seed).astype(np.float32) / 255.0).transpose(2, 0, 1)[None]
    )


@st.composite
def paste_case(draw: st.DrawFn) -> tuple[int, int, npt.NDArray[np.float64], int, float]:
    h, w = draw(st.sampled_from(((241, 317), (480, 641), (1080, 1920))))
    scale = draw(st.floats(0.4, 2.5))
    angle = draw(st.floats(-math.pi, math.pi))
    cx = draw(st.floats(-0.1, 1.1)) * w
    cy = draw(st.floats(-0.1, 1.1)) * h
    opacity = draw(st.sampled_from((1.0, 1.0, 0.6)))
    return h, w, similarity_to_crop(128, scale, angle, cx, cy), draw(st.integers(0, 2**16)), opacity


@FEW
@given(paste_case())
def test_paste_matches_the_compositor(
    graph_ops: DeviceOps, case: tuple[int, int, npt.NDArray[np.float64], int, float]
) -> None:
    h, w, m, seed, opacity = case
    frame = smooth_frame(h, w, seed)
    crop = swapped_crop(128, seed + 1)
    compositor = Compositor()
    expected = compositor.paste(frame, decode_crop(crop), m, opacity=opacity)
    mask = compositor.crop_mask(128, m)

    got = frame.copy()
    graph_ops.paste(got, crop, mask, m, opacity=opacity)
    diff = np.abs(got.astype(np.int16) - expected)
    assert diff.max() <= PASTE_TOL

    # An OrtValue frame is blended in place through its band of rows: same result.
    in_place = frame.copy()
    graph_ops.paste(ort.OrtValue.ortvalue_from_numpy(in_place), crop, mask, m, opacity=opacity)
    assert np.abs(in_place.astype(np.int16) - expected).max() <= PASTE_TOL
    assert np.abs(in_place.astype(np.int16) - got).max() <= 1

    # Pixels outside the compositor's paste region are never written.
    region = paste_region(frame.shape, 128, m)
    outside = np.ones((h, w), dtype=bool)
    outside[region.y0 : region.y1, region.x0 : region.x1] = False
    assert np.array_equal(got[outside], frame[outside])
    assert np.array_equal(in_place[outside], frame[outside])


def test_paste_blend_graph_matches_its_cv2_twin() -> None:
    rng = np.random.default_rng(7)
    runner = PasteBlend(FACTORY, 128)
    mask = Compositor().crop_mask(128, similarity_to_crop(128, 1.0, 0.0, 0, 0))
    for i in range(5):
        region = noise_frame(int(rng.integers(60, 300)), int(rng.integers(60, 300)), i)
        crop = swapped_crop(128, i)
        m = similarity_to_crop(
            128, rng.uniform(0.5, 2), rng.uniform(-3, 3), region.shape[1] / 2, region.shape[0] / 2
        )
        theta_inv = invert_affine(m)
        got = runner.run(region, crop, mask, theta_inv).numpy()
        assert (
            np.abs(got.astype(np.int16) - paste_blend_cv2(region, crop, mask, theta_inv)).max() <= PASTE_TOL
        )


def test_signed_paste_takes_a_restorers_output_like_its_decoder() -> None:
    """A restorer's [-1, 1] output pastes like FaceRestorer._decode + the compositor (graph and twin),
    and differently from reading it as a [0, 1] swap (the test can tell the two apart)."""
    from models.ops.device_twins import decode_signed_crop

    rng = np.random.default_rng(11)
    size = 256
    signed_runner = PasteBlend(FACTORY, size, signed=True)
    unit_runner = PasteBlend(FACTORY, size)
    restored = np.clip(swapped_crop(size, 3) * 2.0 - 1.0 + rng.normal(0, 0.05, (1, 3, size, size)), -1.2, 1.2)
    restored = restored.astype(np.float32)
    # Exactly FaceFusion's decode: clip, (x + 1) * 127.5, round, RGB -> BGR.
    want = np.rint((np.clip(restored[0], -1, 1) + 1) * 127.5).astype(np.uint8).transpose(1, 2, 0)[:, :, ::-1]
    np.testing.assert_array_equal(decode_signed_crop(restored), want)
    m = similarity_to_crop(size, 1.3, 0.4, 150, 120)
    mask = Compositor().crop_mask(size, m)
    region = smooth_frame(240, 300, 4)
    theta_inv = invert_affine(m)
    twin = paste_blend_cv2(region, restored, mask, theta_inv, signed=True)
    got = signed_runner.run(region, restored, mask, theta_inv).numpy()
    assert np.abs(got.astype(np.int16) - twin).max() <= PASTE_TOL
    wrong = unit_runner.run(region, restored, mask, theta_inv).numpy()
    assert np.abs(wrong.astype(np.int16) - twin).max() > 40


def test_cpu_path_of_the_facade_is_the_compositor_exactly() -> None:
    """DeviceOps on a CPU factory defaults to OpenCV: the compositor's blend (within one level: the
    compositor carries its alpha in 8 bits through one 4-channel warp, the facade in float)."""
    ops = DeviceOps(FACTORY)
    assert not ops.use_graphs and ops.device_type == "cpu"
    frame = smooth_frame(360, 480, 8)
    m = similarity_to_crop(128, 1.4, 0.5, 240, 180)
    crop = swapped_crop(128, 9)
    compositor = Compositor()
    got = frame.copy()
    ops.paste(got, crop, compositor.crop_mask(128, m), m)
    want = compositor.paste(frame, decode_crop(crop), m)
    assert np.abs(got.astype(np.int16) - want).max() <= 1
    assert np.count_nonzero(got != frame) > 1000  # the face really was pasted
    cropped = ops.crop_for_inswapper(frame, m).numpy()
    np.testing.assert_array_equal(cropped, warp_crop_cv2(frame, m, INSWAPPER_CROP))
    nv12 = bgr_to_nv12(frame)
    np.testing.assert_array_equal(ops.nv12_to_bgr(nv12).numpy(), nv12_to_bgr_cv2(nv12))


def test_facade_graph_crops_equal_the_runners(graph_ops: DeviceOps, model_crops: dict[str, WarpCrop]) -> None:
    frame = smooth_frame(400, 500, 10)
    m = similarity_to_crop(128, 1.2, -0.4, 250, 200)
    np.testing.assert_array_equal(
        graph_ops.crop_for_inswapper(frame, m).numpy(), model_crops["inswapper"].run(frame, m).numpy()
    )
    m112 = m * (112 / 128)
    np.testing.assert_array_equal(
        graph_ops.crop_for_arcface(frame, m112).numpy(), model_crops["arcface"].run(frame, m112).numpy()
    )
    assert graph_ops.device_type == "cpu"


def test_auto_mode_falls_back_to_opencv_when_cuda_did_not_load() -> None:
    """A CUDA factory on this CPU-only machine: the first graph reveals the fallback (the factory
    reports it), and later calls take the OpenCV path."""
    ops = DeviceOps(SessionFactory(SessionConfig(provider="cuda")))
    assert ops.use_graphs
    frame = smooth_frame(200, 200, 11)
    m = similarity_to_crop(128, 1.0, 0.0, 100, 100)
    first = ops.crop_for_inswapper(frame, m).numpy()
    assert not ops.use_graphs and ops.device_type == "cpu"
    second = ops.crop_for_inswapper(frame, m).numpy()
    assert np.abs(first.astype(np.float64) - second).max() * 255 <= BORDER_TOL


def test_shift_target_moves_the_output_origin() -> None:
    m = similarity_to_crop(128, 1.3, 0.3, 50, 60)
    shifted = shift_target(m, 10, 20)
    pt = np.array([5.0, 7.0])
    np.testing.assert_allclose(shifted[:, :2] @ pt + shifted[:, 2], m[:, :2] @ pt + m[:, 2] - [10, 20])


# ------------------------------------------------------------------------------------------
# CUDA/TensorRT legality, checked by parsing the graphs
# ------------------------------------------------------------------------------------------


def all_graphs() -> list[onnx.ModelProto]:
    return [
        *(build_warp_crop(CropSpec(s)) for s in CROP_SIZES),
        build_crop_for_inswapper(),
        build_crop_for_inswapper(fp16=True),
        build_crop_for_arcface(),
        build_nv12_to_bgr(1080, 1920),
        build_nv12_to_bgr(2, 2),
        build_paste_blend(128),
        build_paste_blend(256),
        build_paste_blend(512, signed=True),
    ]


def input_types(model: onnx.ModelProto) -> dict[str, int]:
    graph = onnx.shape_inference.infer_shapes(model, strict_mode=True).graph
    types = {
        vi.name: vi.type.tensor_type.elem_type for vi in [*graph.input, *graph.value_info, *graph.output]
    }
    types.update({t.name: t.data_type for t in graph.initializer})
    return types


@pytest.mark.parametrize("model", all_graphs(), ids=lambda m: m.graph.name)
def test_graphs_are_cuda_and_tensorrt_legal(model: onnx.ModelProto) -> None:
    assert device_graph_problems(model) == []
    onnx.checker.check_model(model, full_check=True)
    opset = next(o.version for o in model.opset_import if o.domain == "")
    assert opset == OPSET <= 19
    types = input_types(model)
    inits = {t.name for t in model.graph.initializer}
    ops = [n.op_type for n in model.graph.node]
    assert "AffineGrid" not in ops
    assert "Pad" not in ops
    for node in model.graph.node:
        if node.op_type == "GridSample":
            attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
            assert attrs["mode"] == b"bilinear" and attrs["padding_mode"] in (b"zeros", b"border")
            assert attrs["align_corners"] == 0
            assert types[node.input[0]] == types[node.input[1]] == TensorProto.FLOAT
        if node.op_type in ("Slice", "Resize"):
            assert all(i in inits for i in node.input[1:] if i)
        if node.op_type != "Cast":
            assert all(types.get(i) != TensorProto.UINT8 for i in node.input)


def tiny_model(
    nodes: list[onnx.NodeProto],
    inputs: list[onnx.ValueInfoProto],
    outputs: list[onnx.ValueInfoProto],
    inits: list[onnx.TensorProto] | None = None,
    opset: int = OPSET,
) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "bad", inputs, outputs, initializer=inits or [])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8 if opset <= 17 else 10
    return model


def test_the_legality_check_catches_what_the_gpu_would_reject() -> None:
    f4 = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])
    theta = helper.make_tensor_value_info("theta", TensorProto.FLOAT, [1, 2, 3])
    grid = helper.make_tensor_value_info("grid", TensorProto.FLOAT, [1, 8, 8, 2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    size = numpy_helper.from_array(np.array([1, 3, 8, 8], np.int64), "size")

    affine_nodes = [
        helper.make_node("AffineGrid", ["theta", "size"], ["g"]),
        helper.make_node("GridSample", ["x", "g"], ["y"]),
    ]
    affine = tiny_model(affine_nodes, [f4, theta], [y], [size], opset=20)
    problems = " | ".join(device_graph_problems(affine))
    assert "AffineGrid has no CUDA kernel" in problems and "opset 20 > 19" in problems

    linear = tiny_model(
        [helper.make_node("GridSample", ["x", "grid"], ["y"], mode="linear")], [f4, grid], [y], opset=20
    )
    assert any("TensorRT needs 'bilinear'" in p for p in device_graph_problems(linear))

    x16 = helper.make_tensor_value_info("x", TensorProto.FLOAT16, [1, 3, 8, 8])
    g16 = helper.make_tensor_value_info("grid", TensorProto.FLOAT16, [1, 8, 8, 2])
    y16 = helper.make_tensor_value_info("y", TensorProto.FLOAT16, None)
    half = tiny_model([helper.make_node("GridSample", ["x", "grid"], ["y"])], [x16, g16], [y16])
    assert any("not float32" in p for p in device_graph_problems(half))
    # Declared float32 output of a float16 GridSample: ONNX type inference fails, and says so.
    mislabelled = tiny_model([helper.make_node("GridSample", ["x", "grid"], ["y"])], [x16, g16], [y])
    assert any("type inference fails" in p for p in device_graph_problems(mislabelled))

    u8 = helper.make_tensor_value_info("x", TensorProto.UINT8, [4, 4])
    pads = numpy_helper.from_array(np.array([1, 1, 1, 1], np.int64), "pads")
    pad = tiny_model([helper.make_node("Pad", ["x", "pads"], ["y"])], [u8], [y], [pads])
    assert any("Pad has no CUDA kernel" in p for p in device_graph_problems(pad))

    scales = numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")
    cubic = tiny_model(
        [helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="cubic")], [f4], [y], [scales]
    )
    assert any("nearest/linear" in p for p in device_graph_problems(cubic))

    # Slice bounds computed from tensor data: not an initializer, and a device->host stall.
    v = helper.make_tensor_value_info("v", TensorProto.FLOAT, [8])
    data_slice = tiny_model(
        [
            helper.make_node("ReduceMax", ["v"], ["mx"], keepdims=1),
            helper.make_node("Cast", ["mx"], ["end"], to=TensorProto.INT64),
            helper.make_node("Slice", ["v", "start", "end"], ["y"]),
        ],
        [v], [y], [numpy_helper.from_array(np.array([0], np.int64), "start")],
    )  # fmt: skip
    problems = " | ".join(device_graph_problems(data_slice))
    assert "must be an initializer" in problems and "stalls the stream" in problems

    # A Reshape whose shape comes from Shape() is fine; from data it is not.
    ok = tiny_model(
        [helper.make_node("Shape", ["v"], ["s"]), helper.make_node("Reshape", ["v", "s"], ["y"])], [v], [y]
    )
    assert device_graph_problems(ok) == []


def test_ort_places_every_node_of_the_graphs_on_the_cpu_provider_here() -> None:
    """The same graphs the GPU runs execute here end to end on the CPU provider (no node dropped
    or unsupported); on a GPU this list is where to look for CPU fallbacks."""
    so = FACTORY.session_options()
    so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
    model = build_paste_blend(128)
    sess = ort.InferenceSession(
        model.SerializeToString(), sess_options=so, providers=["CPUExecutionProvider"]
    )
    eps = {sg.ep_name for sg in sess.get_provider_graph_assignment_info()}
    assert eps == {"CPUExecutionProvider"}


def test_tensorrt_factory_runs_the_graphs_on_the_cuda_provider() -> None:
    """Per-frame input shapes would make TensorRT rebuild engines; the CUDA provider has no build."""
    trt = SessionFactory(SessionConfig(provider="tensorrt"))
    assert DeviceOps(trt).factory.config.provider == "cuda"
    assert DeviceOps(trt).factory.fallbacks is trt.fallbacks  # fallback notes still reach the app
    assert DeviceOps(trt, allow_tensorrt=True).factory is trt


def test_paste_graph_reads_its_region_once_so_in_place_output_is_safe() -> None:
    """DeviceOps.paste binds a device frame's band as both `region` and `blended`. That is safe
    only while `region` feeds one Cast and every later use is element-wise on that copy."""
    model = build_paste_blend(128)
    consumers = [n for n in model.graph.node if "region" in n.input]
    assert [n.op_type for n in consumers] == ["Cast"]


class HostCopyFrame:
    """A frame that lives on the GPU, as the OpenCV path sees it: numpy() is a host COPY."""

    def __init__(self, image: npt.NDArray[np.uint8]) -> None:
        self.image = image
        self.updates = 0

    def shape(self) -> list[int]:
        return list(self.image.shape)

    def element_type(self) -> int:
        return int(onnx.TensorProto.UINT8)

    def device_name(self) -> str:
        return "Cuda"

    def numpy(self) -> npt.NDArray[np.uint8]:
        return self.image.copy()

    def update_inplace(self, host: npt.NDArray[np.uint8]) -> None:
        self.updates += 1
        np.copyto(self.image, host)


def test_the_opencv_path_writes_a_device_frame_back_instead_of_blending_into_a_copy() -> None:
    frame = smooth_frame(240, 320, 11)
    m = np.array([[0.9, 0.1, -80.0], [-0.1, 0.9, -40.0]])
    crop = swapped_crop(128, 12)
    mask = Compositor().crop_mask(128, m)
    expected = frame.copy()
    DeviceOps(FACTORY, use_graphs=False).paste(expected, crop, mask, m)
    assert not np.array_equal(expected, frame)
    device = HostCopyFrame(frame.copy())
    DeviceOps(FACTORY, use_graphs=False).paste(device, crop, mask, m)
    assert device.updates == 1
    np.testing.assert_array_equal(device.image, expected)
