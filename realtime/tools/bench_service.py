"""`main.py bench --service`: what the shared inference service does for several streams.

N streams (engines, 1 worker each) swap the same one-face 640x480 frame, in phase, at 30 fps paced
from one absolute clock, for `--duration` seconds; once with one shared service for all (the
process's hub: their faces batched) and once with a service each (every stream its own model
calls: today's behaviour without the hub). Per configuration it prints the frames each stream
kept up with, the model calls per second, the faces per call, the swap's per-frame time (p50/p99)
and, for the shared service, what the service itself added to each face (waiting for a batch and
the hand-offs, not the model call; p50/p99). Peak RSS last.

The models are the doubles (near-zero cost): the figures are the pipeline's and the service's own
cost, which is what batching can save; a GPU's model time is another measurement.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TextIO

import cv2
import numpy as np

from models.fakes.doubles import write_all
from models.runtime.batch_window import BatchPolicy
from models.runtime.inference_hub import InferenceHub
from realtime.core.contracts import FramePlan, SwapTarget
from realtime.core.settings import Settings
from realtime.tools.bench import astronaut_bgr, peak_rss_mb
from realtime.wiring.face_swap import ModelOptions, prepare_face_swap

FPS = 30.0
DEFAULT_SECONDS = 10.0  # per run, where --duration does not say
SIZE = (640, 480)


@dataclass(frozen=True, slots=True)
class ServiceRun:
    mode: str  # "shared" or "own"
    streams: int
    frames_per_s: float  # per stream, kept up with
    calls_per_s: float
    faces_per_call: float
    swap_ms_p50: float  # a frame's swap step (crop, submit, model, decode)
    swap_ms_p99: float
    added_ms_p50: float  # what the shared service added to a face (0 for "own")
    added_ms_p99: float


def _frame_and_plan() -> tuple[np.ndarray, FramePlan]:
    face = cv2.resize(astronaut_bgr(), (240, 240))
    frame = np.full((SIZE[1], SIZE[0], 3), 90, dtype=np.uint8)
    frame[120:360, 200:440] = face
    # The astronaut's landmarks (tests' MTCNN measure), scaled into the frame.
    kps = np.array(
        [[203.8, 101.3], [246.4, 103.2], [224.3, 128.9], [201.8, 139.8], [244.9, 142.0]], dtype=np.float32
    )
    kps = kps * np.float32(240 / 512) + np.array([200, 120], dtype=np.float32)
    return frame, FramePlan([SwapTarget(kps, 1.0, 1, 0)])


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(int(round(q / 100.0 * (len(ordered) - 1))), len(ordered) - 1)]


def run_streams(
    models: Path, photo: Path, swapper: str, streams: int, shared: bool, duration: float, policy: BatchPolicy
) -> ServiceRun:
    settings = Settings().with_overrides(
        {
            "detector.model": "mtcnn",
            "swap.model": swapper,
            "pipeline.provider": "cpu",
            "pipeline.frames_in_flight": 1,
        }
    )
    hub = InferenceHub(policy) if shared else None
    engines = []
    for _ in range(streams):
        options = ModelOptions(models_dir=models, allow_unverified=True, inference=hub)
        engines.append(prepare_face_swap([photo], settings, options)(settings))
    frame, plan = _frame_and_plan()
    for engine in engines:  # warm: models loaded, numba compiled, each stream heard from
        engine.workers[0].apply(frame.copy(), plan, settings)
    services = [s.service for s in hub.services()] if hub is not None else []
    for service in services:
        service.reset_stats()
    times: list[float] = []
    done = [0] * streams
    lock = threading.Lock()
    start = time.perf_counter() + 0.2
    deadline = start + duration

    def stream(k: int) -> None:
        worker = engines[k].workers[0]
        image = frame.copy()
        n = 0
        while True:
            due = start + n / FPS
            if due >= deadline:
                break
            wait = due - time.perf_counter()
            if wait > 0:
                time.sleep(wait)
            np.copyto(image, frame)
            t0 = time.perf_counter()
            worker.apply(image, plan, settings)
            spent = time.perf_counter() - t0
            with lock:
                times.append(spent)
            n += 1
            done[k] += 1

    threads = [threading.Thread(target=stream, args=(k,)) for k in range(streams)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = max(time.perf_counter() - start, 1e-9)
    if shared:
        stats = services[0].stats()
        calls, faces, added = stats.calls, stats.per_call, stats.overhead_s
    else:
        calls, faces, added = sum(done), 1.0, []  # one model call per face, each its own
    return ServiceRun(
        "shared" if shared else "own",
        streams,
        statistics.mean(done) / elapsed,
        calls / elapsed,
        faces,
        _percentile(times, 50) * 1000.0,
        _percentile(times, 99) * 1000.0,
        _percentile(added, 50) * 1000.0,
        _percentile(added, 99) * 1000.0,
    )


def run_service_bench_cli(args: argparse.Namespace, out: TextIO) -> int:
    counts = [int(c) for c in str(args.streams).split(",")]
    seconds = args.duration if args.duration > 0 else DEFAULT_SECONDS
    policy = BatchPolicy(max_batch=args.max_batch, max_delay_us=args.max_delay_us)
    with tempfile.TemporaryDirectory() as folder:
        models = Path(folder) / "models"
        write_all(models)
        photo = Path(folder) / "me.png"
        cv2.imwrite(str(photo), astronaut_bgr())
        results = []
        for n in counts:
            for shared in (True, False):
                print(
                    f"{n} stream(s), {'one shared service' if shared else 'a service each'} ...", flush=True
                )
                results.append(run_streams(models, photo, args.swapper, n, shared, seconds, policy))
    rss = peak_rss_mb()
    if args.json:
        print(json.dumps({"runs": [asdict(r) for r in results], "peak_rss_mb": rss}, indent=2), file=out)
        return 0
    print(
        f"\nShared inference service: {args.swapper} doubles, one face per 640x480 frame, streams in phase "
        f"at {FPS:.0f} fps for {seconds:.0f} s; window: max batch {policy.max_batch}, "
        f"max delay {policy.max_delay_us} us",
        file=out,
    )
    print(
        f"{'streams':>7} {'service':>8} {'fps/stream':>10} {'calls/s':>8} {'faces/call':>10} "
        f"{'swap p50':>9} {'p99 ms':>7} {'added p50':>10} {'p99 ms':>7}",
        file=out,
    )
    for r in results:
        rates = f"{r.frames_per_s:>10.1f} {r.calls_per_s:>8.1f} {r.faces_per_call:>10.2f}"
        times = f"{r.swap_ms_p50:>9.2f} {r.swap_ms_p99:>7.2f} {r.added_ms_p50:>10.3f} {r.added_ms_p99:>7.3f}"
        print(f"{r.streams:>7} {r.mode:>8} {rates} {times}", file=out)
    print(f"peak RSS {rss:.0f} MB", file=out)
    return 0


__all__ = ["ServiceRun", "run_service_bench_cli", "run_streams"]
