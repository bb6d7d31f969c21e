"""One factory for every ONNX Runtime session: providers, options, and honest fallback reports.

ONNX Runtime does not raise when the CUDA or TensorRT provider cannot load (missing CUDA/cuDNN or
TensorRT libraries): it logs why on stderr (C++ logger) or prints an "EP Error" (Python), then runs on
the CPU (docs/gpu-api-facts.md §3-4). The factory therefore captures that output while a GPU session is
created, checks `session.get_providers()` afterwards, and records a visible fallback message naming
the provider, the reason and the fix in `factory.fallbacks`.

GPU specifics handled here (with cuda_libraries.py; providers.py names the providers and explains
a failure, output_capture.py captures what ORT prints):
- CUDA/cuDNN from pip are preloaded with `onnxruntime.preload_dlls()` once per process, and pip's
  TensorRT 10 libraries (site-packages/tensorrt_libs) are loaded before the first TensorRT session.
- TensorRT engines are cached per model SHA-256 + GPU + TensorRT + ORT version (models/runtime/trt_cache.py),
  because the provider's own cache key ignores the weights. A first build can take minutes: it is
  announced through `progress` and runs on a thread while a heartbeat reports that it is still going.
- Each in-flight worker may run on its own CUDA stream (`cuda_stream`); 0 (the default stream) is
  rejected, because ORT treats "0" as "no user stream" and the caller would silently share a stream.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar, cast

import numpy as np
import onnxruntime as ort

from models.cli_text import app_command, shown_path
from models.errors import ModelContractError, ModelError, ModelMissingError
from models.runtime import trt_cache
from models.runtime.cuda_libraries import prepare_gpu_libraries
from models.runtime.output_capture import OutputCapture, run_with_heartbeat
from models.runtime.providers import (
    CPU,
    CUDA,
    DIRECTML,
    ORT_PROVIDER,
    TENSORRT,
    ProviderName,
    explain_provider_failure,
    nvidia_driver_present,
    provider_label,
)
from models.runtime.session_pool import SessionPool

# Names other modules import from here, defined in the modules this one is built from.
__all__ = [
    "ArenaExtendStrategy",
    "ConvAlgoSearch",
    "InferenceClock",
    "ProgressCallback",
    "ProviderEntry",
    "SessionConfig",
    "SessionFactory",
    "TimedSession",
    "build_by_running",
    "open_falling_back",
    "open_wrapped",
    "warmup_feeds",
]

log = logging.getLogger(__name__)

ConvAlgoSearch = Literal["EXHAUSTIVE", "HEURISTIC", "DEFAULT"]
ArenaExtendStrategy = Literal["kNextPowerOfTwo", "kSameAsRequested"]
ProgressCallback = Callable[[str], None]
ProviderEntry = str | tuple[str, dict[str, Any]]


@dataclass(frozen=True, slots=True)
class SessionConfig:
    """How sessions are built. Immutable: a change of provider builds a new factory."""

    provider: ProviderName = "cpu"
    device_id: int = 0
    fp16: bool = True  # TensorRT only: build fp16 engines
    cache_dir: Path | None = None  # TensorRT engine/timing caches (one subfolder per model key)
    intra_op_threads: int = 0  # 0 = ONNX Runtime's default (all cores)
    # User compute stream (a cudaStream_t as int) for CUDA/TensorRT sessions; None = each session
    # creates its own stream, which already keeps concurrent workers apart (docs/gpu-api-facts.md §3).
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


@dataclass(frozen=True, slots=True)
class BatchProfile:
    """The inputs of a model given a batch axis (name -> the shape of one sample) and the largest
    batch it runs: TensorRT's explicit optimisation profile (min 1, opt = max = max_batch)."""

    rows: tuple[tuple[str, tuple[int, ...]], ...]
    max_batch: int

    def trt_options(self) -> dict[str, str]:
        def shapes(n: int) -> str:
            return ",".join(f"{name}:{'x'.join(str(d) for d in (n, *row))}" for name, row in self.rows)

        return {
            "trt_profile_min_shapes": shapes(1),
            "trt_profile_opt_shapes": shapes(self.max_batch),
            "trt_profile_max_shapes": shapes(self.max_batch),
        }


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
    # Sessions shared with other factories of this process (the server's streams); None: own ones.
    pool: SessionPool | None = None
    # Model hashes by (path, size, mtime): every worker opens the same 554 MB swapper.
    _hashes: dict[tuple[str, int, int], str] = field(default_factory=dict, init=False, repr=False)
    # Streams made by new_worker_stream(), kept alive as long as the sessions that use them.
    _streams: list[object] = field(default_factory=list, init=False, repr=False)

    # ------------------------------------------------------------------------------ provider chain

    def providers(
        self,
        trt_cache_paths: trt_cache.TrtCachePaths | None = None,
        cuda_stream: int | None = None,
        batch_profile: BatchProfile | None = None,
    ) -> list[ProviderEntry]:
        """Provider list for ONNX Runtime, most preferred first, always ending with CPU.

        Values are Python types; ORT turns them into its option strings with str(), so booleans must
        be True/False (the TensorRT validator wants 'True'/'False') and the stream goes in as a string.
        TensorRT engine caching is only switched on with `trt_cache_paths` (create() computes them per
        model): one shared folder would reuse engines across retrained weights. batch_profile: the
        inputs of a model with a batch axis and the largest batch: TensorRT builds one engine for
        batches 1..max (explicit profile shapes) instead of a new one for each batch size it meets.
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
            if batch_profile is not None:
                trt.update(batch_profile.trt_options())
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
            # and the GUI: with spinning off MTCNN runs ~2x faster on a 2-core machine.
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
        batch_profile: BatchProfile | None = None,
    ) -> ort.InferenceSession:
        """Open a session; raise ModelError with a one-line reason for a missing/corrupt file.

        `cuda_stream` overrides the config's stream for this session (one stream per worker).
        `run_shapes`: the input shapes (one per input, in order) the model will be run with. Only
        TensorRT uses them: it builds the engine of a model whose inputs are not fixed at its first
        run, so that run happens here, announced, instead of stalling the first frame. A dynamic
        batch dimension alone is taken as 1 without them. batch_profile: see providers().
        """
        name = label or (model.name if isinstance(model, Path) else "in-memory model")
        if isinstance(model, Path):
            if not model.is_file():
                raise ModelMissingError(f"Model file not found: {model}")
            if model.stat().st_size == 0:
                raise ModelError(f"Model file {model} is empty (0 bytes).", hint=_download_again(model))
        pool = self.pool
        if pool is not None and isinstance(model, Path) and cuda_stream is None:
            stat = model.stat()
            key = (str(model.resolve()), stat.st_size, stat.st_mtime_ns, self.config, tuple(run_shapes or ()))
            session = pool.get(key, lambda: self._open(model, name, None, run_shapes))
            if self.clock is not None:
                return cast(ort.InferenceSession, TimedSession(session, self.clock))
            return session
        session = self._open(model, name, cuda_stream, run_shapes, batch_profile)
        if self.clock is not None:
            return cast(ort.InferenceSession, TimedSession(session, self.clock))
        return session

    def _open(
        self,
        model: Path | bytes,
        name: str,
        cuda_stream: int | None,
        run_shapes: Sequence[Sequence[int]] | None,
        batch_profile: BatchProfile | None = None,
    ) -> ort.InferenceSession:
        source: str | bytes = str(model) if isinstance(model, Path) else model
        provider = self.config.provider
        notes = prepare_gpu_libraries(ORT_PROVIDER[provider])
        cache: trt_cache.TrtCachePaths | None = None
        # Hashing a 554 MB model takes a second or two: not worth it when TensorRT cannot load.
        if provider == "tensorrt" and trt_cache.tensorrt_version() != "none":
            cache = self.trt_cache_for(model, name)
        providers = self.providers(cache, cuda_stream, batch_profile)
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
        """One note per distinct reason, naming every model it hit (a copy of the same sentence per
        model would push the window's earlier messages out)."""
        for i, note in enumerate(self.fallbacks):
            names, sep, rest = note.partition(": ")
            if sep and rest == text:
                if model not in names.split(", "):
                    self.fallbacks[i] = f"{names}, {model}: {text}"
                return
        msg = f"{model}: {text}"
        self.fallbacks.append(msg)
        # Info, not warning: the CLI and the window show `fallbacks` to the user themselves
        # (a warning here would print each one twice).
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


Wrapped = TypeVar("Wrapped")


def open_wrapped(
    path: Path | str, factory: SessionFactory, wrap: Callable[[ort.InferenceSession], Wrapped]
) -> Wrapped:
    """Open a model file and wrap its session in a contract class; a contract error names the file."""
    p = Path(path)
    return wrap_checked(p, factory.create(p, label=p.name), wrap)


def wrap_checked(path: Path, session: Any, wrap: Callable[[Any], Wrapped]) -> Wrapped:
    """Wrap `session` (of the file `path`) in a contract class; a contract error names the file."""
    try:
        return wrap(session)
    except ModelContractError as err:
        raise ModelContractError(f"{path.name}: {err.message}", hint=err.hint) from err
