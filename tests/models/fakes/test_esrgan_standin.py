"""The Real-ESRGAN x2 stand-in: RRDBNet's published size and cost, a graph TensorRT takes, and a
file the frame enhancer wrapper loads and runs on a tile."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

from models.fakes.standins import ESRGAN_BLOCKS as NUM_BLOCK
from models.fakes.standins import STANDIN_NAMES, build_esrgan_standin, count_macs, count_params
from models.runtime.session import SessionConfig, SessionFactory
from models.wrappers.frame_enhancers import FrameEnhancer

FACTORY = SessionFactory(SessionConfig(provider="cpu", intra_op_threads=2))


@pytest.fixture(scope="module")
def x2() -> onnx.ModelProto:
    return build_esrgan_standin(2)


def test_its_cost_is_rrdbnets_on_a_256_px_tile(x2: onnx.ModelProto) -> None:
    # 23 blocks x 3 dense blocks x 5 convs at 128 px carry almost all of it (docs/model-contracts.md).
    per_pixel = 9 * sum((64 + 32 * i) * 32 for i in range(4)) + 9 * (64 + 4 * 32) * 64
    blocks = NUM_BLOCK * 3 * per_pixel * 128 * 128
    macs = count_macs(x2)
    assert macs / 1e9 == pytest.approx(293.8, rel=0.01)
    assert blocks / macs == pytest.approx(0.92, abs=0.01)
    assert count_params(x2) / 1e6 == pytest.approx(16.7, rel=0.01)
    assert x2.ByteSize() / 1e6 == pytest.approx(66.9, rel=0.01)


def test_the_graph_uses_what_tensorrt_imports(x2: onnx.ModelProto) -> None:
    ops = {n.op_type for n in x2.graph.node}
    assert ops == {"SpaceToDepth", "Conv", "LeakyRelu", "Concat", "Mul", "Add", "Resize", "Identity"}
    assert [n.op_type for n in x2.graph.node].count("Conv") == 1 + NUM_BLOCK * 15 + 1 + 4
    assert "SpaceToDepth" not in {n.op_type for n in build_esrgan_standin(4).graph.node}


def test_the_wrapper_loads_it_and_runs_a_tile(tmp_path: Path, x2: onnx.ModelProto) -> None:
    assert "real_esrgan_x2" in STANDIN_NAMES
    path = tmp_path / "real_esrgan_x2.onnx"
    onnx.save(x2, str(path))
    enhancer = FrameEnhancer.from_file("real_esrgan_x2", path, FACTORY)
    assert (enhancer.tile, enhancer.scale) == (256, 2)
    image = np.random.default_rng(0).integers(0, 256, (200, 230, 3), dtype=np.uint8)
    out = enhancer.upscale(image)  # one tile: 200 x 230 fits a 240 px core
    assert out.shape == (400, 460, 3) and enhancer.tiles_run == 1
    assert out.std() > 1.0  # random weights: a meaningless picture, but a real computation
