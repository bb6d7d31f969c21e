"""Contract-exact double of a frame enhancer (Real-ESRGAN x2/x4), and its numpy reference.

`input` [1,3,T,T] RGB in [0,1] -> `output` [1,3,sT,sT]: a bilinear upscale by s (half-pixel
centres, edges clamped) followed by a depthwise 3x3 sharpening kernel that is not symmetric and a
bias per channel, so a tile that is transposed, flipped or has its channels swapped on the way in
or out comes back different. It looks only at a pixel's neighbours (its reach is 1 px of input), so
run in tiles with any margin of context it gives exactly what it gives on the whole picture:
`upscaler_reference` computes that in numpy, and a seam between tiles shows as a difference.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import onnx
from onnx import TensorProto, helper, numpy_helper

from models.fakes.onnx_model import finish_model

# Depthwise kernel (rows, cols) per channel: sums to 1 (a flat picture stays flat), more weight to
# the right and below than to the left and above.
UPSCALER_KERNEL = np.array([[0.0, -0.10, 0.0], [-0.05, 1.30, -0.10], [0.0, -0.05, 0.0]], dtype=np.float32)
UPSCALER_BIAS = np.array([0.02, 0.0, -0.02], dtype=np.float32)  # R, G, B
DOUBLE_TILE = 256


def build_upscaler(scale: int, tile: int = DOUBLE_TILE, *, fp16_io: bool = False) -> onnx.ModelProto:
    """A x`scale` frame enhancer double (module doc). fp16_io: float16 input and output (the maths
    stays float32 inside)."""
    io_type = TensorProto.FLOAT16 if fp16_io else TensorProto.FLOAT
    nodes: list[onnx.NodeProto] = []
    x = "input"
    if fp16_io:
        nodes.append(helper.make_node("Cast", ["input"], ["input_f32"], to=TensorProto.FLOAT))
        x = "input_f32"
    nodes += [
        helper.make_node(
            "Resize",
            [x, "roi", "scales"],
            ["up"],
            mode="linear",
            coordinate_transformation_mode="half_pixel",
        ),
        helper.make_node(
            "Conv", ["up", "k", "b"], ["sharp"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], group=3
        ),
    ]
    if fp16_io:
        nodes.append(helper.make_node("Cast", ["sharp"], ["output"], to=TensorProto.FLOAT16))
    else:
        nodes.append(helper.make_node("Identity", ["sharp"], ["output"]))
    kernel = np.repeat(UPSCALER_KERNEL[None, None], 3, axis=0)  # [3,1,3,3]
    inits = [
        numpy_helper.from_array(np.zeros(0, dtype=np.float32), "roi"),
        numpy_helper.from_array(np.array([1.0, 1.0, scale, scale], dtype=np.float32), "scales"),
        numpy_helper.from_array(kernel, "k"),
        numpy_helper.from_array(UPSCALER_BIAS, "b"),
    ]
    big = tile * scale
    graph = helper.make_graph(
        nodes,
        f"upscaler_x{scale}_double",
        [helper.make_tensor_value_info("input", io_type, [1, 3, tile, tile])],
        [helper.make_tensor_value_info("output", io_type, [1, 3, big, big])],
        initializer=inits,
    )
    return finish_model(graph)


def _upsample_axis(x: npt.NDArray[np.float64], scale: int, axis: int) -> npt.NDArray[np.float64]:
    n = x.shape[axis]
    pos = (np.arange(n * scale, dtype=np.float64) + 0.5) / scale - 0.5
    pos = np.clip(pos, 0.0, n - 1)
    lo = np.floor(pos).astype(np.int64)
    hi = np.minimum(lo + 1, n - 1)
    frac = pos - lo
    shape = [1] * x.ndim
    shape[axis] = -1
    w = frac.reshape(shape)
    return np.take(x, lo, axis=axis) * (1.0 - w) + np.take(x, hi, axis=axis) * w


def upscaler_reference(image_bgr: npt.NDArray[np.uint8], scale: int) -> npt.NDArray[np.uint8]:
    """What the double gives for the whole of `image_bgr` (any size), through FrameEnhancer's
    decoding: the picture's edge repeated beyond it, as the tiles see it."""
    pad = 2
    padded = np.pad(image_bgr, ((pad, pad), (pad, pad), (0, 0)), mode="edge")
    x = padded[:, :, ::-1].astype(np.float64) / 255.0  # RGB
    up = _upsample_axis(_upsample_axis(x, scale, 0), scale, 1)
    k = UPSCALER_KERNEL.astype(np.float64)
    framed = np.pad(up, ((1, 1), (1, 1), (0, 0)))
    h, w = up.shape[:2]
    sharp = sum(k[i, j] * framed[i : i + h, j : j + w] for i in range(3) for j in range(3))
    sharp = sharp + UPSCALER_BIAS.astype(np.float64)
    c = pad * scale
    kept = sharp[c : h - c, c : w - c]
    return np.rint(np.clip(kept * 255.0, 0.0, 255.0))[:, :, ::-1].astype(np.uint8)


__all__ = ["DOUBLE_TILE", "UPSCALER_BIAS", "UPSCALER_KERNEL", "build_upscaler", "upscaler_reference"]
