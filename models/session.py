"""One factory for every ONNX Runtime session: providers, options, and honest fallback reports.

ONNX Runtime does not raise when the CUDA or TensorRT provider cannot load (missing CUDA/cuDNN
libraries): it logs and silently runs on the CPU. The factory therefore checks
`session.get_providers()` after creation and records a visible fallback message.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast

import onnxruntime as ort

from models.errors import ModelContractError, ModelError, ModelMissingError

log = logging.getLogger(__name__)

ProviderName = Literal["cpu", "cuda", "tensorrt", "coreml", "directml", "openvino"]

ORT_PROVIDER = {
    "cpu": "CPUExecutionProvider",
    "cuda": "CUDAExecutionProvider",
    "tensorrt": "TensorrtExecutionProvider",
    "coreml": "CoreMLExecutionProvider",
    "directml": "DmlExecutionProvider",
    "openvino": "OpenVINOExecutionProvider",
}


@dataclass(frozen=True, slots=True)
class SessionConfig:
    """How sessions are built. Immutable: a change of provider builds a new factory."""

    provider: ProviderName = "cpu"
    device_id: int = 0
    fp16: bool = True  # TensorRT only: build fp16 engines
    cache_dir: Path | None = None  # TensorRT engine/timing caches
    intra_op_threads: int = 0  # 0 = ONNX Runtime's default (all cores)
    cuda_stream: int | None = None  # user compute stream (per in-flight worker)


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

    def providers(self) -> list[str | tuple[str, dict[str, Any]]]:
        """Provider list for ONNX Runtime, most preferred first, always ending with CPU."""
        cfg = self.config
        chain: list[str | tuple[str, dict[str, Any]]] = []
        if cfg.provider == "tensorrt":
            trt: dict[str, Any] = {"device_id": cfg.device_id, "trt_fp16_enable": cfg.fp16}
            if cfg.cache_dir is not None:
                cache = str(cfg.cache_dir)
                trt.update(
                    trt_engine_cache_enable=True,
                    trt_engine_cache_path=cache,
                    trt_timing_cache_enable=True,
                    trt_timing_cache_path=cache,
                )
            chain.append(("TensorrtExecutionProvider", trt))
        if cfg.provider in ("tensorrt", "cuda"):
            cuda: dict[str, Any] = {
                "device_id": cfg.device_id,
                "cudnn_conv_algo_search": "EXHAUSTIVE",
                "arena_extend_strategy": "kSameAsRequested",
            }
            if cfg.cuda_stream:
                cuda["user_compute_stream"] = str(cfg.cuda_stream)
            chain.append(("CUDAExecutionProvider", cuda))
        elif cfg.provider != "cpu":
            chain.append(ORT_PROVIDER[cfg.provider])
        chain.append("CPUExecutionProvider")
        return chain

    def session_options(self) -> ort.SessionOptions:
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        if self.config.intra_op_threads > 0:
            so.intra_op_num_threads = self.config.intra_op_threads
        so.log_severity_level = 3  # errors only: fallbacks are reported by us, not by log spam
        return so

    def create(self, model: Path | bytes, label: str = "") -> ort.InferenceSession:
        """Open a session; raise ModelError with a one-line reason for a missing/corrupt file."""
        name = label or (model.name if isinstance(model, Path) else "in-memory model")
        if isinstance(model, Path):
            if not model.is_file():
                raise ModelMissingError(f"Model file not found: {model}")
            if model.stat().st_size == 0:
                raise ModelError(f"Model file {model} is empty (0 bytes).", hint="Download it again.")
        source: str | bytes = str(model) if isinstance(model, Path) else model
        try:
            session = ort.InferenceSession(
                source, sess_options=self.session_options(), providers=self.providers()
            )
        except Exception as exc:  # ORT raises several exception types for unreadable protobufs
            raise ModelContractError(
                f"{name} is not a readable ONNX model ({type(exc).__name__}: {str(exc).splitlines()[0]}).",
                hint="The file is corrupt or truncated: download it again "
                "(python main.py models download NAME).",
            ) from exc
        self._note_fallback(session, name)
        if self.clock is not None:
            return cast(ort.InferenceSession, TimedSession(session, self.clock))
        return session

    def _note_fallback(self, session: ort.InferenceSession, name: str) -> None:
        wanted = ORT_PROVIDER[self.config.provider]
        got: Sequence[str] = session.get_providers()
        if wanted not in got:
            msg = (
                f"{name}: {wanted} did not load, running on {got[0] if got else 'nothing'}. "
                "Run `python main.py doctor` for the reason (CUDA 13 / cuDNN 9 needed for CUDA)."
            )
            if msg not in self.fallbacks:
                self.fallbacks.append(msg)
                log.warning(msg)

    @property
    def device_type(self) -> str:
        """The IOBinding device string for buffers of this factory's sessions."""
        return "cuda" if self.config.provider in ("cuda", "tensorrt") else "cpu"
