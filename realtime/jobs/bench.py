"""The file-job benchmark: one long clip as one pass, in chunks, and in chunks shared by two
worker processes; throughput, what chunking costs, and how well the seams hold (landmarks at the
frames around each seam against the single pass, with and without the warm-up)."""

from __future__ import annotations

import dataclasses
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import av
import numpy as np

from realtime.api import ImageBGR, Settings, StageFactory
from realtime.jobs.chunks import DEFAULT_WARMUP_FRAMES, plan_chunks
from realtime.jobs.filejob import JobSpec, build_stages, run_file_job
from realtime.jobs.probe import probe
from realtime.jobs.process_pool import run_with_workers

Landmarks = dict[float, tuple[np.ndarray, float]]  # frame time -> (first target's kps, its weight)


class _RecordingAnalyser:
    """Forwards to the real analyser and keeps each frame's first target (the first time a frame
    is seen: a chunk's warm-up frames were written by the chunk before)."""

    def __init__(self, inner: Any, seen: Landmarks, lock: threading.Lock) -> None:
        self._inner, self._seen, self._lock = inner, seen, lock

    def prepare(self, image: Any) -> object | None:
        prepare = getattr(self._inner, "prepare", None)
        return prepare(image) if prepare is not None else None

    def analyse(
        self, image: Any, timestamp: float, settings: Settings, *, prepared: object | None = None
    ) -> Any:
        if hasattr(self._inner, "prepare"):
            plan = self._inner.analyse(image, timestamp, settings, prepared=prepared)
        else:
            plan = self._inner.analyse(image, timestamp, settings)
        if plan.targets:
            with self._lock:
                key = round(timestamp, 4)
                self._seen.setdefault(
                    key, (np.asarray(plan.targets[0].kps, np.float64), plan.targets[0].weight)
                )
        return plan


def recording(stages: StageFactory, seen: Landmarks) -> StageFactory:
    lock = threading.Lock()

    def factory(settings: Settings) -> Any:
        built = stages(settings)
        return dataclasses.replace(built, analyser=_RecordingAnalyser(built.analyser, seen, lock))

    return factory


@dataclass(frozen=True, slots=True)
class JobBench:
    frames: int
    chunks: int
    single_fps: float
    chunked_fps: float
    two_workers_fps: float
    worker_startup_s: float  # until the last of the two worker processes had its models loaded
    chunk_overhead_pct: float  # chunked time over the single pass's, minus 100 %
    seam_px_warm: float  # largest landmark distance from the single pass at the seams (warm-up on)
    seam_px_cold: float  # the same without warm-up
    seam_weight_cold: float  # how far the face faded out at a seam without warm-up (0: not at all)

    def lines(self) -> list[str]:
        return [
            f"clip: {self.frames} frames in {self.chunks} chunks",
            f"single pass:      {self.single_fps:7.1f} fps",
            f"chunked, 1 proc:  {self.chunked_fps:7.1f} fps ({self.chunk_overhead_pct:+.1f} % time)",
            f"chunked, 2 procs: {self.two_workers_fps:7.1f} fps (of which {self.worker_startup_s:.1f} s "
            "starting the processes and loading their models)",
            f"seams: landmarks within {self.seam_px_warm:.2f} px of the single pass with warm-up, "
            f"{self.seam_px_cold:.2f} px without; face weight dips by {self.seam_weight_cold:.2f} without",
        ]


def _clip(path: Path, images: Sequence[ImageBGR], fps: int = 25) -> Path:
    """A clip with a keyframe every second, as cameras write them."""
    with av.open(str(path), mode="w") as out:
        stream = out.add_stream("libx264", rate=fps)
        stream.width, stream.height, stream.pix_fmt = images[0].shape[1], images[0].shape[0], "yuv420p"
        stream.options = {"crf": "18", "preset": "ultrafast", "g": str(fps), "keyint_min": str(fps)}
        for image in images:
            out.mux(stream.encode(av.VideoFrame.from_ndarray(image, format="bgr24")))
        out.mux(stream.encode(None))
    return path


def _timed(spec: JobSpec, settings: Settings, stages: StageFactory) -> tuple[float, int]:
    start = time.perf_counter()
    result = run_file_job(spec, settings, stages)
    return time.perf_counter() - start, result.chunks


def _seam_figures(single: Landmarks, chunked: Landmarks, seams: list[float]) -> tuple[float, float]:
    times = sorted(single)
    worst_px, worst_weight = 0.0, 0.0
    for seam in seams:
        i = int(np.searchsorted(times, seam - 1e-4))
        for t in times[max(i - 2, 0) : i + 3]:
            if t in chunked:
                worst_px = max(worst_px, float(np.abs(chunked[t][0] - single[t][0]).max()))
                worst_weight = max(worst_weight, single[t][1] - chunked[t][1])
            else:
                worst_weight = max(worst_weight, single[t][1])  # no face at all there
    return worst_px, worst_weight


def bench_jobs(
    images: Sequence[ImageBGR],
    source_photo: Path,
    models_dir: Path,
    chunk_s: float = 2.0,
    detector: str = "mtcnn",
) -> JobBench:
    """`images`: the clip's frames (a face moving), written at 25 fps with a keyframe a second."""
    frames = len(images)
    with tempfile.TemporaryDirectory(prefix="facecast-jobs-bench-") as tmp:
        folder = Path(tmp)
        clip = _clip(folder / "clip.mp4", images)
        base = JobSpec(
            input=str(clip),
            output="",
            source=(str(source_photo),),
            models_dir=str(models_dir),
            allow_unverified=True,
            overrides=(f"detector.model={detector}",),
        )
        settings, stages = build_stages(base)
        single_marks: Landmarks = {}
        warm_marks: Landmarks = {}
        cold_marks: Landmarks = {}
        one = dataclasses.replace(base, output=str(folder / "single.mp4"), chunk_s=0)
        single_s, _ = _timed(one, settings, recording(stages, single_marks))
        warm = dataclasses.replace(base, output=str(folder / "chunked.mp4"), chunk_s=chunk_s)
        chunked_s, chunks = _timed(warm, settings, recording(stages, warm_marks))
        cold = dataclasses.replace(base, output=str(folder / "cold.mp4"), chunk_s=chunk_s, warmup_frames=0)
        run_file_job(cold, settings, recording(stages, cold_marks))
        two = dataclasses.replace(base, output=str(folder / "two.mp4"), chunk_s=chunk_s)
        ready: list[float] = []
        start = time.monotonic()
        run_with_workers(two, 2, on_ready=ready.append)
        two_s = time.monotonic() - start
        startup_s = max(ready) - start
        info = probe(clip)
        seams = [info.seconds(c.start_pts) for c in plan_chunks(info, chunk_s, DEFAULT_WARMUP_FRAMES)[1:]]
        warm_px, _ = _seam_figures(single_marks, warm_marks, seams)
        cold_px, cold_weight = _seam_figures(single_marks, cold_marks, seams)
    return JobBench(
        frames,
        chunks,
        frames / single_s,
        frames / chunked_s,
        frames / two_s,
        startup_s,
        100.0 * (chunked_s / single_s - 1.0),
        warm_px,
        cold_px,
        cold_weight,
    )
