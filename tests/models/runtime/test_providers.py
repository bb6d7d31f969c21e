"""The session factory's provider chains, fallback reports, TensorRT cache keys and build notices.

GPU providers cannot load here, so ONNX Runtime's InferenceSession is replaced by a fake that behaves
like the 1.31.1 wheel does when they fail (docs/gpu-api-facts.md §3-4): the C++ logger's lines go to file
descriptor 2, the "EP Error ... Falling back" lines are Python prints, and get_providers() lists
only what really loaded. The texts are verbatim what the real wheel prints.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
import time
import types
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import pytest
from onnx import helper
from onnxruntime.capi.onnxruntime_inference_collection import check_and_normalize_provider_args

from models.runtime import cuda_libraries, trt_cache
from models.runtime import providers as providers_mod
from models.runtime import session as session_mod
from models.runtime.providers import CPU, CUDA, TENSORRT, explain_provider_failure
from models.runtime.session import InferenceClock, SessionConfig, SessionFactory

ORT_CUDA_LOAD_ERROR = (
    "\x1b[1;31m2026-11-30 04:05:34.854506770 [E:onnxruntime:Default, provider_bridge_ort.cc:2458 operator()] "
    "/onnxruntime_src/onnxruntime/core/session/provider_bridge_ort.cc:2043 onnxruntime::Provider& "
    "onnxruntime::ProviderLibrary::Get() [ONNXRuntimeError] : 1 : FAIL : Failed to load library "
    "/venv/lib/python3.11/site-packages/onnxruntime/capi/libonnxruntime_providers_cuda.so with error: "
    "libcublasLt.so.13: cannot open shared object file: No such file or directory\n\x1b[m\n"
    "\x1b[0;93m2026-11-30 04:05:34.854535854 [W:onnxruntime:Default, onnxruntime_pybind_state.cc:1295 "
    "CreateExecutionProviderFactoryInstance] Failed to create CUDAExecutionProvider. Require cuDNN 9.* "
    "and CUDA 13.*. Please install all dependencies as mentioned in the GPU requirements page "
    "(https://onnxruntime.ai/docs/execution-providers/CUDA-ExecutionProvider.html#requirements), make "
    "sure they're in the PATH, and that your GPU is supported.\x1b[m\n"
)
ORT_TRT_EP_ERROR = (
    "*************** EP Error ***************\n"
    "EP Error /onnxruntime_src/onnxruntime/python/onnxruntime_pybind_state.cc:729 void "
    "onnxruntime::python::RegisterTensorRTPluginsAsCustomOps(PySessionOptions&, const "
    "onnxruntime::ProviderOptions&) Please install TensorRT libraries as mentioned in the GPU "
    "requirements page, make sure they're in the PATH or LD_LIBRARY_PATH, and that your GPU is supported.\n"
    " when using [('TensorrtExecutionProvider', {}), 'CPUExecutionProvider']\n"
    "Falling back to ['CUDAExecutionProvider', 'CPUExecutionProvider'] and retrying.\n"
    "****************************************"
)
TRT_REGISTER_ERROR = (
    "/onnxruntime_src/onnxruntime/python/onnxruntime_pybind_state.cc:729 void "
    "onnxruntime::python::RegisterTensorRTPluginsAsCustomOps(PySessionOptions&, const "
    "onnxruntime::ProviderOptions&) Please install TensorRT libraries as mentioned in the GPU "
    "requirements page, make sure they're in the PATH or LD_LIBRARY_PATH, and that your GPU is supported."
)
PRELOAD_OUTPUT = (
    "Failed to load libcublasLt.so.13: libcublasLt.so.13: cannot open shared object file: No such file "
    "or directory\nPlease follow https://onnxruntime.ai/docs/install/#cuda-and-cudnn to install CUDA."
)
GPU = trt_cache.GpuIdentity("NVIDIA GeForce RTX 4090", "8.9")


def tiny_model(bias: float = 0.0) -> bytes:
    node = helper.make_node("Relu", ["x"], ["y"])
    graph = helper.make_graph(
        [node],
        "tiny",
        [helper.make_tensor_value_info("x", 1, [1, 2])],
        [helper.make_tensor_value_info("y", 1, [1, 2])],
        [helper.make_tensor("unused", 1, [1], [bias])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model.SerializeToString()


@dataclass
class Script:
    """What the next fake session does, and what the fakes saw (one per test)."""

    loaded: tuple[str, ...] = (CPU,)  # what get_providers() answers
    native_log: str = ""  # written to fd 2 like ORT's C++ logger
    python_log: str = ""  # printed like ORT's Python "EP Error" fallback
    build_s: float = 0.0  # time spent "building" (TensorRT)
    refuse: str = ""  # a provider whose registration raises (as TensorRT's does without its libraries)
    inputs: list[tuple[str, list[Any]]] = field(default_factory=lambda: [("x", [1, 2])])  # name, shape
    runs: list[dict[str, tuple[int, ...]]] = field(default_factory=list)  # input shapes of each run
    created: list[FakeSession] = field(default_factory=list)
    preloads: int = 0
    driver: bool = True  # whether an NVIDIA driver (libcuda) is present


class FakeSession:
    """Stands in for ort.InferenceSession, doing what its Script says."""

    def __init__(
        self, script: Script, source: Any, sess_options: Any = None, providers: Any = None, **kw: Any
    ) -> None:
        self.script = script
        self.providers_asked = providers
        self.sess_options = sess_options
        self.kwargs = kw
        self.thread = threading.get_ident()
        first = (providers or [CPU])[0]
        if script.refuse and (first if isinstance(first, str) else first[0]) == script.refuse:
            raise RuntimeError(TRT_REGISTER_ERROR)
        if script.native_log:
            os.write(2, script.native_log.encode())
        if script.python_log:
            print(script.python_log)
        time.sleep(script.build_s)
        for entry in providers or []:
            if (
                isinstance(entry, tuple)
                and entry[1].get("trt_engine_cache_enable")
                and TENSORRT in script.loaded
            ):
                folder = Path(entry[1]["trt_engine_cache_path"])
                (folder / f"{entry[1]['trt_engine_cache_prefix']}_1234_0_0_fp16_sm89.engine").write_bytes(
                    b"e"
                )
        script.created.append(self)

    def get_providers(self) -> list[str]:
        return list(self.script.loaded)

    def get_inputs(self) -> list[Any]:
        return [
            types.SimpleNamespace(name=n, shape=shape, type="tensor(float)")
            for n, shape in self.script.inputs
        ]

    def run(self, outputs: Any, feeds: dict[str, Any]) -> list[Any]:
        self.script.runs.append({k: tuple(v.shape) for k, v in feeds.items()})
        return []


@pytest.fixture
def fake_ort(monkeypatch: pytest.MonkeyPatch) -> Iterator[Script]:
    script = Script()

    def fake_preload(*args: Any, **kwargs: Any) -> None:
        script.preloads += 1
        print(PRELOAD_OUTPUT)

    monkeypatch.setattr(ort, "InferenceSession", functools.partial(FakeSession, script))
    monkeypatch.setattr(ort, "preload_dlls", fake_preload)
    monkeypatch.setattr(ort, "get_available_providers", lambda: [TENSORRT, CUDA, CPU])
    monkeypatch.setattr(trt_cache, "gpu_identity", lambda device_id=0: GPU)
    monkeypatch.setattr(trt_cache, "tensorrt_version", lambda: "10.13.2.6")
    monkeypatch.setattr(trt_cache, "load_tensorrt_libs", lambda: "")
    # Looked up by the factory (session) and by auto_provider (providers).
    monkeypatch.setattr(session_mod, "nvidia_driver_present", lambda: script.driver)
    monkeypatch.setattr(providers_mod, "nvidia_driver_present", lambda: script.driver)
    cuda_libraries.preload_cuda_libraries.cache_clear()
    yield script
    cuda_libraries.preload_cuda_libraries.cache_clear()


# -------------------------------------------------------------------------------------- chains


def test_cpu_chain_is_cpu_only() -> None:
    assert SessionFactory().providers() == [CPU]


def test_device_ops_sessions_turn_tf32_off_and_the_networks_keep_it() -> None:
    from models.ops.device_ops import DeviceOps

    for provider in ("cuda", "tensorrt"):
        factory = SessionFactory(SessionConfig(provider=provider, device_id=1))
        assert all("use_tf32" not in e[1] for e in factory.providers() if isinstance(e, tuple))
        ops = DeviceOps(factory, use_graphs=True)
        cuda, cpu = ops.factory.providers()
        assert cpu == CPU
        assert cuda[0] == CUDA and cuda[1]["use_tf32"] == 0 and cuda[1]["device_id"] == 1  # type: ignore[index]
        assert ops.factory.fallbacks is factory.fallbacks  # notes still reach the app


def test_cuda_chain_has_exactly_the_options_ort_expects() -> None:
    factory = SessionFactory(SessionConfig(provider="cuda", device_id=1, gpu_mem_limit=4 << 30))
    assert factory.providers() == [
        (
            CUDA,
            {
                "device_id": 1,
                "cudnn_conv_algo_search": "EXHAUSTIVE",
                "arena_extend_strategy": "kSameAsRequested",
                "gpu_mem_limit": 4 << 30,
            },
        ),
        CPU,
    ]
    streamed = factory.providers(cuda_stream=0x7F00_1234)
    options = streamed[0][1]  # type: ignore[index]
    assert options["user_compute_stream"] == str(0x7F00_1234)  # a string, as the provider parses it


def test_tensorrt_chain_with_cache_and_stream(tmp_path: Path) -> None:
    cfg = SessionConfig(provider="tensorrt", fp16=True, cache_dir=tmp_path, cuda_stream=99)
    paths = trt_cache.TrtCachePaths(tmp_path / "engines", tmp_path / "timing", "inswapper_128")
    chain = SessionFactory(cfg).providers(paths)
    assert [p if isinstance(p, str) else p[0] for p in chain] == [TENSORRT, CUDA, CPU]
    trt = chain[0][1]  # type: ignore[index]
    assert trt == {
        "device_id": 0,
        "trt_fp16_enable": True,
        "trt_engine_cache_enable": True,
        "trt_engine_cache_path": str(tmp_path / "engines"),
        "trt_engine_cache_prefix": "inswapper_128",
        "trt_timing_cache_enable": True,
        "trt_timing_cache_path": str(tmp_path / "timing"),
        "user_compute_stream": "99",
    }
    assert all(
        type(trt[k]) is bool
        for k in ("trt_fp16_enable", "trt_engine_cache_enable", "trt_timing_cache_enable")
    )
    # ORT's own normalisation turns them into the strings its TensorRT validator accepts.
    names, options = check_and_normalize_provider_args(chain, None, [TENSORRT, CUDA, CPU])
    assert names == [TENSORRT, CUDA, CPU]
    assert options[0]["trt_fp16_enable"] == "True" and options[0]["trt_engine_cache_enable"] == "True"
    assert options[1]["user_compute_stream"] == "99"


def test_tensorrt_without_a_cache_folder_does_not_cache() -> None:
    chain = SessionFactory(SessionConfig(provider="tensorrt", fp16=False)).providers()
    assert chain[0] == (TENSORRT, {"device_id": 0, "trt_fp16_enable": False})


@pytest.mark.parametrize("stream", [0, -1])
def test_the_default_stream_is_refused_loudly(stream: int) -> None:
    with pytest.raises(ValueError, match="default stream"):
        SessionConfig(provider="cuda", cuda_stream=stream)
    with pytest.raises(ValueError, match="default stream"):
        SessionFactory(SessionConfig(provider="cuda")).providers(cuda_stream=stream)


def test_other_providers_and_directml_session_options() -> None:
    assert SessionFactory(SessionConfig(provider="openvino")).providers() == [
        "OpenVINOExecutionProvider",
        CPU,
    ]
    dml = SessionFactory(SessionConfig(provider="directml", device_id=1))
    assert dml.providers() == [("DmlExecutionProvider", {"device_id": 1}), CPU]
    so = dml.session_options()
    assert so.enable_mem_pattern is False and so.execution_mode == ort.ExecutionMode.ORT_SEQUENTIAL
    coreml = SessionFactory(SessionConfig(provider="coreml")).providers()
    assert coreml[0][0] == "CoreMLExecutionProvider"


def test_worker_streams_come_from_torch_when_it_is_loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    factory = SessionFactory(SessionConfig(provider="cuda"))
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    monkeypatch.delitem(sys.modules, "cupy", raising=False)
    assert factory.new_worker_stream() is None  # each session then makes its own stream

    class Stream:
        def __init__(self, device: int) -> None:
            self.cuda_stream = 0xABC0 + device

    torch = types.SimpleNamespace(cuda=types.SimpleNamespace(is_available=lambda: True, Stream=Stream))
    monkeypatch.setitem(sys.modules, "torch", torch)
    handle = factory.new_worker_stream()
    assert handle == 0xABC0
    assert SessionFactory(SessionConfig(provider="cpu")).new_worker_stream() is None


# ----------------------------------------------------------------------------------- fallbacks


def test_cuda_fallback_names_the_provider_the_reason_and_the_fix(
    fake_ort: Script, capfd: pytest.CaptureFixture[str]
) -> None:
    fake_ort.native_log = ORT_CUDA_LOAD_ERROR + "an unrelated native line\n"
    factory = SessionFactory(SessionConfig(provider="cuda"))
    session = factory.create(tiny_model(), "inswapper_128")
    assert session.get_providers() == [CPU]
    (message,) = factory.fallbacks
    assert message.startswith("inswapper_128: CUDA did not load")
    assert "needs CUDA 13.x and cuDNN 9.x (missing libcublasLt.so.13)" in message
    assert "onnxruntime-gpu[cuda,cudnn]" in message and message.endswith("Running on CPU.")
    out, err = capfd.readouterr()
    assert "[E:onnxruntime" not in err and "Failed to load" not in out  # summarised, not dumped
    assert "an unrelated native line" in err  # other stderr output still reaches the user
    # preload_dlls ran once, before the first CUDA session, and not again.
    factory.create(tiny_model(), "det_10g")
    assert fake_ort.preloads == 1
    # The same reason for a second model is one note naming both (a copy of the same sentence per
    # model would push the window's earlier messages out).
    (message,) = factory.fallbacks
    assert message.startswith("inswapper_128, det_10g: CUDA did not load")


def test_without_an_nvidia_driver_the_fallback_does_not_prescribe_cuda_downloads(fake_ort: Script) -> None:
    """On a machine with no NVIDIA GPU the note says so and suggests --provider cpu, not ~1 GB of
    CUDA wheels (ORT fails on the missing CUDA libraries before it ever looks for a GPU)."""
    fake_ort.native_log = ORT_CUDA_LOAD_ERROR
    fake_ort.driver = False
    factory = SessionFactory(SessionConfig(provider="tensorrt"))
    factory.create(tiny_model(), "inswapper_128")
    (message,) = factory.fallbacks
    assert "no NVIDIA driver" in message and "--provider cpu" in message
    assert "pip" not in message and message.endswith("Running on CPU.")


def test_tensorrt_fallback_names_tensorrt_and_the_pip_fix(fake_ort: Script) -> None:
    fake_ort.loaded = (CUDA, CPU)  # TensorRT failed, CUDA loaded
    fake_ort.python_log = ORT_TRT_EP_ERROR
    factory = SessionFactory(SessionConfig(provider="tensorrt"))
    factory.create(tiny_model(), "inswapper_128")
    (message,) = factory.fallbacks
    assert "TensorRT did not load: TensorRT 10 libraries not found" in message
    assert 'pip install "tensorrt-cu13-libs==10.*"' in message
    assert "CUDA did not load" not in message and message.endswith("Running on CUDA.")


def test_tensorrt_failing_falls_back_to_cuda_with_its_options_kept(fake_ort: Script) -> None:
    # ORT's own fallback would retry with bare names: CUDA on GPU 0, no memory limit, no stream.
    fake_ort.refuse = TENSORRT
    fake_ort.loaded = (CUDA, CPU)
    config = SessionConfig(provider="tensorrt", device_id=1, gpu_mem_limit=2 << 30, cuda_stream=4242)
    factory = SessionFactory(config)
    session = factory.create(tiny_model(), "inswapper_128")
    assert session.get_providers() == [CUDA, CPU]
    (opened,) = fake_ort.created  # the TensorRT attempt raised; this is the retry
    assert opened.kwargs["enable_fallback"] == 0
    cuda, cpu = opened.providers_asked
    assert cpu == CPU and cuda[0] == CUDA
    assert cuda[1]["device_id"] == 1 and cuda[1]["gpu_mem_limit"] == 2 << 30
    assert cuda[1]["user_compute_stream"] == "4242"
    (message,) = factory.fallbacks
    assert "TensorRT did not load: TensorRT 10 libraries not found" in message
    assert message.endswith("Running on CUDA.")


@pytest.mark.parametrize(
    ("inputs", "run_shapes", "expected_runs"),
    [
        ([("x", [1, 3, 112, 112])], None, []),  # fixed shapes: TensorRT builds when the session is made
        ([("x", ["N", 3, 112, 112])], None, [{"x": (1, 3, 112, 112)}]),  # a dynamic batch: 1
        ([("input.1", [1, 3, "h", "w"])], [(1, 3, 320, 320)], [{"input.1": (1, 3, 320, 320)}]),  # SCRFD
    ],
)
def test_tensorrt_builds_dynamic_models_on_a_warm_up_run_at_open(
    fake_ort: Script,
    inputs: list[tuple[str, list[Any]]],
    run_shapes: list[tuple[int, ...]] | None,
    expected_runs: list[dict[str, tuple[int, ...]]],
) -> None:
    fake_ort.loaded = (TENSORRT, CUDA, CPU)
    fake_ort.inputs = inputs
    notes: list[str] = []
    factory = SessionFactory(SessionConfig(provider="tensorrt"), progress=notes.append)
    factory.create(tiny_model(), "det_10g.onnx", run_shapes=run_shapes)
    assert fake_ort.runs == expected_runs
    assert notes[0].startswith("building TensorRT engine for det_10g.onnx")
    assert notes[-1].startswith("TensorRT engine for det_10g.onnx ready after")


def test_tensorrt_says_when_the_build_waits_for_the_first_frame(fake_ort: Script) -> None:
    fake_ort.loaded = (TENSORRT, CUDA, CPU)
    fake_ort.inputs = [("input.1", [1, 3, "h", "w"])]  # sizes unknown and not given
    notes: list[str] = []
    factory = SessionFactory(SessionConfig(provider="tensorrt"), progress=notes.append)
    factory.create(tiny_model(), "det_10g.onnx")
    assert fake_ort.runs == []
    assert "at its first frame" in notes[-1] and "ready after" not in notes[-1]


def test_tensorrt_and_cuda_both_failing_are_both_reported(fake_ort: Script) -> None:
    fake_ort.python_log = ORT_TRT_EP_ERROR
    fake_ort.native_log = ORT_CUDA_LOAD_ERROR
    factory = SessionFactory(SessionConfig(provider="tensorrt"))
    factory.create(tiny_model(), "gfpgan_1.4")
    (message,) = factory.fallbacks
    assert "TensorRT did not load: TensorRT 10 libraries not found" in message
    assert "CUDA did not load: needs CUDA 13.x and cuDNN 9.x" in message
    assert message.endswith("Running on CPU.")


def test_a_provider_missing_from_the_package_says_which_package(fake_ort: Script) -> None:
    factory = SessionFactory(SessionConfig(provider="directml"))
    factory.create(tiny_model(), "det_10g")
    (message,) = factory.fallbacks
    assert "DirectML did not load: this onnxruntime package has no DirectML provider" in message
    assert "onnxruntime-directml" in message


def test_no_driver_is_explained() -> None:
    reason, fix = explain_provider_failure(
        CUDA, "Failed to load library libonnxruntime_providers_cuda.so with error: libcuda.so.1: cannot open"
    )
    assert reason == "no NVIDIA GPU or driver found" and "driver" in fix


def test_real_onnxruntime_fallback_is_reported_here() -> None:
    """No fakes: on this CPU-only machine the real wheel's texts must be captured and explained."""
    factory = SessionFactory(SessionConfig(provider="cuda"))
    session = factory.create(tiny_model(), "tiny")
    if CUDA in session.get_providers():
        pytest.skip("CUDA works on this machine")
    (message,) = factory.fallbacks
    assert "CUDA did not load" in message and "Running on CPU" in message
    assert "logged no reason" not in message
    (out,) = session.run(None, {"x": np.array([[-1.0, 2.0]], np.float32)})
    assert out.tolist() == [[0.0, 2.0]]
    assert SessionFactory.device_type_of(session) == "cpu" and factory.device_type == "cuda"


def test_cpu_sessions_still_work_with_a_clock() -> None:
    clock = InferenceClock()
    factory = SessionFactory(SessionConfig(provider="cpu", intra_op_threads=1), clock=clock)
    session = factory.create(tiny_model(), "tiny")
    session.run(None, {"x": np.zeros((1, 2), np.float32)})
    assert clock.calls == 1 and factory.fallbacks == []


# ------------------------------------------------------------------------------ TensorRT caches


def test_cache_key_changes_with_the_model_bytes(tmp_path: Path, fake_ort: Script) -> None:
    factory = SessionFactory(SessionConfig(provider="tensorrt", cache_dir=tmp_path))
    model = tmp_path / "inswapper_128.onnx"
    model.write_bytes(tiny_model(0.0))
    first = factory.trt_cache_for(model, "inswapper_128")
    model.write_bytes(tiny_model(1.0))  # "retrained": same name, same graph, other weights
    os.utime(model, ns=(time.time_ns(), time.time_ns() + 10**9))
    second = factory.trt_cache_for(model, "inswapper_128")
    assert first is not None and second is not None
    assert first.engine_dir != second.engine_dir
    assert first.engine_dir.parent == second.engine_dir.parent == tmp_path / "inswapper_128"
    assert first.timing_dir == second.timing_dir  # kernel timings are shared per GPU + TensorRT
    assert first.prefix == "inswapper_128"
    name = first.engine_dir.name
    assert "nvidia-geforce-rtx-4090-sm89" in name and "trt10.13.2.6" in name
    assert f"ort{ort.__version__}" in name and name.endswith("fp16")
    assert (first.engine_dir / trt_cache.KEY_FILE).is_file()
    by_file_name = factory.trt_cache_for(model, "inswapper_128.onnx")  # how the router labels sessions
    assert by_file_name is not None and by_file_name.engine_dir == second.engine_dir


def test_cache_key_changes_with_gpu_tensorrt_and_ort() -> None:
    base = trt_cache.TrtCacheKey("ab" * 32, GPU, "10.13.2.6", "1.31.1", True)
    variants = [
        trt_cache.TrtCacheKey(
            "ab" * 32, trt_cache.GpuIdentity("NVIDIA RTX A6000", "8.6"), "10.13.2.6", "1.31.1", True
        ),
        trt_cache.TrtCacheKey("ab" * 32, GPU, "10.16.1.11", "1.31.1", True),
        trt_cache.TrtCacheKey("ab" * 32, GPU, "10.13.2.6", "1.32.0", True),
        trt_cache.TrtCacheKey("ab" * 32, GPU, "10.13.2.6", "1.31.1", False),
    ]
    assert len({base.folder_name, *(v.folder_name for v in variants)}) == 5


def test_model_files_are_hashed_once_per_factory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_ort: Script
) -> None:
    calls: list[Any] = []
    real = trt_cache.model_sha256
    monkeypatch.setattr(trt_cache, "model_sha256", lambda m: calls.append(m) or real(m))
    model = tmp_path / "m.onnx"
    model.write_bytes(tiny_model())
    factory = SessionFactory(SessionConfig(provider="tensorrt", cache_dir=tmp_path / "cache"))
    for _ in range(3):  # one swapper session per worker
        factory.trt_cache_for(model, "m")
    assert len(calls) == 1


def test_an_engine_cache_that_cannot_be_written_runs_without_one_and_says_so(
    tmp_path: Path, fake_ort: Script
) -> None:
    """The cache sits in the models folder by default: under a read-only or shared models folder
    TensorRT still starts, without a cache, and the note says so (no traceback)."""
    fake_ort.loaded = (TENSORRT, CUDA, CPU)
    blocked = tmp_path / "models" / "trt-cache"
    blocked.parent.mkdir()
    blocked.write_text("a file where the cache folder should be")  # mkdir fails like a read-only disk
    model = tmp_path / "m.onnx"
    model.write_bytes(tiny_model())
    factory = SessionFactory(SessionConfig(provider="tensorrt", cache_dir=blocked))
    session = factory.create(model, "inswapper_128")
    assert session.get_providers()[0] == TENSORRT
    (note,) = factory.fallbacks
    assert "engine cache cannot be written" in note and str(blocked) in note


def test_first_tensorrt_build_is_announced_with_a_heartbeat(tmp_path: Path, fake_ort: Script) -> None:
    fake_ort.loaded = (TENSORRT, CUDA, CPU)
    fake_ort.build_s = 0.25
    notes: list[str] = []
    cfg = SessionConfig(provider="tensorrt", cache_dir=tmp_path, heartbeat_s=0.05)
    factory = SessionFactory(cfg, progress=notes.append)
    factory.create(tiny_model(), "inswapper_128")
    assert notes[0].startswith("building TensorRT engine for inswapper_128 (first run, can take minutes)…")
    assert sum("still building TensorRT engine for inswapper_128" in n for n in notes) >= 2
    assert notes[-1].startswith("TensorRT engine for inswapper_128 ready")
    assert fake_ort.created[-1].thread != threading.get_ident()  # built on a thread, not the caller's
    assert factory.fallbacks == []

    # The engine is now in the cache folder: the next session (e.g. the next run) just loads it.
    notes.clear()
    fake_ort.build_s = 0.0
    SessionFactory(cfg, progress=notes.append).create(tiny_model(), "inswapper_128")
    assert notes == []  # nothing to announce (a slow load would still get the heartbeat)


def test_heartbeat_printed_by_the_caller_is_not_swallowed_by_the_capture(
    tmp_path: Path, fake_ort: Script, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_ort.loaded = (TENSORRT, CUDA, CPU)
    fake_ort.build_s = 0.15
    fake_ort.python_log = "[builder] some TensorRT chatter"
    cfg = SessionConfig(provider="tensorrt", cache_dir=tmp_path, heartbeat_s=0.05)
    SessionFactory(cfg, progress=print).create(tiny_model(), "gfpgan_1.4")
    out = capsys.readouterr().out
    assert "building TensorRT engine for gfpgan_1.4" in out and "still building" in out
    assert "TensorRT chatter" not in out  # ORT's own prints on the build thread are captured
    assert sys.stdout is not None and type(sys.stdout).__name__ != "_ThreadTee"  # restored


def test_no_announcement_when_tensorrt_is_not_installed(
    tmp_path: Path, fake_ort: Script, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(trt_cache, "tensorrt_version", lambda: "none")
    fake_ort.python_log = ORT_TRT_EP_ERROR
    notes: list[str] = []
    factory = SessionFactory(SessionConfig(provider="tensorrt", cache_dir=tmp_path), progress=notes.append)
    factory.create(tiny_model(), "inswapper_128")
    assert notes == [] and "TensorRT did not load" in factory.fallbacks[0]


def test_corrupt_model_still_raises_a_model_error(fake_ort: Script, monkeypatch: pytest.MonkeyPatch) -> None:
    from models.errors import ModelContractError

    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("[ONNXRuntimeError] : 7 : INVALID_PROTOBUF : Load model failed")

    monkeypatch.setattr(ort, "InferenceSession", broken)
    with pytest.raises(ModelContractError, match="not a readable ONNX model"):
        SessionFactory(SessionConfig(provider="cuda")).create(b"garbage", "x")


@pytest.mark.parametrize(
    ("installed", "expected"),
    [
        ({"tensorrt-cu13-libs": "10.13.2.6"}, "10.13.2.6"),
        ({"tensorrt-cu13-libs": "11.4.0.1"}, "none"),  # `pip install tensorrt` today: ORT cannot load it
        ({"tensorrt-cu13-libs": "11.4.0.1", "tensorrt-libs": "10.9.0"}, "10.9.0"),
    ],
)
def test_only_tensorrt_10_counts_as_installed(
    monkeypatch: pytest.MonkeyPatch, installed: dict[str, str], expected: str
) -> None:
    import importlib.metadata

    def version(dist: str) -> str:
        if dist in installed:
            return installed[dist]
        raise importlib.metadata.PackageNotFoundError(dist)

    monkeypatch.setattr(importlib.metadata, "version", version)
    monkeypatch.setattr(trt_cache, "_tensorrt_version_from_library", lambda: None)
    trt_cache.tensorrt_version.cache_clear()
    try:
        assert trt_cache.tensorrt_version() == expected
    finally:
        trt_cache.tensorrt_version.cache_clear()


# ----------------------------------------------------------------------------- provider "auto"


@pytest.mark.parametrize(
    ("available", "driver", "picked"),
    [
        (["TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"], True, "cuda"),
        (["CUDAExecutionProvider", "CPUExecutionProvider"], False, "cpu"),  # onnxruntime-gpu, no GPU
        (["DmlExecutionProvider", "CPUExecutionProvider"], False, "directml"),
        (["CoreMLExecutionProvider", "CPUExecutionProvider"], False, "cpu"),  # asked for by name only
        (["CPUExecutionProvider"], True, "cpu"),
    ],
)
def test_auto_picks_the_gpu_where_one_can_run_the_models(
    available: list[str], driver: bool, picked: str
) -> None:
    from models.runtime.providers import auto_provider

    assert auto_provider(available, driver=driver) == picked


def test_the_default_provider_is_auto_and_runs_on_what_this_machine_has(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With no --provider, `main.py run` runs on the GPU where there is one: the default is auto."""
    from realtime.core.settings import Settings, load_preset
    from realtime.wiring import face_swap as app

    assert Settings().pipeline.provider == "auto"
    assert all(
        load_preset(p).pipeline.provider == "auto" for p in ("balanced", "quality", "ultra-low-latency")
    )
    monkeypatch.setattr(app, "auto_provider", lambda: "cuda")  # an NVIDIA machine
    assert app.resolve_provider(Settings()).pipeline.provider == "cuda"
    tensorrt = Settings().with_overrides({"pipeline.provider": "tensorrt"})
    assert app.resolve_provider(tensorrt).pipeline.provider == "tensorrt"  # a name asked for stays
