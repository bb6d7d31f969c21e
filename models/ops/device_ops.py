"""The image ops that sit between models, as tiny ONNX graphs that stay on the GPU.

On CUDA/TensorRT, a crop done with OpenCV means: download the frame, warp on the CPU, upload the
crop, and the same again for the paste-back. These graphs do the same work on the session's device,
so with IOBinding (models.runtime.iobinding) a frame is uploaded once (or decoded on the GPU as NV12) and
only the finished frame comes back. CI has no GPU, so the very same graphs run on the CPU provider
in the tests and are checked against their OpenCV twins (the `*_cv2` functions below, which are also
the CPU production path: OpenCV is far faster there, see ARCHITECTURE.md).

Graphs (opset 17, IR 8):
* `build_warp_crop(spec)`: frame uint8 [H,W,3] (dynamic) + `theta` float32 [2,3] (the frame->crop
  matrix, exactly what cv2.warpAffine takes) -> `crop` [1,3,S,S]. The sampling grid is a MatMul of
  a constant base grid with the in-graph inverse of theta (no AffineGrid: no CUDA kernel), then
  GridSample bilinear in float32 (border padding: edge pixels repeat beyond the frame; zeros for
  `ARCFACE_CROP`, as insightface). `spec` fuses the model's preprocessing (channel order,
  scale, offset, fp16 output): `INSWAPPER_CROP`, `ARCFACE_CROP`.
* `build_nv12_to_bgr(h, w)`: NV12 [3h/2, w] uint8 -> BGR uint8 [h,w,3], BT.601 limited range with
  OpenCV's own fixed-point coefficients.
* `build_paste_blend(size)`: frame region uint8 [h,w,3] (dynamic), swapped crop float32 [1,3,S,S]
  RGB in [0,1], crop-space mask float32 [S,S], `theta_inv` float32 [2,3] (crop->region, what
  cv2.warpAffine takes) -> blended region uint8 = alpha*warped_crop + (1-alpha)*region.

Pixel convention (the one OpenCV uses): pixel i has its centre at coordinate i. GridSample runs
with align_corners=0, whose denormalisation is x = ((g+1)*W - 1)/2, so the graph normalises a
frame coordinate x as g = (2x+1)/W - 1; the two cancel exactly.

Kernel rules obeyed (GPU_API_NOTES.md §5) and asserted by `device_graph_problems`: GridSample only
in float32 with mode 'bilinear' at opset <= 19; no AffineGrid; no Pad; uint8 only at the graph
edge through Cast (TensorRT); Slice/Resize parameters are initializers; every input that a CUDA
kernel reads on the host (Reshape shape, Range bounds, Clip limits, ...) comes from initializers or
from Shape (host metadata), never from device data, which would stall the stream.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any, TypeAlias

import cv2
import numpy as np
import numpy.typing as npt
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from models.ops.align import Matrix2x3, invert_affine, warp_paste_crop
from models.ops.yuv import BT601_LIMITED, YuvColour, nv12_to_bgr_host
from models.runtime.iobinding import BoundSession, TensorView, numpy_dtype
from models.runtime.session import SessionFactory
from models.types import Box, FloatArray, ImageBGR

log = logging.getLogger(__name__)

OPSET = 17  # >= 16 for GridSample, <= 19 so TensorRT reads mode 'bilinear' (GPU_API_NOTES §5)
IR_VERSION = 8  # the IR version that goes with opset 17

# OpenCV's BT.601 limited-range YUV->RGB fixed point (imgproc/src/color_yuv.simd.hpp), /2**20.
_SHIFT = float(1 << 20)
_CY = 1220542 / _SHIFT
_CUB = 2116026 / _SHIFT
_CUG = -409993 / _SHIFT
_CVG = -852492 / _SHIFT
_CVR = 1673527 / _SHIFT

Frame: TypeAlias = "npt.NDArray[np.uint8] | Any"  # numpy on the host, or an ort.OrtValue


# --------------------------------------------------------------------------------------------
# Specs and geometry
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CropSpec:
    """An aligned crop and the model preprocessing fused into its graph: out = crop * scale + offset,
    channels BGR as in the frame or RGB, float32 (or float16 for fp16-I/O models: GridSample itself
    stays float32, the Cast comes last).

    replicate: beyond the frame the edge pixels repeat (GridSample "border", cv2.BORDER_REPLICATE),
    as for every crop that is pasted back (models.ops.align.warp_paste_crop says why); False: black
    (GridSample "zeros"), as insightface crops for embeddings."""

    size: int
    rgb: bool = False
    scale: float = 1.0
    offset: float = 0.0
    fp16: bool = False
    replicate: bool = True

    def __post_init__(self) -> None:
        if self.size < 1:
            raise ValueError(f"crop size must be positive, got {self.size}")

    @property
    def plain(self) -> bool:
        return not self.rgb and self.scale == 1.0 and self.offset == 0.0


# inswapper_128: RGB, x / 255 (models.wrappers.inswapper).
# ArcFace: RGB, (x - 127.5) / 127.5 (models.wrappers.arcface).
INSWAPPER_CROP = CropSpec(128, rgb=True, scale=1.0 / 255.0)
ARCFACE_CROP = CropSpec(112, rgb=True, scale=1.0 / 127.5, offset=-1.0, replicate=False)


def _checked(m: npt.ArrayLike) -> Matrix2x3:
    mat = np.asarray(m, dtype=np.float64)
    if mat.shape != (2, 3) or not np.all(np.isfinite(mat)):
        raise ValueError(f"expected a finite 2x3 affine matrix, got shape {mat.shape}")
    if abs(float(np.linalg.det(mat[:, :2]))) < 1e-12:
        raise ValueError("the affine matrix is singular (zero scale)")
    return mat


def shift_source(m: Matrix2x3, dx: float, dy: float) -> Matrix2x3:
    """The forward matrix for the same warp when its source is cut at (dx, dy): src' = src - (dx, dy)."""
    out = np.array(m, dtype=np.float64)
    out[:, 2] += out[:, 0] * dx + out[:, 1] * dy
    return out


def shift_target(m: Matrix2x3, dx: float, dy: float) -> Matrix2x3:
    """The forward matrix for the same warp when its output is cut at (dx, dy): dst' = dst - (dx, dy)."""
    out = np.array(m, dtype=np.float64)
    out[0, 2] -= dx
    out[1, 2] -= dy
    return out


def sample_box(m: Matrix2x3, size: int, height: int, width: int) -> Box:
    """The frame pixels bilinear sampling of a size x size crop through `m` (frame->crop) can read.

    The samples are the affine image of the crop's pixel centres, so they lie inside the image of
    its corner centres; bilinear reads floor(x) and floor(x)+1; one more pixel each side absorbs
    the graph's float32 rounding. Never empty: a crop entirely off the frame gets one pixel at the
    nearest edge, whose samples all still land outside it (so the output is black with zeros
    padding, that edge repeated with border padding, as OpenCV's twin gives).
    """
    inv = invert_affine(_checked(m))
    s = float(size - 1)
    corners = np.array([[0.0, 0.0], [s, 0.0], [0.0, s], [s, s]]) @ inv[:, :2].T + inv[:, 2]
    lo = np.floor(corners.min(axis=0)) - 1.0
    hi = np.floor(corners.max(axis=0)) + 3.0
    x0 = int(min(max(lo[0], 0.0), width - 1))
    y0 = int(min(max(lo[1], 0.0), height - 1))
    x1 = int(max(min(hi[0], float(width)), x0 + 1))
    y1 = int(max(min(hi[1], float(height)), y0 + 1))
    return Box(x0, y0, x1, y1)


def paste_box(m: Matrix2x3, size: int, height: int, width: int) -> Box:
    """The part of the frame a pasted size x size crop can touch: the same rule as
    realtime.face.steps.compositor.paste_region (the warped corners' bounding box, 1-2 px margin).
    May be empty."""
    inv = invert_affine(_checked(m))
    s = float(size)
    pts = np.array([[0.0, 0.0], [s, 0.0], [0.0, s], [s, s]]) @ inv[:, :2].T + inv[:, 2]
    x0, y0 = pts.min(axis=0)
    x1, y1 = pts.max(axis=0)
    return Box(
        x0=max(int(math.floor(x0)) - 1, 0),
        y0=max(int(math.floor(y0)) - 1, 0),
        x1=min(int(math.ceil(x1)) + 2, width),
        y1=min(int(math.ceil(y1)) + 2, height),
    )


# --------------------------------------------------------------------------------------------
# Graph building
# --------------------------------------------------------------------------------------------


class _Graph:
    """Collects nodes and initializers with unique names; one per builder call."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self._count = 0

    def _fresh(self, hint: str) -> str:
        self._count += 1
        return f"{hint}_{self._count}"

    def const(self, value: npt.ArrayLike, dtype: npt.DTypeLike, hint: str = "c") -> str:
        name = self._fresh(hint)
        self.inits.append(numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
        return name

    def op(self, op_type: str, inputs: Sequence[str], out: str | None = None, **attrs: Any) -> str:
        name = out or self._fresh(op_type.lower())
        self.nodes.append(helper.make_node(op_type, list(inputs), [name], name=f"{name}_node", **attrs))
        return name

    def ops(self, op_type: str, inputs: Sequence[str], n_out: int, **attrs: Any) -> list[str]:
        names = [self._fresh(op_type.lower()) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op_type, list(inputs), names, name=f"{names[0]}_node", **attrs))
        return names

    def model(
        self, inputs: Sequence[onnx.ValueInfoProto], outputs: Sequence[onnx.ValueInfoProto]
    ) -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, self.name, list(inputs), list(outputs), initializer=self.inits)
        model = helper.make_model(
            graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="facecast-device-ops"
        )
        model.ir_version = IR_VERSION
        onnx.checker.check_model(model, full_check=True)
        return model

    # -- shared sub-graphs ---------------------------------------------------------------------

    def invert_affine(self, theta: str) -> str:
        """[2,3] forward matrix -> its inverse [2,3]: adjugate / determinant on six numbers.

        Done in the graph so theta stays a plain per-frame input (the cv2 matrix) and no node
        ever depends on a host round trip; a few element ops on six floats cost nothing.
        """
        flat = self.op("Reshape", [theta, self.const([6], np.int64, "six")])  # a b c d e f
        ab = self.op("Gather", [flat, self.const([0, 1], np.int64, "i01")])
        ed = self.op("Gather", [flat, self.const([4, 3], np.int64, "i43")])
        prods = self.op("Mul", [ab, ed])  # [a*e, b*d]
        det = self.op(
            "Sub",
            [
                self.op("Gather", [prods, self.const(0, np.int64, "i0")]),
                self.op("Gather", [prods, self.const(1, np.int64, "i1")]),
            ],
        )
        adj = self.op(
            "Mul",
            [
                self.op("Gather", [flat, self.const([4, 1, 3, 0], np.int64, "adj_idx")]),
                self.const([1.0, -1.0, -1.0, 1.0], np.float32, "adj_sign"),
            ],
        )  # [e, -b, -d, a]
        lin = self.op("Reshape", [self.op("Div", [adj, det]), self.const([2, 2], np.int64, "s22")])
        t = self.op(
            "Reshape",
            [
                self.op("Gather", [flat, self.const([2, 5], np.int64, "i25")]),
                self.const([2, 1], np.int64, "s21"),
            ],
        )
        t_inv = self.op("Neg", [self.op("MatMul", [lin, t])])
        return self.op("Concat", [lin, t_inv], axis=1)


def _channel_conv_weights(rgb: bool, scale: float) -> FloatArray:
    """1x1 Conv weight [3,3,1,1]: channel permutation (BGR<->RGB) times `scale`. A single Conv does
    the swap, the scale and the offset (its bias) in one kernel on the small crop tensor."""
    perm = [2, 1, 0] if rgb else [0, 1, 2]
    w = np.zeros((3, 3, 1, 1), dtype=np.float32)
    for out_c, in_c in enumerate(perm):
        w[out_c, in_c, 0, 0] = scale
    return w


def build_warp_crop(spec: CropSpec) -> onnx.ModelProto:
    """frame uint8 [H,W,3] + theta float32 [2,3] (frame->crop) -> crop [1,3,S,S] (see module doc)."""
    s = spec.size
    g = _Graph(f"warp_crop_{s}")
    # Cast first: TensorRT takes uint8 only at the edge through Cast; everything after is float32.
    frame_f = g.op("Cast", ["frame"], to=TensorProto.FLOAT)
    nchw = g.op(
        "Unsqueeze",
        [g.op("Transpose", [frame_f], perm=[2, 0, 1]), g.const([0], np.int64, "ax0")],
    )
    # Sampling matrix A: crop pixel -> frame pixel.
    a = g.invert_affine("theta")
    # Normalise for GridSample (align_corners=0): g = (2/W) x + (1/W - 1), from the frame's Shape
    # (host metadata, so this small chain never waits on the device).
    wh = g.op(
        "Reshape",
        [
            g.op(
                "Cast",
                [g.op("Gather", [g.op("Shape", [frame_f]), g.const([1, 0], np.int64, "iwh")])],
                to=TensorProto.FLOAT,
            ),
            g.const([2, 1], np.int64, "s21"),
        ],
    )  # [[W], [H]]
    k = g.op("Div", [g.const(2.0, np.float32, "two"), wh])
    c = g.op("Sub", [g.op("Div", [g.const(1.0, np.float32, "one"), wh]), g.const(1.0, np.float32, "one")])
    t_norm = g.op(
        "Add",
        [g.op("Mul", [a, k]), g.op("Mul", [c, g.const([[0.0, 0.0, 1.0]], np.float32, "e3")])],
    )
    # The grid: constant (x, y, 1) rows for the crop's pixel centres, times the 2x3 matrix.
    ys, xs = np.mgrid[0:s, 0:s].astype(np.float32)
    base = np.stack([xs.ravel(), ys.ravel(), np.ones(s * s, np.float32)], axis=1)
    grid = g.op(
        "Reshape",
        [
            g.op(
                "MatMul", [g.const(base, np.float32, "base_grid"), g.op("Transpose", [t_norm], perm=[1, 0])]
            ),
            g.const([1, s, s, 2], np.int64, "grid_shape"),
        ],
    )
    padding = "border" if spec.replicate else "zeros"
    last = g.op("GridSample", [nchw, grid], mode="bilinear", padding_mode=padding, align_corners=0)
    if not spec.plain:
        last = g.op(
            "Conv",
            [
                last,
                g.const(_channel_conv_weights(spec.rgb, spec.scale), np.float32, "chan_w"),
                g.const([spec.offset] * 3, np.float32, "chan_b"),
            ],
        )
    if spec.fp16:
        last = g.op("Cast", [last], to=TensorProto.FLOAT16)
    g.nodes[-1].output[0] = "crop"
    out_type = TensorProto.FLOAT16 if spec.fp16 else TensorProto.FLOAT
    return g.model(
        [
            helper.make_tensor_value_info("frame", TensorProto.UINT8, ["H", "W", 3]),
            helper.make_tensor_value_info("theta", TensorProto.FLOAT, [2, 3]),
        ],
        [helper.make_tensor_value_info("crop", out_type, [1, 3, s, s])],
    )


def build_crop_for_inswapper(*, fp16: bool = False) -> onnx.ModelProto:
    """The inswapper's `target`: 128 px, RGB, x / 255, float32 (or float16 for fp16-I/O files)."""
    return build_warp_crop(CropSpec(128, rgb=True, scale=1.0 / 255.0, fp16=fp16))


def build_crop_for_arcface() -> onnx.ModelProto:
    """ArcFace's input: 112 px, RGB, (x - 127.5) / 127.5."""
    return build_warp_crop(ARCFACE_CROP)


def build_nv12_to_bgr(height: int, width: int, colour: YuvColour = BT601_LIMITED) -> onnx.ModelProto:
    """nv12 uint8 [3h/2, w] -> bgr uint8 [h, w, 3] for one resolution and colour (matrix, range).

    BT.601 limited range uses OpenCV's own fixed-point coefficients (bit-exact with cvtColor); any
    other colour the exact ones of models.ops.yuv, like its host twin nv12_to_bgr_host.

    Static shapes: the Y/UV split points are then initializers (Slice bounds are host inputs on
    CUDA, and TensorRT wants them constant); a camera keeps its resolution, and DeviceOps rebuilds
    the graph when it changes. The maths runs planar ([1,3,h,w]) and is transposed to HWC once at
    the end: broadcasting against a trailing dimension of 1 (luma [h,w,1] + chroma [h,w,3]) is
    10x slower on the CPU provider. Chroma is upsampled by nearest neighbour like OpenCV (Resize
    nearest, asymmetric/floor: output pixel x reads chroma x // 2).
    """
    if height < 2 or width < 2 or height % 2 or width % 2:
        raise ValueError(f"NV12 needs an even, positive size, got {width}x{height}")
    h, w = height, width
    g = _Graph(f"nv12_to_bgr_{w}x{h}_{colour.matrix}_{'full' if colour.full_range else 'limited'}")
    f = g.op("Cast", ["nv12"], to=TensorProto.FLOAT)
    ax0 = g.const([0], np.int64, "ax0")
    y = g.op("Slice", [f, g.const([0], np.int64, "y0"), g.const([h], np.int64, "y1"), ax0])
    uv = g.op("Slice", [f, g.const([h], np.int64, "uv0"), g.const([h * 3 // 2], np.int64, "uv1"), ax0])
    # OpenCV: R = floor(CY*max(Y-16, 0) + CVR*(V-128) + 1/2), saturated; likewise G and B.
    # Here luma = CY*max(Y, 16); the -16*CY, the -128 offsets and the +1/2 of the rounding fold
    # into one bias on the quarter-size chroma. Full range: no black level, no clamp.
    if colour.is_opencv:
        gain, black = _CY, 16.0
        cmat = np.array([[_CUB, 0.0], [_CUG, _CVG], [0.0, _CVR]], dtype=np.float64)  # rows B,G,R; cols u,v
    else:
        gain, black, cmat = colour.coefficients()
    clamped = g.op("Clip", [y, g.const(black, np.float32, "black")]) if black else y
    luma = g.op(
        "Reshape",
        [
            g.op("Mul", [clamped, g.const(gain, np.float32, "cy")]),
            g.const([1, 1, h, w], np.int64, "luma_shape"),
        ],
    )
    bias = (-128.0 * cmat.sum(axis=1) - black * gain + 0.5).reshape(3, 1)
    uv_planar = g.op(
        "Reshape",
        [
            g.op(
                "Transpose",
                [g.op("Reshape", [uv, g.const([h // 2, w // 2, 2], np.int64, "uv_hw2")])],
                perm=[2, 0, 1],
            ),
            g.const([2, (h // 2) * (w // 2)], np.int64, "uv_2n"),
        ],
    )
    chroma = g.op(
        "Reshape",
        [
            g.op(
                "Add",
                [
                    g.op("MatMul", [g.const(cmat, np.float32, "yuv_mat"), uv_planar]),
                    g.const(bias, np.float32, "yuv_bias"),
                ],
            ),
            g.const([1, 3, h // 2, w // 2], np.int64, "chroma_shape"),
        ],
    )
    chroma_up = g.op(
        "Resize",
        [chroma, "", g.const([1.0, 1.0, 2.0, 2.0], np.float32, "x2")],
        mode="nearest",
        coordinate_transformation_mode="asymmetric",
        nearest_mode="floor",
    )
    planar = g.op(
        "Clip",
        [g.op("Add", [chroma_up, luma]), g.const(0.0, np.float32, "lo"), g.const(255.0, np.float32, "hi")],
    )
    bgr = g.op(
        "Reshape",
        [g.op("Transpose", [planar], perm=[0, 2, 3, 1]), g.const([h, w, 3], np.int64, "bgr_shape")],
    )
    # Clipped to [0, 255] and x + 1/2 already added: Cast truncates (x >= 0), as OpenCV's >> 20 floors.
    g.op("Cast", [bgr], out="bgr", to=TensorProto.UINT8)
    return g.model(
        [helper.make_tensor_value_info("nv12", TensorProto.UINT8, [h * 3 // 2, w])],
        [helper.make_tensor_value_info("bgr", TensorProto.UINT8, [h, w, 3])],
    )


def build_paste_blend(size: int, *, signed: bool = False) -> onnx.ModelProto:
    """region uint8 [h,w,3] + crop float32 [1,3,S,S] (RGB, [0,1]) + mask float32 [S,S] + theta_inv
    float32 [2,3] (crop->region) -> blended uint8 [h,w,3].

    Same steps as realtime.face.steps.compositor's OpenCV path: the crop is quantised like InSwapper._decode
    (RGB->BGR, x255, clip, truncate), crop and mask are warped together (one GridSample over 4
    channels), then region + alpha*(warped - region), rounded half-to-even like cv2.blendLinear.
    signed=True takes a restorer's output instead (RGB in [-1, 1]) and quantises it like
    FaceRestorer._decode: (x + 1) * 127.5, clip, round half to even.
    The region size is dynamic, so the grid is built separably from Range over the region's Shape
    (host metadata) and broadcast, not from a constant base grid.
    """
    s = size
    g = _Graph(f"paste_blend_{s}{'_signed' if signed else ''}")
    region_f = g.op("Cast", ["region"], to=TensorProto.FLOAT)
    # Sampling matrix: region pixel -> crop pixel, normalised for a crop of S pixels (constants).
    b = g.invert_affine("theta_inv")
    t_norm = g.op(
        "Add",
        [
            g.op("Mul", [b, g.const(2.0 / s, np.float32, "k")]),
            g.const([[0.0, 0.0, 1.0 / s - 1.0]] * 2, np.float32, "c"),
        ],
    )
    cols = []
    for j in range(3):
        col = g.op("Gather", [t_norm, g.const(j, np.int64, f"col{j}")], axis=1)
        cols.append(g.op("Reshape", [col, g.const([1, 1, 2], np.int64, "s112")]))
    shape = g.op("Shape", [region_f])
    zero, one = g.const(0, np.int64, "zero"), g.const(1, np.int64, "one")
    # Range's bounds are host inputs on CUDA; they come straight from Shape, so no stall.
    xs = g.op("Cast", [g.op("Range", [zero, g.op("Gather", [shape, one]), one])], to=TensorProto.FLOAT)
    ys = g.op("Cast", [g.op("Range", [zero, g.op("Gather", [shape, zero]), one])], to=TensorProto.FLOAT)
    gx = g.op("Mul", [g.op("Reshape", [xs, g.const([1, -1, 1], np.int64, "xs_shape")]), cols[0]])
    gy = g.op(
        "Add",
        [g.op("Mul", [g.op("Reshape", [ys, g.const([-1, 1, 1], np.int64, "ys_shape")]), cols[1]]), cols[2]],
    )
    grid = g.op("Unsqueeze", [g.op("Add", [gy, gx]), g.const([0], np.int64, "ax0")])  # [1,h,w,2]
    gain, bias = (127.5, 127.5) if signed else (255.0, 0.0)
    crop_bgr = g.op(
        "Conv",
        [
            "crop",
            g.const(_channel_conv_weights(True, gain), np.float32, "rgb2bgr"),
            g.const([bias] * 3, np.float32, "bias"),
        ],
    )
    crop_q = g.op(
        "Round" if signed else "Floor",
        [g.op("Clip", [crop_bgr, g.const(0.0, np.float32, "lo"), g.const(255.0, np.float32, "hi")])],
    )
    mask4 = g.op("Unsqueeze", ["mask", g.const([0, 1], np.int64, "ax01")])
    src = g.op("Concat", [crop_q, mask4], axis=1)  # [1,4,S,S]: colour and alpha share one grid
    sampled = g.op("GridSample", [src, grid], mode="bilinear", padding_mode="zeros", align_corners=0)
    hw4 = g.op(
        "Squeeze",
        [g.op("Transpose", [sampled], perm=[0, 2, 3, 1]), g.const([0], np.int64, "ax0")],
    )  # [h,w,4]
    fake, alpha = g.ops("Split", [hw4, g.const([3, 1], np.int64, "split31")], 2, axis=2)
    blended = g.op("Add", [region_f, g.op("Mul", [alpha, g.op("Sub", [fake, region_f])])])
    clipped = g.op(
        "Clip", [g.op("Round", [blended]), g.const(0.0, np.float32, "lo"), g.const(255.0, np.float32, "hi")]
    )
    g.op("Cast", [clipped], out="blended", to=TensorProto.UINT8)
    return g.model(
        [
            helper.make_tensor_value_info("region", TensorProto.UINT8, ["h", "w", 3]),
            helper.make_tensor_value_info("crop", TensorProto.FLOAT, [1, 3, s, s]),
            helper.make_tensor_value_info("mask", TensorProto.FLOAT, [s, s]),
            helper.make_tensor_value_info("theta_inv", TensorProto.FLOAT, [2, 3]),
        ],
        [helper.make_tensor_value_info("blended", TensorProto.UINT8, ["h", "w", 3])],
    )


# --------------------------------------------------------------------------------------------
# GPU legality: what keeps the graphs CUDA/TensorRT-legal without a GPU to try them on
# --------------------------------------------------------------------------------------------

# Ops these graphs may use: each has a CUDA kernel for the float32/int64 tensors used here
# (ORT 1.31 cuda_execution_provider.cc) and a TensorRT importer.
DEVICE_OPS: frozenset[str] = frozenset(
    {
        "Add", "Cast", "Clip", "Concat", "Conv", "Div", "Floor", "Gather", "GridSample", "Identity",
        "MatMul", "Mul", "Neg", "Range", "Reshape", "Resize", "Round", "Shape", "Slice", "Split",
        "Squeeze", "Sub", "Transpose", "Unsqueeze",
    }
)  # fmt: skip
# Inputs a CUDA kernel reads on the host (OrtMemTypeCPUInput). If computed from device data, ORT
# copies them back first and the stream stalls (and CUDA graphs break).
HOST_INPUTS: Mapping[str, tuple[int, ...]] = MappingProxyType(
    {
        "Reshape": (1,), "Unsqueeze": (1,), "Squeeze": (1,), "Expand": (1,), "Tile": (1,),
        "ConstantOfShape": (0,), "Range": (0, 1, 2), "Clip": (1, 2), "Split": (1,),
        "Slice": (1, 2, 3, 4), "Resize": (1, 2, 3), "Pad": (1, 2, 3), "TopK": (1,),
        "CumSum": (1,), "ReduceSum": (1,), "OneHot": (1,),
    }
)  # fmt: skip
# TensorRT wants these constant (onnx-tensorrt operators.md: axes must be initializers).
INITIALIZER_INPUTS: Mapping[str, tuple[int, ...]] = MappingProxyType(
    {"Slice": (1, 2, 3, 4), "Resize": (1, 2, 3)}
)
_PAD_TYPES = frozenset({TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.BOOL})


def device_graph_problems(model: onnx.ModelProto) -> list[str]:
    """Why `model` would not run well on the CUDA/TensorRT providers; [] when it is legal.

    Parses the graph (with ONNX type inference) against GPU_API_NOTES.md §5.
    """
    problems: list[str] = []
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    try:
        graph = onnx.shape_inference.infer_shapes(model, strict_mode=True).graph
    except onnx.shape_inference.InferenceError as err:
        # Report it and check what can be checked with the types that did infer.
        problems.append(f"ONNX type inference fails: {str(err).splitlines()[0]}")
        graph = onnx.shape_inference.infer_shapes(model).graph
    types: dict[str, int] = {}
    for vi in [*graph.input, *graph.value_info, *graph.output]:
        types[vi.name] = vi.type.tensor_type.elem_type
    constants = {t.name for t in graph.initializer}
    for t in graph.initializer:
        types[t.name] = t.data_type
    for node in graph.node:
        if node.op_type == "Constant":
            constants.update(node.output)
    graph_inputs = {i.name for i in graph.input} - constants
    producer = {out: node for node in graph.node for out in node.output}
    host_memo: dict[str, bool] = {}

    def host_side(name: str) -> bool:
        """True when `name` is known on the host without reading device data."""
        if name in host_memo:
            return host_memo[name]
        if name in constants:
            ok = True
        elif name in graph_inputs or name not in producer:
            ok = False
        else:
            node = producer[name]
            ok = node.op_type in ("Shape", "Size") or all(host_side(i) for i in node.input if i)
        host_memo[name] = ok
        return ok

    for node in graph.node:
        where = f"{node.op_type} '{node.name or node.output[0]}'"
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        if node.domain not in ("", "ai.onnx"):
            problems.append(f"{where}: custom domain {node.domain!r} has no CUDA/TensorRT kernel")
        if node.op_type == "AffineGrid":
            problems.append(f"{where}: AffineGrid has no CUDA kernel (build the grid with MatMul)")
        elif node.op_type not in DEVICE_OPS:
            problems.append(f"{where}: not in the checked CUDA/TensorRT op list")
        if node.op_type == "GridSample":
            if opset > 19:
                problems.append(f"{where}: opset {opset} > 19 (TensorRT reads only the opset<=19 modes)")
            mode = attrs.get("mode", b"bilinear")
            if mode != b"bilinear":
                problems.append(f"{where}: mode {mode!r}, TensorRT needs 'bilinear'")
            for i in node.input[:2]:
                if types.get(i) != TensorProto.FLOAT:
                    problems.append(f"{where}: input {i!r} is not float32 (the CUDA kernel is float32 only)")
        if node.op_type == "Resize" and (
            attrs.get("mode", b"nearest") not in (b"nearest", b"linear") or attrs.get("antialias", 0)
        ):
            problems.append(f"{where}: TensorRT resizes only nearest/linear, without antialias")
        if node.op_type == "Pad" and types.get(node.input[0]) not in _PAD_TYPES:
            problems.append(f"{where}: Pad has no CUDA kernel for this type (none for uint8)")
        if node.op_type != "Cast":
            for i in node.input:
                if i and types.get(i) == TensorProto.UINT8:
                    problems.append(f"{where}: reads uint8 {i!r}; TensorRT takes uint8 only through Cast")
        for idx in INITIALIZER_INPUTS.get(node.op_type, ()):
            if idx < len(node.input) and node.input[idx] and node.input[idx] not in constants:
                problems.append(f"{where}: input {idx} ({node.input[idx]!r}) must be an initializer")
        for idx in HOST_INPUTS.get(node.op_type, ()):
            if idx < len(node.input) and node.input[idx] and not host_side(node.input[idx]):
                problems.append(
                    f"{where}: host input {idx} ({node.input[idx]!r}) is computed from device data "
                    "(a device->host copy that stalls the stream)"
                )
    return problems


# --------------------------------------------------------------------------------------------
# OpenCV twins: the CPU production path and the tests' reference
# --------------------------------------------------------------------------------------------


def warp_crop_cv2(
    frame: ImageBGR, m: Matrix2x3, spec: CropSpec, out: npt.NDArray[Any] | None = None
) -> npt.NDArray[Any]:
    """What the warp_crop graph computes, the OpenCV way: cv2.warpAffine to uint8, then the same
    channel order / scale / offset as InSwapper._load_target and ArcFace.embed_aligned_raw."""
    s = spec.size
    mat = _checked(m)
    if spec.replicate:
        crop = warp_paste_crop(frame, mat, s)
    else:
        crop = np.asarray(cv2.warpAffine(frame, mat, (s, s), borderValue=0.0), dtype=np.uint8)
    chw = (crop[:, :, ::-1] if spec.rgb else crop).transpose(2, 0, 1)
    dtype = np.float16 if spec.fp16 else np.float32
    dst = np.empty((1, 3, s, s), dtype=dtype) if out is None else out
    if spec.offset == 0.0:
        np.multiply(chw, np.float32(spec.scale), out=dst[0])
    else:
        blob = chw * np.float32(spec.scale) + np.float32(spec.offset)
        np.copyto(dst[0], blob, casting="same_kind")
    return dst


def nv12_to_bgr_cv2(nv12: npt.NDArray[np.uint8], colour: YuvColour = BT601_LIMITED) -> ImageBGR:
    """The graph's CPU twin: OpenCV for BT.601 limited range, else models.ops.yuv's float maths."""
    return nv12_to_bgr_host(nv12, colour)


def decode_crop(crop: npt.NDArray[Any]) -> ImageBGR:
    """[1,3,S,S] RGB in [0,1] -> (S,S,3) BGR uint8, truncating exactly like InSwapper._decode."""
    scaled = np.multiply(crop[0].transpose(1, 2, 0)[:, :, ::-1], np.float32(255.0), dtype=np.float32)
    return np.asarray(np.clip(scaled, 0.0, 255.0).astype(np.uint8))


def decode_signed_crop(crop: npt.NDArray[Any]) -> ImageBGR:
    """[1,3,S,S] RGB in [-1,1] -> (S,S,3) BGR uint8, rounding exactly like FaceRestorer._decode."""
    x = np.clip(crop[0].transpose(1, 2, 0)[:, :, ::-1].astype(np.float32), -1.0, 1.0)
    return np.asarray(np.rint((x + np.float32(1.0)) * np.float32(127.5)).astype(np.uint8))


def paste_blend_cv2(
    region: ImageBGR, crop: npt.NDArray[Any], mask: FloatArray, theta_inv: Matrix2x3, *, signed: bool = False
) -> ImageBGR:
    """What the paste_blend graph computes, as realtime.face.steps.compositor.Compositor.paste does."""
    h, w = region.shape[:2]
    m = _checked(theta_inv)
    face = decode_signed_crop(crop) if signed else decode_crop(crop)
    fake = cv2.warpAffine(face, m, (w, h), borderValue=0.0)
    alpha = cv2.warpAffine(np.asarray(mask, dtype=np.float32), m, (w, h), borderValue=0.0)
    return np.asarray(cv2.blendLinear(fake, region, alpha, 1.0 - alpha), dtype=np.uint8)


# --------------------------------------------------------------------------------------------
# Runners: one graph, its session and its reused buffers each
# --------------------------------------------------------------------------------------------


def _shape_of(value: Frame | TensorView) -> tuple[int, ...]:
    """Shape of a numpy array, a TensorView (a device buffer bound by pointer) or an OrtValue."""
    if isinstance(value, np.ndarray | TensorView):
        return tuple(int(d) for d in value.shape)
    return tuple(int(d) for d in value.shape())


def _frame_hw(frame: Frame) -> tuple[int, int]:
    shape = tuple(frame.shape) if isinstance(frame, np.ndarray) else tuple(frame.shape())
    dtype = frame.dtype if isinstance(frame, np.ndarray) else numpy_dtype(frame)
    if len(shape) != 3 or shape[2] != 3 or dtype != np.uint8:
        raise ValueError(f"expected an (H, W, 3) uint8 frame, got {shape} {dtype}")
    return int(shape[0]), int(shape[1])


class _Runner:
    """A graph's session (through the SessionFactory: same providers, same fallback reports) bound
    with IOBinding on the session's real device."""

    def __init__(self, factory: SessionFactory, model: onnx.ModelProto, label: str) -> None:
        session = factory.create(model.SerializeToString(), label=label)
        self.bound = BoundSession(session, factory.device_type, factory.config.device_id)

    @property
    def device_type(self) -> str:
        return self.bound.device_type


class _Scratch:
    """A growing host buffer handed out as contiguous views (the cut-out a graph reads)."""

    def __init__(self) -> None:
        self._buf = np.empty(0, dtype=np.uint8)

    def copy_of(self, src: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint8]:
        n = src.size
        if self._buf.size < n:
            self._buf = np.empty(n, dtype=np.uint8)
        view = self._buf[:n].reshape(src.shape)
        np.copyto(view, src)
        return view


class WarpCrop(_Runner):
    """Runs a warp_crop graph. The output OrtValue [1,3,S,S] is one buffer reused by every call."""

    def __init__(self, factory: SessionFactory, spec: CropSpec) -> None:
        super().__init__(factory, build_warp_crop(spec), f"warp_crop_{spec.size}")
        self.spec = spec
        self._theta = np.zeros((2, 3), dtype=np.float32)
        self._scratch = _Scratch()

    def run(self, frame: Frame, m: Matrix2x3, *, roi: bool = True) -> Any:
        """The crop of `frame` (numpy or OrtValue) through `m` (frame->crop), as an OrtValue.

        With roi (the default) the graph only sees the pixels the crop can read: a numpy frame is
        cut to that rectangle (a small host copy), an OrtValue frame to its band of whole rows
        (contiguous, so bound by pointer with no copy); theta is shifted to match. roi=False feeds
        the whole frame (tests, timings).
        """
        h, w = _frame_hw(frame)
        mat = _checked(m)
        box = sample_box(mat, self.spec.size, h, w) if roi else Box(0, 0, w, h)
        feed: Any
        if isinstance(frame, np.ndarray):
            cut = frame[box.y0 : box.y1, box.x0 : box.x1]
            feed = cut if cut.flags.c_contiguous else self._scratch.copy_of(cut)
            dx, dy = box.x0, box.y0
        else:
            full = (box.y0, box.y1) == (0, h)
            feed = frame if full else TensorView.rows(frame, box.y0, box.y1)
            dx, dy = 0, box.y0
        np.copyto(self._theta, shift_source(mat, dx, dy), casting="same_kind")
        return self.bound.run({"frame": feed, "theta": self._theta})[0]


class Nv12ToBgr(_Runner):
    """Runs the NV12 -> BGR graph for one resolution; the output [h,w,3] buffer is reused."""

    def __init__(
        self, factory: SessionFactory, height: int, width: int, colour: YuvColour = BT601_LIMITED
    ) -> None:
        graph = build_nv12_to_bgr(height, width, colour)
        super().__init__(factory, graph, f"nv12_to_bgr_{width}x{height} ({colour})")
        self.height, self.width, self.colour = height, width, colour

    def run(self, nv12: Frame | TensorView) -> Any:
        shape = _shape_of(nv12)
        if shape != (self.height * 3 // 2, self.width):
            raise ValueError(f"expected NV12 of shape {(self.height * 3 // 2, self.width)}, got {shape}")
        return self.bound.run({"nv12": nv12})[0]


class PasteBlend(_Runner):
    """Runs the paste_blend graph. The region is dynamic, so its output is allocated per run unless
    `out` is given (an OrtValue or TensorView; it may be the region itself: see DeviceOps.paste)."""

    def __init__(self, factory: SessionFactory, size: int, *, signed: bool = False) -> None:
        label = f"paste_blend_{size}{'_signed' if signed else ''}"
        super().__init__(factory, build_paste_blend(size, signed=signed), label)
        self.size = size
        self.signed = signed
        self._theta = np.zeros((2, 3), dtype=np.float32)

    def run(
        self,
        region: Frame | TensorView,
        crop: npt.NDArray[np.float32] | Any,
        mask: FloatArray | Any,
        theta_inv: Matrix2x3,
        *,
        out: Any | None = None,
    ) -> Any:
        np.copyto(self._theta, _checked(theta_inv), casting="same_kind")
        self.bound.bind_output("blended", out)
        return self.bound.run({"region": region, "crop": crop, "mask": mask, "theta_inv": self._theta})[0]


# --------------------------------------------------------------------------------------------
# Facade
# --------------------------------------------------------------------------------------------


class DeviceOps:
    """The between-model image ops of one worker (one instance per worker thread).

    `use_graphs` (default: whenever the factory asks for CUDA/TensorRT) runs the ONNX graphs on
    the session's device with IOBinding; the graphs are built once, on first use, and kept. Without
    it the OpenCV twins run instead (the CPU production path; much faster than the graphs there).
    If CUDA was asked for but did not load, the default switches to the OpenCV twins after the
    first graph reveals it. Either way the crop results are OrtValues (zero-copy wrappers on the
    host path), so the next model binds them directly. Results live in reused buffers: each is
    valid until the same op runs again. Under a TensorRT factory the graphs run on the CUDA
    provider unless `allow_tensorrt` (see __init__).
    """

    def __init__(
        self, factory: SessionFactory, *, use_graphs: bool | None = None, allow_tensorrt: bool = False
    ) -> None:
        if factory.config.provider == "tensorrt" and not allow_tensorrt:
            # The graphs are TensorRT-legal, but their inputs change shape every frame (the face's
            # rows), and TensorRT rebuilds an engine whenever a shape leaves its profile. They are
            # memory-bound anyway: the CUDA provider runs them with no build step.
            # dataclasses.replace keeps every other field (the shared fallbacks list, the clock).
            factory = replace(factory, config=replace(factory.config, provider="cuda"))
        if factory.config.tf32 and factory.config.provider == "cuda":
            # Exact float32 MatMuls: the affine maths (inverse, sampling grid, colour matrix) in
            # TF32 would shift crops and pastes by up to a pixel against the OpenCV twins.
            factory = replace(factory, config=replace(factory.config, tf32=False))
        self.factory = factory
        self._auto = use_graphs is None
        self.use_graphs: bool = factory.device_type != "cpu" if use_graphs is None else use_graphs
        self._crops: dict[CropSpec, WarpCrop] = {}
        self._nv12: Nv12ToBgr | None = None
        self._pastes: dict[tuple[int, bool], PasteBlend] = {}  # by (crop size, signed)
        self._host_crops: dict[CropSpec, npt.NDArray[Any]] = {}
        self._host_bgr: ImageBGR | None = None
        self._scratch = _Scratch()

    @property
    def device_type(self) -> str:
        """Where the results live: the graphs' device, or 'cpu' on the OpenCV path."""
        if not self.use_graphs:
            return "cpu"
        for runner in [*self._crops.values(), *self._pastes.values(), self._nv12]:
            if runner is not None:
                return runner.device_type
        return self.factory.device_type

    def _adopt(self, runner: _Runner) -> None:
        if self._auto and runner.bound.fell_back:
            # CUDA asked for but the session runs on the CPU: the graphs would be correct but 10-80x
            # slower than OpenCV there, so later calls take the OpenCV path.
            log.info("device ops: %s runs on the CPU; using the OpenCV path", type(runner).__name__)
            self.use_graphs = False

    # -- crops -------------------------------------------------------------------------------

    def crop(self, frame: Frame, m: Matrix2x3, spec: CropSpec) -> Any:
        """The aligned, preprocessed crop [1,3,S,S] of `frame` through `m` (frame->crop)."""
        if self.use_graphs:
            runner = self._crops.get(spec)
            if runner is None:
                runner = self._crops[spec] = WarpCrop(self.factory, spec)
                self._adopt(runner)
            return runner.run(frame, m)
        buf = self._host_crops.get(spec)
        if buf is None:
            dtype = np.float16 if spec.fp16 else np.float32
            buf = self._host_crops[spec] = np.empty((1, 3, spec.size, spec.size), dtype=dtype)
        warp_crop_cv2(self._host_frame(frame), m, spec, out=buf)
        return ort.OrtValue.ortvalue_from_numpy(buf)

    def crop_for_inswapper(self, frame: Frame, m: Matrix2x3, *, fp16: bool = False) -> Any:
        return self.crop(frame, m, CropSpec(128, rgb=True, scale=1.0 / 255.0, fp16=fp16))

    def crop_for_arcface(self, frame: Frame, m: Matrix2x3) -> Any:
        return self.crop(frame, m, ARCFACE_CROP)

    # -- colour ------------------------------------------------------------------------------

    def nv12_to_bgr(self, nv12: Frame | TensorView, colour: YuvColour = BT601_LIMITED) -> Any:
        """BGR [h,w,3] uint8 of an NV12 [3h/2, w] frame in the stream's `colour` (matrix, range)
        (graph: on the device; else the CPU twin). A TensorView (e.g. a decoder's picture bound by
        pointer) needs the graphs."""
        rows, width = _shape_of(nv12)
        height = int(rows) * 2 // 3
        if not self.use_graphs:
            if isinstance(nv12, TensorView):
                raise ValueError("a picture bound by pointer needs the device graphs (use_graphs)")
            if self._host_bgr is None or self._host_bgr.shape != (height, int(width), 3):
                self._host_bgr = np.empty((height, int(width), 3), dtype=np.uint8)
            nv12_to_bgr_host(self._host_frame(nv12), colour, out=self._host_bgr)
            return ort.OrtValue.ortvalue_from_numpy(self._host_bgr)
        current = self._nv12
        if current is None or (current.height, current.width, current.colour) != (height, int(width), colour):
            self._nv12 = Nv12ToBgr(self.factory, height, int(width), colour)
            self._adopt(self._nv12)
        assert self._nv12 is not None
        return self._nv12.run(nv12)

    # -- paste-back --------------------------------------------------------------------------

    def paste(
        self,
        frame: Frame,
        swapped: npt.NDArray[np.float32] | Any,
        mask: FloatArray,
        m: Matrix2x3,
        *,
        opacity: float = 1.0,
        signed: bool = False,
        limit: Box | None = None,
    ) -> None:
        """Blend the swapped crop ([1,3,S,S] RGB in [0,1], aligned by `m`: frame->crop) into `frame`
        in place, through the crop-space `mask` (realtime.face.steps.compositor's Compositor.crop_mask).
        signed: the crop is a restorer's output, RGB in [-1, 1]. limit: a part of the frame the
        mask is known to be zero beyond (the restorer's crop is larger than the face it pastes).

        Only the paste region is touched. A numpy frame: the region is cut out, blended, written
        back. An OrtValue frame (on the device): its band of whole rows is bound by pointer as both
        the graph's input and its output, so the blend happens in place with no copy; this is safe
        because the region is read by the graph's first node only, before its last node writes.
        """
        h, w = _frame_hw(frame)
        mat = _checked(m)
        size = int(tuple(swapped.shape if isinstance(swapped, np.ndarray) else swapped.shape())[-1])
        box = paste_box(mat, size, h, w)
        if limit is not None:
            box = box.intersect(limit)
        if box.empty or opacity <= 0.0:
            return
        alpha = np.asarray(mask, dtype=np.float32)
        if opacity < 1.0:
            alpha = alpha * np.float32(opacity)
        if not self.use_graphs:
            host = self._host_frame(frame)  # a view for numpy and CPU OrtValues: written in place
            roi = host[box.y0 : box.y1, box.x0 : box.x1]
            crop = swapped if isinstance(swapped, np.ndarray) else swapped.numpy()
            theta = shift_target(invert_affine(mat), box.x0, box.y0)
            roi[:] = paste_blend_cv2(roi, crop, alpha, theta, signed=signed)
            if not isinstance(frame, np.ndarray) and frame.device_name().lower() != "cpu":
                # numpy() of a device frame is a host copy: the blend must go back, or it is lost.
                frame.update_inplace(host)
            return
        runner = self._pastes.get((size, signed))
        if runner is None:
            runner = self._pastes[(size, signed)] = PasteBlend(self.factory, size, signed=signed)
            self._adopt(runner)
        if isinstance(frame, np.ndarray):
            region = self._scratch.copy_of(frame[box.y0 : box.y1, box.x0 : box.x1])
            theta_inv = shift_target(invert_affine(mat), box.x0, box.y0)
            blended = runner.run(region, swapped, alpha, theta_inv)
            frame[box.y0 : box.y1, box.x0 : box.x1] = blended.numpy()
        else:
            band = TensorView.rows(frame, box.y0, box.y1)
            runner.run(band, swapped, alpha, shift_target(invert_affine(mat), 0, box.y0), out=band)

    @staticmethod
    def _host_frame(frame: Frame) -> npt.NDArray[np.uint8]:
        # OrtValue.numpy() of a CPU OrtValue is a view of its memory (checked on ORT 1.31).
        return frame if isinstance(frame, np.ndarray) else np.asarray(frame.numpy())
