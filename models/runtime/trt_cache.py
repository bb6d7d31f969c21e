"""TensorRT engine/timing cache layout: one folder per (model bytes, GPU, TensorRT, ONNX Runtime).

ONNX Runtime's TensorRT provider names its engine files with a MurmurHash of the model's *file name*,
input/initializer/output names, OS, ORT, CUDA and TensorRT major.minor (docs/gpu-api-facts.md §4). It does
NOT hash the weights: replace inswapper_128.onnx with a retrained file of the same name and the old
engine is loaded silently. So the cache folder we hand to the provider is itself keyed by the model's
SHA-256 plus the GPU, the TensorRT version and the ORT version:

    <cache_dir>/<model label>/<sha256[:16]>-<gpu slug>-sm<cc>-trt<ver>-ort<ver>-<fp16|fp32>/
        <label>_...engine, .profile          (trt_engine_cache_path + trt_engine_cache_prefix)
        key.json                             (the full key, for people and for pruning)
    <cache_dir>/timing/<gpu slug>-sm<cc>-trt<ver>/
        TensorrtExecutionProvider_cache_sm<cc>.timing   (shared by every model on that GPU/TRT)

The timing cache only records kernel timings for layer shapes, so it is safe (and useful: later
builds are faster) to share it between models on the same GPU and TensorRT version.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import importlib.metadata
import importlib.util
import json
import logging
import os
import re
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

log = logging.getLogger(__name__)

# Distributions that ship libnvinfer, most specific first (PyPI's `tensorrt` is 11.x now and is not
# what the 1.31 TRT provider links: it needs libnvinfer.so.10, see docs/gpu-api-facts.md §4).
_TENSORRT_DISTS = ("tensorrt-cu13-libs", "tensorrt-cu12-libs", "tensorrt-libs", "tensorrt_libs", "tensorrt")
_TENSORRT_MAJOR = 10
_HASH_CHUNK = 1 << 20
ENGINE_SUFFIX = ".engine"
KEY_FILE = "key.json"


@dataclass(frozen=True, slots=True)
class GpuIdentity:
    """What a TensorRT engine is only valid for: the GPU model and its compute capability."""

    name: str
    compute_capability: str  # "8.9"; "" when unknown

    @property
    def slug(self) -> str:
        name = _slug(self.name) or "unknown-gpu"
        sm = self.compute_capability.replace(".", "") or "unknown"
        return f"{name}-sm{sm}"


@dataclass(frozen=True, slots=True)
class TrtCacheKey:
    model_sha256: str
    gpu: GpuIdentity
    tensorrt_version: str
    ort_version: str
    fp16: bool

    @property
    def folder_name(self) -> str:
        precision = "fp16" if self.fp16 else "fp32"
        return (
            f"{self.model_sha256[:16]}-{self.gpu.slug}-trt{_slug(self.tensorrt_version)}"
            f"-ort{_slug(self.ort_version)}-{precision}"
        )


@dataclass(frozen=True, slots=True)
class TrtCachePaths:
    """The folders and name prefix handed to the TensorRT provider for one model."""

    engine_dir: Path
    timing_dir: Path
    prefix: str

    def has_engine(self) -> bool:
        """True when an engine was built before: the next session loads it instead of building."""
        return self.engine_dir.is_dir() and any(self.engine_dir.glob(f"*{ENGINE_SUFFIX}"))


def model_sha256(model: Path | bytes) -> str:
    digest = hashlib.sha256()
    if isinstance(model, bytes):
        digest.update(model)
    else:
        with model.open("rb") as f:
            while chunk := f.read(_HASH_CHUNK):
                digest.update(chunk)
    return digest.hexdigest()


def cache_paths(cache_dir: Path, label: str, key: TrtCacheKey) -> TrtCachePaths:
    # The router labels sessions with the file name: the ".onnx" adds nothing to engine names.
    prefix = _slug(label.removesuffix(".onnx")) or "model"
    timing = f"{key.gpu.slug}-trt{_slug(key.tensorrt_version)}"
    return TrtCachePaths(
        engine_dir=cache_dir / prefix / key.folder_name,
        timing_dir=cache_dir / "timing" / timing,
        prefix=prefix,
    )


def prepare(paths: TrtCachePaths, key: TrtCacheKey) -> None:
    """Create the folders and record the key beside the engines (the provider fills the rest)."""
    paths.engine_dir.mkdir(parents=True, exist_ok=True)
    paths.timing_dir.mkdir(parents=True, exist_ok=True)
    key_file = paths.engine_dir / KEY_FILE
    if not key_file.is_file():
        key_file.write_text(json.dumps(asdict(key), indent=2, sort_keys=True) + "\n", encoding="utf-8")


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9._]+", "-", text.lower()).strip("-.")


# --------------------------------------------------------------------------------------- environment


@functools.cache
def gpu_identity(device_id: int = 0) -> GpuIdentity:
    """The GPU's name and compute capability: the CUDA driver API, else nvidia-smi, else unknown.

    Cached per process: the GPU cannot change under a running process.
    """
    found = _gpu_from_driver(device_id) or _gpu_from_nvidia_smi(device_id)
    if found is None:
        log.info("GPU %d could not be identified; TensorRT caches are keyed 'unknown-gpu'.", device_id)
        return GpuIdentity("unknown-gpu", "")
    return found


def _gpu_from_driver(device_id: int) -> GpuIdentity | None:
    name = "nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1"
    try:
        cuda = ctypes.CDLL(name)
    except OSError as err:
        log.debug("No CUDA driver library (%s): %s", name, err)
        return None
    dev = ctypes.c_int()
    buf = ctypes.create_string_buffer(256)
    major, minor = ctypes.c_int(), ctypes.c_int()
    # 75/76 = CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR/MINOR (cuda.h).
    calls = (
        lambda: cuda.cuInit(0),
        lambda: cuda.cuDeviceGet(ctypes.byref(dev), device_id),
        lambda: cuda.cuDeviceGetName(buf, len(buf), dev),
        lambda: cuda.cuDeviceGetAttribute(ctypes.byref(major), 75, dev),
        lambda: cuda.cuDeviceGetAttribute(ctypes.byref(minor), 76, dev),
    )
    for call in calls:
        status = call()
        if status != 0:
            log.debug("CUDA driver call failed with status %s while identifying GPU %d", status, device_id)
            return None
    return GpuIdentity(buf.value.decode(errors="replace"), f"{major.value}.{minor.value}")


def _gpu_from_nvidia_smi(device_id: int) -> GpuIdentity | None:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    cmd = [exe, f"--id={device_id}", "--query-gpu=name,compute_cap", "--format=csv,noheader"]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=10, check=True)
    except (OSError, subprocess.SubprocessError) as err:
        log.debug("nvidia-smi failed: %s", err)
        return None
    parts = [p.strip() for p in done.stdout.strip().split(",")]
    if len(parts) != 2 or not parts[0]:
        return None
    return GpuIdentity(parts[0], parts[1])


def tensorrt_libs_dir() -> Path | None:
    """site-packages/tensorrt_libs (from `pip install tensorrt-cu13-libs`), when installed."""
    try:
        spec = importlib.util.find_spec("tensorrt_libs")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


@functools.cache
def load_tensorrt_libs() -> str:
    """Make libnvinfer 10 findable by ORT's TensorRT provider; once per process (cached).

    ORT's preload_dlls() does not cover TensorRT, and pip's tensorrt_libs folder is not on the loader
    path. Loading the libraries by full path with RTLD_GLOBAL makes the provider's later
    dlopen("libnvinfer.so.10") resolve to them (glibc matches already-loaded sonames). On Windows the
    folder is added to the DLL search path instead. Returns a note for the logs ('' if nothing to do).
    """
    folder = tensorrt_libs_dir()
    if folder is None:
        return "tensorrt_libs not installed (pip install 'tensorrt-cu13-libs==10.*')"
    if sys.platform == "win32":
        os.add_dll_directory(str(folder))
        return f"added {folder} to the DLL search path"
    loaded: list[str] = []
    failed: list[str] = []
    # Order matters: the plugin and parser libraries link libnvinfer itself.
    for lib in ("libnvinfer.so.10", "libnvinfer_plugin.so.10", "libnvonnxparser.so.10"):
        path = folder / lib
        if not path.is_file():
            continue
        try:
            ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
            loaded.append(lib)
        except OSError as err:
            failed.append(f"{lib}: {err}")
    if failed:
        return f"could not load from {folder}: {'; '.join(failed)}"
    return f"loaded {', '.join(loaded) or 'nothing'} from {folder}"


@functools.cache
def tensorrt_version() -> str:
    """The installed TensorRT version ('10.13.2.6'), or 'none' when no TensorRT is installed."""
    for dist in _TENSORRT_DISTS:
        try:
            version = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
        # ORT's TensorRT provider links libnvinfer.so.10: TensorRT 11 (`pip install tensorrt`
        # today pulls tensorrt-cu13-libs 11.x) cannot load, whichever package brought it.
        if version.split(".")[0] == str(_TENSORRT_MAJOR):
            return version
    return _tensorrt_version_from_library() or "none"


def _tensorrt_version_from_library() -> str | None:
    # A system-wide TensorRT (apt, tarball) has no Python distribution: ask the library itself.
    # getInferLibVersion() = major*10000 + minor*100 + patch in TensorRT 10 (NvInferVersion.h).
    name = "nvinfer_10.dll" if sys.platform == "win32" else "libnvinfer.so.10"
    try:
        lib = ctypes.CDLL(name)
    except OSError:
        return None
    try:
        value = int(lib.getInferLibVersion())
    except AttributeError:
        return None
    return f"{value // 10000}.{value // 100 % 100}.{value % 100}"
