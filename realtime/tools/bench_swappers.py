"""`main.py bench --swappers`: ms per face for every swap family, at batch 1 and batch 4.

Each family's double (near-zero model cost: the pipeline's own cost per face, which grows with
the crop: encode, the call, decode) and, with `--standins`, inswapper_128 on its compute-equivalent
stand-in (random weights, the real architecture and cost). Batch 4: four faces submitted together
through the family's shared service, one model call (the published files' batch axis given at
load time and proven). Peak RSS last.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TextIO

import cv2
import numpy as np
import platformdirs

from models.fakes.doubles import write_all
from models.files.catalogue import get_entry, one_swapper_per_family
from models.runtime.batch_window import BatchPolicy
from models.runtime.inference_hub import InferenceHub
from models.runtime.session import SessionConfig, SessionFactory
from models.types import SourceFace
from models.wrappers.swappers.base import FaceSwapper
from models.wrappers.swappers.registry import check_swapper_file, converter_entry, family_of, load_swapper
from realtime.tools.bench import astronaut_bgr, peak_rss_mb

ONE_PER_FAMILY = one_swapper_per_family()
ASTRONAUT_KPS = np.array(
    [[203.8, 101.3], [246.4, 103.2], [224.3, 128.9], [201.8, 139.8], [244.9, 142.0]], dtype=np.float32
)


@dataclass(frozen=True, slots=True)
class SwapperTiming:
    model: str
    family: str
    crop: int
    models: str  # "doubles" or "stand-in"
    ms_per_face_batch1: float
    ms_per_face_batch4: float
    max_batch: int  # what the service may run (1: the batch axis did not hold)


def _shared(name: str, folder: Path, factory: SessionFactory, hub: InferenceHub) -> FaceSwapper:
    path = folder / get_entry(name).files[0].name
    family = family_of(name).facts.family
    converter = converter_entry(name)
    shared = hub.service(path, factory, label=name, check=lambda s: check_swapper_file(path, s, family))
    swapper = load_swapper(
        path,
        factory,
        family,
        None if converter is None else folder / get_entry(converter).files[0].name,
        session=shared.session,
    )
    swapper.attach(shared.service.client(name))
    return swapper


def time_per_face(swapper: FaceSwapper, batch: int, rounds: int) -> float:
    """ms per face: `rounds` x (`batch` faces encoded, submitted together, collected, decoded)."""
    layout = swapper.facts.layout
    image = astronaut_bgr()
    crop = np.asarray(
        cv2.warpAffine(image, layout.matrix(ASTRONAUT_KPS), (layout.size, layout.size)), np.uint8
    )
    raw = np.random.default_rng(0).standard_normal(512).astype(np.float32) * 0.7
    face = SourceFace(raw / np.linalg.norm(raw), raw, image, ASTRONAUT_KPS)
    source = swapper.source_tensor(swapper.identity(face))
    blobs = [np.zeros((1, 3, layout.size, layout.size), dtype=swapper.target_dtype) for _ in range(batch)]
    outs = [np.zeros((layout.size, layout.size, 3), dtype=np.uint8) for _ in range(batch)]

    def one_round() -> None:
        with swapper.client.holding():
            tickets = []
            for blob in blobs:
                swapper.encode_target(crop, blob)
                tickets.append(swapper.submit(blob, source))
        for ticket, out in zip(tickets, outs, strict=True):
            swapper.decode(np.asarray(ticket.result()[0]), out)

    one_round()  # warm: numba compiled, arenas grown
    t0 = time.perf_counter()
    for _ in range(rounds):
        one_round()
    return (time.perf_counter() - t0) * 1000.0 / (rounds * batch)


def measure(
    folder: Path, names: tuple[str, ...], models: str, rounds: int, log: Callable[[str], None]
) -> list[SwapperTiming]:
    factory = SessionFactory(SessionConfig(provider="cpu"))
    hub = InferenceHub(BatchPolicy(max_batch=4, max_delay_us=0))
    results = []
    for name in names:
        log(f"{name} ({models}) ...")
        swapper = _shared(name, folder, factory, hub)
        (service,) = [s for s in hub.services() if s.service.name == name]
        results.append(
            SwapperTiming(
                name,
                swapper.label,
                swapper.input_size,
                models,
                time_per_face(swapper, 1, rounds),
                time_per_face(swapper, 4, max(rounds // 4, 1)),
                service.max_batch,
            )
        )
    return results


def run_swappers_bench_cli(args: argparse.Namespace, out: TextIO) -> int:
    def log(message: str) -> None:
        print(message, flush=True)

    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        write_all(folder)
        results = measure(folder, ONE_PER_FAMILY, "doubles", max(args.frames, 8), log)
    if args.standins:
        from models.fakes.standins import ensure_standins

        cache = Path(platformdirs.user_cache_dir("FaceCast")) / "standins"
        ensure_standins(cache, which=["inswapper_128"], log=log)
        results += measure(cache, ("inswapper_128",), "stand-in", 4, log)
    rss = peak_rss_mb()
    if args.json:
        data: dict[str, Any] = {"swappers": [asdict(r) for r in results], "peak_rss_mb": rss}
        print(json.dumps(data, indent=2), file=out)
        return 0
    print("\nms per face (this machine's CPU), one family each; batch 4 = four faces in one call", file=out)
    print(f"{'model':<24} {'family':<10} {'crop':>5} {'models':<9} {'batch 1':>8} {'batch 4':>8}", file=out)
    for r in results:
        print(
            f"{r.model:<24} {r.family:<10} {r.crop:>5} {r.models:<9} {r.ms_per_face_batch1:>8.2f} "
            f"{r.ms_per_face_batch4:>8.2f}" + ("" if r.max_batch > 1 else "  (batch axis did not hold)"),
            file=out,
        )
    print(f"peak RSS {rss:.0f} MB", file=out)
    return 0


__all__ = ["SwapperTiming", "measure", "run_swappers_bench_cli", "time_per_face"]
