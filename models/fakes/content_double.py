"""A contract-exact ONNX double of the content classifier (nsfw_2.onnx), and its numpy reference.

`input` [N,3,384,384] (RGB, (x/255 - 0.5)/0.5) -> `output` [N,2] = (s, -s), where s is the
highest cell score of the picture: each pixel's score is CONTENT_RGB_WEIGHTS . x + CONTENT_BIAS
(positive only on saturated violet and magenta: the tests paint FLAGGED_BGR where they want a
picture flagged), averaged over 16 x 16 cells (the real model's patch size), each cell weighted by a
fixed ramp that is steeper along x than along y. Faces, skin, grey, white and the black border of a
fitted picture all score below zero.

What it sees: the channel order (violet read as BGR is crimson, which scores below zero), the
normalisation (x/255 alone or raw 0-255 values give other scores), and the orientation (a transposed
picture meets other ramp values), so a wrapper that gets any of them wrong gets another answer
than content_reference.
"""

from __future__ import annotations

import cv2
import numpy as np
import numpy.typing as npt
import onnx
from onnx import TensorProto, helper, numpy_helper

from models.fakes.onnx_model import finish_model

CONTENT_SIZE = 384
CONTENT_CELL = 16
CONTENT_RGB_WEIGHTS = np.array([0.5, -1.0, 1.0], dtype=np.float32)
CONTENT_BIAS = -1.5
# Violet (RGB 100, 0, 255): a cell of it scores 0.5 * -0.22 + 1 + 1 - 1.5 = 0.39; read as BGR it
# is a crimson scoring -0.22, and x/255 without the rest of the normalisation scores -0.30.
FLAGGED_BGR = (255, 0, 100)


def content_ramp() -> npt.NDArray[np.float32]:
    """(24, 24) cell weights in [0.75, 1.25]: low top left, high bottom right, steeper along x."""
    cells = CONTENT_SIZE // CONTENT_CELL
    t = np.arange(cells, dtype=np.float64) / (cells - 1)
    return (0.75 + 0.5 * (2.0 * t[None, :] + t[:, None]) / 3.0).astype(np.float32)


def build_content_classifier() -> onnx.ModelProto:
    """The double (module doc): 1x1 conv -> 16x16 average pool -> x ramp -> global max -> (s, -s)."""
    cells = CONTENT_SIZE // CONTENT_CELL
    nodes = [
        helper.make_node("Conv", ["input", "w", "b"], ["pixel"], kernel_shape=[1, 1]),
        helper.make_node(
            "AveragePool",
            ["pixel"],
            ["cell"],
            kernel_shape=[CONTENT_CELL, CONTENT_CELL],
            strides=[CONTENT_CELL, CONTENT_CELL],
        ),
        helper.make_node("Mul", ["cell", "ramp"], ["weighted"]),
        helper.make_node("GlobalMaxPool", ["weighted"], ["peak"]),
        helper.make_node("Flatten", ["peak"], ["nsfw"], axis=1),
        helper.make_node("Neg", ["nsfw"], ["safe"]),
        helper.make_node("Concat", ["nsfw", "safe"], ["output"], axis=1),
    ]
    graph = helper.make_graph(
        nodes,
        "content_double",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 3, CONTENT_SIZE, CONTENT_SIZE])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["N", 2])],
        initializer=[
            numpy_helper.from_array(CONTENT_RGB_WEIGHTS.reshape(1, 3, 1, 1), "w"),
            numpy_helper.from_array(np.array([CONTENT_BIAS], dtype=np.float32), "b"),
            numpy_helper.from_array(content_ramp().reshape(1, 1, cells, cells), "ramp"),
        ],
    )
    return finish_model(graph)


def content_reference(picture_bgr: npt.NDArray[np.uint8]) -> float:
    """The score (NSFW minus safe) the double gives `picture_bgr` fed as the contract says, in numpy."""
    h, w = picture_bgr.shape[:2]
    scale = min(CONTENT_SIZE / h, CONTENT_SIZE / w)
    fw, fh = max(1, int(w * scale)), max(1, int(h * scale))
    x0, y0 = (CONTENT_SIZE - fw) // 2, (CONTENT_SIZE - fh) // 2
    square = np.zeros((CONTENT_SIZE, CONTENT_SIZE, 3), np.float64)
    fitted = cv2.resize(picture_bgr, (fw, fh), interpolation=cv2.INTER_LINEAR)
    square[y0 : y0 + fh, x0 : x0 + fw] = fitted[:, :, ::-1]  # RGB
    x = (square / 255.0 - 0.5) / 0.5
    pixel = x @ CONTENT_RGB_WEIGHTS.astype(np.float64) + CONTENT_BIAS
    cells = CONTENT_SIZE // CONTENT_CELL
    cell = pixel.reshape(cells, CONTENT_CELL, cells, CONTENT_CELL).mean(axis=(1, 3))
    s = float((cell * content_ramp()).max())
    return 2.0 * s
