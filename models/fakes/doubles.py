"""Contract-exact ONNX doubles of the real models, built with onnx.helper (no weights downloaded).

Each double has the real model's input/output names, shapes, dtypes and output order, and a tiny
deterministic graph whose outputs are easy to predict:

* SCRFD (det_10g / scrfd_2.5g): finds face i where the picture shows colour key i (0: skin, so the
  astronaut; 1..: marker colours paint_face draws) and reports it, as configured, at the key's centroid.
* ArcFace (w600k_r50): 14x14 average pool -> flatten -> fixed random projection to 512-d.
* inswapper (fp32 / fp16): m = 0.5 * target + 0.5 * colour(source), colour = (tanh(source @ W) + 1) / 2
  per channel, bent by a fixed position ramp; plus a real 512x512 `buff2fs` emap as the last initializer.
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


def scrfd_constant_outputs(
    faces: Sequence[FaceSpec], det_size: int = DET_SIZE
) -> list[npt.NDArray[np.float32]]:
    """The nine SCRFD tensors (scores, boxes, kps per stride) that carry `faces` (640x640 detector
    pixels) at the anchor nearest each face's centre, for a det_size x det_size input: what the
    detector double reports when it finds them where they are given. The stand-ins emit these."""
    k = det_size / DET_SIZE
    specs = [
        FaceSpec([float(v) * k for v in f.box], np.asarray(f.kps, dtype=np.float64) * k, f.score)
        for f in faces
    ]
    encoded = _encode_scrfd(specs, det_size)
    outs: list[npt.NDArray[np.float32]] = []
    for gi, (width, background) in enumerate(((1, BACKGROUND_SCORE), (4, 1.0), (10, 0.0))):
        for s in STRIDES:
            dense = np.full(((det_size // s) ** 2 * ANCHORS, width), background, dtype=np.float32)
            for e in encoded[s]:
                dense[e.row] = ([e.score], e.distances, e.offsets)[gi]
            outs.append(dense)
    return outs


# Colour keys: face i of a double is found where the picture shows key i (normalised RGB, x/128
# after -127.5). Key 0 is skin, broad enough for the astronaut photo the engine's own pictures show;
# keys 1.. are saturated marker colours, each with a low channel so that a wrong mean or scale moves
# it far from its key.
SKIN_BGR = (146, 176, 232)  # what paint_face draws for key 0: inside every skin bound
MARKER_RGB = ((40, 90, 220), (60, 200, 90), (230, 60, 150), (120, 230, 200), (250, 230, 40))
MARKER_TOLERANCE = 0.06  # per channel, normalised (about 8 levels)
MAX_FACES = 1 + len(MARKER_RGB)
MIN_FACE_PIXELS = 4.0  # matching detector pixels (after the 3x3 erosion) that make a face
_KEY_FEATURES = 7  # linear features per key, all >= 0 on a matching pixel


def _skin_features() -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """(7, 3) weights on normalised (r, g, b) and (7,) biases; skin where every feature >= 0:
    0.55 <= r <= 0.97, 0.1 <= r - g <= 0.55, -0.05 <= g - b <= 0.4, b <= 0.35. The bounds on r and b
    reject half-scale and mean-free inputs (r halves below 0.55; b of painted skin rises above 0.35)."""
    w = np.array(
        [[1, 0, 0], [-1, 0, 0], [1, -1, 0], [-1, 1, 0], [0, 1, -1], [0, -1, 1], [0, 0, -1]], dtype=np.float64
    )
    b = np.array([-0.55, 0.97, -0.1, 0.55, 0.05, 0.4, 0.35])
    return w, b


def _marker_features(rgb: Sequence[int]) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """|x_c - key_c| <= MARKER_TOLERANCE per channel as six features (the seventh repeats the first)."""
    key = (np.asarray(rgb, dtype=np.float64) - 127.5) / 128.0
    rows, bias = [], []
    for c in range(3):
        e = np.zeros(3)
        e[c] = 1.0
        rows += [e, -e]
        bias += [MARKER_TOLERANCE - key[c], MARKER_TOLERANCE + key[c]]
    rows.append(rows[0])
    bias.append(bias[0])
    return np.array(rows), np.array(bias)


def key_bgr(index: int) -> tuple[int, int, int]:
    """The BGR colour paint_face draws for face `index` of a double."""
    if index == 0:
        return SKIN_BGR
    r, g, b = MARKER_RGB[index - 1]
    return (b, g, r)


def paint_face(
    frame: npt.NDArray[np.uint8], face: FaceSpec, index: int = 0, size: float = 1.0
) -> npt.NDArray[np.uint8]:
    """Draw face `index` of a double into `frame` (BGR, in place) where face_in_frame puts it: a
    filled ellipse in the box (its axes times `size`: a small one can sit on another face and leave
    that face's centroid where it was), in key_bgr(index). Returns the frame."""
    import cv2  # lazy: the doubles build without OpenCV

    h, w = frame.shape[:2]
    box, _ = face_in_frame(face, w, h)
    centre = ((box[0] + box[2]) / 2.0, (box[1] + box[3]) / 2.0)
    axes = ((box[2] - box[0]) * size / 2.0, (box[3] - box[1]) * size / 2.0)
    # Sub-pixel centre (shift=4): the painted centroid is the box centre to a fraction of a pixel.
    cv2.ellipse(
        frame,
        (round(centre[0] * 16), round(centre[1] * 16)),
        (round(axes[0] * 16), round(axes[1] * 16)),
        0.0, 0.0, 360.0, key_bgr(index), thickness=-1, lineType=cv2.LINE_8, shift=4,
    )  # fmt: skip
    return frame


def frame_with_faces(
    faces: Sequence[FaceSpec], width: int, height: int, background: tuple[int, int, int] = (90, 90, 90)
) -> npt.NDArray[np.uint8]:
    """A width x height BGR frame showing faces[i] painted in key i on a plain background."""
    frame = np.empty((height, width, 3), dtype=np.uint8)
    frame[:] = background
    for i, face in enumerate(faces):
        paint_face(frame, face, i)
    return frame



def build_scrfd_fixed(faces: Sequence[FaceSpec], det_size: int = DET_SIZE) -> onnx.ModelProto:
    """An SCRFD double that always reports `faces` where they are given and reads nothing of its
    input: near-zero cost, for the benchmark of the pipeline's own overhead only. Tests use
    build_scrfd, which finds the faces in the picture."""
    g = _Graph()
    names = [f"{prefix}_{s}" for prefix in ("score", "bbox", "kps") for s in STRIDES]
    out_infos = []
    for name, tensor in zip(names, scrfd_constant_outputs(faces, det_size), strict=True):
        g.op("Identity", [g.const(tensor)], out=name)
        out_infos.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, list(tensor.shape)))
    graph = helper.make_graph(
        g.nodes,
        "scrfd_fixed_double",
        [helper.make_tensor_value_info("input.1", TensorProto.FLOAT, [1, 3, "h", "w"])],
        out_infos,
        initializer=g.inits,
    )
    return _finish(graph)

class _Graph:
    """Collects nodes and initializers with unique names (a builder's local state)."""

    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self._n = 0

    def const(self, value: Any, dtype: Any = np.float32) -> str:
        self._n += 1
        name = f"c{self._n}"
        self.inits.append(numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
        return name

    def op(self, op_type: str, inputs: Sequence[str], out: str | None = None, **attrs: Any) -> str:
        self._n += 1
        name = out or f"t{self._n}"
        self.nodes.append(helper.make_node(op_type, list(inputs), [name], **attrs))
        return name


def _scalar_of(g: _Graph, vec: str, i: int) -> str:
    """Element i of a 1-D tensor as a 1-element tensor."""
    return g.op("Slice", [vec, g.const([i], np.int64), g.const([i + 1], np.int64), g.const([0], np.int64)])


def build_scrfd(
    faces: Sequence[FaceSpec | tuple[Any, Any, float]],
    input_name: str = "input.1",
    *,
    with_kps: bool = True,
    det_size: int = DET_SIZE,
) -> onnx.ModelProto:
    """An SCRFD double that finds faces[i] where the picture shows colour key i (key_bgr(i); 0 is
    skin, so the astronaut's face counts): it matches the normalised input against each key, erodes
    the match (3x3, so noise pixels do not count), and reports face i, box and landmarks as given
    (640x640 detector pixels, scaled by input width / 640) but centred on the match's centroid, at
    the anchor nearest it on the stride that suits its size, when at least MIN_FACE_PIXELS match.
    Every other anchor scores BACKGROUND_SCORE. The input is dynamic [1,3,'h','w'] and the nine
    outputs follow it like the real model's (declared for det_size). A blank, mis-normalised or
    channel-swapped picture shows no key, so no face. input_name "input" reads BGR (FaceFusion's
    export), anything else RGB. with_kps=False gives the 6-output variant (no landmarks)."""
    if det_size % max(STRIDES) != 0:
        raise ValueError(f"det_size must be a multiple of {max(STRIDES)}, got {det_size}")
    specs = [FaceSpec(*f) for f in faces]
    if len(specs) > MAX_FACES:
        raise ValueError(f"the SCRFD double tells at most {MAX_FACES} faces apart, got {len(specs)}")
    g = _Graph()
    x = input_name
    k = max(len(specs), 1)
    # Features per key from the input's own channel order (BGR for FaceFusion's `input`).
    order = [2, 1, 0] if input_name == "input" else [0, 1, 2]
    weights, biases = [], []
    for i in range(k):
        w, b = _skin_features() if i == 0 else _marker_features(MARKER_RGB[i - 1])
        weights.append(w[:, order])
        biases.append(b)
    conv_w = np.concatenate(weights).reshape(k * _KEY_FEATURES, 3, 1, 1)
    feats = g.op("Conv", [x, g.const(conv_w), g.const(np.concatenate(biases))], kernel_shape=[1, 1])
    shape = g.op("Shape", [x])
    hw = g.op("Slice", [shape, g.const([2], np.int64), g.const([4], np.int64), g.const([0], np.int64)])
    feats5 = g.op(
        "Reshape",
        [feats, g.op("Concat", [g.const([1, k, _KEY_FEATURES], np.int64), hw], axis=0)],
    )
    worst = g.op("ReduceMin", [feats5], axes=[2], keepdims=0)  # [1, k, H, W]
    match = g.op("Cast", [g.op("Greater", [worst, g.const(0.0)])], to=TensorProto.FLOAT)
    # 3x3 erosion: min = -max(-m); MaxPool ignores its padding.
    neg = g.op("Neg", [match])
    eroded = g.op("Neg", [g.op("MaxPool", [neg], kernel_shape=[3, 3], pads=[1, 1, 1, 1])])
    hwf = g.op("Cast", [hw], to=TensorProto.FLOAT)
    height, width = _scalar_of(g, hwf, 0), _scalar_of(g, hwf, 1)
    zero, one = g.const(0.0), g.const(1.0)
    scalar = g.const(np.zeros(0), np.int64)  # Reshape to this shape makes a 0-D tensor
    cols = g.op("Range", [zero, g.op("Reshape", [width, scalar]), one])
    rows_ = g.op("Range", [zero, g.op("Reshape", [height, scalar]), one])
    cols = g.op("Reshape", [cols, g.const([1, 1, 1, -1], np.int64)])
    rows_ = g.op("Reshape", [rows_, g.const([1, 1, -1, 1], np.int64)])
    count = g.op("ReduceSum", [eroded], axes=[2, 3], keepdims=0)  # [1, k]
    safe = g.op("Max", [count, one])
    cx = g.op("Div", [g.op("ReduceSum", [g.op("Mul", [eroded, cols])], axes=[2, 3], keepdims=0), safe])
    cy = g.op("Div", [g.op("ReduceSum", [g.op("Mul", [eroded, rows_])], axes=[2, 3], keepdims=0), safe])
    cx = g.op("Reshape", [cx, g.const([k], np.int64)])
    cy = g.op("Reshape", [cy, g.const([k], np.int64)])
    found = g.op(
        "Cast",
        [
            g.op(
                "Not",
                [g.op("Less", [g.op("Reshape", [count, g.const([k], np.int64)]), g.const(MIN_FACE_PIXELS)])],
            )
        ],
        to=TensorProto.FLOAT,
    )
    scale = g.op("Div", [width, g.const(float(DET_SIZE))])  # spec pixels -> detector pixels
    h_i, w_i = _scalar_of(g, hw, 0), _scalar_of(g, hw, 1)

    groups = [("score", 1, BACKGROUND_SCORE), ("bbox", 4, 1.0)]
    if with_kps:
        groups.append(("kps", 10, 0.0))
    by_stride: dict[int, list[int]] = {s: [] for s in STRIDES}
    for i, spec in enumerate(specs):
        by_stride[_choose_stride([float(v) for v in spec.box])].append(i)
    outputs: dict[str, str] = {}
    for s in STRIDES:
        sf = float(s)
        gw_i = g.op("Div", [w_i, g.const([s], np.int64)])
        gh_i = g.op("Div", [h_i, g.const([s], np.int64)])
        gw, gh = g.op("Cast", [gw_i], to=TensorProto.FLOAT), g.op("Cast", [gh_i], to=TensorProto.FLOAT)
        n_rows = g.op("Mul", [g.op("Mul", [gw, gh]), g.const([float(ANCHORS)])])
        idx = g.op("Range", [zero, g.op("Reshape", [n_rows, scalar]), one])
        idx = g.op("Reshape", [idx, g.const([-1, 1], np.int64)])
        cell = g.op("Floor", [g.op("Div", [idx, g.const(float(ANCHORS))])])
        slot = g.op("Sub", [idx, g.op("Mul", [cell, g.const(float(ANCHORS))])])
        row = g.op("Floor", [g.op("Div", [cell, gw])])
        col = g.op("Sub", [cell, g.op("Mul", [row, gw])])
        ax, ay = g.op("Mul", [col, g.const(sf)]), g.op("Mul", [row, g.const(sf)])
        anchor4 = g.op("Concat", [ax, ay, ax, ay], axis=1)  # [rows, 4]
        anchor10 = g.op("Concat", [ax, ay] * 5, axis=1)  # [rows, 10]
        acc: dict[str, str] = {}
        like = {1: ax, 4: anchor4, 10: anchor10}
        for prefix, width_, background in groups:
            acc[prefix] = g.op("Add", [g.op("Mul", [like[width_], zero]), g.const(background)])
        for n, i in enumerate(by_stride[s]):
            spec = specs[i]
            box = np.asarray(spec.box, dtype=np.float64)
            kps = np.asarray(spec.kps, dtype=np.float64).reshape(5, 2)
            centre = np.array([(box[0] + box[2]) / 2.0, (box[1] + box[3]) / 2.0])
            fcx, fcy = _scalar_of(g, cx, i), _scalar_of(g, cy, i)
            ccol = g.op("Min", [g.op("Max", [g.op("Round", [g.op("Div", [fcx, g.const(sf)])]), zero]),
                                g.op("Sub", [gw, one])])  # fmt: skip
            crow = g.op("Min", [g.op("Max", [g.op("Round", [g.op("Div", [fcy, g.const(sf)])]), zero]),
                                g.op("Sub", [gh, one])])  # fmt: skip
            near = g.const(0.5)
            hit = g.op(
                "And",
                [
                    g.op("And", [g.op("Less", [g.op("Abs", [g.op("Sub", [col, ccol])]), near]),
                                 g.op("Less", [g.op("Abs", [g.op("Sub", [row, crow])]), near])]),
                    g.op("Less", [g.op("Abs", [g.op("Sub", [slot, g.const(float(n % ANCHORS))])]), near]),
                ],
            )  # fmt: skip
            sel = g.op(
                "Mul", [g.op("Cast", [hit], to=TensorProto.FLOAT), _scalar_of(g, found, i)]
            )  # [rows,1]
            # The face in detector pixels: its offsets from its centre scaled, around the centroid.
            centroid2 = g.op("Concat", [fcx, fcy], axis=0)  # [2]
            rel_box = (box.reshape(2, 2) - centre).reshape(4)
            box_det = g.op("Add", [g.op("Tile", [centroid2, g.const([2], np.int64)]),
                                   g.op("Mul", [g.const(rel_box), scale])])  # fmt: skip
            score = g.op("Mul", [sel, g.const(float(spec.score) - BACKGROUND_SCORE)])
            acc["score"] = g.op("Add", [acc["score"], score])
            # Distances (anchor - x1, anchor - y1, x2 - anchor, y2 - anchor) / stride, minus background 1.
            dist = g.op(
                "Mul", [g.op("Sub", [anchor4, box_det]), g.const([1.0 / sf, 1.0 / sf, -1.0 / sf, -1.0 / sf])]
            )
            acc["bbox"] = g.op("Add", [acc["bbox"], g.op("Mul", [sel, g.op("Sub", [dist, one])])])
            if with_kps:
                rel_kps = (kps - centre).reshape(10)
                kps_det = g.op("Add", [g.op("Tile", [centroid2, g.const([5], np.int64)]),
                                       g.op("Mul", [g.const(rel_kps), scale])])  # fmt: skip
                offs = g.op("Div", [g.op("Sub", [kps_det, anchor10]), g.const(sf)])
                acc["kps"] = g.op("Add", [acc["kps"], g.op("Mul", [sel, offs])])
        for prefix, _, _ in groups:
            outputs[f"{prefix}_{s}"] = acc[prefix]
    out_infos = []
    for prefix, width_, _ in groups:
        for s in STRIDES:
            name = f"{prefix}_{s}"
            g.op("Identity", [outputs[name]], out=name)
            out_infos.append(
                helper.make_tensor_value_info(
                    name, TensorProto.FLOAT, [(det_size // s) ** 2 * ANCHORS, width_]
                )
            )
    graph = helper.make_graph(
        g.nodes,
        "scrfd_double",
        [helper.make_tensor_value_info(input_name, TensorProto.FLOAT, [1, 3, "h", "w"])],
        out_infos,
        initializer=g.inits,
    )
    return _finish(graph)


def position_ramp(size: int) -> npt.NDArray[np.float32]:
    """(size, size) fixed ramp in [-1, 1]: -1 top left, +1 bottom right, twice as steep along x as
    along y, so a transposed or flipped picture meets other values of it."""
    t = np.arange(size, dtype=np.float64) / (size - 1)
    return ((2.0 * t[None, :] + t[:, None]) * (2.0 / 3.0) - 1.0).astype(np.float32)


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


INSWAPPER_BEND = 0.2  # times position_ramp(128): up to +-13 levels where the mix is mid-grey


def build_inswapper(seed: int = 0, fp16: bool = False, fp16_io: bool = False) -> onnx.ModelProto:
    """inswapper double: `target` [1,3,128,128] + `source` [1,512] -> `output` [1,3,128,128] in [0,1]:
    m = 0.5 * target + 0.5 * (tanh(source @ W) + 1) / 2 (one colour per channel), then
    output = m + INSWAPPER_BEND * position_ramp(128) * m * (1 - m), so a crop transposed or flipped on
    the way in and back on the way out comes back different (inswapper_reference in numpy).

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
        numpy_helper.from_array((INSWAPPER_BEND * position_ramp(128)).astype(ct)[None, None], "bend"),
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


def inswapper_reference(
    crop_bgr: npt.NDArray[np.uint8], latent: npt.ArrayLike, seed: int = 0
) -> npt.NDArray[np.uint8]:
    """What the fp32 inswapper double + InSwapper return for `crop_bgr` and a (1, 512) latent, in numpy."""
    w, _ = inswapper_weights(seed)
    colour = (
        np.tanh(np.asarray(latent, dtype=np.float64).reshape(1, 512) @ w.astype(np.float64)) + 1.0
    ) / 2.0
    rgb = crop_bgr[:, :, ::-1].astype(np.float64) / 255.0
    m = 0.5 * rgb + 0.5 * colour.reshape(1, 1, 3)
    out = m + INSWAPPER_BEND * position_ramp(128).astype(np.float64)[:, :, None] * m * (1.0 - m)
    return np.clip(255.0 * out, 0.0, 255.0).astype(np.uint8)[:, :, ::-1]


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
    return _finish(graph)


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
    return _finish(graph)


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
    return _finish(graph)


def _finish(graph: onnx.GraphProto) -> onnx.ModelProto:
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="facecast-doubles"
    )
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model)
    return model


def write_all(
    dirpath: Path | str, det_size: int = DET_SIZE, *, fixed_detector: bool = False
) -> dict[str, Path]:
    """Write every double under the catalogue's file names; {file name: path}. The detectors'
    outputs are sized for a det_size input (the pipeline's detector.size). fixed_detector: the
    detectors report their face without looking (build_scrfd_fixed), for the overhead benchmark."""
    d = Path(dirpath)
    d.mkdir(parents=True, exist_ok=True)
    detector = build_scrfd_fixed if fixed_detector else build_scrfd
    models = {
        "det_10g.onnx": detector([DEFAULT_FACE], det_size=det_size),
        "scrfd_2.5g.onnx": detector([DEFAULT_FACE._replace(score=0.87)], det_size=det_size),
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
