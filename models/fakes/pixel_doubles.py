"""Contract-exact ONNX doubles of the per-pixel models, built with onnx.helper (no weights downloaded).

Each double has the real model's input/output names, shapes, dtypes and output order, and a tiny
deterministic graph whose outputs are easy to predict (the *_reference functions compute them in numpy):

* ArcFace (w600k_r50): 14x14 average pool -> flatten -> fixed random projection to 512-d.
* inswapper (fp32 / fp16): m = 0.5 * target + 0.5 * colour(source), colour = (tanh(source @ W) + 1) / 2
  per channel, bent by a fixed position ramp; plus a real 512x512 `buff2fs` emap as the last initializer.
* 2d106det landmarks: signature only.
* restorers (GPEN-BFR-256/512, GFPGAN 1.4, CodeFormer): a 1x1 colour mix in the normalised RGB space,
  y = RESTORER_MIX @ x + RESTORER_BIAS, bent by a fixed position ramp (+ CODEFORMER_WEIGHT_GAIN * weight).
* xseg occluder: visibility = clip(XSEG_BGR_WEIGHTS . x + XSEG_BIAS, 0, 1) on BGR x/255 = clip(2 + 4(R - G)):
  1 on grey and skin (red >= green), 0 on saturated green (the tests' "hand"), eroded by an
  asymmetric window.
* BiSeNet parser: a nearest-colour classifier, logit_k = 2 p_k . x - |p_k|^2 with p_k the normalised
  PARSER_PALETTE colour of class k and x the mean of a pixel and one offset from it, so a region
  painted in class k's colour is labelled k.

The ramps, windows and offsets are asymmetric on purpose: a wrapper that transposes or flips a crop
on the way in and undoes it on the way out gets a different answer.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import onnx
from onnx import TensorProto, helper, numpy_helper

from models.fakes.onnx_model import finish_model


def position_ramp(size: int) -> npt.NDArray[np.float32]:
    """(size, size) fixed ramp in [-1, 1]: -1 top left, +1 bottom right, twice as steep along x as
    along y, so a transposed or flipped picture meets other values of it."""
    t = np.arange(size, dtype=np.float64) / (size - 1)
    return ((2.0 * t[None, :] + t[:, None]) * (2.0 / 3.0) - 1.0).astype(np.float32)


def pooled_projection(
    name: str, io: tuple[str, str], size: int, pool: int, weight: npt.NDArray[np.float32]
) -> onnx.ModelProto:
    """`io[0]` [N,3,size,size] -> `pool`x`pool` average pool -> flatten -> MatMul with `weight`
    -> `io[1]` [N, weight's columns]: a double whose output depends on the whole picture."""
    nodes = [
        helper.make_node("AveragePool", [io[0]], ["pooled"], kernel_shape=[pool, pool], strides=[pool, pool]),
        helper.make_node("Flatten", ["pooled"], ["flat"], axis=1),
        helper.make_node("MatMul", ["flat", "w"], [io[1]]),
    ]
    graph = helper.make_graph(
        nodes,
        name,
        [helper.make_tensor_value_info(io[0], TensorProto.FLOAT, ["N", 3, size, size])],
        [helper.make_tensor_value_info(io[1], TensorProto.FLOAT, ["N", int(weight.shape[1])])],
        initializer=[numpy_helper.from_array(weight, "w")],
    )
    return finish_model(graph)


def build_arcface(seed: int = 0) -> onnx.ModelProto:
    """ArcFace double: `input.1` [N,3,112,112] -> 8x8 average pool -> flatten (192) -> MatMul with a
    seeded (192, 512) matrix -> `embedding` [N,512]. Same crop, same vector; different crops differ."""
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((3 * 8 * 8, 512)) / np.sqrt(3 * 8 * 8)).astype(np.float32)
    return pooled_projection("arcface_double", ("input.1", "embedding"), 112, 14, w)


def inswapper_weights(seed: int = 0) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
    """(W (512, 3) colour projection, emap (512, 512)) the inswapper double is built from."""
    rng = np.random.default_rng(seed)
    w = (2.0 * rng.standard_normal((512, 3))).astype(np.float32)
    emap = (rng.standard_normal((512, 512)) / np.sqrt(512)).astype(np.float32)
    return w, emap


INSWAPPER_BEND = 0.2  # times position_ramp(128): up to +-13 levels where the mix is mid-grey


def build_inswapper(
    seed: int = 0, fp16: bool = False, fp16_io: bool = False, *, size: int = 128, emap_name: str = "buff2fs"
) -> onnx.ModelProto:
    """inswapper double: `target` [1,3,128,128] + `source` [1,512] -> `output` [1,3,128,128] in [0,1]:
    m = 0.5 * target + 0.5 * (tanh(source @ W) + 1) / 2 (one colour per channel), then
    output = m + INSWAPPER_BEND * position_ramp(128) * m * (1 - m), so a crop transposed or flipped on
    the way in and back on the way out comes back different (inswapper_reference in numpy).

    fp16=True computes in float16 behind Casts with float32 I/O, as the published fp16 file is used;
    fp16_io=True also declares float16 inputs/output. The emap (`buff2fs`, 512x512) is the last
    initializer and unused by the graph, like the real file; in the fp16 doubles it is stored as
    float16, as a float16 converter would store it (loaders must accept both). size / emap_name:
    ReSwapper's files have the same contract at 128 or 256 px, their emap named `emap`."""
    fp16 = fp16 or fp16_io
    w, emap = inswapper_weights(seed)
    ct = np.float16 if fp16 else np.float32
    io_type = TensorProto.FLOAT16 if fp16_io else TensorProto.FLOAT
    nodes: list[onnx.NodeProto] = []
    target, source = "target", "source"
    if fp16 and not fp16_io:
        nodes.append(helper.make_node("Cast", ["target"], ["target_h"], to=TensorProto.FLOAT16))
        nodes.append(helper.make_node("Cast", ["source"], ["source_h"], to=TensorProto.FLOAT16))
        target, source = "target_h", "source_h"
    result = "output_h" if fp16 and not fp16_io else "output"
    nodes += [
        helper.make_node("MatMul", [source, "colour_w"], ["proj"]),
        helper.make_node("Tanh", ["proj"], ["t"]),
        helper.make_node("Add", ["t", "one"], ["t1"]),
        helper.make_node("Mul", ["t1", "half"], ["colour"]),
        helper.make_node("Reshape", ["colour", "colour_shape"], ["colour4"]),
        helper.make_node("Mul", [target, "half"], ["t_half"]),
        helper.make_node("Mul", ["colour4", "half"], ["c_half"]),
        helper.make_node("Add", ["t_half", "c_half"], ["mixed"]),
        # mixed + bend * mixed * (1 - mixed): position-dependent, and still in [0, 1].
        helper.make_node("Sub", ["one", "mixed"], ["rest"]),
        helper.make_node("Mul", ["mixed", "rest"], ["spread"]),
        helper.make_node("Mul", ["spread", "bend"], ["bent"]),
        helper.make_node("Add", ["mixed", "bent"], [result]),
    ]
    if fp16 and not fp16_io:
        nodes.append(helper.make_node("Cast", ["output_h"], ["output"], to=TensorProto.FLOAT))
    inits = [
        numpy_helper.from_array(w.astype(ct), "colour_w"),
        numpy_helper.from_array(np.array(1.0, dtype=ct), "one"),
        numpy_helper.from_array(np.array(0.5, dtype=ct), "half"),
        numpy_helper.from_array(np.array([1, 3, 1, 1], dtype=np.int64), "colour_shape"),
        numpy_helper.from_array((INSWAPPER_BEND * position_ramp(size)).astype(ct)[None, None], "bend"),
        numpy_helper.from_array(emap.astype(ct), emap_name),  # LAST: insightface reads initializer[-1]
    ]
    graph = helper.make_graph(
        nodes,
        "inswapper_double",
        [
            helper.make_tensor_value_info("target", io_type, [1, 3, size, size]),
            helper.make_tensor_value_info("source", io_type, [1, 512]),
        ],
        [helper.make_tensor_value_info("output", io_type, [1, 3, size, size])],
        initializer=inits,
    )
    return finish_model(graph)


def inswapper_reference(
    crop_bgr: npt.NDArray[np.uint8], latent: npt.ArrayLike, seed: int = 0
) -> npt.NDArray[np.uint8]:
    """What the fp32 inswapper double + InSwapper return for `crop_bgr` (128 or 256 px) and a
    (1, 512) latent, in numpy."""
    w, _ = inswapper_weights(seed)
    colour = (
        np.tanh(np.asarray(latent, dtype=np.float64).reshape(1, 512) @ w.astype(np.float64)) + 1.0
    ) / 2.0
    rgb = crop_bgr[:, :, ::-1].astype(np.float64) / 255.0
    m = 0.5 * rgb + 0.5 * colour.reshape(1, 1, 3)
    ramp = position_ramp(crop_bgr.shape[0]).astype(np.float64)
    out = m + INSWAPPER_BEND * ramp[:, :, None] * m * (1.0 - m)
    return np.clip(255.0 * out, 0.0, 255.0).astype(np.uint8)[:, :, ::-1]


def build_landmark_2d106() -> onnx.ModelProto:
    """Signature-only 2d106det double ([N,3,192,192] -> [N,212]) for router tests."""
    return pooled_projection("lmk_double", ("data", "fc1"), 192, 192, np.ones((3, 212), dtype=np.float32))


# Restorer doubles: a 1x1 colour mix in the restorers' normalised RGB space (rows: out R, G, B).
# Irregular values on purpose: with round ones (0.5, 0.3) many outputs land exactly on a .5 rounding
# tie, which float32 and a float64 reference would then break differently.
RESTORER_MIX = np.array(
    [[0.5137, 0.2963, 0.0112], [0.0291, 0.6071, 0.2873], [0.3117, 0.0219, 0.4889]], dtype=np.float32
)
RESTORER_BIAS = np.array([0.0931, -0.0517, 0.0073], dtype=np.float32)
CODEFORMER_WEIGHT_GAIN = np.array([0.2113, 0.0, -0.1979], dtype=np.float32)  # per RGB channel, x weight
RESTORER_BEND = 0.15  # times position_ramp(size): up to +-19 levels on mid-grey


def build_restorer(
    size: int,
    *,
    input_name: str = "input",
    with_weight: bool = False,
    weight_type: int = TensorProto.DOUBLE,
    fp16_io: bool = False,
) -> onnx.ModelProto:
    """Restorer double: `input_name` [1,3,size,size] (+ `weight` [1] for CodeFormer) -> `output`
    [1,3,size,size]: y = RESTORER_MIX @ x + RESTORER_BIAS per pixel, bent by position,
    out = y + RESTORER_BEND * position_ramp(size) * (1 - y^2) (+ CODEFORMER_WEIGHT_GAIN * weight),
    so a crop transposed or flipped on the way in and back on the way out comes back different.
    fp16_io: float16 image input and output (the maths stays float32 inside)."""
    nodes: list[onnx.NodeProto] = []
    conv_in = input_name
    if fp16_io:
        nodes.append(helper.make_node("Cast", [input_name], ["input_f32"], to=TensorProto.FLOAT))
        conv_in = "input_f32"
    nodes += [
        helper.make_node("Conv", [conv_in, "mix_w", "mix_b"], ["flat"], kernel_shape=[1, 1]),
        # flat + bend * (1 - flat^2): position-dependent, and [-1, 1] stays [-1, 1].
        helper.make_node("Mul", ["flat", "flat"], ["sq"]),
        helper.make_node("Sub", ["one", "sq"], ["room"]),
        helper.make_node("Mul", ["room", "bend"], ["bent"]),
        helper.make_node("Add", ["flat", "bent"], ["mixed"]),
    ]
    inits = [
        numpy_helper.from_array(RESTORER_MIX.reshape(3, 3, 1, 1), "mix_w"),
        numpy_helper.from_array(RESTORER_BIAS, "mix_b"),
        numpy_helper.from_array(np.array(1.0, dtype=np.float32), "one"),
        numpy_helper.from_array((RESTORER_BEND * position_ramp(size))[None, None], "bend"),
    ]
    image_type = TensorProto.FLOAT16 if fp16_io else TensorProto.FLOAT
    inputs = [helper.make_tensor_value_info(input_name, image_type, [1, 3, size, size])]
    if with_weight:
        inputs.append(helper.make_tensor_value_info("weight", weight_type, [1]))
        inits.append(numpy_helper.from_array(CODEFORMER_WEIGHT_GAIN.reshape(1, 3, 1, 1), "gain"))
        nodes += [
            helper.make_node("Cast", ["weight"], ["weight_f"], to=TensorProto.FLOAT),
            helper.make_node("Mul", ["weight_f", "gain"], ["shift"]),
            helper.make_node("Add", ["mixed", "shift"], ["restored"]),
        ]
    else:
        nodes.append(helper.make_node("Identity", ["mixed"], ["restored"]))
    if fp16_io:
        nodes.append(helper.make_node("Cast", ["restored"], ["output"], to=TensorProto.FLOAT16))
    else:
        nodes.append(helper.make_node("Identity", ["restored"], ["output"]))
    graph = helper.make_graph(
        nodes,
        "restorer_double",
        inputs,
        [helper.make_tensor_value_info("output", image_type, [1, 3, size, size])],
        initializer=inits,
    )
    return finish_model(graph)


def restorer_reference(crop_bgr: npt.NDArray[np.uint8], weight: float | None = None) -> npt.NDArray[np.uint8]:
    """What a restorer double + FaceRestorer return for `crop_bgr`, in numpy (the contract's maths)."""
    x = crop_bgr[:, :, ::-1].astype(np.float64) / 255.0
    x = (x - 0.5) / 0.5
    y = x @ RESTORER_MIX.astype(np.float64).T + RESTORER_BIAS
    bend = RESTORER_BEND * position_ramp(crop_bgr.shape[0]).astype(np.float64)[:, :, None]
    y = y + bend * (1.0 - y * y)
    if weight is not None:
        y = y + CODEFORMER_WEIGHT_GAIN * weight
    y = (np.clip(y, -1.0, 1.0) + 1.0) / 2.0 * 255.0
    return np.rint(y)[:, :, ::-1].astype(np.uint8)


XSEG_BGR_WEIGHTS = np.array([0.0, -4.0, 4.0], dtype=np.float32)
XSEG_BIAS = 2.0
XSEG_ERODE = (7, 4)  # rows, columns: an asymmetric window, so transposes and flips show


def build_xseg() -> onnx.ModelProto:
    """xseg double: `input` [1,256,256,3] NHWC BGR x/255 -> `output` [1,256,256,1]: the visibility
    v = clip(x . XSEG_BGR_WEIGHTS + XSEG_BIAS, 0, 1), then its minimum over the XSEG_ERODE window
    below and right of each pixel (xseg_reference in numpy)."""
    kh, kw = XSEG_ERODE
    nodes = [
        helper.make_node("MatMul", ["input", "w"], ["lin"]),
        helper.make_node("Add", ["lin", "one"], ["shifted"]),
        helper.make_node("Clip", ["shifted", "zero", "one_s"], ["visible"]),
        # [1,256,256,1] and [1,1,256,256] hold the same values in the same order.
        helper.make_node("Reshape", ["visible", "nchw"], ["visible_nchw"]),
        helper.make_node("Neg", ["visible_nchw"], ["hidden"]),
        # min over rows y..y+kh-1, columns x..x+kw-1: the occluded area reaches up and left.
        helper.make_node(
            "MaxPool", ["hidden"], ["hidden_max"], kernel_shape=[kh, kw], pads=[0, 0, kh - 1, kw - 1]
        ),
        helper.make_node("Neg", ["hidden_max"], ["eroded"]),
        helper.make_node("Reshape", ["eroded", "nhwc"], ["output"]),
    ]
    graph = helper.make_graph(
        nodes,
        "xseg_double",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 256, 256, 3])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 256, 256, 1])],
        initializer=[
            numpy_helper.from_array(XSEG_BGR_WEIGHTS.reshape(3, 1), "w"),
            numpy_helper.from_array(np.array([XSEG_BIAS], dtype=np.float32), "one"),
            numpy_helper.from_array(np.array(0.0, dtype=np.float32), "zero"),
            numpy_helper.from_array(np.array(1.0, dtype=np.float32), "one_s"),
            numpy_helper.from_array(np.array([1, 1, 256, 256], dtype=np.int64), "nchw"),
            numpy_helper.from_array(np.array([1, 256, 256, 1], dtype=np.int64), "nhwc"),
        ],
    )
    return finish_model(graph)


def xseg_reference(crop_bgr: npt.NDArray[np.uint8]) -> npt.NDArray[np.float32]:
    """What the xseg double + Occluder return for `crop_bgr`, in numpy."""
    x = crop_bgr.astype(np.float32) / np.float32(255.0)
    v = np.clip(x @ XSEG_BGR_WEIGHTS + np.float32(XSEG_BIAS), 0.0, 1.0)
    kh, kw = XSEG_ERODE
    padded = np.pad(v, ((0, kh - 1), (0, kw - 1)), constant_values=1.0)
    windows = np.lib.stride_tricks.sliding_window_view(padded, (kh, kw))
    return np.asarray(windows.min(axis=(2, 3)), dtype=np.float32)


# One RGB colour per BiSeNet class: paint a region in PARSER_PALETTE[k] and the double labels it k.
PARSER_PALETTE = np.array(
    [
        (0, 0, 0),  # 0 background
        (230, 180, 150),  # 1 skin
        (120, 80, 40),  # 2 left brow
        (120, 40, 80),  # 3 right brow
        (255, 255, 255),  # 4 left eye
        (190, 255, 255),  # 5 right eye
        (0, 255, 255),  # 6 glasses
        (255, 0, 255),  # 7 left ear
        (255, 128, 255),  # 8 right ear
        (255, 255, 0),  # 9 earring
        (250, 120, 100),  # 10 nose
        (120, 0, 0),  # 11 mouth
        (200, 40, 60),  # 12 upper lip
        (160, 20, 40),  # 13 lower lip
        (0, 128, 0),  # 14 neck
        (0, 255, 0),  # 15 necklace
        (0, 0, 255),  # 16 cloth
        (60, 40, 20),  # 17 hair
        (128, 128, 128),  # 18 hat
    ],
    dtype=np.float64,
)
PARSER_OFFSET = (2, 1)  # rows, columns
IMAGENET_MEAN = np.array([0.485, 0.456, 0.406])
IMAGENET_STD = np.array([0.229, 0.224, 0.225])


def build_bisenet() -> onnx.ModelProto:
    """BiSeNet double: `input` [N,3,512,512] (RGB, ImageNet mean/std) -> `output` [N,19,512,512]:
    logit_k = 2 p_k . x - |p_k|^2, p_k = PARSER_PALETTE[k] normalised the same way (nearest colour),
    where x is the mean of the pixel and the one PARSER_OFFSET below and right of it (edge-padded):
    an asymmetric pair, so transposes and flips show at every edge."""
    protos = (PARSER_PALETTE / 255.0 - IMAGENET_MEAN) / IMAGENET_STD  # (19, 3)
    dy, dx = PARSER_OFFSET
    w = np.zeros((19, 3, dy + 1, dx + 1), dtype=np.float32)
    w[:, :, 0, 0] = w[:, :, dy, dx] = protos  # 2 p . mean of the two pixels = p . (x0 + x1)
    b = (-np.square(protos).sum(axis=1)).astype(np.float32)
    pads = np.array([0, 0, 0, 0, 0, 0, dy, dx], dtype=np.int64)
    graph = helper.make_graph(
        [
            helper.make_node("Pad", ["input", "pads"], ["padded"], mode="edge"),
            helper.make_node("Conv", ["padded", "w", "b"], ["output"], kernel_shape=[dy + 1, dx + 1]),
        ],
        "bisenet_double",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 3, 512, 512])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["N", 19, 512, 512])],
        initializer=[
            numpy_helper.from_array(w, "w"),
            numpy_helper.from_array(b, "b"),
            numpy_helper.from_array(pads, "pads"),
        ],
    )
    return finish_model(graph)
