"""`python main.py doctor --gpu-bench`: the GPU face path, measured with compute-equivalent stand-ins.

What runs per frame (one face), everything on the device between one upload-free start and one
download, as the GPU pipeline is meant to work:

    decode-sim   a ring of NV12 frames uploaded once before timing (what NVDEC would leave on the GPU)
    convert      NV12 -> BGR                        models.ops.device_ops (graph)
    crop         aligned 128 px inswapper crop      models.ops.device_ops (graph)
    swap         inswapper_128 stand-in             models.runtime.iobinding.BoundSession
    [enhance]    512 px crop -> GFPGAN-sized stand-in -> paste
    paste        swapped face blended into the frame, in place
    download     the finished BGR frame, once

at 720p and 1080p, swap-only and swap + enhancer, on the CUDA provider and on TensorRT fp16 (a
provider that does not load is skipped with the reason). Then the whole engine on CUDA ("engine",
"engine+enhance" rows): host frames as a webcam delivers them, the analyser (detector every 3rd
frame + tracker), two swap workers on the device path, fps with every frame pushed through and
glass-to-glass p50/p99 at a 60 fps camera's pace. It prints fps, latency p50/p99 (frame
arrival to finished download, one frame in flight), GPU memory in use, and the host<->device copies
each frame issues. The stand-ins (models/fakes/standins.py) have the real models' shapes and arithmetic
cost with random weights: timings are realistic, pictures are meaningless.

Budget: the whole check stays under `budget_s` (default 280 s), TensorRT engine builds included:
frame counts are small, and a configuration that no longer fits is skipped with that reason (built
engines are cached, so a second run reaches the rest).

Without a CUDA provider it prints "no CUDA provider: <reason>" and returns 1: nothing was measured,
which must not read as a pass (the doctor lists a missing GPU as information, not as a failure).
`allow_cpu=True` runs the same code path on the CPU provider with the device graphs forced on
(tests; the lead's CI), with whatever models it is given.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import numpy as np
import numpy.typing as npt
import onnxruntime as ort

from models.errors import ModelError
from models.ops.align import FFHQ_TEMPLATE_512, arcface_template, similarity_transform
from models.runtime import trt_cache
from models.runtime.providers import CPU, CUDA, TENSORRT, ProviderName
from models.runtime.session import SessionConfig, SessionFactory
from realtime.face.device_backend import Copies
from realtime.face.host.compositor import Compositor
from realtime.io.nvenc import bgr_to_nv12

DEFAULT_BUDGET_S = 280.0
SIZES: tuple[tuple[str, int, int], ...] = (("720p", 1280, 720), ("1080p", 1920, 1080))
WARMUP_FRAMES = 5  # first runs: cuDNN algorithm search, lazy allocations
MEASURED_FRAMES = 60
RING = 4  # distinct device frames cycled through (decode-sim)
# A first TensorRT build of a 128 px inswapper or a 512 px U-Net: tens of seconds to a few minutes.
TRT_BUILD_ESTIMATE_S = 120.0
ENHANCER_INPUT = 512
FACE_HEIGHT_FRACTION = 0.35  # the face's share of the frame height (a webcam head shot)
_THETA_BYTES = 2 * 3 * 4  # one float32 2x3 matrix
_NO_TIME_TO_BUILD = (
    "not enough of the time budget left for a first TensorRT build; run again (engines are cached)"
)


@dataclass(frozen=True, slots=True)
class BenchModels:
    """The ONNX files to run: the inswapper contract (`target`, `source` -> `output`) and optionally
    a restorer contract (`input` [1,3,512,512] -> `output`)."""

    swapper: Path
    enhancer: Path | None = None


@dataclass(slots=True)
class Result:
    provider: str
    size: str
    path: str
    fps: float = 0.0
    p50_ms: float = 0.0
    p99_ms: float = 0.0
    gpu_mib: str = "n/a"
    copies: Copies = field(default_factory=Copies)
    copies_note: str = ""  # engine rows: the engine's own per-frame transfer count
    skipped: str = ""


@dataclass
class _Clock:
    """Seconds left of the budget."""

    budget_s: float
    start: float = field(default_factory=time.perf_counter)

    def left(self) -> float:
        return self.budget_s - (time.perf_counter() - self.start)


def run_gpu_bench(
    out: TextIO,
    budget_s: float = DEFAULT_BUDGET_S,
    *,
    allow_cpu: bool = False,
    models: BenchModels | None = None,
    cache_dir: Path | None = None,
    sizes: Sequence[tuple[str, int, int]] = SIZES,
    frames: int = MEASURED_FRAMES,
    warmup: int = WARMUP_FRAMES,
    gpu_id: int = 0,
    engine_models: Path | None = None,
) -> int:
    """Print the GPU self-check to `out`; 0 when it ran, 1 when a configuration failed (the error
    is printed) or when there is no CUDA provider to check (nothing was measured: a script must not
    read that as a GPU that passed).

    After the face path alone, the whole engine runs on the CUDA provider (capture -> analyser ->
    2 swap workers on the device path -> sink) with `engine_models`: a folder with the detector,
    recognizer, swapper and GFPGAN files (default: the stand-ins; with allow_cpu and none given,
    those rows are left out)."""
    clock = _Clock(budget_s)
    say = _printer(out)
    say("GPU self-check: the face path on the GPU with compute-equivalent stand-ins")
    ok, reason = cuda_provider_status(gpu_id)
    if not ok:
        say(f"no CUDA provider: {reason}")
        if not allow_cpu:
            say("nothing was measured: the GPU self-check needs a working CUDA provider")
            return 1
        say("running the same path on the CPU provider instead (allow_cpu: a test run, not a benchmark)")
    say(_environment(gpu_id, ok))
    cache = cache_dir or _default_cache_dir()
    try:
        chosen = models or _standins(cache, say)
    except (OSError, ValueError, ModelError) as err:
        say(f"could not prepare the stand-in models: {err}")
        return 1
    providers: list[ProviderName] = ["cuda", "tensorrt"] if ok else ["cpu"]
    results: list[Result] = []
    failed = False
    for provider in providers:
        try:
            results += _bench_provider(provider, chosen, cache, sizes, frames, warmup, gpu_id, clock, say)
        except Exception as err:  # one provider's failure must not hide the other's numbers
            failed = True
            say(f"{provider}: failed: {type(err).__name__}: {err}")
    for provider in providers:
        if clock.left() < 15.0:
            say(f"{provider}: batching rows skipped (time budget used up)")
            continue
        try:
            _bench_service(provider, chosen, cache, gpu_id, say)
        except Exception as err:  # the rows above still stand
            failed = True
            say(f"{provider} batching: failed: {type(err).__name__}: {err}")
    engine_provider: ProviderName = "cuda" if ok else "cpu"
    if ok or engine_models is not None:
        try:
            folder = engine_models or _engine_standins(cache, say)
            results += _bench_engine(engine_provider, folder, sizes, frames, gpu_id, clock, say)
        except Exception as err:  # the face path's numbers above still stand
            failed = True
            say(f"engine: failed: {type(err).__name__}: {err}")
    say("")
    say(format_results(results))
    say(f"total {time.perf_counter() - clock.start:.0f} s of a {budget_s:.0f} s budget")
    return 1 if failed else 0


def _bench_service(
    provider: ProviderName, models: BenchModels, cache: Path, gpu_id: int, say: Callable[[str], None]
) -> None:
    """Faces a second through the shared inference service at batch 1/4/8 (gpu_service_bench)."""
    from realtime.tools.gpu_service_bench import faces_per_second

    label = {"cuda": "CUDA", "tensorrt": "TensorRT fp16", "cpu": "CPU"}[provider]
    factory = SessionFactory(
        SessionConfig(provider=provider, device_id=gpu_id, fp16=True, cache_dir=cache / "trt-cache"),
        progress=say,
    )
    faces_per_second(models.swapper, factory, label, seconds=3.0 if provider != "cpu" else 0.5, say=say)


ENGINE_LIVE_FPS = 60.0  # the engine's latency rows: a 60 fps camera's pace


def _bench_engine(
    provider: ProviderName,
    models_dir: Path,
    sizes: Sequence[tuple[str, int, int]],
    frames: int,
    gpu_id: int,
    clock: _Clock,
    say: Callable[[str], None],
) -> list[Result]:
    """The whole engine per size, swap-only and + GFPGAN: fps with every frame pushed through as
    fast as it goes, glass-to-glass p50/p99 with frames arriving at ENGINE_LIVE_FPS. Host frames
    (as a webcam delivers them): one upload and one download per frame, counted by the engine."""
    import tempfile

    import cv2

    from realtime.core.settings import Settings
    from realtime.tools.bench import astronaut_bgr, make_clip, run_engine
    from realtime.wiring.face_swap import ModelOptions, prepare_face_swap

    label = {"cuda": "CUDA", "tensorrt": "TensorRT fp16", "cpu": "CPU"}[provider]
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="facecast-gpu-bench-") as tmp:
        photo = Path(tmp) / "source.png"
        cv2.imwrite(str(photo), astronaut_bgr())
        options = ModelOptions(models_dir, allow_unverified=True, cache_dir=Path(tmp) / "trt-cache")
        clips = {name: make_clip(8, width, height) for name, width, height in sizes}
        for path, enhancer in (("engine", "none"), ("engine+enhance", "gfpgan_1.4")):
            settings = Settings().with_overrides({"pipeline.provider": provider, "enhancer.model": enhancer})
            stages: Any = None  # loaded once per path (the sessions do not depend on the frame size)
            for name, _, _ in sizes:
                result = Result(label, name, path)
                if clock.left() < 20.0:
                    result.skipped = "time budget used up"
                else:
                    if stages is None:
                        stages = prepare_face_swap([photo], settings, options)(settings)
                    clip = clips[name]
                    fast = run_engine(clip, frames, settings, options, photo, stages=stages)
                    live = run_engine(
                        clip, frames, settings, options, photo, live_fps=ENGINE_LIVE_FPS, stages=stages
                    )
                    result.fps = fast.fps
                    result.p50_ms = live.latency_ms.get("p50", 0.0)
                    result.p99_ms = live.latency_ms.get("p99", 0.0)
                    result.gpu_mib = gpu_memory_used_mib(gpu_id) if provider != "cpu" else "n/a (CPU)"
                    copies = fast.stages_ms.get("copies")
                    result.copies_note = (
                        f"{copies:.1f} transfers/frame (engine)" if copies is not None else "OpenCV path"
                    )
                results.append(result)
                say(format_results([result], header=False))
    return results


def _engine_standins(cache: Path, say: Callable[[str], None]) -> Path:
    from models.fakes.standins import DEFAULT_STANDINS, ensure_standins

    return ensure_standins(cache, which=(*DEFAULT_STANDINS, "gfpgan_1.4"), log=say)


def cuda_provider_status(gpu_id: int = 0) -> tuple[bool, str]:
    """(True, '') when the CUDA provider really runs a tiny model, else (False, the reason)."""
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "probe", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    factory = SessionFactory(SessionConfig(provider="cuda", device_id=gpu_id))
    session = factory.create(model.SerializeToString(), "gpu-bench probe")
    if CUDA in session.get_providers():
        return True, ""
    note = factory.fallbacks[-1] if factory.fallbacks else "the CUDA provider did not load"
    return False, note.removeprefix("gpu-bench probe: ")


# ------------------------------------------------------------------------------------- one provider


def _bench_provider(
    provider: ProviderName,
    models: BenchModels,
    cache: Path,
    sizes: Sequence[tuple[str, int, int]],
    frames: int,
    warmup: int,
    gpu_id: int,
    clock: _Clock,
    say: Callable[[str], None],
) -> list[Result]:
    from models.ops.device_ops import DeviceOps
    from models.runtime.iobinding import BoundSession

    label = {"cuda": "CUDA", "tensorrt": "TensorRT fp16", "cpu": "CPU"}[provider]
    paths = [("swap", False)] + ([("swap + enhance", True)] if models.enhancer else [])
    results: list[Result] = []

    def skip_all(why: str) -> list[Result]:
        return [Result(label, name, path, skipped=why) for name, _, _ in sizes for path, _ in paths]

    if _needs_build(provider, models.swapper, "inswapper_128", cache, gpu_id) and (
        clock.left() < TRT_BUILD_ESTIMATE_S
    ):
        return skip_all(_NO_TIME_TO_BUILD)
    factory = SessionFactory(
        SessionConfig(provider=provider, device_id=gpu_id, fp16=True, cache_dir=cache / "trt-cache"),
        progress=say,
    )
    swapper_session = factory.create(models.swapper, "inswapper_128")
    wanted = {"cuda": CUDA, "tensorrt": TENSORRT, "cpu": CPU}[provider]
    if wanted not in swapper_session.get_providers():
        # The fallback line already names the provider, the reason and the fix.
        return skip_all(
            factory.fallbacks[-1] if factory.fallbacks else f"{label} did not load (no reason given)"
        )
    device = SessionFactory.device_type_of(swapper_session)
    swapper = BoundSession(swapper_session, device, gpu_id)
    # Device graphs forced on: on the CPU provider (allow_cpu) they are slower than OpenCV, but the
    # point there is to run the GPU code path itself.
    ops = DeviceOps(factory, use_graphs=True)
    latent = _to_device(np.random.default_rng(1).standard_normal((1, 512)).astype(np.float32), device, gpu_id)
    enhancer: Any = None
    for enhance_path, with_enhancer in paths:
        if with_enhancer:
            assert models.enhancer is not None
            building = _needs_build(provider, models.enhancer, "gfpgan_1.4", cache, gpu_id)
            if building and clock.left() < TRT_BUILD_ESTIMATE_S:
                results += [
                    Result(label, name, enhance_path, skipped=_NO_TIME_TO_BUILD) for name, _, _ in sizes
                ]
                continue
            enhancer = BoundSession(factory.create(models.enhancer, "gfpgan_1.4"), device, gpu_id)
        for name, width, height in sizes:
            result = Result(label, name, enhance_path)
            if clock.left() < 5.0:
                result.skipped = "time budget used up"
            else:
                stages = _Stages(ops, swapper, enhancer if with_enhancer else None, latent)
                _run_config(result, stages, width, height, frames, warmup, device, gpu_id, clock)
            results.append(result)
            say(format_results([result], header=False))
    return results


@dataclass(frozen=True, slots=True)
class _Stages:
    ops: Any  # models.ops.device_ops.DeviceOps
    swapper: Any  # models.runtime.iobinding.BoundSession
    enhancer: Any  # BoundSession or None
    latent: Any  # the source identity's latent, an OrtValue on the device


def _run_config(
    result: Result,
    stages: _Stages,
    width: int,
    height: int,
    frames: int,
    warmup: int,
    device: str,
    gpu_id: int,
    clock: _Clock,
) -> None:
    rng = np.random.default_rng(7)
    # decode-sim: NV12 frames put on the device once, as NVDEC would leave them there.
    ring = [
        _to_device(bgr_to_nv12(rng.integers(0, 256, (height, width, 3), dtype=np.uint8)), device, gpu_id)
        for _ in range(RING)
    ]
    kps = _face_landmarks(width, height)
    compositor = Compositor()
    latencies: list[float] = []
    copies = Copies()
    total = warmup + frames
    t_start = 0.0
    for i in range(total):
        if i == warmup:
            t_start = time.perf_counter()
        if i >= warmup and clock.left() < 2.0:
            break
        t0 = time.perf_counter()
        jitter = np.array([i % 3, (i // 3) % 3], dtype=np.float32)  # the face moves a little
        frame_copies = _one_frame(stages, ring[i % RING], kps + jitter, compositor)
        if i >= warmup:
            latencies.append((time.perf_counter() - t0) * 1000.0)
            copies = frame_copies
    elapsed = time.perf_counter() - t_start
    if not latencies:
        result.skipped = "time budget used up"
        return
    result.fps = len(latencies) / elapsed
    result.p50_ms = float(np.percentile(latencies, 50))
    result.p99_ms = float(np.percentile(latencies, 99))
    result.copies = copies
    result.gpu_mib = gpu_memory_used_mib(gpu_id) if device == "cuda" else "n/a (CPU)"


def _one_frame(stages: _Stages, nv12: Any, kps: npt.NDArray[np.float32], compositor: Compositor) -> Copies:
    ops, enhancer = stages.ops, stages.enhancer
    copies = Copies()
    frame = ops.nv12_to_bgr(nv12)  # device BGR, a buffer the ops reuse (valid until the next convert)
    m = similarity_transform(kps, arcface_template(128))
    crop = ops.crop_for_inswapper(frame, m)
    copies.add_params(1, _THETA_BYTES)  # the crop's 2x3 matrix
    (swapped,) = stages.swapper.run({"target": crop, "source": stages.latent})
    mask = compositor.crop_mask(128, m)
    ops.paste(frame, swapped, mask, m)
    copies.add_params(2, _THETA_BYTES + mask.size * 4)  # the paste's matrix and float32 mask
    if enhancer is not None:
        m512 = similarity_transform(kps, FFHQ_TEMPLATE_512)
        face = ops.crop(frame, m512, _enhancer_spec())
        copies.add_params(1, _THETA_BYTES)
        (restored,) = enhancer.run({"input": face})
        mask512 = compositor.crop_mask(ENHANCER_INPUT, m512)
        ops.paste(frame, restored, mask512, m512, signed=True)  # GFPGAN's output: RGB in [-1, 1]
        copies.add_params(2, _THETA_BYTES + mask512.size * 4)
    image = frame.numpy()  # the one download: the finished frame for the sink
    copies.downloads += 1
    copies.download_bytes += int(image.nbytes)
    return copies


def _enhancer_spec() -> Any:
    from models.ops.crop_geometry import CropSpec

    # GFPGAN's input: RGB in [-1, 1].
    return CropSpec(ENHANCER_INPUT, rgb=True, scale=1.0 / 127.5, offset=-1.0)


def _face_landmarks(width: int, height: int) -> npt.NDArray[np.float32]:
    """Five landmarks of a frontal face in the middle of the frame, FACE_HEIGHT_FRACTION tall."""
    template = arcface_template(128)  # points in a 128 px crop that a face roughly fills
    scale = FACE_HEIGHT_FRACTION * height / 128.0
    centre = np.array([width / 2.0, height / 2.0], dtype=np.float32)
    return np.asarray((template - 64.0) * scale + centre, dtype=np.float32)


def _to_device(array: npt.NDArray[Any], device: str, gpu_id: int) -> Any:
    return ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(array), device, gpu_id)


# ------------------------------------------------------------------------------------------ helpers


def _needs_build(provider: str, model: Path, label: str, cache: Path, gpu_id: int) -> bool:
    """True when opening `model` will start a TensorRT engine build (TensorRT installed, no engine
    cached). Without TensorRT the session falls back at once and says why: nothing to budget for."""
    if provider != "tensorrt" or trt_cache.tensorrt_version() == "none":
        return False
    config = SessionConfig(provider="tensorrt", device_id=gpu_id, cache_dir=cache / "trt-cache")
    paths = SessionFactory(config).trt_cache_for(model, label)
    return paths is None or not paths.has_engine()


def gpu_memory_used_mib(gpu_id: int = 0) -> str:
    """Device memory in use (all processes), from nvidia-smi, else the CUDA driver; 'n/a' if neither."""
    exe = shutil.which("nvidia-smi")
    if exe is not None:
        cmd = [exe, f"--id={gpu_id}", "--query-gpu=memory.used", "--format=csv,noheader,nounits"]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=10, check=True)
            return f"{int(done.stdout.strip().splitlines()[0]):,}"
        except (OSError, subprocess.SubprocessError, ValueError, IndexError) as err:
            return f"n/a ({type(err).__name__})"
    try:
        from realtime.io.nvdec_device import CtypesCudaDriver

        free, total = CtypesCudaDriver(gpu_id).mem_get_info()
    except RuntimeError:
        return "n/a"
    return f"{(total - free) // (1 << 20):,}"


def _environment(gpu_id: int, gpu: bool) -> str:
    parts = [f"onnxruntime {ort.__version__}"]
    if gpu:
        ident = trt_cache.gpu_identity(gpu_id)
        parts.insert(0, f"GPU {gpu_id}: {ident.name} (sm{ident.compute_capability.replace('.', '')})")
        parts.append(f"TensorRT {trt_cache.tensorrt_version()}")
    return ", ".join(parts)


def _default_cache_dir() -> Path:
    import platformdirs

    return Path(platformdirs.user_cache_dir("FaceCast")) / "standins"


def _standins(cache: Path, say: Callable[[str], None]) -> BenchModels:
    from models.fakes.standins import ensure_standins

    folder = ensure_standins(cache, which=("inswapper_128", "gfpgan_1.4"), log=say)
    return BenchModels(folder / "inswapper_128.onnx", folder / "gfpgan_1.4.onnx")


def _printer(out: TextIO) -> Callable[[str], None]:
    def say(line: str) -> None:
        out.write(line + "\n")
        out.flush()  # progress lines must show while a TensorRT build runs

    return say


def format_results(results: Sequence[Result], header: bool = True) -> str:
    lines = []
    if header:
        lines.append(
            f"{'provider':<14} {'size':<6} {'path':<15} {'fps':>7} {'p50 ms':>7} {'p99 ms':>7} "
            f"{'GPU MiB':>10}  host<->device per frame"
        )
    for r in results:
        head = f"{r.provider:<14} {r.size:<6} {r.path:<15}"
        if r.skipped:
            lines.append(f"{head} skipped: {r.skipped}")
        else:
            copies = r.copies_note or r.copies.describe()
            lines.append(f"{head} {r.fps:7.1f} {r.p50_ms:7.2f} {r.p99_ms:7.2f} {r.gpu_mib:>10}  {copies}")
    return "\n".join(lines)
