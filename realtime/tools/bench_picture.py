"""`main.py bench --picture`: the picture stages' cost and steadiness.

1. Poisson blending (composite.blend = poisson) per face at 720p and 1080p, through the real chain
   (FaceSwapWorker, the inswapper double): the "blend" step's ms next to the paste's, for a still
   face (its mask's factorisation kept) and a face that changes size every frame (a factorisation
   every frame: the worst case), on the host path and on the device path's fallback (forced onto
   the CPU provider: the crop's round trip counted); and the blend alone on 128/256/512 px crops.
2. The edge's frame-to-frame change on a still face, feathered against Poisson
   (realtime.tools.edge_flicker).
3. The frame enhancer per frame at 720p and 1080p, through the model's shared service as the engine
   runs it: the x2 double (the tiling, the service and the merge: near-zero model cost), kept at
   size and upscaled; with --standins also the compute-equivalent Real-ESRGAN x2 stand-in (RRDBNet,
   random weights; one frame each: about 5 s a tile on a 2-core CPU).

Prints ms, the machine's load and peak memory; --json for the figures as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TextIO

import cv2
import numpy as np
import onnx
import platformdirs

from models.fakes.pixel_doubles import build_inswapper
from models.fakes.upscaler_double import build_upscaler
from models.ops.align import estimate_norm, warp_paste_crop
from models.runtime.inference_hub import InferenceHub
from models.runtime.session import SessionConfig, SessionFactory
from models.wrappers.frame_enhancers import FrameEnhancer
from models.wrappers.swappers.inswapper import InSwapper
from realtime.core.contracts import FramePlan, SwapTarget
from realtime.core.settings import Settings, load_preset
from realtime.face.host.compositor import Compositor
from realtime.face.host.poisson import PoissonBlender
from realtime.face.source_face import SourceIdentity
from realtime.face.steps.blend import BlendStep
from realtime.face.swap_worker import FaceSwapWorker
from realtime.picture.frame_enhancer import FrameEnhanceStage
from realtime.tools.bench import peak_rss_mb
from realtime.tools.edge_flicker import EdgeChange, measure_edge_change, still_face_clip

SIZES = ((1280, 720), (1920, 1080))
BLEND_FRAMES = 40
FLICKER_FRAMES = 30
DOUBLE_FRAMES = 10


@dataclass
class BlendRow:
    size: str
    path: str  # host, or device (the fallback)
    face: str  # still, or resized every frame
    blend_ms: float
    paste_ms: float
    feather_paste_ms: float
    factorisations: int
    crop_round_trips: float = 0.0  # per face per frame (device path)


@dataclass
class EnhanceRow:
    model: str
    size: str
    mode: str  # keep size, or upscale
    frames: int
    ms_per_frame: float
    tiles: int
    ms_per_tile: float
    calls_per_frame: float


@dataclass
class PictureBench:
    machine: str
    blend: list[BlendRow] = field(default_factory=list)
    blend_crops_ms: dict[str, float] = field(default_factory=dict)
    flicker: list[EdgeChange] = field(default_factory=list)
    enhance: list[EnhanceRow] = field(default_factory=list)
    peak_rss_mb: float = 0.0


def machine_line() -> str:
    load = os.getloadavg() if hasattr(os, "getloadavg") else (0.0, 0.0, 0.0)
    return f"{os.cpu_count()} CPUs, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the start"


def _person() -> SourceIdentity:
    v = np.random.default_rng(1).standard_normal(512).astype(np.float32)
    return SourceIdentity(v / np.linalg.norm(v), ())


def _blend_row(
    swapper_path: Path, width: int, height: int, *, device: bool, resize: bool, factory: SessionFactory
) -> BlendRow:
    clip, points = still_face_clip(width, height, BLEND_FRAMES)
    results: dict[str, tuple[float, float, int, float]] = {}
    for blend in ("feather", "poisson"):
        s = load_preset("balanced").with_overrides({"composite.blend": blend, "pipeline.provider": "cpu"})
        worker = FaceSwapWorker(
            InSwapper.from_file(swapper_path, factory), _person(), s, factory=factory, device_graphs=device
        )
        blend_ms: list[float] = []
        paste_ms: list[float] = []
        trips = 0.0
        centre = points[0].mean(axis=0)
        for i, (image, kps) in enumerate(zip(clip, points, strict=True)):
            if resize:  # the face grows 0.3 % a frame: its paste mask changes every frame
                kps = ((kps - centre) * (1.0 + 0.003 * i) + centre).astype(np.float32)
            frame = image.copy()
            t = worker.apply(frame, FramePlan([SwapTarget(kps, 1.0, 1)]), s)
            if i >= 2:  # the first frames load and compile
                blend_ms.append(t.get("blend", 0.0))
                paste_ms.append(t["paste"])
                if worker.device_path is not None:
                    trips += worker.device_path.last_copies.crop_downloads
        steps = [s for s in worker.steps if s.name == "blend"] or [worker.steps[0]]
        factorisations = steps[0].blender.factorisations if isinstance(steps[0], BlendStep) else 0
        results[blend] = (
            statistics.mean(blend_ms),
            statistics.mean(paste_ms),
            factorisations,
            trips / len(paste_ms),
        )
    poisson, feather = results["poisson"], results["feather"]
    return BlendRow(
        f"{width}x{height}",
        "device (fallback)" if device else "host",
        "resized every frame" if resize else "still",
        poisson[0],
        poisson[1],
        feather[1],
        poisson[2],
        poisson[3] - feather[3],
    )


def _blend_alone(size: int, repeats: int = 50) -> float:
    """ms of PoissonBlender.blend on a `size` px crop with its mask's factorisation kept."""
    from realtime.io.test_pattern import astronaut_photo

    photo = astronaut_photo()
    kps = np.asarray(((203.8, 101.3), (246.4, 103.2), (224.3, 128.9), (201.8, 139.8), (244.9, 142.0)))
    m = estimate_norm(kps.astype(np.float32), size)
    reference = warp_paste_crop(photo, m, size)
    swap = np.asarray(cv2.convertScaleAbs(reference[:, ::-1], alpha=0.8, beta=30), dtype=np.uint8)
    mask = Compositor().crop_mask(size, m)
    blender = PoissonBlender()
    out = swap.copy()
    blender.blend(swap, reference, mask, out=out)
    t0 = time.perf_counter()
    for _ in range(repeats):
        blender.blend(swap, reference, mask, out=out)
    return (time.perf_counter() - t0) / repeats * 1000.0


def _enhance_rows(
    name: str,
    path: Path,
    factory: SessionFactory,
    frames: int,
    modes: tuple[bool, ...],
    log: Callable[[str], None],
) -> list[EnhanceRow]:
    hub = InferenceHub()
    service = hub.service(path, factory, label=name)
    enhancer = FrameEnhancer.from_file("real_esrgan_x2", path, factory, service.session)
    enhancer.served.attach(service.service.client("bench"))
    stage = FrameEnhanceStage(enhancer)
    from realtime.io.test_pattern import astronaut_photo

    photo = astronaut_photo()
    rows = []
    for width, height in SIZES:
        picture = np.asarray(
            cv2.resize(photo, (width, height), interpolation=cv2.INTER_LINEAR), dtype=np.uint8
        )
        for upscale in modes:
            s = Settings().with_overrides(
                {"frame_enhancer.model": "real_esrgan_x2", "frame_enhancer.upscale": upscale}
            )
            mode = "upscale" if upscale else "keep size"
            log(f"{name}: {width}x{height}, {mode}, {frames} frame(s) ...")
            if frames > 1:  # a warm-up frame (the first run's allocations) where it is cheap
                stage.process(picture.copy(), s)
            before = service.service.stats().calls
            tiles_before = enhancer.tiles_run
            ms = []
            for _ in range(frames):
                image = picture.copy()
                t0 = time.perf_counter()
                stage.process(image, s)
                ms.append((time.perf_counter() - t0) * 1000.0)
            tiles = (enhancer.tiles_run - tiles_before) // frames
            calls = (service.service.stats().calls - before) / frames
            mean = statistics.mean(ms)
            rows.append(EnhanceRow(name, f"{width}x{height}", mode, frames, mean, tiles, mean / tiles, calls))
    return rows


def run_picture_bench(standins: bool, log: Callable[[str], None] = print) -> PictureBench:
    result = PictureBench(machine_line())
    factory = SessionFactory(
        SessionConfig(provider="cpu", intra_op_threads=max(1, (os.cpu_count() or 2) // 2))
    )
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        swapper = folder / "inswapper_128.onnx"
        onnx.save(build_inswapper(), str(swapper))
        for width, height in SIZES:
            for device in (False, True):
                for resize in (False, True):
                    log(f"Poisson blend, {width}x{height}, {'device' if device else 'host'}, "
                        f"{'resized' if resize else 'still'} face ...")  # fmt: skip
                    result.blend.append(
                        _blend_row(swapper, width, height, device=device, resize=resize, factory=factory)
                    )
        for size in (128, 256, 512):
            result.blend_crops_ms[str(size)] = _blend_alone(size)
        for blend in ("feather", "poisson"):
            log(f"edge change on a still face, {blend} ...")
            result.flicker.append(measure_edge_change(blend, frames=FLICKER_FRAMES, workdir=folder))
        double = folder / "real_esrgan_x2.onnx"
        onnx.save(build_upscaler(2), str(double))
        result.enhance += _enhance_rows("x2 double", double, factory, DOUBLE_FRAMES, (False, True), log)
    if standins:
        from models.fakes.standins import ensure_standins

        cache = Path(platformdirs.user_cache_dir("FaceCast")) / "standins"
        ensure_standins(cache, which=("real_esrgan_x2",), log=log)
        result.enhance += _enhance_rows(
            "Real-ESRGAN x2 stand-in", cache / "real_esrgan_x2.onnx", factory, 1, (False,), log
        )
    result.peak_rss_mb = peak_rss_mb()
    return result


def format_picture_bench(r: PictureBench) -> str:
    lines = [f"Picture stages ({r.machine}), peak RSS {r.peak_rss_mb:.0f} MB", ""]
    lines.append("Poisson blend per face (inswapper double, 128 px crop):")
    head = f"  {'frame':10s}{'path':19s}{'face':22s}{'blend ms':>9s}{'paste ms':>9s}"
    lines.append(head + f"{'feather paste':>14s}{'factorised':>11s}{'crop trips':>11s}")
    for b in r.blend:
        lines.append(
            f"  {b.size:10s}{b.path:19s}{b.face:22s}{b.blend_ms:9.2f}{b.paste_ms:9.2f}"
            f"{b.feather_paste_ms:14.2f}{b.factorisations:11d}{b.crop_round_trips:11.1f}"
        )
    crops = ", ".join(f"{k} px {v:.2f} ms" for k, v in r.blend_crops_ms.items())
    lines += [f"  the blend alone, mask kept: {crops}", ""]
    lines.append("Edge change from frame to frame on a still face (grey levels, 1280x720):")
    for f in r.flicker:
        lines.append(
            f"  {f.blend:8s} edge {f.edge:5.2f}  inside {f.inside:5.2f}  (camera noise {f.camera:4.2f})"
        )
    lines += ["", "Frame enhancer per frame (through the shared service, 256 px tiles, 8 px margins):"]
    lines.append(
        f"  {'model':26s}{'frame':11s}{'mode':11s}{'ms/frame':>10s}{'tiles':>7s}{'ms/tile':>9s}{'calls':>7s}"
    )
    for e in r.enhance:
        lines.append(
            f"  {e.model:26s}{e.size:11s}{e.mode:11s}{e.ms_per_frame:10.1f}{e.tiles:7d}{e.ms_per_tile:9.1f}"
            f"{e.calls_per_frame:7.1f}"
        )
    return "\n".join(lines)


def run_picture_bench_cli(args: argparse.Namespace, out: TextIO) -> int:
    def log(message: str) -> None:
        print(message, file=out, flush=True)

    result = run_picture_bench(bool(args.standins), log)
    if args.json:
        print(json.dumps(asdict(result), indent=2, default=_plain), file=out)
    else:
        print(format_picture_bench(result), file=out)
    return 0


def _plain(value: Any) -> Any:
    return asdict(value) if hasattr(value, "__dataclass_fields__") else str(value)


__all__ = ["PictureBench", "format_picture_bench", "run_picture_bench", "run_picture_bench_cli"]
