"""InSwapper wrapper: emap from the last initializer, latent, pre/post-processing, fp16 variants."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cv2
import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from models.errors import ModelContractError
from models.fakes.detector_double import build_scrfd
from models.fakes.doubles import FakeArg, FakeSession
from models.fakes.pixel_doubles import INSWAPPER_BEND, build_inswapper, inswapper_weights, position_ramp
from models.ops.crop_codec import CropCodec
from models.runtime.session import SessionConfig, SessionFactory
from models.wrappers.swappers.inswapper import InSwapper, read_emap

FACTORY = SessionFactory(SessionConfig(provider="cpu"))


def save(model: onnx.ModelProto, path: Path) -> Path:
    path.write_bytes(model.SerializeToString())
    return path


@pytest.fixture(scope="module")
def paths(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("inswapper")
    return {
        "fp32": save(build_inswapper(seed=0), d / "inswapper_128.onnx"),
        "fp16": save(build_inswapper(seed=0, fp16=True), d / "inswapper_128_fp16.onnx"),
        "fp16_io": save(build_inswapper(seed=0, fp16_io=True), d / "inswapper_fp16_io.onnx"),
        "det": save(build_scrfd([]), d / "det_10g.onnx"),
    }


@pytest.fixture(scope="module")
def swapper(paths: dict[str, Path]) -> InSwapper:
    return InSwapper.from_file(paths["fp32"], FACTORY)


def unit(seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal(512).astype(np.float32)
    return v / np.linalg.norm(v)


def crop(seed: int) -> np.ndarray:
    small = np.random.default_rng(seed).integers(0, 256, (16, 16, 3), dtype=np.uint8)
    return np.asarray(cv2.resize(small, (128, 128), interpolation=cv2.INTER_LINEAR), dtype=np.uint8)


def expected_swap(crop_bgr: np.ndarray, latent: np.ndarray, seed: int = 0) -> np.ndarray:
    """What the double computes, in numpy: m = 0.5 * crop + 0.5 * colour(latent), bent by the
    position ramp, BGR uint8."""
    w, _ = inswapper_weights(seed)
    colour_rgb = (np.tanh(latent.reshape(1, 512) @ w) + 1.0) / 2.0  # (1, 3) RGB
    rgb = crop_bgr[:, :, ::-1].astype(np.float32) / 255.0
    m = 0.5 * rgb + 0.5 * colour_rgb.reshape(1, 1, 3)
    out = m + INSWAPPER_BEND * position_ramp(128)[:, :, None] * m * (1.0 - m)
    return np.asarray(np.clip(out * 255.0, 0, 255).astype(np.uint8)[:, :, ::-1])


def test_emap_is_the_last_initializer(swapper: InSwapper, paths: dict[str, Path]) -> None:
    _, emap = inswapper_weights(0)
    np.testing.assert_array_equal(swapper.emap, emap)
    # A decoy 512x512 initializer placed FIRST must not be picked up.
    model = onnx.load(str(paths["fp32"]))
    decoy = numpy_helper.from_array(np.eye(512, dtype=np.float32), "decoy")
    model.graph.initializer.insert(0, decoy)
    path = save(model, paths["fp32"].with_name("decoy.onnx"))
    np.testing.assert_array_equal(read_emap(path), emap)


def test_missing_or_wrong_emap_is_a_contract_error(paths: dict[str, Path]) -> None:
    model = onnx.load(str(paths["fp32"]))
    model.graph.initializer.append(numpy_helper.from_array(np.zeros((3, 3), np.float32), "not_emap"))
    path = save(model, paths["fp32"].with_name("no_emap.onnx"))
    with pytest.raises(ModelContractError, match=r"no_emap\.onnx: the last initializer \('not_emap'"):
        InSwapper.from_file(path, FACTORY)
    with pytest.raises(ModelContractError, match="512x512"):
        InSwapper(FACTORY.create(paths["fp32"]), np.zeros((512, 256), np.float32))


def test_latent_is_embedding_times_emap_renormalised(swapper: InSwapper) -> None:
    e = unit(1)
    lat = swapper.latent(e)
    assert lat.shape == (1, 512) and lat.dtype == np.float32
    assert np.linalg.norm(lat) == pytest.approx(1.0, abs=1e-5)
    raw = e.reshape(1, 512) @ inswapper_weights(0)[1]
    assert abs(float(np.linalg.norm(raw)) - 1.0) > 0.01  # so the renormalisation is observable
    np.testing.assert_allclose(lat, raw / np.linalg.norm(raw), rtol=1e-5, atol=1e-6)


def test_swap_pre_and_post_processing(swapper: InSwapper) -> None:
    c, lat = crop(2), swapper.latent(unit(2))
    out = swapper.swap(c, lat)
    assert out.shape == (128, 128, 3) and out.dtype == np.uint8
    # Exact: RGB in, x/255, output x255, truncation, back to BGR; any channel slip shows here.
    np.testing.assert_array_equal(out, expected_swap(c, lat))


def test_two_identities_differ_and_target_matters(swapper: InSwapper) -> None:
    c = crop(3)
    a = swapper.swap(c, swapper.latent(unit(10))).astype(np.int16)
    b = swapper.swap(c, swapper.latent(unit(11))).astype(np.int16)
    assert np.abs(a - b).mean() > 10  # visibly different faces
    np.testing.assert_array_equal(swapper.swap(c, swapper.latent(unit(10))), a.astype(np.uint8))
    other_target = swapper.swap(crop(4), swapper.latent(unit(10))).astype(np.int16)
    assert np.abs(a - other_target).mean() > 5


def test_out_buffer_is_written_and_returned(swapper: InSwapper) -> None:
    buf = np.zeros((128, 128, 3), np.uint8)
    res = swapper.swap(crop(5), swapper.latent(unit(5)), out=buf)
    assert res is buf and buf.any()
    with pytest.raises(ValueError):
        swapper.swap(np.zeros((112, 112, 3), np.uint8), swapper.latent(unit(5)))


def test_fp16_file_with_float32_io(paths: dict[str, Path], swapper: InSwapper) -> None:
    half = InSwapper.from_file(paths["fp16"], FACTORY)
    assert half.target_dtype is np.float32 and half.source_dtype is np.float32
    assert half.emap.dtype == np.float32  # stored as float16 in this file, used as float32
    np.testing.assert_allclose(half.emap, swapper.emap, atol=2e-3)
    c, e = crop(6), unit(6)
    diff = half.swap(c, half.latent(e)).astype(np.int16) - swapper.swap(c, swapper.latent(e))
    assert np.abs(diff).max() <= 2  # float16 rounding only


def test_fp16_io_is_fed_float16(paths: dict[str, Path], swapper: InSwapper) -> None:
    half = InSwapper.from_file(paths["fp16_io"], FACTORY)
    assert half.session.get_inputs()[0].type == "tensor(float16)"
    assert half.target_dtype is np.float16 and half.source_dtype is np.float16
    c, e = crop(7), unit(7)
    diff = half.swap(c, half.latent(e)).astype(np.int16) - swapper.swap(c, swapper.latent(e))
    assert np.abs(diff).max() <= 2


def test_detector_file_is_not_a_swapper(paths: dict[str, Path]) -> None:
    with pytest.raises(
        ModelContractError,
        match=r"det_10g\.onnx: not an inswapper model: expected inputs "
        r"target\[1,3,128,128\] \+ source\[1,512\]",
    ):
        InSwapper.from_file(paths["det"], FACTORY)


@pytest.mark.parametrize(
    "inputs, outputs",
    [
        (
            [FakeArg("target", [1, 3, 256, 256]), FakeArg("source", [1, 512])],
            [FakeArg("output", [1, 3, 256, 256])],
        ),
        (
            [FakeArg("target", [1, 3, 128, 128]), FakeArg("latent", [1, 512])],
            [FakeArg("output", [1, 3, 128, 128])],
        ),
        (
            [FakeArg("target", [1, 3, 128, 128]), FakeArg("source", [1, 512])],
            [FakeArg("output", [1, 128, 128, 3])],
        ),
        (
            [FakeArg("target", [1, 3, 128, 128]), FakeArg("source", [1, 512], "tensor(double)")],
            [FakeArg("output", [1, 3, 128, 128])],
        ),
    ],
)
def test_wrong_signature_rejected(inputs: list[FakeArg], outputs: list[FakeArg]) -> None:
    with pytest.raises(ModelContractError):
        InSwapper(FakeSession(inputs, outputs), np.zeros((512, 512), np.float32))


def test_large_model_emap_is_cached_and_a_replaced_file_misses(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import onnx

    from models.fakes.pixel_doubles import build_inswapper
    from models.wrappers.swappers import inswapper as mod

    path = tmp_path / "inswapper_128.onnx"
    onnx.save(build_inswapper(seed=0), str(path))
    monkeypatch.setattr(mod, "EMAP_CACHE_MIN_BYTES", 1)
    calls = []
    real = mod.read_emap
    monkeypatch.setattr(mod, "read_emap", lambda p: calls.append(p) or real(p))
    cache = tmp_path / "cache"
    first = mod.read_emap_cached(path, cache)
    second = mod.read_emap_cached(path, cache)
    assert len(calls) == 1 and np.array_equal(first, second)
    onnx.save(build_inswapper(seed=1), str(path))  # a different file under the same name
    third = mod.read_emap_cached(path, cache)
    assert len(calls) == 2 and not np.array_equal(first, third)


def test_the_app_loads_the_swapper_emap_from_the_cache(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # The engine loads a swapper per worker at every start and reload: the 554 MB parse must not
    # happen each time (it holds the GIL and freezes the window ~1 s per worker).
    import onnx
    import platformdirs

    from models.fakes.pixel_doubles import build_inswapper
    from models.runtime.session import SessionFactory
    from models.wrappers.swappers import inswapper as mod
    from models.wrappers.swappers.registry import load_swapper

    path = tmp_path / "inswapper_128.onnx"
    onnx.save(build_inswapper(seed=0), str(path))
    monkeypatch.setattr(mod, "EMAP_CACHE_MIN_BYTES", 1)
    monkeypatch.setattr(platformdirs, "user_cache_dir", lambda app: str(tmp_path / "user-cache"))
    calls = []
    real = mod.read_emap
    monkeypatch.setattr(mod, "read_emap", lambda p: calls.append(p) or real(p))
    first = load_swapper(path, SessionFactory())
    second = load_swapper(path, SessionFactory())
    assert len(calls) == 1 and np.array_equal(first.emap, second.emap)
    assert list((tmp_path / "user-cache" / "emap").glob("*.emap.npy"))


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_decode_writes_into_an_out_array_of_any_layout(dtype: type[np.floating[Any]]) -> None:
    codec = CropCodec(InSwapper.facts.crop_spec())
    pred = np.random.default_rng(3).random((1, 3, 128, 128), dtype=np.float32).astype(dtype)
    expected, _ = codec.decode(pred, None, "unit")
    fortran = np.asfortranarray(np.zeros((128, 128, 3), np.uint8))
    assert codec.decode(pred, fortran, "unit") == (fortran, True)
    np.testing.assert_array_equal(fortran, expected)


def test_a_swap_with_nan_is_refused_not_pasted_as_a_black_square(
    swapper: InSwapper, monkeypatch: pytest.MonkeyPatch
) -> None:
    from models.errors import ModelOutputError

    bad = np.full((1, 3, 128, 128), 0.5, np.float32)
    bad[0, :, 40:80, 40:80] = np.nan  # what an fp16 overflow looks like
    from models.runtime.batch_window import BatchPolicy
    from models.runtime.inference_service import HostBatchRunner, InferenceService

    nan_model = InferenceService([HostBatchRunner(lambda feeds: [bad])], BatchPolicy(max_batch=1))
    monkeypatch.setattr(swapper, "client", nan_model.client("overflowing"))
    crop = np.random.default_rng(0).integers(0, 256, (128, 128, 3), dtype=np.uint8)
    with pytest.raises(ModelOutputError) as info:
        swapper.swap(crop, unit(1))
    assert "NaN" in info.value.user_message() and "fp32 swapper" in info.value.user_message()


def test_a_dropped_swapper_is_freed_at_once_not_left_to_the_cycle_collector(paths: dict[str, Path]) -> None:
    """The app freezes its heap once the first models are loaded; a swapper kept alive by a
    reference cycle would then never be freed after a model reload (its session with it)."""
    import gc
    import weakref

    gc.disable()
    try:
        sw = InSwapper.from_file(paths["fp32"], FACTORY)
        sw.swap(np.zeros((128, 128, 3), np.uint8), sw.latent(unit(1)))
        gone = weakref.ref(sw)
        del sw
        assert gone() is None
    finally:
        gc.enable()
