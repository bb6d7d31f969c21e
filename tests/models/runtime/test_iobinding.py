"""models.runtime.iobinding on the CPU provider: the IOBinding path equals plain session.run on the model
doubles, static outputs are bound once and reused, the device string follows the session's real
providers, and the crop graph -> inswapper chain equals the OpenCV crop + session.run path."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import onnx
import onnxruntime as ort
import pytest

from models.fakes.detector_double import DEFAULT_FACE, build_scrfd
from models.fakes.pixel_doubles import build_arcface, build_inswapper
from models.ops.align import warp_crop
from models.ops.crop_geometry import INSWAPPER_CROP, CropSpec
from models.ops.device_ops import WarpCrop
from models.runtime.iobinding import BoundSession, TensorView, chain, session_device
from models.runtime.session import InferenceClock, SessionConfig, SessionFactory
from models.wrappers.swappers.inswapper import InSwapper

FACTORY = SessionFactory(SessionConfig(provider="cpu", intra_op_threads=2))


def session(model: onnx.ModelProto, factory: SessionFactory = FACTORY) -> Any:
    return factory.create(model.SerializeToString(), label=model.graph.name)


def latent(seed: int) -> npt.NDArray[np.float32]:
    v = np.random.default_rng(seed).standard_normal((1, 512)).astype(np.float32)
    return v / np.linalg.norm(v)


def smooth_frame(h: int, w: int) -> npt.NDArray[np.uint8]:
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    chans = [127 + 60 * np.sin(x / 37 + c) + 50 * np.cos(y / 29 - c) for c in range(3)]
    return np.ascontiguousarray(np.clip(np.stack(chans, axis=-1), 0, 255).astype(np.uint8))


def similarity_to_crop(
    size: int, scale: float, angle: float, cx: float, cy: float
) -> npt.NDArray[np.float64]:
    c, s = scale * math.cos(angle), scale * math.sin(angle)
    m = np.array([[c, -s, 0.0], [s, c, 0.0]])
    m[:, 2] = np.array([size / 2.0, size / 2.0]) - m[:, :2] @ np.array([cx, cy])
    return m


# ------------------------------------------------------------------------------------------
# Equality with session.run
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", ["fp32", "fp16", "fp16_io"])
def test_inswapper_double_equals_session_run(variant: str) -> None:
    model = build_inswapper(seed=0, fp16=variant == "fp16", fp16_io=variant == "fp16_io")
    sess = session(model)
    dtype = np.float16 if variant == "fp16_io" else np.float32
    bound = BoundSession(sess, "cpu")
    for seed in range(3):
        target = np.random.default_rng(seed).random((1, 3, 128, 128)).astype(dtype)
        source = latent(seed).astype(dtype)
        feeds = {"target": target, "source": source}
        (expected,) = sess.run(None, feeds)
        (got,) = bound.run_numpy(feeds)
        assert got.dtype == expected.dtype
        np.testing.assert_array_equal(got, expected)


def test_scrfd_double_equals_session_run_and_reuses_its_outputs() -> None:
    sess = session(build_scrfd([DEFAULT_FACE]))
    bound = BoundSession(sess, "cpu")
    blob = np.random.default_rng(1).random((1, 3, 640, 640)).astype(np.float32)
    expected = sess.run(None, {"input.1": blob})
    first = bound.run({"input.1": blob})
    ptrs = [o.data_ptr() for o in first]
    assert len(first) == 9
    for got, want in zip(first, expected, strict=True):
        np.testing.assert_array_equal(got.numpy(), want)
    # All nine outputs are static: bound once, the same buffers on every run.
    second = bound.run({"input.1": blob * 0.5})
    assert [o.data_ptr() for o in second] == ptrs
    assert ptrs == [bound.static_output(n).data_ptr() for n in bound.output_names]


def test_arcface_double_dynamic_batch_is_allocated_per_run() -> None:
    sess = session(build_arcface(seed=0))
    bound = BoundSession(sess, "cpu")
    for n in (1, 3):
        crops = np.random.default_rng(n).random((n, 3, 112, 112)).astype(np.float32)
        (expected,) = sess.run(None, {"input.1": crops})
        (got,) = bound.run_numpy({"input.1": crops})
        assert got.shape == (n, 512)
        np.testing.assert_array_equal(got, expected)
    with pytest.raises(KeyError):
        bound.static_output("embedding")  # dynamic: never preallocated


def test_run_numpy_returns_copies_not_views_of_the_reused_buffers() -> None:
    bound = BoundSession(session(build_inswapper(seed=0)), "cpu")
    target = np.full((1, 3, 128, 128), 0.2, np.float32)
    (a,) = bound.run_numpy({"target": target, "source": latent(0)})
    kept = a.copy()
    (b,) = bound.run_numpy({"target": np.full_like(target, 0.9)})  # source stays bound
    np.testing.assert_array_equal(a, kept)
    assert not np.array_equal(a, b)


def test_inputs_left_out_keep_their_binding_and_numpy_inputs_are_read_at_run_time_on_cpu() -> None:
    """CPU-provider behaviour (a CUDA session copies a numpy input when it is bound instead)."""
    sess = session(build_inswapper(seed=0))
    bound = BoundSession(sess, "cpu")
    target = np.zeros((1, 3, 128, 128), np.float32)
    src = latent(3)
    bound.run({"target": target, "source": src})
    target[:] = 0.5  # bind_cpu_input reads the caller's memory at run time on the CPU provider
    (got,) = bound.run_numpy()
    np.testing.assert_array_equal(got, sess.run(None, {"target": target, "source": src})[0])
    assert bound.bound_inputs["target"] is target


def test_caller_buffers_as_outputs() -> None:
    sess = session(build_inswapper(seed=0))
    bound = BoundSession(sess, "cpu")
    mine = ort.OrtValue.ortvalue_from_shape_and_type([1, 3, 128, 128], np.float32, "cpu", 0)
    bound.bind_output("output", mine)
    feeds = {"target": np.full((1, 3, 128, 128), 0.3, np.float32), "source": latent(4)}
    (out,) = bound.run(feeds)
    assert out.data_ptr() == mine.data_ptr()
    np.testing.assert_array_equal(mine.numpy(), sess.run(None, feeds)[0])
    bound.bind_output("output", None)  # back to the session's own reused buffer
    (out,) = bound.run()
    assert out.data_ptr() == bound.static_output("output").data_ptr()


def test_tensor_view_binds_a_band_of_rows_by_pointer() -> None:
    sess = session(build_arcface(seed=0))
    bound = BoundSession(sess, "cpu")
    stack = np.random.default_rng(5).random((5, 3, 112, 112)).astype(np.float32)
    (got,) = bound.run_numpy({"input.1": TensorView.rows(stack, 1, 4)})
    np.testing.assert_array_equal(got, sess.run(None, {"input.1": stack[1:4]})[0])
    ov = ort.OrtValue.ortvalue_from_numpy(stack)
    (got_ov,) = bound.run_numpy({"input.1": TensorView.rows(ov, 2, 5)})
    np.testing.assert_array_equal(got_ov, sess.run(None, {"input.1": stack[2:5]})[0])
    with pytest.raises(ValueError, match="outside"):
        TensorView.rows(stack, 3, 6)


def test_timed_sessions_are_bound_and_timed() -> None:
    clock = InferenceClock()
    factory = SessionFactory(SessionConfig(provider="cpu"), clock=clock)
    bound = BoundSession(session(build_inswapper(seed=0), factory), "cpu")
    bound.run({"target": np.zeros((1, 3, 128, 128), np.float32), "source": latent(0)})
    assert clock.calls == 1


def test_synchronize_false_sets_the_run_option_only_when_asked() -> None:
    sess = session(build_inswapper(seed=0))
    assert BoundSession(sess, "cpu")._run_options is None
    lazy = BoundSession(sess, "cpu", synchronize=False)
    assert lazy._run_options.get_run_config_entry("disable_synchronize_execution_providers") == "1"
    feeds = {"target": np.full((1, 3, 128, 128), 0.7, np.float32), "source": latent(1)}
    np.testing.assert_array_equal(lazy.run_numpy(feeds)[0], sess.run(None, feeds)[0])


# ------------------------------------------------------------------------------------------
# Devices
# ------------------------------------------------------------------------------------------


class _Providers:
    def __init__(self, *names: str) -> None:
        self._names = list(names)

    def get_providers(self) -> list[str]:
        return self._names


def test_device_string_follows_the_live_providers() -> None:
    assert session_device(_Providers("CUDAExecutionProvider", "CPUExecutionProvider"), "cuda") == "cuda"
    assert session_device(_Providers("TensorrtExecutionProvider", "CUDAExecutionProvider"), "cuda") == "cuda"
    assert session_device(_Providers("CPUExecutionProvider"), "cuda") == "cpu"
    assert session_device(_Providers("CUDAExecutionProvider"), "cpu") == "cpu"


def test_cuda_asked_on_a_cpu_only_session_falls_back_to_cpu_buffers() -> None:
    """This machine has no CUDA: ORT runs the session on the CPU, so 'cuda' buffers would fail."""
    factory = SessionFactory(SessionConfig(provider="cuda"))
    sess = session(build_inswapper(seed=0), factory)
    assert sess.get_providers() == ["CPUExecutionProvider"]
    bound = BoundSession(sess, factory.device_type)
    assert factory.device_type == "cuda"
    assert bound.device_type == "cpu" and bound.fell_back
    assert all(bound.static_output(n).device_name() == "cpu" for n in bound.output_names)
    feeds = {"target": np.full((1, 3, 128, 128), 0.4, np.float32), "source": latent(2)}
    np.testing.assert_array_equal(bound.run_numpy(feeds)[0], sess.run(None, feeds)[0])


def test_binding_mistakes_are_clear_errors() -> None:
    bound = BoundSession(session(build_inswapper(seed=0)), "cpu")
    with pytest.raises(KeyError, match="not an input"):
        bound.bind_input("nope", np.zeros(1, np.float32))
    with pytest.raises(TypeError, match="float64"):
        bound.bind_input("target", np.zeros((1, 3, 128, 128)))
    with pytest.raises(ValueError, match="never bound"):
        bound.run({"target": np.zeros((1, 3, 128, 128), np.float32)})
    fake_gpu = TensorView(0, (1, 3, 128, 128), np.dtype(np.float32), "cuda", owner=None)
    with pytest.raises(ValueError, match="'cuda' cannot be bound to a session running on 'cpu'"):
        bound.bind_input("target", fake_gpu)


# ------------------------------------------------------------------------------------------
# The GPU-resident chain: crop graph -> inswapper, no host round trip
# ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def inswapper_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("iob") / "inswapper_128.onnx"
    path.write_bytes(build_inswapper(seed=0).SerializeToString())
    return path


def test_crop_to_swap_chain_equals_opencv_crop_and_session_run(inswapper_file: Path) -> None:
    frame = smooth_frame(720, 1280)
    swapper = InSwapper.from_file(inswapper_file, FACTORY)
    crop = WarpCrop(FACTORY, INSWAPPER_CROP)
    swap = BoundSession(swapper.session, FACTORY.device_type)
    for angle, cx, cy in ((0.0, 640.0, 360.0), (0.6, 300.0, 200.0), (-2.5, 1000.0, 500.0)):
        m = similarity_to_crop(128, 1.1, angle, cx, cy)
        lat = swapper.latent(np.random.default_rng(int(cx)).standard_normal(512))

        # The CPU path: OpenCV crop, the wrapper's own preprocessing, session.run.
        swapper.encode_target(warp_crop(frame, m, 128))
        swapper.load_source(lat)
        expected = swapper._infer()

        # The device path: the crop graph's output OrtValue is the swapper's `target`.
        crop_feeds = {"frame": frame, "theta": m.astype(np.float32)}
        (out,) = chain(crop.bound, crop_feeds, swap, {"source": lat}, {"crop": "target"})
        assert swap.bound_inputs["target"].data_ptr() == crop.bound.static_output("crop").data_ptr()
        # The double is 0.5 * target + ...: OpenCV's uint8 crop is within 1 level inside the frame.
        assert np.abs(out.numpy() - expected).max() <= 0.5 * 1.0 / 255 + 1e-6
        decoded = swapper.decode(out.numpy())
        assert np.abs(decoded.astype(np.int16) - swapper.decode(expected)).max() <= 1


def test_fp16_io_chain() -> None:
    sess = session(build_inswapper(seed=0, fp16_io=True))
    crop = WarpCrop(FACTORY, CropSpec(128, rgb=True, scale=1 / 255.0, fp16=True))
    swap = BoundSession(sess, "cpu")
    frame = smooth_frame(480, 640)
    m = similarity_to_crop(128, 1.0, 0.3, 320, 240)
    lat = latent(7).astype(np.float16)
    (out,) = chain(
        crop.bound,
        {"frame": frame, "theta": m.astype(np.float32)},
        swap,
        {"source": lat},
        [("crop", "target")],
    )
    target = crop.run(frame, m, roi=False).numpy()
    np.testing.assert_array_equal(out.numpy(), sess.run(None, {"target": target, "source": lat})[0])
