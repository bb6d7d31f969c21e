"""The watermark's device path: the mark graph (models/ops/device_graphs.py), run with IOBinding by
DeviceOps on the CPU provider, marks a frame bit for bit as the host marker does, frame after frame
while the amplitudes follow the picture; the graph keeps the GPU rules; the frame read back carries
the run's payload."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

from models.ops.device_graphs import build_mark
from models.ops.device_ops import DeviceOps
from models.ops.graph_rules import device_graph_problems
from models.runtime.session import SessionConfig, SessionFactory
from realtime.core.watermark.detect import MarkDetector
from realtime.core.watermark.embed import Watermarker
from realtime.core.watermark.payload import Payload
from tests.realtime.core.watermark.marked_clips import RUN_ID, real_clip

FACTORY = SessionFactory(SessionConfig(provider="cpu"))


def camera_clip(frames: int, size: tuple[int, int]) -> list[np.ndarray]:
    """A real photo drifting with a camera's noise, cut to a flat grey band at the bottom: busy,
    flat and in between, so every amplitude is in play."""
    rng = np.random.default_rng(5)
    out = []
    for image in real_clip(frames, size):
        noisy = np.clip(image + rng.normal(0.0, 1.5, image.shape), 0, 255).astype(np.uint8)
        noisy[-size[1] // 4 :] = 128
        out.append(noisy)
    return out


@pytest.mark.parametrize("size", [(640, 360), (1280, 720), (642, 362)], ids=["360p", "720p", "odd cells"])
def test_the_device_mark_is_the_host_mark_bit_for_bit(size: tuple[int, int]) -> None:
    payload = Payload.for_run("0.1", RUN_ID)
    host, device = Watermarker(payload), Watermarker(payload)
    ops = DeviceOps(FACTORY, use_graphs=True)
    for frame in camera_clip(12, size):
        expected = frame.copy()
        host.mark(expected)
        offsets = device.cell_offsets(frame)  # from the picture's host copy, as the device path has it
        on_device = ort.OrtValue.ortvalue_from_numpy(frame.copy())  # the frame in the graph's memory
        ops.mark(on_device, offsets.cells, offsets.row_of, offsets.col_of)
        assert np.array_equal(on_device.numpy(), expected)
    assert ops.use_graphs and ops.device_type == "cpu"


def test_the_host_twin_marks_the_same_and_the_marked_frame_carries_the_payload() -> None:
    payload = Payload.for_run("0.1", RUN_ID)
    twin, marker = DeviceOps(FACTORY, use_graphs=False), Watermarker(payload)
    detector = MarkDetector()
    for frame in camera_clip(6, (1280, 720)):
        expected = frame.copy()
        Watermarker(payload).mark(expected)
        offsets = marker.cell_offsets(frame)
        twin.mark(frame, offsets.cells, offsets.row_of, offsets.col_of)
        detector.add(frame)
    found = detector.decide(wide=False)
    assert found.marked and found.payload is not None and found.payload.run_id == RUN_ID


def test_the_mark_graph_keeps_the_gpu_rules_and_refuses_another_size() -> None:
    rows = (np.arange(360) * 90 // 360).astype(np.int64)
    cols = (np.arange(640) * 90 // 360).astype(np.int64)
    assert device_graph_problems(build_mark(rows, cols)) == []
    ops = DeviceOps(FACTORY, use_graphs=True)
    frame = np.zeros((360, 640, 3), np.uint8)
    ops.mark(frame, np.ones((90, 160), np.float32), rows, cols)
    assert (frame == 1).all()
    cells = np.full((90, 160), -3, np.float32)
    ops.mark(frame, cells, rows, cols)
    assert (frame == 0).all()  # clipped at black, as the host's saturating subtraction
