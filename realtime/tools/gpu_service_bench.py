"""The GPU self-check's batching rows: faces per second through the shared inference service at
batch 1, 4 and 8, on the inswapper stand-in, its requests device tensors (the device path's).

Each round submits `batch` faces together (a frame's faces, or several streams' in one window)
and waits for them; the service gathers them on the device, runs the batched model once and splits
the outputs back. On TensorRT the batched session has one optimisation profile for batches 1..8.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort

from models.runtime.batch_window import BatchPolicy
from models.runtime.inference_hub import InferenceHub
from models.runtime.session import SessionFactory

BATCHES = (1, 4, 8)


@dataclass(frozen=True, slots=True)
class ServiceRow:
    provider: str
    batch: int
    faces_per_s: float
    max_batch: int  # what the service may run (1: the batch axis did not hold)


def _tensor(shape: Sequence[int], dtype: Any, device: str, gpu_id: int, seed: int) -> Any:
    host = np.random.default_rng(seed).uniform(0.0, 1.0, shape).astype(dtype)
    if device == "cpu":
        return ort.OrtValue.ortvalue_from_numpy(host)
    return ort.OrtValue.ortvalue_from_numpy(host, device, gpu_id)


def faces_per_second(
    swapper: Path,
    factory: SessionFactory,
    label: str,
    batches: Sequence[int] = BATCHES,
    seconds: float = 3.0,
    say: Callable[[str], None] = print,
) -> list[ServiceRow]:
    """One row per batch size: faces a second through the shared service (module doc)."""
    hub = InferenceHub(BatchPolicy(max_batch=max(batches), max_delay_us=0))
    shared = hub.service(swapper, factory, kind="device", instances=2, label="inswapper_128")
    device = SessionFactory.device_type_of(shared.session)
    gpu_id = factory.config.device_id
    by_name = {i.name: i for i in shared.session.get_inputs()}
    dtype = np.float16 if by_name["target"].type == "tensor(float16)" else np.float32
    crops = [_tensor((1, 3, 128, 128), dtype, device, gpu_id, k) for k in range(max(batches))]
    latent = _tensor((1, 512), dtype, device, gpu_id, 99)
    client = shared.service.client("gpu-check")
    rows = []
    for batch in batches:

        def one_round(batch: int = batch) -> None:
            with client.holding():
                tickets = [client.submit({"target": crops[k], "source": latent}) for k in range(batch)]
            for ticket in tickets:
                ticket.result()

        one_round()  # warm: the engine for this batch size, the gather and split graphs
        faces, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            one_round()
            faces += batch
        rate = faces / (time.perf_counter() - t0)
        rows.append(ServiceRow(label, batch, rate, shared.max_batch))
        say(f"{label}: {rate:,.0f} faces/s at batch {batch} through the shared service")
    return rows


__all__ = ["BATCHES", "ServiceRow", "faces_per_second"]
