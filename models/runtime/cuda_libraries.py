"""The CUDA, cuDNN and TensorRT libraries a GPU session needs and ONNX Runtime does not find by
itself: pip's CUDA/cuDNN preloaded once per process, pip's TensorRT 10 before TensorRT sessions."""

from __future__ import annotations

import functools

import onnxruntime as ort

from models.runtime import trt_cache
from models.runtime.output_capture import OutputCapture
from models.runtime.providers import CUDA, TENSORRT


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
