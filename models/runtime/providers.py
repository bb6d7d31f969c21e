"""ONNX Runtime's execution providers: their names, which one "auto" picks here, and why one did
not load (the one explanation for the session factory's fallback notes and the doctor's report)."""

from __future__ import annotations

import ctypes
import re
import sys
from collections.abc import Sequence
from typing import Literal

import onnxruntime as ort

from models.runtime.output_capture import _ANSI

ProviderName = Literal["cpu", "cuda", "tensorrt", "coreml", "directml", "openvino"]

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


def provider_label(provider: str) -> str:
    """The short name of an ORT provider for messages: 'CUDA' for CUDAExecutionProvider."""
    return PROVIDER_LABEL.get(provider, provider.removesuffix("ExecutionProvider"))


# ------------------------------------------------------------------------------ failure explanation


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
