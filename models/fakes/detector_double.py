"""The SCRFD (det_10g / scrfd_2.5g) double and the pictures it finds faces in, built with onnx.helper.

The double finds face i where the picture shows colour key i (0: skin, so the astronaut; 1..: marker
colours paint_face draws) and reports it, as configured, at the key's centroid. FaceSpec says where a
face is (640x640 detector pixels), face_in_frame where SCRFD reports it on a frame, paint_face and
frame_with_faces draw it. build_scrfd_fixed reports its faces without looking (the overhead
benchmark), scrfd_constant_outputs gives the nine tensors that carry them (the stand-ins emit these).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
import onnx
from onnx import TensorProto, helper, numpy_helper

from models.fakes.onnx_model import finish_model

STRIDES = (8, 16, 32)
ANCHORS = 2
DET_SIZE = 640

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
    return finish_model(graph)


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
    return finish_model(graph)
