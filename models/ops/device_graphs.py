"""The image ops that sit between models, as tiny ONNX graphs that stay on the GPU.

On CUDA/TensorRT, a crop done with OpenCV means: download the frame, warp on the CPU, upload the
crop, and the same again for the paste-back. These graphs do the same work on the session's device,
so with IOBinding (models.runtime.iobinding) a frame is uploaded once (or decoded on the GPU as NV12) and
only the finished frame comes back. CI has no GPU, so the very same graphs run on the CPU provider
in the tests and are checked against their OpenCV twins (models.ops.device_twins, which are also
the CPU production path: OpenCV is far faster there, see docs/ARCHITECTURE.md). models.ops.device_ops
runs them.

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
* `build_mark(row_of, col_of)`: frame uint8 [h,w,3] + cells float32 [R,C] (each cell's signed
  offset in grey levels) -> the frame with each pixel's cell offset added to B, G and R, clipped:
  the invisible watermark (realtime/core/watermark) applied to the device frame.

Pixel convention (the one OpenCV uses): pixel i has its centre at coordinate i. GridSample runs
with align_corners=0, whose denormalisation is x = ((g+1)*W - 1)/2, so the graph normalises a
frame coordinate x as g = (2x+1)/W - 1; the two cancel exactly.

Kernel rules obeyed (docs/gpu-api-facts.md §5) and asserted by models.ops.graph_rules: GridSample only
in float32 with mode 'bilinear' at opset <= 19; no AffineGrid; no Pad; uint8 only at the graph
edge through Cast (TensorRT); Slice/Resize parameters are initializers; every input that a CUDA
kernel reads on the host (Reshape shape, Range bounds, Clip limits, ...) comes from initializers or
from Shape (host metadata), never from device data, which would stall the stream.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import onnx
from onnx import TensorProto, helper, numpy_helper

from models.ops.crop_geometry import ARCFACE_CROP, CropSpec
from models.ops.yuv import BT601_LIMITED, YuvColour
from models.types import FloatArray

OPSET = 17  # >= 16 for GridSample, <= 19 so TensorRT reads mode 'bilinear' (docs/gpu-api-facts.md §5)
IR_VERSION = 8  # the IR version that goes with opset 17

# OpenCV's BT.601 limited-range YUV->RGB fixed point (imgproc/src/color_yuv.simd.hpp), /2**20.
_SHIFT = float(1 << 20)
_CY = 1220542 / _SHIFT
_CUB = 2116026 / _SHIFT
_CUG = -409993 / _SHIFT
_CVG = -852492 / _SHIFT
_CVR = 1673527 / _SHIFT


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


def _channel_conv_weights(rgb: bool, scales: tuple[float, float, float]) -> FloatArray:
    """1x1 Conv weight [3,3,1,1]: channel permutation (BGR<->RGB) times each output channel's
    scale. A single Conv does the swap, the scale and the offset (its bias) in one kernel on the
    small crop tensor."""
    perm = [2, 1, 0] if rgb else [0, 1, 2]
    w = np.zeros((3, 3, 1, 1), dtype=np.float32)
    for out_c, in_c in enumerate(perm):
        w[out_c, in_c, 0, 0] = scales[out_c]
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
                g.const(_channel_conv_weights(spec.rgb, spec.scales), np.float32, "chan_w"),
                g.const(list(spec.offsets), np.float32, "chan_b"),
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

    Same steps as realtime.face.host.compositor's OpenCV path: the crop is quantised like InSwapper._decode
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
            g.const(_channel_conv_weights(True, (gain, gain, gain)), np.float32, "rgb2bgr"),
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


__all__ = [
    "IR_VERSION",
    "OPSET",
    "build_crop_for_arcface",
    "build_crop_for_inswapper",
    "build_nv12_to_bgr",
    "build_paste_blend",
    "build_warp_crop",
]


def build_mark(row_of: npt.ArrayLike, col_of: npt.ArrayLike) -> onnx.ModelProto:
    """frame uint8 [h,w,3] + cells float32 [R,C] -> marked uint8 [h,w,3] = clip(frame + offset, 0,
    255) on every channel, the offset of pixel (y, x) being cells[row_of[y], col_of[x]].

    What the host watermark does with its saturating byte additions (realtime/core/watermark/
    embed.py), bit for bit: the offsets are whole grey levels, exact in float32. The cell grid is
    the host's (`row_of`, `col_of`: each pixel row's and column's cell, from the frame's height),
    so the graph is built per frame size, like the NV12 graph; the cells (a few kB) come per frame,
    so the amplitudes can follow the picture as the host's do. The two Gathers read their indices
    from initializers, which live on the device.
    """
    rows, cols = np.asarray(row_of, np.int64), np.asarray(col_of, np.int64)
    h, w = int(rows.size), int(cols.size)
    if h < 1 or w < 1:
        raise ValueError("the mark needs a frame of at least one pixel")
    g = _Graph(f"mark_{w}x{h}")
    by_row = g.op("Gather", ["cells", g.const(rows, np.int64, "row_of")], axis=0)  # [h, C]
    plane = g.op("Gather", [by_row, g.const(cols, np.int64, "col_of")], axis=1)  # [h, w]
    offsets = g.op("Reshape", [plane, g.const([h, w, 1], np.int64, "hw1")])
    summed = g.op("Add", [g.op("Cast", ["frame"], to=TensorProto.FLOAT), offsets])
    clipped = g.op("Clip", [summed, g.const(0.0, np.float32, "lo"), g.const(255.0, np.float32, "hi")])
    g.op("Cast", [clipped], out="marked", to=TensorProto.UINT8)
    return g.model(
        [
            helper.make_tensor_value_info("frame", TensorProto.UINT8, [h, w, 3]),
            helper.make_tensor_value_info("cells", TensorProto.FLOAT, ["R", "C"]),
        ],
        [helper.make_tensor_value_info("marked", TensorProto.UINT8, [h, w, 3])],
    )
