"""Contract-exact ONNX doubles of the face-swap families besides inswapper, and of the embedding
converters; each with its numpy reference.

Signatures are the published ones (docs/model-contracts.md, "Face swappers"), stated here on
their own rather than read from the wrappers, so a wrapper with a wrong fact disagrees with its
double. All are fixed at batch 1, as the published files are.

A swapper double computes, in the model's own normalised space:

    colour = tanh(source @ W)                     (identity vector; W scaled to its typical norm)
           | tanh(M_s @ moments(source) + b_s)    (source picture: its mean colour, and its colour
                                                   moments along x and along y)
    y      = MIX @ target + BEND * ramp_S + colour (per pixel; MIX mixes the channels)
    output = sigmoid(y)  (unit range)  |  tanh(y)  (signed range)

The channel mix, the asymmetric position ramp and the moments make a transposed, flipped,
unnormalised or channel-swapped input come back different. HyperSwap's double adds its `mask`
output. A converter double normalises its input (as CrossFace does inside) and maps it to a
vector of the converters' typical norm, CONVERTER_NORM.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

import numpy as np
import numpy.typing as npt
import onnx
from onnx import TensorProto, helper, numpy_helper

from models.fakes.onnx_model import finish_model
from models.fakes.pixel_doubles import position_ramp

SWAP_MIX = np.array(
    [[0.8213, 0.2147, -0.1371], [-0.0913, 0.7349, 0.2519], [0.1733, -0.2011, 0.9127]], dtype=np.float32
)
SWAP_BEND = 0.35
# Rows: the colour's R, G, B. Columns: the picture's mean R, G, B, then its R, G, B moments along
# x, then along y (a transposed or mirrored picture gives another colour).
SOURCE_PICTURE_MIX = np.array(
    [
        [1.6, -0.7, 0.4, 16.2, -8.9, 4.7, -12.4, 6.3, 14.1],
        [0.5, 1.3, -1.1, -9.8, 15.5, 5.2, 10.6, -15.9, 3.4],
        [-0.5, 0.6, 1.7, 7.7, 4.9, -16.3, -6.1, 12.8, -9.7],
    ],
    dtype=np.float32,
)
# Centres the mean-colour terms on mid-grey, so the moments' terms stay off tanh's flat ends.
SOURCE_PICTURE_BIAS = (
    -0.5 * SOURCE_PICTURE_MIX[:, :3].sum(axis=1) + np.array([0.21, -0.17, 0.05])
).astype(np.float32)
CONVERTER_NORM = 17.35  # the norm of CrossFace's output for a real face
EMBEDDING = 512


@dataclass(frozen=True, slots=True)
class SwapperDouble:
    """One published swapper file's signature and what its double computes."""

    size: int
    source: tuple[int, ...]  # the `source` input's shape
    output: Literal["unit", "signed"]
    source_norm: float = 1.0  # the identity vector's typical norm (scales W)
    mask_output: bool = False  # HyperSwap's second output
    order: tuple[str, str] = ("source", "target")  # input order in the graph


_VECTOR = (1, EMBEDDING)
DOUBLES: Mapping[str, SwapperDouble] = MappingProxyType(
    {
        "hyperswap_1a_256.onnx": SwapperDouble(256, _VECTOR, "signed", mask_output=True),
        "hyperswap_1b_256.onnx": SwapperDouble(256, _VECTOR, "signed", mask_output=True),
        "hyperswap_1c_256.onnx": SwapperDouble(256, _VECTOR, "signed", mask_output=True),
        "simswap_256.onnx": SwapperDouble(256, _VECTOR, "unit"),
        "simswap_unofficial_512.onnx": SwapperDouble(512, _VECTOR, "unit"),
        "ghost_1_256.onnx": SwapperDouble(256, _VECTOR, "signed", source_norm=CONVERTER_NORM),
        "ghost_2_256.onnx": SwapperDouble(256, _VECTOR, "signed", source_norm=CONVERTER_NORM),
        "ghost_3_256.onnx": SwapperDouble(256, _VECTOR, "signed", source_norm=CONVERTER_NORM),
        "hififace_unofficial_256.onnx": SwapperDouble(256, _VECTOR, "signed"),
        "blendswap_256.onnx": SwapperDouble(256, (1, 3, 112, 112), "unit"),
        "uniface_256.onnx": SwapperDouble(256, (1, 3, 256, 256), "signed"),
    }
)
CONVERTER_FILES = ("crossface_ghost.onnx", "crossface_simswap.onnx", "crossface_hififace.onnx")


def _seed_of(name: str) -> int:
    return sum(ord(c) * (i + 1) for i, c in enumerate(name)) % 10_000


def swapper_weights(name: str) -> npt.NDArray[np.float32]:
    """The identity projection W (512, 3) of the double called `name` (scaled to its source norm)."""
    spec = DOUBLES[name]
    rng = np.random.default_rng(_seed_of(name))
    return (rng.standard_normal((EMBEDDING, 3)) / spec.source_norm).astype(np.float32)


def _moment_maps(side: int) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
    """(side, side) maps from -1 to 1 along x and along y."""
    t = np.linspace(-1.0, 1.0, side, dtype=np.float32)
    return np.tile(t[None, :], (side, 1)), np.tile(t[:, None], (1, side))


def _picture_nodes(side: int) -> tuple[list[onnx.NodeProto], list[onnx.TensorProto]]:
    """source [1,3,s,s] -> `colour` [1,3] from its mean colour and colour moments."""
    along_x, along_y = _moment_maps(side)
    inits = [
        numpy_helper.from_array(along_x[None, None], "source_x"),
        numpy_helper.from_array(along_y[None, None], "source_y"),
        numpy_helper.from_array(SOURCE_PICTURE_MIX.T.copy(), "source_mix"),
        numpy_helper.from_array(SOURCE_PICTURE_BIAS, "source_bias"),
    ]
    nodes = [
        helper.make_node("ReduceMean", ["source"], ["mean0"], axes=[2, 3], keepdims=0),
        helper.make_node("Mul", ["source", "source_x"], ["weighted_x"]),
        helper.make_node("ReduceMean", ["weighted_x"], ["mean_x"], axes=[2, 3], keepdims=0),
        helper.make_node("Mul", ["source", "source_y"], ["weighted_y"]),
        helper.make_node("ReduceMean", ["weighted_y"], ["mean_y"], axes=[2, 3], keepdims=0),
        helper.make_node("Concat", ["mean0", "mean_x", "mean_y"], ["moments"], axis=1),
        helper.make_node("MatMul", ["moments", "source_mix"], ["mixed_source"]),
        helper.make_node("Add", ["mixed_source", "source_bias"], ["source_code"]),
        helper.make_node("Tanh", ["source_code"], ["colour"]),
    ]
    return nodes, inits


def build_swapper_double(name: str) -> onnx.ModelProto:
    """The double of the published file `name` (a key of DOUBLES)."""
    spec = DOUBLES[name]
    s = spec.size
    nodes: list[onnx.NodeProto] = []
    inits = [
        numpy_helper.from_array(SWAP_MIX.reshape(3, 3, 1, 1), "mix_w"),
        numpy_helper.from_array(np.zeros(3, dtype=np.float32), "mix_b"),
        numpy_helper.from_array((SWAP_BEND * position_ramp(s))[None, None].astype(np.float32), "bend"),
        numpy_helper.from_array(np.array([1, 3, 1, 1], dtype=np.int64), "colour_shape"),
    ]
    if len(spec.source) == 2:
        inits.append(numpy_helper.from_array(swapper_weights(name), "w"))
        nodes += [
            helper.make_node("MatMul", ["source", "w"], ["proj"]),
            helper.make_node("Tanh", ["proj"], ["colour"]),
        ]
    else:
        picture_nodes, picture_inits = _picture_nodes(spec.source[2])
        nodes += picture_nodes
        inits += picture_inits
    nodes += [
        helper.make_node("Reshape", ["colour", "colour_shape"], ["colour4"]),
        helper.make_node("Conv", ["target", "mix_w", "mix_b"], ["mixed"], kernel_shape=[1, 1]),
        helper.make_node("Add", ["mixed", "bend"], ["bent"]),
        helper.make_node("Add", ["bent", "colour4"], ["y"]),
        helper.make_node("Sigmoid" if spec.output == "unit" else "Tanh", ["y"], ["output"]),
    ]
    outputs = [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 3, s, s])]
    if spec.mask_output:
        inits.append(numpy_helper.from_array(np.array([4.0], dtype=np.float32), "mask_gain"))
        nodes += [
            helper.make_node("ReduceMean", ["target"], ["grey"], axes=[1], keepdims=1),
            helper.make_node("Mul", ["grey", "mask_gain"], ["mask_logit"]),
            helper.make_node("Sigmoid", ["mask_logit"], ["mask"]),
        ]
        outputs.append(helper.make_tensor_value_info("mask", TensorProto.FLOAT, [1, 1, s, s]))
    declared = {
        "source": helper.make_tensor_value_info("source", TensorProto.FLOAT, list(spec.source)),
        "target": helper.make_tensor_value_info("target", TensorProto.FLOAT, [1, 3, s, s]),
    }
    graph = helper.make_graph(
        nodes, f"{name}_double", [declared[n] for n in spec.order], outputs, initializer=inits
    )
    return finish_model(graph)


def swapper_reference(
    name: str, target: npt.ArrayLike, source: npt.ArrayLike
) -> npt.NDArray[np.float64]:
    """What the double `name` outputs ([1,3,S,S], float64) for the given input tensors."""
    spec = DOUBLES[name]
    t = np.asarray(target, dtype=np.float64).reshape(3, spec.size, spec.size)
    src = np.asarray(source, dtype=np.float64)
    if len(spec.source) == 2:
        colour = np.tanh(src.reshape(1, EMBEDDING) @ swapper_weights(name).astype(np.float64))[0]
    else:
        side = spec.source[2]
        picture = src.reshape(3, side, side)
        along_x, along_y = (m.astype(np.float64) for m in _moment_maps(side))
        moments = np.concatenate(
            [
                picture.mean(axis=(1, 2)),
                (picture * along_x).mean(axis=(1, 2)),
                (picture * along_y).mean(axis=(1, 2)),
            ]
        )
        colour = np.tanh(SOURCE_PICTURE_MIX.astype(np.float64) @ moments + SOURCE_PICTURE_BIAS)
    y = np.einsum("oc,chw->ohw", SWAP_MIX.astype(np.float64), t)
    y = y + SWAP_BEND * position_ramp(spec.size).astype(np.float64) + colour[:, None, None]
    out = 1.0 / (1.0 + np.exp(-y)) if spec.output == "unit" else np.tanh(y)
    return np.asarray(out[None], dtype=np.float64)


def converter_weights(name: str) -> npt.NDArray[np.float32]:
    """The converter double's (512, 512) map: orthonormal columns, so a unit input keeps norm 1."""
    rng = np.random.default_rng(_seed_of(name))
    q, _ = np.linalg.qr(rng.standard_normal((EMBEDDING, EMBEDDING)))
    return q.astype(np.float32)


def build_converter_double(name: str) -> onnx.ModelProto:
    """`input` [1,512] -> L2-normalise -> x W x CONVERTER_NORM -> `output` [1,512]."""
    graph = helper.make_graph(
        [
            helper.make_node("LpNormalization", ["input"], ["unit"], axis=-1, p=2),
            helper.make_node("MatMul", ["unit", "w"], ["turned"]),
            helper.make_node("Mul", ["turned", "norm"], ["output"]),
        ],
        f"{name}_double",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, EMBEDDING])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, EMBEDDING])],
        initializer=[
            numpy_helper.from_array(converter_weights(name), "w"),
            numpy_helper.from_array(np.array(CONVERTER_NORM, dtype=np.float32), "norm"),
        ],
    )
    return finish_model(graph)


def converter_reference(name: str, raw: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """What the converter double `name` outputs ((1, 512) float64) for a raw embedding."""
    x = np.asarray(raw, dtype=np.float64).reshape(1, EMBEDDING)
    turned = (x / np.linalg.norm(x)) @ converter_weights(name).astype(np.float64)
    return np.asarray(turned * CONVERTER_NORM, dtype=np.float64)


def swapper_doubles() -> dict[str, onnx.ModelProto]:
    """Every swapper and converter double, by file name."""
    built = {name: build_swapper_double(name) for name in DOUBLES}
    built.update({name: build_converter_double(name) for name in CONVERTER_FILES})
    return built


__all__ = [
    "CONVERTER_FILES",
    "CONVERTER_NORM",
    "DOUBLES",
    "SwapperDouble",
    "build_converter_double",
    "build_swapper_double",
    "converter_reference",
    "swapper_doubles",
    "swapper_reference",
    "swapper_weights",
]
