"""The per-face chain is written once: both backends implement every backend operation with the
same signature, and a step added to a worker's chain runs on the host and the device backend alike."""

from __future__ import annotations

import inspect
from pathlib import Path

import numpy as np
import onnx
import pytest

from models.fakes.pixel_doubles import build_inswapper
from models.wrappers.swappers.inswapper import InSwapper
from realtime.core.contracts import FramePlan
from realtime.core.settings import Settings
from realtime.face.backend import FaceBackend, HostBackend
from realtime.face.chain import FaceJob, FrameJob
from realtime.face.device_backend import DeviceBackend
from realtime.face.swap_worker import FaceSwapWorker
from tests.models.ops.test_device_ops import PASTE_TOL, smooth_frame
from tests.realtime.face.test_device_backend import FACES, FACTORY, H, W, identity


def protocol_members() -> list[str]:
    return [
        name
        for name, value in vars(FaceBackend).items()
        if not name.startswith("_") and inspect.isfunction(value)
    ]


@pytest.mark.parametrize("backend", [HostBackend, DeviceBackend])
def test_every_backend_implements_every_backend_operation(backend: type) -> None:
    members = protocol_members()
    assert {"begin", "submit", "collect", "pixels", "reference", "enhance", "paste", "end"} <= set(members)
    for name in members:
        want = inspect.signature(getattr(FaceBackend, name))
        have = inspect.signature(getattr(backend, name))
        assert list(have.parameters) == list(want.parameters), f"{backend.__name__}.{name}"


class InvertStep:
    """A test-only step: inverts the swapped face's pixels through the backend's host view."""

    name = "invert"

    def __init__(self) -> None:
        self.runs = 0

    def run(self, backend: FaceBackend, face: FaceJob, frame: FrameJob) -> None:
        pixels = backend.pixels(face.crop)
        np.subtract(np.uint8(255), pixels, out=pixels)
        self.runs += 1


@pytest.fixture(scope="module")
def swapper_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = Path(tmp_path_factory.mktemp("chain")) / "inswapper_128.onnx"
    onnx.save(build_inswapper(), str(path))
    return path


def with_step(worker: FaceSwapWorker, step: InvertStep) -> FaceSwapWorker:
    """`step` inserted just before the paste."""
    names = [s.name for s in worker.steps]
    at = names.index("paste")
    worker.steps = (*worker.steps[:at], step, *worker.steps[at:])
    return worker


def test_a_step_added_to_the_chain_runs_on_both_backends(swapper_file: Path) -> None:
    s = Settings()
    people = [identity(1), identity(2)]
    plan = FramePlan(list(FACES))
    frame = smooth_frame(H, W, 40)
    outs = {}
    for device in (False, True):
        step = InvertStep()
        worker = FaceSwapWorker(
            InSwapper.from_file(swapper_file, FACTORY),
            people,
            s,
            factory=FACTORY if device else None,
            device_graphs=True if device else None,
        )
        assert (worker.device_path is not None) == device
        out = frame.copy()
        with_step(worker, step).apply(out, plan, s)
        assert step.runs == len(FACES)
        outs[device] = out
    plain = frame.copy()
    FaceSwapWorker(InSwapper.from_file(swapper_file, FACTORY), people, s).apply(plain, plan, s)
    # The step changed the faces, the same way on both backends.
    assert np.abs(outs[False].astype(np.int16) - plain).mean() > 1.0
    assert np.abs(outs[True].astype(np.int16) - outs[False]).max() <= PASTE_TOL
