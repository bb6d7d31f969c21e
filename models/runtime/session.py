"""One factory for every ONNX Runtime session: providers, options, and honest fallback reports.

ONNX Runtime does not raise when the CUDA or TensorRT provider cannot load (missing CUDA/cuDNN or
TensorRT libraries): it logs why on stderr (C++ logger) or prints an "EP Error" (Python), then runs on
the CPU (GPU_API_NOTES.md §3-4). The factory therefore captures that output while a GPU session is
created, checks `session.get_providers()` afterwards, and records a visible fallback message naming
the provider, the reason and the fix in `factory.fallbacks`.

GPU specifics handled here:
- CUDA/cuDNN from pip are preloaded with `onnxruntime.preload_dlls()` once per process, and pip's
  TensorRT 10 libraries (site-packages/tensorrt_libs) are loaded before the first TensorRT session.
- TensorRT engines are cached per model SHA-256 + GPU + TensorRT + ORT version (models/runtime/trt_cache.py),
  because the provider's own cache key ignores the weights. A first build can take minutes: it is
  announced through `progress` and runs on a thread while a heartbeat reports that it is still going.
- Each in-flight worker may run on its own CUDA stream (`cuda_stream`); 0 (the default stream) is
  rejected, because ORT treats "0" as "no user stream" and the caller would silently share a stream.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import logging
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TextIO, TypeVar, cast

import numpy as np
import onnxruntime as ort

from models.cli_text import app_command, shown_path
from models.errors import ModelContractError, ModelError, ModelMissingError
from models.runtime import trt_cache

log = logging.getLogger(__name__)

ProviderName = Literal["cpu", "cuda", "tensorrt", "coreml", "directml", "openvino"]
ConvAlgoSearch = Literal["EXHAUSTIVE", "HEURISTIC", "DEFAULT"]
ArenaExtendStrategy = Literal["kNextPowerOfTwo", "kSameAsRequested"]
ProgressCallback = Callable[[str], None]
ProviderEntry = str | tuple[str, dict[str, Any]]

ORT_PROVIDER = {
    "cpu": "CPUExecutionProvider",
    "cuda": "CUDAExecutionProvider",
    "tensorrt": "TensorrtExecutionProvider",
    "coreml": "CoreMLExecutionProvider",
    "directml": "DmlExecutionProvider",
    "openvino": "OpenVINOExecutionProvider",
}
CPU, CUDA, TENSORRT = ORT_PROVIDER["cpu"], ORT_PROVIDER["cuda"], ORT_PROVIDER["tensorrt"]
DIRECTML = ORT_PROVIDER["directml"]
# Short names for reports ("CUDA provider not usable", "TensorRT did not load"); see provider_label().
PROVIDER_LABEL = {
    CPU: "CPU",
    CUDA: "CUDA",
    TENSORRT: "TensorRT",
    ORT_PROVIDER["coreml"]: "CoreML",
    DIRECTML: "DirectML",
    ORT_PROVIDER["openvino"]: "OpenVINO",
    "ROCMExecutionProvider": "ROCm",
    "MIGraphXExecutionProvider": "MIGraphX",
}
# What to install when the onnxruntime package in use was built without a provider.
_BUILD_HINT = {
    CUDA: 'pip install "onnxruntime-gpu[cuda,cudnn]" (Linux x86_64 / Windows x64)',
    TENSORRT: 'pip install "onnxruntime-gpu[cuda,cudnn]" "tensorrt-cu13-libs==10.*"',
    ORT_PROVIDER["coreml"]: "use the standard onnxruntime package on macOS",
    DIRECTML: "pip install onnxruntime-directml (Windows)",
    ORT_PROVIDER["openvino"]: "pip install onnxruntime-openvino",
}
# onnxruntime's TensorRT provider links libnvinfer.so.10; PyPI's `tensorrt` is now 11, so pin 10.
_TENSORRT_MAJOR = 10
# When ORT's log does not say ("Require cuDNN 9.* and CUDA 13.*" normally does): the cuDNN major the
# CUDA 12/13 builds of ORT link against, and the CUDA major of a build that does not say either.
_DEFAULT_CUDNN_MAJOR = 9
_DEFAULT_CUDA_MAJOR = 13
# Oldest NVIDIA driver branch per CUDA major (CUDA release notes, "minimum required driver").
MIN_DRIVER = {12: 525, 13: 580}

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_ORT_LOG_LINE = re.compile(r"\[[VIWEF]:onnxruntime:")
_MISSING_LIBRARY = (
    re.compile(r"([\w.+-]+\.so(?:\.\d+)*): cannot open shared object file"),  # dlopen
    re.compile(r"depends on \"(?:[^\"]*[\\/])?([^\"\\/]+)\" which is missing"),  # ORT on Windows
    re.compile(r"Failed to load ([\w.+-]+\.(?:so[\w.]*|dll|dylib))"),  # preload_dlls
)
# Libraries that come with CUDA/cuDNN (not the driver): missing one means "install CUDA/cuDNN".
_CUDA_LIBRARY = re.compile(
    r"cublas|cudart|cudnn|curand|cufft|cusparse|cusolver|nvrtc|nvjitlink|cupti", re.IGNORECASE
)
_TENSORRT_LIBRARY = re.compile(r"nvinfer|nvonnxparser", re.IGNORECASE)
# No GPU, or no driver at all (libcuda is the driver's library).
_NO_DEVICE = re.compile(r"no CUDA-capable device|cudaErrorNoDevice|libcuda\.so\.1|nvcuda\.dll")
# The CUDA runtime reports a missing driver as "insufficient" too (error 35).
_OLD_DRIVER = re.compile(r"driver version is insufficient|cudaErrorInsufficientDriver")


@dataclass(frozen=True, slots=True)
class SessionConfig:
    """How sessions are built. Immutable: a change of provider builds a new factory."""

    provider: ProviderName = "cpu"
    device_id: int = 0
    fp16: bool = True  # TensorRT only: build fp16 engines
    cache_dir: Path | None = None  # TensorRT engine/timing caches (one subfolder per model key)
    intra_op_threads: int = 0  # 0 = ONNX Runtime's default (all cores)
    # User compute stream (a cudaStream_t as int) for CUDA/TensorRT sessions; None = each session
    # creates its own stream, which already keeps concurrent workers apart (GPU_API_NOTES.md §3).
    cuda_stream: int | None = None
    # EXHAUSTIVE benchmarks every cuDNN algorithm once per input shape: right for FaceCast's fixed
    # shapes (128/512 px crops, 640 px detector); HEURISTIC when shapes change every run.
    cudnn_conv_algo_search: ConvAlgoSearch = "EXHAUSTIVE"
    # kSameAsRequested: several sessions share one GPU; power-of-two growth would strand memory.
    arena_extend_strategy: ArenaExtendStrategy = "kSameAsRequested"
    gpu_mem_limit: int | None = None  # bytes; caps the CUDA arena only (None = no cap)
    heartbeat_s: float = 10.0  # TensorRT engine builds: seconds between "still building" notes
    # CUDA's default lets cuBLAS run float MatMuls in TF32 (10-bit mantissa) on Ampere and newer:
    # fine for the networks, not for the device ops' geometry (a 1,000 px translation through a
    # TF32 MatMul is off by ~0.5 px), which turn it off.
    tf32: bool = True

    def __post_init__(self) -> None:
        _check_stream(self.cuda_stream)
        if self.heartbeat_s <= 0:
            raise ValueError(f"heartbeat_s must be positive, got {self.heartbeat_s}")


def _check_stream(stream: int | None) -> None:
    if stream is not None and stream <= 0:
        raise ValueError(
            f"cuda_stream={stream} is not a stream ONNX Runtime can use: 0 is the default stream, which "
            "the CUDA provider ignores (str(torch.cuda.current_stream().cuda_stream) is '0'). Pass a "
            "handle from torch.cuda.Stream() / cupy.cuda.Stream(), or None to let each session make "
            "its own."
        )


@dataclass
class InferenceClock:
    """Adds up the time spent inside session.run (benchmarks: pipeline overhead = wall - this)."""

    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    total_ms: float = 0.0
    calls: int = 0

    def add(self, ms: float) -> None:
        with self._lock:
            self.total_ms += ms
            self.calls += 1

    def reset(self) -> None:
        with self._lock:
            self.total_ms = 0.0
            self.calls = 0


class TimedSession:
    """An InferenceSession whose run() time is added to a clock; everything else is delegated."""

    def __init__(self, session: ort.InferenceSession, clock: InferenceClock) -> None:
        self._session = session
        self._clock = clock

    def run(self, *args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return self._session.run(*args, **kwargs)
        finally:
            self._clock.add((time.perf_counter() - t0) * 1000.0)

    def run_with_iobinding(self, *args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return self._session.run_with_iobinding(*args, **kwargs)
        finally:
            self._clock.add((time.perf_counter() - t0) * 1000.0)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)


@dataclass(slots=True)
class SessionFactory:
    config: SessionConfig = field(default_factory=SessionConfig)
    # Human-readable notes about providers that did not load (shown by the CLI/GUI).
    fallbacks: list[str] = field(default_factory=list)
    # When set, sessions are wrapped so their inference time is measured (benchmarks only).
    clock: InferenceClock | None = None
    # Long operations (a first TensorRT engine build) report here; None = log at WARNING level.
    progress: ProgressCallback | None = None
    # Model hashes by (path, size, mtime): every worker opens the same 554 MB swapper.
    _hashes: dict[tuple[str, int, int], str] = field(default_factory=dict, init=False, repr=False)
    # Streams made by new_worker_stream(), kept alive as long as the sessions that use them.
    _streams: list[object] = field(default_factory=list, init=False, repr=False)

    # ------------------------------------------------------------------------------ provider chain

    def providers(
        self, trt_cache_paths: trt_cache.TrtCachePaths | None = None, cuda_stream: int | None = None
    ) -> list[ProviderEntry]:
        """Provider list for ONNX Runtime, most preferred first, always ending with CPU.

        Values are Python types; ORT turns them into its option strings with str(), so booleans must
        be True/False (the TensorRT validator wants 'True'/'False') and the stream goes in as a string.
        TensorRT engine caching is only switched on with `trt_cache_paths` (create() computes them per
        model): one shared folder would reuse engines across retrained weights.
        """
        cfg = self.config
        stream = cfg.cuda_stream if cuda_stream is None else cuda_stream
        _check_stream(stream)
        chain: list[ProviderEntry] = []
        if cfg.provider == "tensorrt":
            trt: dict[str, Any] = {"device_id": cfg.device_id, "trt_fp16_enable": cfg.fp16}
            if trt_cache_paths is not None:
                trt.update(
                    trt_engine_cache_enable=True,
                    trt_engine_cache_path=str(trt_cache_paths.engine_dir),
                    trt_engine_cache_prefix=trt_cache_paths.prefix,
                    trt_timing_cache_enable=True,
                    trt_timing_cache_path=str(trt_cache_paths.timing_dir),
                )
            if stream is not None:
                trt["user_compute_stream"] = str(stream)
            chain.append((TENSORRT, trt))
        if cfg.provider in ("tensorrt", "cuda"):
            cuda: dict[str, Any] = {
                "device_id": cfg.device_id,
                "cudnn_conv_algo_search": cfg.cudnn_conv_algo_search,
                "arena_extend_strategy": cfg.arena_extend_strategy,
            }
            if cfg.gpu_mem_limit is not None:
                cuda["gpu_mem_limit"] = int(cfg.gpu_mem_limit)
            if not cfg.tf32:
                cuda["use_tf32"] = 0
            if stream is not None:
                cuda["user_compute_stream"] = str(stream)
            chain.append((CUDA, cuda))
        elif cfg.provider == "coreml":
            # ⚠️ Not run on a Mac here: option names from ORT's CoreML provider documentation.
            chain.append((ORT_PROVIDER["coreml"], {"ModelFormat": "MLProgram", "MLComputeUnits": "ALL"}))
        elif cfg.provider == "directml":
            chain.append((DIRECTML, {"device_id": cfg.device_id}))
        elif cfg.provider == "openvino":
            chain.append(ORT_PROVIDER["openvino"])
        chain.append(CPU)
        return chain

    def session_options(self) -> ort.SessionOptions:
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        if self.config.intra_op_threads > 0:
            so.intra_op_num_threads = self.config.intra_op_threads
        if self.config.provider == "directml":
            # DirectML supports neither memory patterns nor parallel execution (ORT's DirectML docs).
            so.enable_mem_pattern = False
            so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        if self.config.provider == "cpu":
            # Idle ORT threads spin-wait by default. With several small sessions run one after
            # another (detector, tracker, swapper) on few cores, spinning pools starve each other
            # and the GUI: measured ~2x faster MTCNN with spinning off on a 2-core machine.
            so.add_session_config_entry("session.intra_op.allow_spinning", "0")
            so.add_session_config_entry("session.inter_op.allow_spinning", "0")
        so.log_severity_level = 3  # errors only: fallbacks are reported by us, not by log spam
        return so

    # ------------------------------------------------------------------------------------ sessions

    def create(
        self,
        model: Path | bytes,
        label: str = "",
        *,
        cuda_stream: int | None = None,
        run_shapes: Sequence[Sequence[int]] | None = None,
    ) -> ort.InferenceSession:
        """Open a session; raise ModelError with a one-line reason for a missing/corrupt file.

        `cuda_stream` overrides the config's stream for this session (one stream per worker).
        `run_shapes`: the input shapes (one per input, in order) the model will be run with. Only
        TensorRT uses them: it builds the engine of a model whose inputs are not fixed at its first
        run, so that run happens here, announced, instead of stalling the first frame. A dynamic
        batch dimension alone is taken as 1 without them.
        """
        name = label or (model.name if isinstance(model, Path) else "in-memory model")
        if isinstance(model, Path):
            if not model.is_file():
                raise ModelMissingError(f"Model file not found: {model}")
            if model.stat().st_size == 0:
                raise ModelError(f"Model file {model} is empty (0 bytes).", hint=_download_again(model))
        source: str | bytes = str(model) if isinstance(model, Path) else model
        provider = self.config.provider
        notes = prepare_gpu_libraries(ORT_PROVIDER[provider])
        cache: trt_cache.TrtCachePaths | None = None
        # Hashing a 554 MB model takes a second or two: not worth it when TensorRT cannot load.
        if provider == "tensorrt" and trt_cache.tensorrt_version() != "none":
            cache = self.trt_cache_for(model, name)
        providers = self.providers(cache, cuda_stream)
        options = self.session_options()

        def open_session(chain: Sequence[ProviderEntry]) -> ort.InferenceSession:
            # enable_fallback=0: ORT's own fallback retries with bare provider names, which drops
            # device_id, the memory limit and the stream; open_falling_back() keeps them.
            return ort.InferenceSession(
                source, sess_options=options, providers=list(chain), enable_fallback=0
            )

        try:
            if provider == "cpu":
                session, captured = open_session(providers), ""
            else:
                session, captured = self._open_gpu(
                    lambda: open_falling_back(open_session, providers), name, cache, run_shapes
                )
        except Exception as exc:  # ORT raises several exception types for unreadable protobufs
            raise ModelContractError(
                f"{name} is not a readable ONNX model ({type(exc).__name__}: {str(exc).splitlines()[0]}).",
                hint=f"The file is corrupt or truncated. {_download_again(model)}",
            ) from exc
        self._note_fallback(session, name, providers, notes + captured)
        if self.clock is not None:
            return cast(ort.InferenceSession, TimedSession(session, self.clock))
        return session

    def trt_cache_for(self, model: Path | bytes, label: str) -> trt_cache.TrtCachePaths | None:
        """Where this model's TensorRT engine lives for this GPU/TensorRT/ORT (None: no cache_dir)."""
        cfg = self.config
        if cfg.cache_dir is None:
            return None
        key = trt_cache.TrtCacheKey(
            model_sha256=self._sha256(model),
            gpu=trt_cache.gpu_identity(cfg.device_id),
            tensorrt_version=trt_cache.tensorrt_version(),
            ort_version=ort.__version__,
            fp16=cfg.fp16,
        )
        paths = trt_cache.cache_paths(Path(cfg.cache_dir), label, key)
        try:
            trt_cache.prepare(paths, key)
        except OSError as exc:  # a read-only or shared models folder (the cache defaults to it)
            self._add_fallback(
                label,
                f"the TensorRT engine cache cannot be written in {cfg.cache_dir} ({exc.strerror or exc}); "
                "the engine is built at every start. Fix: make that folder writable, or put the models "
                "in a folder you own (--models-dir).",
            )
            return None
        return paths

    def new_worker_stream(self) -> int | None:
        """A new non-default CUDA stream handle for one in-flight worker, or None.

        Made with torch or CuPy only when the app has already imported one (importing torch just for a
        stream would cost seconds and a CUDA context); the stream object is kept alive by the factory.
        None means: leave `user_compute_stream` unset, each session then creates its own stream.
        """
        if self.config.provider not in ("cuda", "tensorrt"):
            return None
        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_available():
            stream = torch.cuda.Stream(device=self.config.device_id)
            self._streams.append(stream)
            return int(stream.cuda_stream)
        cupy = sys.modules.get("cupy")
        if cupy is not None:
            with cupy.cuda.Device(self.config.device_id):
                stream = cupy.cuda.Stream(non_blocking=True)
            self._streams.append(stream)
            return int(stream.ptr)
        return None

    @property
    def device_type(self) -> str:
        """The IOBinding device string this factory asks for (see device_type_of for the truth)."""
        return "cuda" if self.config.provider in ("cuda", "tensorrt") else "cpu"

    @staticmethod
    def provider_of(session: Any) -> str:
        """The short name ("cpu", "cuda", ...) of the provider that really runs this session first."""
        got = session.get_providers()
        by_ort = {ort_name: short for short, ort_name in ORT_PROVIDER.items()}
        return by_ort.get(got[0], str(got[0])) if got else "cpu"

    @staticmethod
    def device_type_of(session: Any) -> str:
        """The IOBinding device string for buffers of this session: 'cuda' only when a CUDA-based
        provider really loaded (binding 'cuda' buffers to a CPU session fails)."""
        got = session.get_providers()
        return "cuda" if CUDA in got or TENSORRT in got else "cpu"

    # ------------------------------------------------------------------------------------- helpers

    def _sha256(self, model: Path | bytes) -> str:
        if isinstance(model, bytes):
            return trt_cache.model_sha256(model)
        st = model.stat()
        key = (str(model.resolve()), st.st_size, st.st_mtime_ns)
        digest = self._hashes.get(key)
        if digest is None:
            digest = self._hashes[key] = trt_cache.model_sha256(model)
        return digest

    def _report(self, message: str) -> None:
        if self.progress is not None:
            self.progress(message)
        else:
            log.warning("%s", message)

    def _open_gpu(
        self,
        open_session: Callable[[], ort.InferenceSession],
        name: str,
        cache: trt_cache.TrtCachePaths | None,
        run_shapes: Sequence[Sequence[int]] | None = None,
    ) -> tuple[ort.InferenceSession, str]:
        """Create a GPU session while capturing what ORT prints about providers that fail to load."""
        # No announcement when TensorRT is not installed at all: the session falls back at once.
        tensorrt = (
            self.config.provider == "tensorrt"
            and TENSORRT in ort.get_available_providers()
            and trt_cache.tensorrt_version() != "none"
        )
        building = tensorrt and (cache is None or not cache.has_engine())
        unbuilt: list[str] = []  # set when TensorRT will build at the first frame after all

        def open_and_build() -> ort.InferenceSession:
            session = open_session()
            if TENSORRT in session.get_providers() and not build_by_running(session, run_shapes):
                unbuilt.append(name)
            return session

        t0 = time.perf_counter()
        with OutputCapture() as capture:
            if building:
                where = f"cached in {cache.engine_dir}" if cache else "not cached: no cache folder set"
                self._report(f"building TensorRT engine for {name} (first run, can take minutes)… ({where})")
            if tensorrt:
                # Also with a cached engine: a model with dynamic inputs loads or rebuilds it on the
                # warm-up run, which the heartbeat covers when it is slow.
                session = run_with_heartbeat(
                    lambda: capture.run(open_and_build),
                    lambda s: self._report(f"still building TensorRT engine for {name}… {s:.0f} s"),
                    self.config.heartbeat_s,
                )
            else:
                session = capture.run(open_session)
        # The text is complete only after the capture ended (its fd reader drains the pipe then).
        if unbuilt:
            self._report(
                f"TensorRT builds the engine for {name} at its first frame (its input size is not "
                "fixed): expect a pause when the video starts"
            )
        elif building and TENSORRT in session.get_providers():
            self._report(f"TensorRT engine for {name} ready after {time.perf_counter() - t0:.0f} s")
        return session, capture.text()

    def _note_fallback(
        self, session: ort.InferenceSession, name: str, chain: Sequence[ProviderEntry], log_text: str
    ) -> None:
        got: Sequence[str] = session.get_providers()
        wanted = [p if isinstance(p, str) else p[0] for p in chain]
        missing = [p for p in wanted if p != CPU and p not in got]
        if not missing:
            return
        available = ort.get_available_providers()
        parts = []
        no_driver = any(p in (CUDA, TENSORRT) for p in missing) and not nvidia_driver_present()
        for provider in missing:
            if no_driver and provider in (CUDA, TENSORRT):
                # ORT fails on the CUDA libraries before it looks for a GPU, so its text says
                # "install CUDA": useless advice (a 1 GB download) on a machine without one.
                reason = "this machine has no NVIDIA driver (no NVIDIA GPU?)"
                fix = "use --provider cpu (or auto), or install the NVIDIA driver if it has an NVIDIA GPU"
            else:
                reason, fix = explain_provider_failure(
                    provider, log_text, available, with_cuda=CUDA not in missing, active=got,
                    pip=f"{shown_path(Path(sys.executable))} -m pip",
                )  # fmt: skip
            # The doctor logs at warning level (this factory: errors only), so it may say more.
            fix = fix or f"run `{app_command('doctor')}` for details"
            parts.append(f"{provider_label(provider)} did not load: {reason} — fix: {fix}")
            if no_driver:
                break  # one reason covers every GPU provider
        running = provider_label(got[0]) if got else "nothing"
        self._add_fallback(name, f"{'; '.join(parts)}. Running on {running}.")
        if log_text.strip():
            log.debug("ONNX Runtime output while opening %s:\n%s", name, log_text)

    def _add_fallback(self, model: str, text: str) -> None:
        """One note per distinct reason, naming every model it hit (each model's own copy of the
        same sentence pushed the window's earlier messages out)."""
        for i, note in enumerate(self.fallbacks):
            names, sep, rest = note.partition(": ")
            if sep and rest == text:
                if model not in names.split(", "):
                    self.fallbacks[i] = f"{names}, {model}: {text}"
                return
        msg = f"{model}: {text}"
        self.fallbacks.append(msg)
        # Info, not warning: the CLI and the window show `fallbacks` to the user themselves
        # (a warning here printed each one twice).
        log.info("%s", msg)


_NUMPY_OF_ORT = {
    "tensor(float)": np.float32,
    "tensor(float16)": np.float16,
    "tensor(double)": np.float64,
    "tensor(int64)": np.int64,
    "tensor(int32)": np.int32,
    "tensor(uint8)": np.uint8,
}


def warmup_feeds(inputs: Sequence[Any], run_shapes: Sequence[Sequence[int]] | None) -> dict[str, Any] | None:
    """Zero inputs of the shapes a model will run with; {} when every input shape is fixed (nothing
    to warm up), None when a dynamic dimension other than the batch has no given size."""
    if all(all(isinstance(d, int) for d in i.shape) for i in inputs) and run_shapes is None:
        return {}
    feeds: dict[str, Any] = {}
    for index, node in enumerate(inputs):
        if run_shapes is not None and index < len(run_shapes):
            dims: list[Any] = [int(d) for d in run_shapes[index]]
        else:
            dims = [1 if (axis == 0 and not isinstance(d, int)) else d for axis, d in enumerate(node.shape)]
        dtype = _NUMPY_OF_ORT.get(node.type)
        if dtype is None or not all(isinstance(d, int) and d > 0 for d in dims):
            return None
        feeds[node.name] = np.zeros(dims, dtype=dtype)
    return feeds


def build_by_running(session: ort.InferenceSession, run_shapes: Sequence[Sequence[int]] | None) -> bool:
    """TensorRT builds the engine of a model with dynamic inputs at its first run, not when the
    session is made (ORT's TensorRT provider): run it once here. False when the sizes are unknown."""
    feeds = warmup_feeds(session.get_inputs(), run_shapes)
    if feeds is None:
        return False
    if feeds:
        session.run(None, feeds)
    return True


def open_falling_back(
    open_chain: Callable[[Sequence[ProviderEntry]], ort.InferenceSession], chain: Sequence[ProviderEntry]
) -> ort.InferenceSession:
    """Open a session with `chain`; when a provider's registration raises (TensorRT without its
    libraries does), retry without that provider, keeping the others' options. ORT's built-in
    fallback would retry with bare names: CUDA on GPU 0, default arena, no worker stream. The error
    is printed as ORT prints it, so the fallback note (captured output) can explain it."""
    remaining = list(chain)
    while True:
        try:
            return open_chain(remaining)
        except (ValueError, RuntimeError) as err:
            if len(remaining) <= 1:
                raise  # nothing left to fall back to: the caller reports it (e.g. a corrupt model)
            failed = remaining.pop(0)
            print(f"EP Error {err} when using {failed if isinstance(failed, str) else failed[0]}", flush=True)


def provider_label(provider: str) -> str:
    """The short name of an ORT provider for messages: 'CUDA' for CUDAExecutionProvider."""
    return PROVIDER_LABEL.get(provider, provider.removesuffix("ExecutionProvider"))


# ------------------------------------------------------------------------------ failure explanation


def _download_again(model: Path | bytes) -> str:
    """How to replace a damaged model file: its catalogue entry and folder, when it has them."""
    from models.files.catalogue import entry_for_file
    from models.files.store import download_command

    entry = None
    if isinstance(model, Path):
        try:
            entry = entry_for_file(model.name)
        except ModelMissingError:
            entry = None  # not a catalogue file: the generic advice below
    if entry is not None and isinstance(model, Path):
        return f"Delete it and run `{download_command(entry.name, model.parent)}`."
    return f"Download it again (`{app_command('models download NAME')}`; `models list` shows the names)."


def auto_provider(available: Sequence[str] | None = None, driver: bool | None = None) -> ProviderName:
    """What `pipeline.provider = "auto"` runs on here: CUDA where onnxruntime-gpu and the NVIDIA
    driver are both present, DirectML where onnxruntime-directml is (Windows), else the CPU.
    TensorRT is never picked by itself (its first start builds engines for minutes), nor CoreML
    or OpenVINO (not measured with these models): those are asked for by name."""
    have = ort.get_available_providers() if available is None else list(available)
    if CUDA in have and (nvidia_driver_present() if driver is None else driver):
        return "cuda"
    if DIRECTML in have:
        return "directml"
    return "cpu"


def nvidia_driver_present() -> bool:
    """Whether the NVIDIA driver's CUDA library loads (no driver: no CUDA or TensorRT, whatever
    else is installed)."""
    if sys.platform == "darwin":
        return False
    name = "nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1"
    try:
        ctypes.CDLL(name)
    except OSError:
        return False
    return True


def explain_provider_failure(
    provider: str,
    text: str,
    available: Sequence[str] = (),
    *,
    with_cuda: bool = True,
    active: Sequence[str] = (),
    pip: str = "pip",
    ort_version: str = "",
) -> tuple[str, str]:
    """(reason, fix) for an ORT provider that did not load, from what ORT printed while it tried.

    The one explanation for both the session factory's fallback notes and the doctor's report (which
    prefixes "<label> provider not usable: "). `text` is everything captured: ORT's C++ log, its
    Python "EP Error" prints, prepare_gpu_libraries()' notes, an exception. `fix` is a command or
    step, or '' when there is nothing more specific than the reason.

    available: ort.get_available_providers(); a provider missing there is not in this build at all.
    with_cuda=False leaves the CUDA part out of a TensorRT explanation (when the CUDA provider's own
    failure is reported next to it, saying it twice only buries the TensorRT part).
    active: the session's get_providers(), to name what it fell back to when ORT said nothing.
    pip / ort_version: how fixes spell pip (the doctor: "<this python> -m pip") and the
    onnxruntime-gpu version they install (default: the one running).
    """
    label = provider_label(provider)
    if available and provider not in available:
        return f"this onnxruntime package has no {label} provider", _BUILD_HINT.get(provider, "")
    text = _ANSI.sub("", text)
    missing = _missing_libraries(text)
    if provider in (CUDA, TENSORRT):
        cuda_major, cudnn_major = required_cuda(text)
        driver = _driver_text(cuda_major)
        if _NO_DEVICE.search(text):
            return "no NVIDIA GPU or driver found", f"install the NVIDIA driver ({driver})"
        if _OLD_DRIVER.search(text):
            return (
                f"the NVIDIA driver is missing or too old for CUDA {cuda_major}",
                f"install or update the NVIDIA driver ({driver})",
            )
        cuda_lib = next((lib for lib in missing if _CUDA_LIBRARY.search(lib)), None)
        cuda_missing = cuda_lib is not None or "Require cuDNN" in text
        cuda_reason = f"needs CUDA {cuda_major}.x and cuDNN {cudnn_major}.x" + (
            f" (missing {cuda_lib})" if cuda_lib else ""
        )
        cuda_fix = (
            f'{pip} install "onnxruntime-gpu[cuda,cudnn]=={ort_version or ort.__version__}" or install '
            f"CUDA {cuda_major}.x + cuDNN {cudnn_major}.x and an NVIDIA driver ({driver})"
        )
        trt_fix = f'{pip} install "tensorrt-cu{cuda_major}-libs=={_TENSORRT_MAJOR}.*"'
        trt_lib = next((lib for lib in missing if _TENSORRT_LIBRARY.search(lib)), None)
        if provider == TENSORRT and (trt_lib is not None or "install TensorRT" in text):
            reason = f"TensorRT {_TENSORRT_MAJOR} libraries not found" + (
                f" (missing {trt_lib})" if trt_lib else ""
            )
            path_var = "PATH" if sys.platform == "win32" else "LD_LIBRARY_PATH"
            fix = f"{trt_fix} (if it is still not found, add site-packages/tensorrt_libs to {path_var})"
            if cuda_missing and with_cuda:
                return f"{reason}; {cuda_reason}", f"{cuda_fix}; then for TensorRT: {fix}"
            return reason, fix
        if cuda_missing:
            if provider == TENSORRT and with_cuda:
                cuda_fix += f"; then for TensorRT: {trt_fix}"
            return cuda_reason, cuda_fix
    if missing:
        return f"missing {missing[0]}", ""
    first = _first_error_line(text)
    if first:
        return first, ""
    fell_back_to = active[0] if active else "another provider"
    return f"the session fell back to {fell_back_to} (ORT logged no reason)", ""


def required_cuda(text: str = "") -> tuple[int, int]:
    """(CUDA major, cuDNN major) that this ORT build needs: from its log, else its build info."""
    match = re.search(r"Require cuDNN (\d+)\.\* and CUDA (\d+)\.\*", text)
    if match:
        return int(match.group(2)), int(match.group(1))
    major = _ort_build_cuda_version().split(".")[0]
    return (int(major) if major.isdigit() else _DEFAULT_CUDA_MAJOR), _DEFAULT_CUDNN_MAJOR


def _driver_text(cuda_major: int) -> str:
    """The NVIDIA driver a CUDA major needs, for a fix: 'R580+' (or 'for CUDA 14' if unknown)."""
    branch = MIN_DRIVER.get(cuda_major)
    return f"R{branch}+" if branch else f"for CUDA {cuda_major}"


def _ort_build_cuda_version() -> str:
    """The CUDA version this onnxruntime was built with ('13.0'), '' for a CPU-only build."""
    try:
        from onnxruntime.capi import build_and_package_info
    except ImportError:
        return ""
    return str(getattr(build_and_package_info, "cuda_version", "") or "")


def _missing_libraries(text: str) -> list[str]:
    """Every shared library ORT or preload_dlls could not load ('libcublasLt.so.13'), in the order
    the text names them."""
    hits = sorted((m.start(), m.group(1)) for pattern in _MISSING_LIBRARY for m in pattern.finditer(text))
    return [name for _, name in hits]


def _first_error_line(text: str) -> str:
    """The most telling line of an ORT log: its first error record (without the timestamp and
    source location), else the "EP Error" it printed, else the last line naming an error."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in lines:
        if "[E:" in line:
            return re.sub(r"^.*?\[E:[^\]]*\]\s*", "", line)
    for line in lines:
        if line.startswith("EP Error"):
            return line
    return next((line for line in reversed(lines) if "error" in line.lower()), "")


# ----------------------------------------------------------------------------------- CUDA runtime


def prepare_gpu_libraries(provider: str) -> str:
    """Load what a session of this ORT provider needs and ORT does not find by itself, as every
    FaceCast session does (the doctor's probes too): pip's CUDA/cuDNN for CUDA and TensorRT
    (preload_cuda_libraries), pip's TensorRT 10 for TensorRT (trt_cache.load_tensorrt_libs).

    Returns what the loaders said ('' for other providers), for explain_provider_failure.
    """
    notes = ""
    if provider in (CUDA, TENSORRT):
        notes += preload_cuda_libraries()
    if provider == TENSORRT:
        notes += trt_cache.load_tensorrt_libs() + "\n"
    return notes


@functools.cache
def preload_cuda_libraries() -> str:
    """onnxruntime.preload_dlls() once per process, before the first CUDA session; returns what it
    printed (it names each CUDA/cuDNN library it could not load), for the fallback explanation.

    Cached, so the flag lives in the cache rather than in a module global. Two threads racing here
    at most preload twice, which is harmless (loading a loaded library is a no-op).
    """
    preload = getattr(ort, "preload_dlls", None)
    if preload is None:  # ORT < 1.21
        return ""
    failure = ""
    with OutputCapture() as capture:
        try:
            capture.run(preload)
        except Exception as err:
            # It raises for a bad `directory`; with the default search it only prints. Either way the
            # session creation that follows reports the provider as not loaded, with this text.
            failure = f"preload_dlls failed: {type(err).__name__}: {err}\n"
    return capture.text() + failure


T = TypeVar("T")


def run_with_heartbeat(work: Callable[[], T], beat: Callable[[float], None], interval_s: float) -> T:
    """Run `work` on a thread and call beat(elapsed_s) every `interval_s` until it finishes.

    ORT's session creation releases no progress information, so a heartbeat is all a user can get
    during a multi-minute TensorRT build. The thread is a daemon: Ctrl-C still ends the process.
    """
    result: list[T] = []
    error: list[BaseException] = []

    def target() -> None:
        try:
            result.append(work())
        except BaseException as exc:  # re-raised on the caller's thread below
            error.append(exc)

    worker = threading.Thread(target=target, name="session-build", daemon=True)
    t0 = time.perf_counter()
    worker.start()
    while True:
        worker.join(interval_s)
        if not worker.is_alive():
            break
        beat(time.perf_counter() - t0)
    if error:
        raise error[0]
    return result[0]


# ---------------------------------------------------------------------------------- output capture


@functools.cache
def _capture_lock() -> threading.RLock:
    # stdout/stderr and fd 2 are process-wide: one capture at a time (cached = created once).
    return threading.RLock()


class _ThreadTee:
    """Stands in for sys.stdout/sys.stderr: writes from the watched threads are captured, the rest
    pass through, so a heartbeat printed by another thread during a capture is still seen."""

    def __init__(self, target: TextIO | None, sink: list[str], threads: set[int]) -> None:
        self._target = target
        self._sink = sink
        self._threads = threads

    def write(self, text: str) -> int:
        if threading.get_ident() in self._threads:
            self._sink.append(text)
            return len(text)
        return self._target.write(text) if self._target is not None else len(text)

    def flush(self) -> None:
        if self._target is not None:
            self._target.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._target, name)


class OutputCapture:
    """Collects what ONNX Runtime prints while a session is created (see run()); the session factory
    and the doctor's provider probes both use it.

    Two channels: Python-level output ("EP Error ... Falling back" and preload_dlls' "Failed to load"
    prints, and warnings, which Python writes to sys.stderr) from the threads given to run(), and ORT's
    C++ logger on file descriptor 2. fd 2 is process-wide, so a reader thread forwards every line that
    is not an ORT log record to the real stderr at once: only ORT's own lines are withheld (they are
    summarised in factory.fallbacks or the doctor's report instead). text() is complete once the
    `with` block has ended.
    """

    def __init__(self) -> None:
        self._python: list[str] = []
        self._native: list[str] = []
        self._threads: set[int] = set()
        self._saved_streams: tuple[Any, Any] = (None, None)
        self._tees: tuple[_ThreadTee, _ThreadTee] | None = None
        self._saved_fd: int | None = None
        self._reader: threading.Thread | None = None
        self._read_fd: int | None = None
        self._stack = contextlib.ExitStack()

    def run(self, work: Callable[[], T]) -> T:
        """Run `work` on the calling thread with its Python-level output captured."""
        ident = threading.get_ident()
        self._threads.add(ident)
        try:
            return work()
        finally:
            self._threads.discard(ident)

    def text(self) -> str:
        return "".join(self._python) + "".join(self._native)

    def __enter__(self) -> OutputCapture:
        self._stack.enter_context(_capture_lock())
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
        self._saved_streams = (sys.stdout, sys.stderr)
        out = _ThreadTee(sys.stdout, self._python, self._threads)
        err = _ThreadTee(sys.stderr, self._python, self._threads)
        self._tees = (out, err)
        sys.stdout, sys.stderr = cast(TextIO, out), cast(TextIO, err)
        try:
            self._start_fd_capture()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self._stop_fd_capture()
            assert self._tees is not None
            if sys.stdout is self._tees[0]:
                sys.stdout = self._saved_streams[0]
            if sys.stderr is self._tees[1]:
                sys.stderr = self._saved_streams[1]
        finally:
            self._stack.close()

    def _start_fd_capture(self) -> None:
        try:
            saved = os.dup(2)
        except OSError as err:
            # No fd 2 at all (pythonw on Windows): only Python-level output can be captured.
            log.debug("stderr has no file descriptor to capture (%s)", err)
            return
        try:
            read_fd, write_fd = os.pipe()
        except OSError as err:
            os.close(saved)
            log.debug("no pipe for capturing stderr (%s)", err)
            return
        os.dup2(write_fd, 2)
        os.close(write_fd)
        self._saved_fd, self._read_fd = saved, read_fd
        self._reader = threading.Thread(target=self._pump, name="ort-log-capture", daemon=True)
        self._reader.start()

    def _stop_fd_capture(self) -> None:
        if self._saved_fd is None:
            return
        # Restoring fd 2 closes the pipe's last write end, so the reader sees EOF and ends.
        os.dup2(self._saved_fd, 2)
        if self._reader is not None:
            self._reader.join(timeout=5.0)
            if self._reader.is_alive():
                log.warning("the ONNX Runtime log reader did not finish; some log lines may be lost")
        if self._read_fd is not None:
            os.close(self._read_fd)
        os.close(self._saved_fd)
        self._saved_fd = self._read_fd = None

    def _pump(self) -> None:
        assert self._read_fd is not None and self._saved_fd is not None
        pending = b""
        while chunk := os.read(self._read_fd, 65536):
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                self._route(line + b"\n")
        if pending:
            self._route(pending)

    def _route(self, raw: bytes) -> None:
        line = raw.decode("utf-8", errors="replace")
        self._native.append(line)
        bare = _ANSI.sub("", line).strip()
        if bare and not _ORT_LOG_LINE.search(bare):
            assert self._saved_fd is not None
            os.write(self._saved_fd, raw)


Wrapped = TypeVar("Wrapped")


def open_wrapped(
    path: Path | str, factory: SessionFactory, wrap: Callable[[ort.InferenceSession], Wrapped]
) -> Wrapped:
    """Open a model file and wrap its session in a contract class; a contract error names the file."""
    p = Path(path)
    session = factory.create(p, label=p.name)
    try:
        return wrap(session)
    except ModelContractError as err:
        raise ModelContractError(f"{p.name}: {err.message}", hint=err.hint) from err
