"""`main.py bench`: FaceCast's engine against the naive loop, same clip, same models, one run.

(a) naive: every frame detect + swap + full-frame paste-back with insightface's own classes,
    sequentially (what roop and early Deep-Live-Cam do);
(b) Deep-Live-Cam-style: that project's current webcam loop (detection every 2nd frame, a paste
    limited to the face's box, realtime.tools.bench_peers);
(c) FaceCast: the engine with a preset (tracker, region-limited paste, frames in flight).

Prints fps, glass-to-glass latency, per-stage ms, pipeline overhead (wall time per frame minus
time inside the models) and peak memory. Models: near-zero-cost doubles by default (they expose
the pipeline's own cost), compute-equivalent stand-ins with --standins, real models with
--models-dir.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any, TextIO

import cv2
import numpy as np
import numpy.typing as npt
import platformdirs

from models.runtime.session import InferenceClock
from models.types import ImageBGR
from realtime.core.engine import Engine
from realtime.core.frames import VideoFrame
from realtime.core.metrics import Summary
from realtime.core.settings import Settings, load_preset, parse_override
from realtime.core.stage_set import StageSet
from realtime.io.sinks import NullSink
from realtime.tools.bench_peers import DLC_DET_INTERVAL, load_insightface_models, run_dlc_style
from realtime.wiring.face_swap import ModelOptions, prepare_face_swap


def peak_rss_mb() -> float:
    """Peak resident memory of this process (0 where the OS does not say)."""
    try:
        import resource
    except ImportError:  # Windows
        return 0.0
    kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kb / 1024.0 if sys.platform != "darwin" else kb / (1024.0 * 1024.0)


def astronaut_bgr() -> ImageBGR:
    from realtime.io.test_pattern import astronaut_photo

    return astronaut_photo()


# The astronaut's face in the bundled photo (x1, y1, x2, y2), as MTCNN finds it.
ASTRONAUT_FACE_BOX = (182.0, 61.0, 268.0, 172.0)


def make_clip_with_faces(
    n_unique: int, width: int, height: int
) -> tuple[list[ImageBGR], list[npt.NDArray[np.float64]]]:
    """The astronaut moving on a grey canvas (slow pan, zoom, small rotation), and where her face
    is in each frame (x1, y1, x2, y2 of the transformed face box's bounding box)."""
    face = astronaut_bgr()
    x1, y1, x2, y2 = ASTRONAUT_FACE_BOX
    corners = np.array([[x1, y1, 1], [x2, y1, 1], [x1, y2, 1], [x2, y2, 1]], dtype=np.float64)
    frames: list[ImageBGR] = []
    boxes: list[npt.NDArray[np.float64]] = []
    for i in range(n_unique):
        t = i / max(n_unique - 1, 1)
        scale = (height / face.shape[0]) * (0.8 + 0.2 * np.sin(2 * np.pi * t))
        angle = 8.0 * np.sin(2 * np.pi * t)
        cx = width * (0.35 + 0.3 * t)
        m = cv2.getRotationMatrix2D((face.shape[1] / 2, face.shape[0] / 2), angle, scale)
        m[0, 2] += cx - face.shape[1] / 2
        m[1, 2] += height / 2 - face.shape[0] / 2
        frames.append(
            np.asarray(cv2.warpAffine(face, m, (width, height), borderValue=(90, 90, 90)), dtype=np.uint8)
        )
        pts = corners @ m.T
        boxes.append(np.concatenate([pts.min(axis=0), pts.max(axis=0)]))
    return frames, boxes


def make_clip(n_unique: int, width: int, height: int) -> list[ImageBGR]:
    return make_clip_with_faces(n_unique, width, height)[0]


@dataclass
class ClipSource:
    """Frames from memory; `live` paces them like a camera at `fps` (for latency)."""

    clip: list[ImageBGR]
    frames: int
    fps: float = 30.0
    live: bool = False
    description: str = "benchmark clip"
    _next: int = 0
    _start: float = 0.0

    @property
    def size(self) -> tuple[int, int]:
        return int(self.clip[0].shape[1]), int(self.clip[0].shape[0])

    @property
    def is_live(self) -> bool:
        return self.live

    def open(self) -> None:
        self._next = 0
        self._start = time.perf_counter()

    def read(self) -> VideoFrame | None:
        if self._next >= self.frames:
            return None
        if self.live:
            due = self._start + self._next / self.fps
            delay = due - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
        i = self._next
        self._next += 1
        # A fresh buffer per frame, as a decoder hands out.
        return VideoFrame(self.clip[i % len(self.clip)].copy(), i, time.perf_counter())

    def close(self) -> None:
        return None


NAIVE_NAME = "naive loop (insightface)"
DLC_NAME = "Deep-Live-Cam-style loop"


@dataclass
class BenchResult:
    name: str
    frames: int
    wall_s: float
    fps: float
    ms_per_frame: float
    latency_ms: dict[str, float]
    stages_ms: dict[str, float]
    model_ms_per_frame: float
    overhead_ms_per_frame: float
    overhead_pct: float
    peak_rss_mb: float
    detections: int = 0
    notes: list[str] = field(default_factory=list)
    runs_ms_per_frame: list[float] = field(default_factory=list)  # every repeat's ms/frame, in order


def _result(
    name: str, frames: int, wall: float, model_ms: float, latency: Summary, stages: dict[str, float]
) -> BenchResult:
    per_frame = wall * 1000.0 / max(frames, 1)
    model_pf = model_ms / max(frames, 1)
    overhead = max(per_frame - model_pf, 0.0)
    return BenchResult(
        name=name,
        frames=frames,
        wall_s=wall,
        fps=frames / wall if wall > 0 else 0.0,
        ms_per_frame=per_frame,
        latency_ms={"p50": latency.p50, "p95": latency.p95, "p99": latency.p99},
        stages_ms=stages,
        model_ms_per_frame=model_pf,
        overhead_ms_per_frame=overhead,
        overhead_pct=100.0 * overhead / per_frame if per_frame > 0 else 0.0,
        peak_rss_mb=peak_rss_mb(),
    )


def run_naive(
    clip: list[ImageBGR], frames: int, models_dir: Path, source_photo: ImageBGR, det_size: int
) -> BenchResult:
    """insightface's reference classes, sequentially, every frame, full-frame paste-back."""
    models = load_insightface_models(models_dir, source_photo, det_size)
    det, swapper, src = models.detector, models.swapper, models.source
    size = (det_size, det_size)
    latencies = np.zeros(frames)
    detect_ms = np.zeros(frames)
    swap_ms = np.zeros(frames)
    t_start = time.perf_counter()
    for i in range(frames):
        t0 = time.perf_counter()
        img = clip[i % len(clip)].copy()
        bboxes, kpss = det.detect(img, input_size=size)
        t1 = time.perf_counter()
        if len(bboxes):
            areas = (bboxes[:, 2] - bboxes[:, 0]) * (bboxes[:, 3] - bboxes[:, 1])
            target = SimpleNamespace(kps=kpss[int(np.argmax(areas))])
            img = swapper.get(img, target, src, paste_back=True)
        t2 = time.perf_counter()
        detect_ms[i] = (t1 - t0) * 1000.0
        swap_ms[i] = (t2 - t1) * 1000.0
        latencies[i] = (t2 - t0) * 1000.0
    wall = time.perf_counter() - t_start
    stages = {"detect": float(detect_ms.mean()), "swap+paste": float(swap_ms.mean())}
    result = _result(NAIVE_NAME, frames, wall, models.clock.total_ms, Summary.of(latencies), stages)
    result.detections = frames
    result.notes.append("latency = processing time only (no queueing), i.e. the naive loop's best case")
    return result


def run_dlc(
    clip: list[ImageBGR], frames: int, models_dir: Path, source_photo: ImageBGR, det_size: int
) -> BenchResult:
    """Deep-Live-Cam's current live loop, rebuilt on insightface's classes (realtime.tools.bench_peers)."""
    run = run_dlc_style(clip, frames, load_insightface_models(models_dir, source_photo, det_size))
    result = _result(DLC_NAME, frames, run.wall_s, run.model_ms, Summary.of(run.latencies_ms), run.stages_ms)
    result.detections = run.detections
    result.notes.append(
        f"detects every {DLC_DET_INTERVAL}nd frame and swaps at the last landmarks in between (no tracking)"
    )
    return result


def run_engine(
    clip: list[ImageBGR],
    frames: int,
    settings: Settings,
    options: ModelOptions,
    photo_path: Path,
    *,
    live_fps: float | None = None,
    stages: StageSet | None = None,
) -> BenchResult:
    """FaceCast's engine on the same clip: every frame as fast as possible, or paced like a camera.
    `stages`: models loaded by an earlier run, reused (else loaded from `options` for this run)."""
    clock = options.clock or InferenceClock()
    factory: Callable[[Settings], StageSet]
    if stages is None:
        factory = prepare_face_swap([photo_path], settings, options)
    else:
        loaded = stages
        factory = lambda _settings: loaded  # noqa: E731 - the engine asks once, at start
    source = ClipSource(clip, frames, fps=live_fps or 30.0, live=live_fps is not None)
    engine = Engine(source, NullSink(), settings, factory)
    engine.start()
    clock.reset()
    t0 = time.perf_counter()
    engine.wait()
    wall = time.perf_counter() - t0
    if engine.error is not None:
        raise engine.error
    snap = engine.stats()
    stage_ms = engine.metrics.stage_means()  # whole run, like the latency below
    mode = f"live {live_fps:.0f} fps" if live_fps else "every frame"
    name = f"FaceCast engine ({mode})"
    # Whole-run latency (the live window holds only the last 20 s), in time order.
    lat = engine.metrics.latencies_ms(whole_run=True)
    result = _result(name, snap.frames_out, wall, clock.total_ms, Summary.of(lat), stage_ms)
    result.detections = engine.metrics.stage_count("detect")
    if live_fps:
        if len(lat) >= 3:  # a run too short for thirds has no drift (the median of nothing is NaN)
            third = len(lat) // 3
            first, last = float(np.median(lat[:third])), float(np.median(lat[-third:]))
            result.latency_ms["drift_p50_first_to_last_third"] = last - first
        result.notes.append(f"dropped at source: {snap.frames_dropped}")
    return result


@dataclass
class BenchSetup:
    models_dir: Path
    allow_unverified: bool
    label: str


# Stand-ins exist for these enhancer settings (others fall back to the doubles' cost).
ENHANCER_STANDIN = {"gpen_256": "GPEN-BFR-256", "gfpgan_1.4": "gfpgan_1.4"}


def prepare_models(
    args: argparse.Namespace, settings: Settings, log: Callable[[str], None], scratch: Path
) -> BenchSetup:
    """The models the bench runs: stand-ins (cached), the user's folder, or doubles written into
    `scratch` (a folder the caller removes, so no run leaves one in the temp folder)."""
    if args.standins:
        from models.fakes.standins import DEFAULT_STANDINS, ensure_standins

        cache = Path(platformdirs.user_cache_dir("FaceCast")) / "standins"
        which = list(DEFAULT_STANDINS)
        if settings.enhancer.model in ENHANCER_STANDIN:
            which.append(ENHANCER_STANDIN[settings.enhancer.model])
        ensure_standins(cache, which=which, log=log)
        return BenchSetup(cache, True, "compute-equivalent stand-ins (random weights)")
    if args.models_dir is not None:
        return BenchSetup(Path(args.models_dir), args.allow_unverified, f"models from {args.models_dir}")
    from models.fakes.doubles import write_all

    scratch.mkdir(parents=True, exist_ok=True)
    # The detector double that finds faces in the picture has a cost of its own (docs/PERFORMANCE.md):
    # the bench measures the pipeline's own cost, so its detector answers without looking.
    write_all(scratch, det_size=settings.detector.size, fixed_detector=True)
    return BenchSetup(scratch, True, "contract-exact doubles (near-zero model cost)")


def _median_run(runs: list[BenchResult]) -> BenchResult:
    """The run with the median ms/frame (the lower middle of an even count), carrying every run's
    ms/frame in `runs_ms_per_frame`. Its peak memory is the first round's: the process's peak
    only grows, so a later round's row would also hold the loops that ran before it."""
    ms = [r.ms_per_frame for r in runs]
    chosen = runs[ms.index(statistics.median_low(ms))]
    chosen.runs_ms_per_frame = ms
    chosen.peak_rss_mb = runs[0].peak_rss_mb
    return chosen


def _ratio(slower_ms: float, faster_ms: float) -> float:
    return slower_ms / faster_ms if faster_ms > 0 else 0.0


def format_table(results: list[BenchResult], speedups: dict[str, float], header: str) -> str:
    """The results as a text table; `speedups`: FaceCast's speed-up against each named loop."""
    lines = [header, ""]
    cols = f"{'':34s}{'fps':>8s}{'ms/frame':>10s}{'lat p50':>9s}{'lat p99':>9s}{'model ms':>10s}"
    cols += f"{'overhead':>10s}{'peak MB':>9s}"
    lines.append(cols)
    for r in results:
        lines.append(
            f"{r.name:34s}{r.fps:8.1f}{r.ms_per_frame:10.2f}{r.latency_ms['p50']:9.1f}"
            f"{r.latency_ms['p99']:9.1f}{r.model_ms_per_frame:10.2f}"
            f"{r.overhead_pct:9.1f}%{r.peak_rss_mb:9.0f}"
        )
    lines.append("")
    for r in results:
        stages = ", ".join(f"{k} {v:.2f}" for k, v in sorted(r.stages_ms.items()))
        lines.append(f"{r.name}: stages ms [{stages}]")
        for note in r.notes:
            lines.append(f"  {note}")
        if len(r.runs_ms_per_frame) > 1:
            runs = ", ".join(f"{v:.2f}" for v in r.runs_ms_per_frame)
            lines.append(f"  ms/frame of each run: {runs} (the median run is shown)")
        if "drift_p50_first_to_last_third" in r.latency_ms:
            lines.append(
                f"  latency drift (p50, last third - first third): "
                f"{r.latency_ms['drift_p50_first_to_last_third']:+.1f} ms"
            )
    lines.append(
        "peak MB: the bench process's peak resident memory after that row (it only grows; with "
        "--repeat, after the row's first run)."
    )
    lines.append("")
    for name, ratio in speedups.items():
        lines.append(f"speed-up FaceCast / {name}: {ratio:.1f}x")
    return "\n".join(lines)


def run_bench_cli(args: argparse.Namespace, out: TextIO) -> int:
    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    overrides = dict(parse_override(o) for o in getattr(args, "overrides", []))
    overrides["pipeline.provider"] = "cpu"
    settings = load_preset(args.preset).with_overrides(overrides)
    frames = args.frames
    photo = astronaut_bgr()
    with tempfile.TemporaryDirectory(prefix="facecast-bench-") as tmp:
        setup = prepare_models(args, settings, log, Path(tmp) / "models")
        log(f"building a {args.width}x{args.height} clip ...")
        clip = make_clip(min(frames, 48), args.width, args.height)
        photo_path = Path(tmp) / "source.png"
        cv2.imwrite(str(photo_path), photo)
        options = ModelOptions(setup.models_dir, setup.allow_unverified, clock=InferenceClock())
        rounds: list[tuple[BenchResult, BenchResult, BenchResult]] = []
        repeat = getattr(args, "repeat", 1)
        for r in range(repeat):
            # Interleaved: a drift in the machine's speed falls on all three loops alike.
            of = f" ({r + 1}/{repeat})" if repeat > 1 else ""
            log(f"naive loop{of} ...")
            naive = run_naive(clip, frames, setup.models_dir, photo, settings.detector.size)
            log(f"Deep-Live-Cam-style loop{of} ...")
            dlc = run_dlc(clip, frames, setup.models_dir, photo, settings.detector.size)
            log(f"FaceCast engine, preset {args.preset}{of} ...")
            rounds.append((naive, dlc, run_engine(clip, frames, settings, options, photo_path)))
        naive, dlc, engine = (_median_run([round_[k] for round_ in rounds]) for k in range(3))
        results = [naive, dlc, engine]
        if args.duration > 0:
            live_frames = int(args.duration * 30)
            log(f"FaceCast engine live at 30 fps for {args.duration:.0f} s ...")
            results.append(run_engine(clip, live_frames, settings, options, photo_path, live_fps=30.0))
    # Each round's own ratio, then the median: the loops of one round run minutes apart at most.
    speedup = statistics.median(_ratio(n.ms_per_frame, e.ms_per_frame) for n, _, e in rounds)
    speedup_dlc = statistics.median(_ratio(d.ms_per_frame, e.ms_per_frame) for _, d, e in rounds)
    header = (
        f"FaceCast bench: {frames} frames at {args.width}x{args.height}, preset {args.preset}, "
        f"{setup.label}, CPU provider"
    )
    if len(rounds) > 1:
        header += f"; each loop's median of {len(rounds)} interleaved runs, speed-ups the median per run"
    if args.json:
        payload = {
            "header": header,
            "repeats": len(rounds),
            "speedup": speedup,
            "speedup_vs_dlc_style": speedup_dlc,
            "results": [asdict(r) for r in results],
        }
        json.dump(_finite(payload), out, indent=2, allow_nan=False)  # strict JSON: no NaN
        print(file=out)
    else:
        print(format_table(results, {"naive": speedup, "Deep-Live-Cam-style": speedup_dlc}, header), file=out)
    return 0


__all__ = ["BenchResult", "ClipSource", "make_clip", "run_bench_cli", "run_dlc", "run_engine", "run_naive"]


def _finite(value: Any) -> Any:
    """`value` with every NaN or infinity (a figure that could not be measured) as None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value
