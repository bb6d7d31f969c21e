"""Contract-exact ONNX doubles of the real models, built with onnx.helper (no weights downloaded).

Each double has the real model's input/output names, shapes, dtypes and output order, and a tiny
deterministic graph whose outputs are easy to predict:

* SCRFD (det_10g / scrfd_2.5g): ignores the picture and always emits the configured faces.
* ArcFace (w600k_r50): 14x14 average pool -> flatten -> fixed random projection to 512-d.
* inswapper (fp32 / fp16): output = 0.5 * target + 0.5 * colour(source), colour = (tanh(source @ W) + 1) / 2
  per channel, plus a real 512x512 `buff2fs` emap as the last initializer.
* restorers (GPEN-BFR-256/512, GFPGAN 1.4, CodeFormer): a 1x1 colour mix in the normalised RGB space,
  out = RESTORER_MIX @ x + RESTORER_BIAS (+ CODEFORMER_WEIGHT_GAIN * weight for CodeFormer).
* xseg occluder: visibility = clip(XSEG_BGR_WEIGHTS . x + XSEG_BIAS, 0, 1) on BGR x/255 = clip(2 + 4(R - G)):
  1 on grey and skin (red >= green), 0 on saturated green (the tests' "hand").
* BiSeNet parser: a nearest-colour classifier, logit_k = 2 p_k . x - |p_k|^2 with p_k the normalised
  PARSER_PALETTE colour of class k, so a pixel painted in class k's colour is labelled k.

`python -m models.fakes.doubles DIR` writes them under the real file names.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
import onnx
from onnx import TensorProto, helper, numpy_helper

STRIDES = (8, 16, 32)
ANCHORS = 2
DET_SIZE = 640
OPSET = 11  # like the real inswapper_128; every double uses it
IR_VERSION = 6  # the IR version that goes with opset 11

BACKGROUND_SCORE = 0.01


class FaceSpec(NamedTuple):
    """A face for the SCRFD double, in 640x640 detector-input pixels."""

    box: Sequence[float]  # x1, y1, x2, y2
    kps: Sequence[Sequence[float]] | npt.NDArray[Any]  # (5, 2)
    score: float


# One plausible frontal face, centred horizontally and high enough (y 100..260) to lie inside the
# letterboxed picture for 16:9 (rows 0..360 of the canvas), 4:3 and square frames.
DEFAULT_FACE = FaceSpec(
    box=(260.0, 100.0, 380.0, 260.0),
    kps=((292.0, 160.0), (348.0, 160.0), (320.0, 195.0), (297.0, 228.0), (343.0, 228.0)),
    score=0.92,
)


def det_scale_for(width: int, height: int, size: int = DET_SIZE) -> float:
    """SCRFD's det_scale for a frame (insightface's letterbox: new_h / img_h, int-truncated)."""
    ratio = height / width
    new_h = size if ratio > 1.0 else int(size * ratio)
    return new_h / height


def face_in_frame(
    face: FaceSpec, width: int, height: int
) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
    """(box (4,), kps (5,2)) that SCRFD should report for `face` on a width x height frame."""
    s = det_scale_for(width, height)
    box = np.asarray(face.box, dtype=np.float32) / np.float32(s)
    kps = np.asarray(face.kps, dtype=np.float32).reshape(5, 2) / np.float32(s)
    return box, kps


def _choose_stride(box: Sequence[float]) -> int:
    """The stride whose anchors suit the face size (SCRFD's anchors: 16/32 px at 8, 64/128 at 16,
    256/512 at 32; boundaries at their geometric means)."""
    side = max(box[2] - box[0], box[3] - box[1])
    if side < 45:
        return 8
    if side < 181:
        return 16
    return 32


class _Row(NamedTuple):
    """One encoded face: the anchor row it sits on and the values of its three outputs."""

    row: int
    score: float
    distances: list[float]  # left, top, right, bottom, in strides
    offsets: list[float]  # 5 x (dx, dy), in strides


def _encode_scrfd(faces: Sequence[FaceSpec], det_size: int = DET_SIZE) -> dict[int, list[_Row]]:
    """Per stride, the anchor rows that carry a face (nearest free anchor to the face's centre)."""
    grids = {s: det_size // s for s in STRIDES}
    taken: set[tuple[int, int]] = set()  # (stride, anchor row)
    rows: dict[int, list[_Row]] = {s: [] for s in STRIDES}
    for face in faces:
        box = [float(v) for v in face.box]
        kps = np.asarray(face.kps, dtype=np.float64).reshape(5, 2)
        s = _choose_stride(box)
        g = grids[s]
        cx, cy = (box[0] + box[2]) / 2.0, (box[1] + box[3]) / 2.0
        ys, xs = np.mgrid[:g, :g]
        dist = (xs * s - cx) ** 2 + (ys * s - cy) ** 2
        for cell in np.argsort(dist.ravel(), kind="stable"):
            free = [a for a in range(ANCHORS) if (s, int(cell) * ANCHORS + a) not in taken]
            if free:
                row = int(cell) * ANCHORS + free[0]
                break
        else:  # pragma: no cover - 6400+ cells
            raise ValueError("no free anchor")
        taken.add((s, row))
        ax, ay = float(xs.ravel()[cell] * s), float(ys.ravel()[cell] * s)
        distances = [(ax - box[0]) / s, (ay - box[1]) / s, (box[2] - ax) / s, (box[3] - ay) / s]
        offsets = ((kps - np.array([ax, ay])) / s).ravel().tolist()
        rows[s].append(_Row(row, float(face.score), distances, offsets))
    return rows


def build_scrfd(
    faces: Sequence[FaceSpec | tuple[Any, Any, float]],
    input_name: str = "input.1",
    *,
    with_kps: bool = True,
    det_size: int = DET_SIZE,
) -> onnx.ModelProto:
    """An SCRFD double whose nine outputs (scores x3, boxes x3, kps x3; 2-D, sized for a
    det_size x det_size input) encode `faces` (given in 640x640 detector-input pixels, scaled to
    det_size) at the anchor nearest each face's centre, on the stride that suits its size. Every
    other anchor scores BACKGROUND_SCORE. The input is dynamic [1,3,'h','w'] but the outputs are
    only right for a det_size x det_size input (the picture is ignored), so a frame gives the same
    faces in frame pixels at any det_size. with_kps=False gives the 6-output variant (no landmarks).
    Near-zero cost: only one input value is read."""
    if det_size % max(STRIDES) != 0:
        raise ValueError(f"det_size must be a multiple of {max(STRIDES)}, got {det_size}")
    k = det_size / DET_SIZE
    specs = [
        FaceSpec([float(v) * k for v in spec.box], np.asarray(spec.kps, dtype=np.float64) * k, spec.score)
        for spec in (FaceSpec(*f) for f in faces)
    ]
    encoded = _encode_scrfd(specs, det_size)
    nodes: list[onnx.NodeProto] = []
    inits: list[onnx.TensorProto] = []
    # Keep the input alive: zero = 0 * (one input value), added to every output, so ORT cannot
    # prune it; reading one value rather than the whole picture keeps the double near-free.
    for name, value in (("first_starts", [0, 0, 0, 0]), ("first_ends", [1, 1, 1, 1])):
        inits.append(numpy_helper.from_array(np.array(value, dtype=np.int64), name))
    nodes.append(helper.make_node("Slice", [input_name, "first_starts", "first_ends"], ["in_first"]))
    nodes.append(helper.make_node("ReduceMean", ["in_first"], ["in_mean"], keepdims=0))
    inits.append(numpy_helper.from_array(np.array(0.0, dtype=np.float32), "zero_f"))
    nodes.append(helper.make_node("Mul", ["in_mean", "zero_f"], ["zero"]))

    groups = [("score", 1, BACKGROUND_SCORE), ("bbox", 4, 1.0)]
    if with_kps:
        groups.append(("kps", 10, 0.0))
    outputs: list[onnx.ValueInfoProto] = []
    for gi, (prefix, width, background) in enumerate(groups):
        for s in STRIDES:
            rows = (det_size // s) ** 2 * ANCHORS
            name = f"{prefix}_{s}"
            shape_name, bg_name = f"{name}_shape", f"{name}_bg"
            inits.append(numpy_helper.from_array(np.array([rows, width], dtype=np.int64), shape_name))
            nodes.append(
                helper.make_node(
                    "ConstantOfShape",
                    [shape_name],
                    [bg_name],
                    value=numpy_helper.from_array(np.array([background], dtype=np.float32)),
                )
            )
            entries = encoded[s]
            dense = bg_name
            if entries:
                idx = np.array([[e.row] for e in entries], dtype=np.int64)
                values = (
                    [[e.score] for e in entries],
                    [e.distances for e in entries],
                    [e.offsets for e in entries],
                )
                upd = np.array(values[gi], dtype=np.float32)
                inits.append(numpy_helper.from_array(idx, f"{name}_idx"))
                inits.append(numpy_helper.from_array(upd, f"{name}_upd"))
                dense = f"{name}_dense"
                nodes.append(helper.make_node("ScatterND", [bg_name, f"{name}_idx", f"{name}_upd"], [dense]))
            nodes.append(helper.make_node("Add", [dense, "zero"], [name]))
            outputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, [rows, width]))
    graph = helper.make_graph(
        nodes,
        "scrfd_double",
        [helper.make_tensor_value_info(input_name, TensorProto.FLOAT, [1, 3, "h", "w"])],
        outputs,
        initializer=inits,
    )
    return _finish(graph)


def build_arcface(seed: int = 0) -> onnx.ModelProto:
    """ArcFace double: `input.1` [N,3,112,112] -> 8x8 average pool -> flatten (192) -> MatMul with a
    seeded (192, 512) matrix -> `embedding` [N,512]. Same crop, same vector; different crops differ."""
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((3 * 8 * 8, 512)) / np.sqrt(3 * 8 * 8)).astype(np.float32)
    nodes = [
        helper.make_node("AveragePool", ["input.1"], ["pooled"], kernel_shape=[14, 14], strides=[14, 14]),
        helper.make_node("Flatten", ["pooled"], ["flat"], axis=1),
        helper.make_node("MatMul", ["flat", "proj_w"], ["embedding"]),
    ]
    graph = helper.make_graph(
        nodes,
        "arcface_double",
        [helper.make_tensor_value_info("input.1", TensorProto.FLOAT, ["N", 3, 112, 112])],
        [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, ["N", 512])],
        initializer=[numpy_helper.from_array(w, "proj_w")],
    )
    return _finish(graph)


def inswapper_weights(seed: int = 0) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
    """(W (512, 3) colour projection, emap (512, 512)) the inswapper double is built from."""
    rng = np.random.default_rng(seed)
    w = (2.0 * rng.standard_normal((512, 3))).astype(np.float32)
    emap = (rng.standard_normal((512, 512)) / np.sqrt(512)).astype(np.float32)
    return w, emap


def build_inswapper(seed: int = 0, fp16: bool = False, fp16_io: bool = False) -> onnx.ModelProto:
    """inswapper double: `target` [1,3,128,128] + `source` [1,512] -> `output` [1,3,128,128] in [0,1],
    output = 0.5 * target + 0.5 * (tanh(source @ W) + 1) / 2 (one colour per channel).

    fp16=True computes in float16 behind Casts with float32 I/O, as the published fp16 file is used;
    fp16_io=True also declares float16 inputs/output. The emap (`buff2fs`, 512x512) is the last
    initializer and unused by the graph, like the real file; in the fp16 doubles it is stored as
    float16, as a float16 converter would store it (loaders must accept both)."""
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
        helper.make_node("Add", ["t_half", "c_half"], [result]),
    ]
    if fp16 and not fp16_io:
        nodes.append(helper.make_node("Cast", ["output_h"], ["output"], to=TensorProto.FLOAT))
    inits = [
        numpy_helper.from_array(w.astype(ct), "colour_w"),
        numpy_helper.from_array(np.array(1.0, dtype=ct), "one"),
        numpy_helper.from_array(np.array(0.5, dtype=ct), "half"),
        numpy_helper.from_array(np.array([1, 3, 1, 1], dtype=np.int64), "colour_shape"),
        numpy_helper.from_array(emap.astype(ct), "buff2fs"),  # LAST: insightface reads initializer[-1]
    ]
    graph = helper.make_graph(
        nodes,
        "inswapper_double",
        [
            helper.make_tensor_value_info("target", io_type, [1, 3, 128, 128]),
            helper.make_tensor_value_info("source", io_type, [1, 512]),
        ],
        [helper.make_tensor_value_info("output", io_type, [1, 3, 128, 128])],
        initializer=inits,
    )
    return _finish(graph)


def build_landmark_2d106() -> onnx.ModelProto:
    """Signature-only 2d106det double ([N,3,192,192] -> [N,212]) for router tests."""
    nodes = [
        helper.make_node("AveragePool", ["data"], ["pooled"], kernel_shape=[192, 192]),
        helper.make_node("Flatten", ["pooled"], ["flat"], axis=1),
        helper.make_node("MatMul", ["flat", "w"], ["fc1"]),
    ]
    graph = helper.make_graph(
        nodes,
        "lmk_double",
        [helper.make_tensor_value_info("data", TensorProto.FLOAT, ["N", 3, 192, 192])],
        [helper.make_tensor_value_info("fc1", TensorProto.FLOAT, ["N", 212])],
        initializer=[numpy_helper.from_array(np.ones((3, 212), dtype=np.float32), "w")],
    )
    return _finish(graph)


# Restorer doubles: a 1x1 colour mix in the restorers' normalised RGB space (rows: out R, G, B).
# Irregular values on purpose: with round ones (0.5, 0.3) many outputs land exactly on a .5 rounding
# tie, which float32 and a float64 reference would then break differently.
RESTORER_MIX = np.array(
    [[0.5137, 0.2963, 0.0112], [0.0291, 0.6071, 0.2873], [0.3117, 0.0219, 0.4889]], dtype=np.float32
)
RESTORER_BIAS = np.array([0.0931, -0.0517, 0.0073], dtype=np.float32)
CODEFORMER_WEIGHT_GAIN = np.array([0.2113, 0.0, -0.1979], dtype=np.float32)  # per RGB channel, x weight


def build_restorer(
    size: int,
    *,
    input_name: str = "input",
    with_weight: bool = False,
    weight_type: int = TensorProto.DOUBLE,
    fp16_io: bool = False,
) -> onnx.ModelProto:
    """Restorer double: `input_name` [1,3,size,size] (+ `weight` [1] for CodeFormer) -> `output`
    [1,3,size,size]: out = RESTORER_MIX @ x + RESTORER_BIAS per pixel (+ CODEFORMER_WEIGHT_GAIN * weight).
    fp16_io: float16 image input and output (the maths stays float32 inside)."""
    nodes: list[onnx.NodeProto] = []
    conv_in = input_name
    if fp16_io:
        nodes.append(helper.make_node("Cast", [input_name], ["input_f32"], to=TensorProto.FLOAT))
        conv_in = "input_f32"
    nodes.append(helper.make_node("Conv", [conv_in, "mix_w", "mix_b"], ["mixed"], kernel_shape=[1, 1]))
    inits = [
        numpy_helper.from_array(RESTORER_MIX.reshape(3, 3, 1, 1), "mix_w"),
        numpy_helper.from_array(RESTORER_BIAS, "mix_b"),
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
    return _finish(graph)


def restorer_reference(crop_bgr: npt.NDArray[np.uint8], weight: float | None = None) -> npt.NDArray[np.uint8]:
    """What a restorer double + FaceRestorer return for `crop_bgr`, in numpy (the contract's maths)."""
    x = crop_bgr[:, :, ::-1].astype(np.float64) / 255.0
    x = (x - 0.5) / 0.5
    y = x @ RESTORER_MIX.astype(np.float64).T + RESTORER_BIAS
    if weight is not None:
        y = y + CODEFORMER_WEIGHT_GAIN * weight
    y = (np.clip(y, -1.0, 1.0) + 1.0) / 2.0 * 255.0
    return np.rint(y)[:, :, ::-1].astype(np.uint8)


XSEG_BGR_WEIGHTS = np.array([0.0, -4.0, 4.0], dtype=np.float32)
XSEG_BIAS = 2.0


def build_xseg() -> onnx.ModelProto:
    """xseg double: `input` [1,256,256,3] NHWC BGR x/255 -> `output` [1,256,256,1] =
    clip(x . XSEG_BGR_WEIGHTS + XSEG_BIAS, 0, 1)."""
    nodes = [
        helper.make_node("MatMul", ["input", "w"], ["lin"]),
        helper.make_node("Add", ["lin", "one"], ["shifted"]),
        helper.make_node("Clip", ["shifted", "zero", "one_s"], ["output"]),
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
        ],
    )
    return _finish(graph)


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
IMAGENET_MEAN = np.array([0.485, 0.456, 0.406])
IMAGENET_STD = np.array([0.229, 0.224, 0.225])


def build_bisenet() -> onnx.ModelProto:
    """BiSeNet double: `input` [N,3,512,512] (RGB, ImageNet mean/std) -> `output` [N,19,512,512]:
    logit_k = 2 p_k . x - |p_k|^2, p_k = PARSER_PALETTE[k] normalised the same way (nearest colour)."""
    protos = (PARSER_PALETTE / 255.0 - IMAGENET_MEAN) / IMAGENET_STD  # (19, 3)
    w = (2.0 * protos).astype(np.float32).reshape(19, 3, 1, 1)
    b = (-np.square(protos).sum(axis=1)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["input", "w", "b"], ["output"], kernel_shape=[1, 1])],
        "bisenet_double",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 3, 512, 512])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["N", 19, 512, 512])],
        initializer=[numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")],
    )
    return _finish(graph)


def _finish(graph: onnx.GraphProto) -> onnx.ModelProto:
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="facecast-doubles"
    )
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model)
    return model


def write_all(dirpath: Path | str, det_size: int = DET_SIZE) -> dict[str, Path]:
    """Write every double under the catalogue's file names; {file name: path}. The detectors'
    outputs are sized for a det_size input (the pipeline's detector.size)."""
    d = Path(dirpath)
    d.mkdir(parents=True, exist_ok=True)
    models = {
        "det_10g.onnx": build_scrfd([DEFAULT_FACE], det_size=det_size),
        "scrfd_2.5g.onnx": build_scrfd([DEFAULT_FACE._replace(score=0.87)], det_size=det_size),
        "w600k_r50.onnx": build_arcface(seed=0),
        "inswapper_128.onnx": build_inswapper(seed=0),
        "inswapper_128_fp16.onnx": build_inswapper(seed=0, fp16=True),
        "GPEN-BFR-256.onnx": build_restorer(256),
        "GPEN-BFR-512.onnx": build_restorer(512),
        "gfpgan_1.4.onnx": build_restorer(512),
        "codeformer.onnx": build_restorer(512, with_weight=True),
        "xseg_1.onnx": build_xseg(),
        "bisenet_resnet_34.onnx": build_bisenet(),
    }
    written: dict[str, Path] = {}
    for name, model in models.items():
        path = d / name
        onnx.save(model, str(path))
        written[name] = path
    return written


@dataclass(frozen=True)
class FakeArg:
    """Stands in for onnxruntime.NodeArg: name, shape, type."""

    name: str
    shape: list[Any]
    type: str = "tensor(float)"


class FakeSession:
    """A session that only answers get_inputs()/get_outputs(): enough for contract checks."""

    def __init__(self, inputs: Sequence[FakeArg], outputs: Sequence[FakeArg]) -> None:
        self._inputs = list(inputs)
        self._outputs = list(outputs)

    def get_inputs(self) -> list[FakeArg]:
        return self._inputs

    def get_outputs(self) -> list[FakeArg]:
        return self._outputs

    def run(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("FakeSession cannot run")


def scrfd_signature(n_outputs: int = 9, input_shape: Sequence[Any] = (1, 3, "h", "w")) -> FakeSession:
    """A fake session with SCRFD's signature at 640 (n_outputs 9, or 6 without keypoints)."""
    widths = (1, 4, 10)[: n_outputs // 3]
    outs = [FakeArg(f"o{g}_{s}", [(640 // s) ** 2 * 2, w]) for g, w in enumerate(widths) for s in STRIDES]
    return FakeSession([FakeArg("input.1", list(input_shape))], outs)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write contract-exact ONNX doubles of FaceCast's models.")
    parser.add_argument("dir", type=Path)
    args = parser.parse_args(argv)
    for name, path in write_all(args.dir).items():
        print(f"{name}: {path} ({path.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
