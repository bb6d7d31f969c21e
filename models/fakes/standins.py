"""Compute-equivalent stand-ins: random-weight ONNX models with the real models' I/O contracts and cost.

The contract-exact doubles (models/fakes/doubles.py) cost nothing to run, so a benchmark built on them
measures only the pipeline. The real weights cannot be shipped (non-commercial licences) or fetched
offline. These stand-ins sit in between: same input/output names, shapes and dtypes as the real files
(the wrappers in models/ load them unchanged), the same architecture or at least the same MACs and
parameter count as docs/model-contracts.md gives, and seeded random weights, so inference time (and weight
memory traffic) is realistic while the pictures they produce are meaningless.

Only TensorRT-friendly ops are used (docs/gpu-api-facts.md §4-5): Conv, Gemm, InstanceNormalization,
LeakyRelu/Relu, Resize (linear/nearest with constant scales), Pad (reflect, constant pads), Concat,
Split (sizes as an attribute), Reshape, ReduceMean, Tanh, Add/Mul, Cast and MaxPool (and SpaceToDepth
and Identity in Real-ESRGAN's). Opset 11, like the real inswapper_128.

`ensure_standins(cache_dir)` writes them under the catalogue's file names for `main.py bench --standins`.
"""

from __future__ import annotations

import functools
import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
import onnx
from onnx import TensorProto, helper

# Bump whenever a builder's graph or weights change: ensure_standins rebuilds files written by an
# older version instead of benchmarking a stale graph.
STANDINS_VERSION = 1
MANIFEST_NAME = "standins.json"
PRODUCER = "facecast-standins"
OPSET = 11
IR_VERSION = 6  # the IR version that goes with opset 11 (as in models/fakes/onnx_model.py)

DEFAULT_STANDINS: tuple[str, ...] = ("det_10g", "w600k_r50", "inswapper_128")

# Weights are drawn from a block of this many normals per tensor and tiled over the rest of the tensor:
# drawing all 138.6 M inswapper weights with standard_normal takes ~8 s on a 2-core CPU (and a float16
# cast of them another 4 s), tiling a 1 M block takes ~0.5 s. Values do not change the arithmetic cost;
# a prime length keeps the repeats from lining up with conv rows (no two output channels are equal).
_WEIGHT_BLOCK = 1_048_573

# He-init for (leaky) ReLU is sqrt(2 / fan_in); half of that variance (LeCun init) makes every
# unnormalised conv shrink activations a little instead of holding them level, so no random-weight
# stack can overflow float16 and the Tanh heads stay out of saturation.
_WEIGHT_GAIN = float(np.sqrt(0.5))
_LEAKY_SLOPE = 0.2
# The SCRFD heads feed the outputs through Tanh(mean) x this, far below the wrapper's tolerances.
_SCRFD_TIE = 1e-6

_FLOAT_TYPES = (TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.DOUBLE, TensorProto.BFLOAT16)


# --------------------------------------------------------------------------------------------------
# Graph building
# --------------------------------------------------------------------------------------------------


class _Builder:
    """Accumulates nodes and seeded random initializers for one graph (state lives per build)."""

    def __init__(self, seed: int, dtype: type[np.floating[Any]] = np.float32) -> None:
        self.rng = np.random.default_rng(seed)
        self.dtype = dtype
        self.nodes: list[onnx.NodeProto] = []
        # Initializers are written straight into the final ModelProto: make_graph/make_model would copy
        # all 554 MB twice (3 s of the inswapper build on a 2-core CPU).
        self.proto = onnx.ModelProto()
        self._names: dict[str, int] = {}
        self._shared: dict[tuple[str, int], str] = {}
        self._norm_affine: dict[int, tuple[str, str]] = {}

    def name(self, prefix: str) -> str:
        n = self._names.get(prefix, 0)
        self._names[prefix] = n + 1
        return f"{prefix}_{n}"

    def const(self, value: npt.NDArray[Any], prefix: str, exact_name: bool = False) -> str:
        """An initializer holding `value` exactly as given (its dtype is kept)."""
        name = prefix if exact_name else self.name(prefix)
        arr = np.ascontiguousarray(value)
        t = self.proto.graph.initializer.add()
        t.name = name
        t.data_type = helper.np_dtype_to_tensor_dtype(arr.dtype)
        t.dims.extend(arr.shape)
        # raw_data is little-endian, like numpy_helper.from_array writes it.
        t.raw_data = arr.astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()
        return name

    def scalar(self, value: float, prefix: str) -> str:
        """A scalar in the graph's compute dtype, shared by every node that needs the same value."""
        key = (prefix, int(np.float32(value).view(np.int32)))
        if key not in self._shared:
            self._shared[key] = self.const(np.array(value, dtype=self.dtype), prefix)
        return self._shared[key]

    def random(self, shape: Sequence[int], std: float, prefix: str) -> str:
        n = int(np.prod(shape))
        block = self.rng.standard_normal(min(n, _WEIGHT_BLOCK), dtype=np.float32)
        block *= np.float32(std)
        values = block.astype(self.dtype, copy=False)
        if n > values.size:
            values = np.resize(values, n)
        return self.const(values.reshape(shape), prefix)

    def node(self, op: str, inputs: Sequence[str], prefix: str = "", **attrs: Any) -> str:
        out = self.name(prefix or op.lower())
        self.nodes.append(helper.make_node(op, list(inputs), [out], name=out, **attrs))
        return out

    def conv(
        self,
        x: str,
        cin: int,
        cout: int,
        k: int = 3,
        stride: int = 1,
        pad: int | None = None,
        act: str | None = "lrelu",
    ) -> str:
        p = k // 2 if pad is None else pad
        w, b = self.conv_weights(cin, cout, k)
        y = self.node(
            "Conv", [x, w, b], "conv", kernel_shape=[k, k], strides=[stride, stride], pads=[p, p, p, p]
        )
        return self.activate(y, act)

    def conv_weights(self, cin: int, cout: int, k: int = 3, gain: float = _WEIGHT_GAIN) -> tuple[str, str]:
        """(weight, bias) initializers of a k x k conv, He-init scaled by `gain`."""
        w = self.random((cout, cin, k, k), gain * np.sqrt(2.0 / (cin * k * k)), "conv_w")
        return w, self.random((cout,), 0.01, "conv_b")

    def activate(self, x: str, act: str | None) -> str:
        if act is None:
            return x
        if act == "lrelu":
            return self.node("LeakyRelu", [x], "lrelu", alpha=_LEAKY_SLOPE)
        if act == "relu":
            return self.node("Relu", [x], "relu")
        raise ValueError(f"unknown activation {act!r}")

    def gemm(self, x: str, fin: int, fout: int) -> str:
        # transB=1 keeps the weight [out, in] like a PyTorch Linear export.
        w = self.random((fout, fin), _WEIGHT_GAIN * np.sqrt(2.0 / fin), "fc_w")
        b = self.const(np.zeros(fout, dtype=self.dtype), "fc_b")
        return self.node("Gemm", [x, w, b], "gemm", transB=1)

    def instance_norm(self, x: str, ch: int) -> str:
        # No affine part (AdaIN supplies it); ONNX still needs scale/bias inputs, shared per width.
        if ch not in self._norm_affine:
            self._norm_affine[ch] = (
                self.const(np.ones(ch, dtype=self.dtype), f"in_scale{ch}"),
                self.const(np.zeros(ch, dtype=self.dtype), f"in_bias{ch}"),
            )
        scale, bias = self._norm_affine[ch]
        return self.node("InstanceNormalization", [x, scale, bias], "inorm", epsilon=1e-5)

    def upsample2(self, x: str, mode: str = "linear") -> str:
        # Opset-11 Resize: an empty roi and constant float32 scales (TensorRT needs them constant);
        # nearest/linear only, no cubic or antialias (docs/gpu-api-facts.md §5).
        if ("resize_consts", 0) not in self._shared:
            self._shared[("resize_consts", 0)] = self.const(np.zeros(0, dtype=np.float32), "roi")
            self._shared[("resize_consts", 1)] = self.const(
                np.array([1.0, 1.0, 2.0, 2.0], dtype=np.float32), "scales2"
            )
        roi, scales = self._shared[("resize_consts", 0)], self._shared[("resize_consts", 1)]
        attrs: dict[str, Any] = {"mode": mode}
        if mode == "nearest":
            attrs.update(coordinate_transformation_mode="asymmetric", nearest_mode="floor")
        return self.node("Resize", [x, roi, scales], "up", **attrs)

    def reflect_pad(self, x: str, p: int) -> str:
        pads = self.const(np.array([0, 0, p, p, 0, 0, p, p], dtype=np.int64), "pads")
        return self.node("Pad", [x, pads], "pad", mode="reflect")

    def model(
        self, graph_name: str, inputs: Sequence[onnx.ValueInfoProto], outputs: Sequence[onnx.ValueInfoProto]
    ) -> onnx.ModelProto:
        model = self.proto
        model.ir_version = IR_VERSION
        model.producer_name = PRODUCER
        model.opset_import.append(helper.make_opsetid("", OPSET))
        model.graph.name = graph_name
        model.graph.node.extend(self.nodes)
        model.graph.input.extend(inputs)
        model.graph.output.extend(outputs)
        # The checker runs on the weightless skeleton: checking the full proto would serialise a
        # second copy of up to 554 MB for no extra coverage.
        onnx.checker.check_model(_skeleton(model), full_check=True)
        return model


def _tensor(name: str, shape: Sequence[int | str], elem: int = TensorProto.FLOAT) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, list(shape))


# --------------------------------------------------------------------------------------------------
# inswapper_128
# --------------------------------------------------------------------------------------------------


def build_inswapper_standin(fp16: bool = False, seed: int = 0) -> onnx.ModelProto:
    """inswapper_128's architecture (docs/model-contracts.md, "Swapper") with seeded random weights.

    `target` [1,3,128,128] + `source` [1,512] -> `output` [1,3,128,128] in [0,1]; 174.6 GMACs,
    138.6 M parameters; the 512x512 emap `buff2fs` is the LAST initializer. fp16=True stores every
    weight in float16 and computes in float16 behind Casts, keeping float32 graph I/O like the
    published fp16 file (277 MB); the weights are the fp32 stand-in's, rounded.
    """
    dt: type[np.floating[Any]] = np.float16 if fp16 else np.float32
    b = _Builder(seed, dt)
    target, source = "target", "source"
    if fp16:
        target = b.node("Cast", ["target"], "target_h", to=TensorProto.FLOAT16)
        source = b.node("Cast", ["source"], "source_h", to=TensorProto.FLOAT16)

    # Encoder: 128 px -> 32 px, 1024 channels.
    h = b.conv(b.reflect_pad(target, 3), 3, 128, k=7, pad=0)
    h = b.conv(h, 128, 256)
    h = b.conv(h, 256, 512, stride=2)
    h = b.conv(h, 512, 1024, stride=2)

    # Six AdaIN residual blocks at 32x32: 66% of the cost. AdaIN: x * (1 + gamma) + beta, with
    # [gamma | beta] = Gemm(source) split in two (Split sizes as an attribute: TensorRT-friendly).
    one = b.scalar(1.0, "one")
    style_shape = b.const(np.array([1, 2048, 1, 1], dtype=np.int64), "style_shape")

    def adain(x: str) -> str:
        style = b.node("Reshape", [b.gemm(source, 512, 2048), style_shape], "style")
        gamma = b.name("gamma")
        beta = b.name("beta")
        b.nodes.append(helper.make_node("Split", [style], [gamma, beta], axis=1, split=[1024, 1024]))
        scaled = b.node("Mul", [x, b.node("Add", [gamma, one], "gamma1")], "adain_mul")
        return b.node("Add", [scaled, beta], "adain")

    for _ in range(6):
        y = b.conv(h, 1024, 1024, act=None)
        y = b.activate(adain(b.instance_norm(y, 1024)), "relu")
        y = b.conv(y, 1024, 1024, act=None)
        y = adain(b.instance_norm(y, 1024))
        h = b.node("Add", [h, y], "res")

    # Decoder: back to 128 px.
    h = b.conv(b.upsample2(h), 1024, 512)
    h = b.conv(b.upsample2(h), 512, 256)
    h = b.conv(h, 256, 128)
    h = b.conv(b.reflect_pad(h, 3), 128, 3, k=7, pad=0, act=None)
    t = b.node("Tanh", [h], "tanh")
    out = "output_h" if fp16 else "output"
    b.nodes.append(helper.make_node("Mul", [b.node("Add", [t, one], "t1"), b.scalar(0.5, "half")], [out]))
    if fp16:
        b.nodes.append(helper.make_node("Cast", [out], ["output"], to=TensorProto.FLOAT))

    # LAST initializer: insightface (and models.wrappers.swappers.inswapper.read_emap) read initializer[-1]
    # as the emap.
    # Kept float32 in both files: the graph never uses it, the latent is computed in float32 on the host.
    emap = np.random.default_rng(seed + 1).standard_normal((512, 512), dtype=np.float32)
    emap /= np.float32(np.sqrt(512.0))
    b.const(emap, "buff2fs", exact_name=True)
    return b.model(
        "inswapper_standin",
        [_tensor("target", [1, 3, 128, 128]), _tensor("source", [1, 512])],
        [_tensor("output", [1, 3, 128, 128])],
    )


# --------------------------------------------------------------------------------------------------
# SCRFD det_10g
# --------------------------------------------------------------------------------------------------

# A det_10g-sized backbone (10.05 GMACs, 4.14 M parameters at 640: the real file is 16.9 MB = 4.2 M);
# the FPN neck and the heads run at _SCRFD_NECK channels.
_SCRFD_STEM = (28, 28, 56)  # det_10g's stem widths (3 convs, then max-pool to stride 4)
_SCRFD_STAGES: tuple[tuple[int, int, int], ...] = (
    # (out channels, convs after the strided one, stride reached)
    (56, 2, 4),
    (88, 3, 8),
    (184, 3, 16),
    (256, 3, 32),
)
_SCRFD_NECK = 64
_SCRFD_HEAD_CONVS = 3
_SCRFD_GROUPS = ((1, "score"), (4, "bbox"), (10, "kps"))  # output width per anchor, in output order


def _scrfd_double_outputs() -> list[npt.NDArray[np.float32]]:
    """The nine tensors the detector double reports for its DEFAULT_FACE found where it is given, at
    640x640.

    DEFAULT_FACE is centred horizontally on the canvas and vertically on the part a 16:9 frame fills
    (rows 0..360), so any common frame shows one face in its middle. Reusing the double's encoding
    (anchor choice, distances, background values) keeps the two in step.
    """
    from models.fakes.detector_double import DEFAULT_FACE, scrfd_constant_outputs

    return [np.ascontiguousarray(o, dtype=np.float32) for o in scrfd_constant_outputs([DEFAULT_FACE])]


def build_scrfd_standin(seed: int = 0) -> onnx.ModelProto:
    """A det_10g-sized detector (~10 GMACs, ~4.2 M parameters at 640x640) that always finds one face.

    `input.1` [1,3,'h','w'] (dynamic, multiples of 32) -> nine 2-D outputs in SCRFD's order and
    640x640 shapes. The backbone (strided convs to strides 8/16/32, an FPN neck, shared 3-conv heads
    per stride) really runs; each output is the double's constant tensor for one face plus
    1e-6 * tanh(mean(head)), which keeps the backbone alive (ONNX Runtime cannot fold it away) while
    moving the face by far less than a pixel.
    """
    b = _Builder(seed)
    h = "input.1"
    cin = 3
    for i, c in enumerate(_SCRFD_STEM):
        h = b.conv(h, cin, c, stride=2 if i == 0 else 1, act="relu")
        cin = c
    h = b.node("MaxPool", [h], "pool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    feats: dict[int, tuple[str, int]] = {}
    for cout, repeats, stride in _SCRFD_STAGES:
        h = b.conv(h, cin, cout, stride=1 if stride == 4 else 2, act="relu")
        for _ in range(repeats):
            h = b.conv(h, cout, cout, act="relu")
        cin = cout
        feats[stride] = (h, cout)

    # FPN neck: 1x1 laterals, top-down nearest upsampling, a 3x3 smoothing conv per level.
    lat = {s: b.conv(f, c, _SCRFD_NECK, k=1, act=None) for s, (f, c) in feats.items() if s >= 8}
    top = {32: lat[32]}
    top[16] = b.node("Add", [lat[16], b.upsample2(top[32], "nearest")], "fpn")
    top[8] = b.node("Add", [lat[8], b.upsample2(top[16], "nearest")], "fpn")
    pyramid = {s: b.conv(top[s], _SCRFD_NECK, _SCRFD_NECK, act="relu") for s in (8, 16, 32)}

    # Heads: SCRFD shares one head's weights across the strides; cost scales with each level's area.
    tower_w = [b.conv_weights(_SCRFD_NECK, _SCRFD_NECK) for _ in range(_SCRFD_HEAD_CONVS)]
    # Half the gain again on the predictors: their means feed Tanh, which should stay near linear.
    pred_w = [b.conv_weights(_SCRFD_NECK, 2 * width, gain=0.5) for width, _ in _SCRFD_GROUPS]
    conv3 = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}
    # [1,1] rather than 0-D tensors: they broadcast onto the [K,w] outputs the same way, and 0-D
    # tensors are where TensorRT's importer has been least reliable.
    tie = b.const(np.full((1, 1), _SCRFD_TIE, dtype=np.float32), "tie")
    flat = b.const(np.array([1, 1], dtype=np.int64), "mean_shape")
    consts = _scrfd_double_outputs()
    outputs: list[onnx.ValueInfoProto] = []
    results: dict[tuple[int, int], str] = {}
    for s in (8, 16, 32):
        x = pyramid[s]
        for w, bias in tower_w:
            x = b.node("Relu", [b.node("Conv", [x, w, bias], "head", **conv3)], "relu")
        for g, (w, bias) in enumerate(pred_w):
            pred = b.node("Conv", [x, w, bias], "pred", **conv3)
            mean = b.node("Reshape", [b.node("ReduceMean", [pred], "pred_mean", keepdims=1), flat], "mean11")
            results[(g, s)] = b.node("Mul", [b.node("Tanh", [mean], "pred_tanh"), tie], "pred_tie")
    for g, (width, prefix) in enumerate(_SCRFD_GROUPS):
        for i, s in enumerate((8, 16, 32)):
            const = consts[3 * g + i]
            name = f"{prefix}_{s}"
            base = b.const(const, f"{name}_base")
            b.nodes.append(helper.make_node("Add", [base, results[(g, s)]], [name], name=name))
            outputs.append(_tensor(name, [const.shape[0], width]))
    return b.model("scrfd_standin", [_tensor("input.1", [1, 3, "h", "w"])], outputs)


# --------------------------------------------------------------------------------------------------
# Face restorers (GFPGAN 1.4, GPEN-BFR-256): U-Net-ish conv stacks
# --------------------------------------------------------------------------------------------------


class _UNet(NamedTuple):
    size: int
    widths: tuple[int, ...]  # channels per level, full resolution first; each level halves the size
    mid_convs: int  # residual-free convs at the lowest level: parameters cheaply, MACs barely
    dec_double: tuple[bool, ...]  # per decoder level (deepest first): a second conv after the merge


# Tuned with count_macs/count_params to docs/model-contracts.md's costs and the files' parameter counts
# (bytes / 4): GFPGAN 1.4 197.8 GMACs, 340 MB -> 85 M; GPEN-BFR-256 8.7 GMACs, 75.7 MB -> 18.9 M.
_GFPGAN = _UNet(512, (64, 128, 256, 512, 512, 512, 512), 18, (True, True, True, True, False, False))
_GPEN256 = _UNet(256, (32, 48, 64, 256, 256, 512, 512), 0, (False, False, True, True, False, False))


def _build_unet(spec: _UNet, graph_name: str, seed: int) -> onnx.ModelProto:
    b = _Builder(seed)
    w = spec.widths
    h = b.conv("input", 3, w[0])
    h = b.conv(h, w[0], w[0])
    skips = [h]
    for lvl in range(1, len(w)):
        h = b.conv(h, w[lvl - 1], w[lvl], stride=2)
        h = b.conv(h, w[lvl], w[lvl])
        skips.append(h)
    for _ in range(spec.mid_convs):
        h = b.conv(h, w[-1], w[-1])
    for i, lvl in enumerate(range(len(w) - 2, -1, -1)):
        merged = b.node("Concat", [b.upsample2(h), skips[lvl]], "skip", axis=1)
        h = b.conv(merged, w[lvl + 1] + w[lvl], w[lvl])
        if spec.dec_double[i]:
            h = b.conv(h, w[lvl], w[lvl])
    h = b.conv(h, w[0], 3, act=None)
    b.nodes.append(helper.make_node("Tanh", [h], ["output"], name="output"))
    shape = [1, 3, spec.size, spec.size]
    return b.model(graph_name, [_tensor("input", shape)], [_tensor("output", shape)])


def build_gfpgan_standin(seed: int = 0) -> onnx.ModelProto:
    """GFPGAN-1.4-sized restorer: `input` [1,3,512,512] -> `output` [1,3,512,512] in [-1,1] (Tanh);
    ~198 GMACs, ~85 M parameters (a U-Net; the real one is a U-Net plus a StyleGAN2 decoder)."""
    return _build_unet(_GFPGAN, "gfpgan_standin", seed)


def build_gpen256_standin(seed: int = 0) -> onnx.ModelProto:
    """GPEN-BFR-256-sized restorer: `input` [1,3,256,256] -> `output` [1,3,256,256] in [-1,1];
    ~8.7 GMACs, ~19 M parameters (most of them at low resolution, as in GPEN's StyleGAN decoder)."""
    return _build_unet(_GPEN256, "gpen256_standin", seed)


# Real-ESRGAN (RRDBNet): for x2 the tile is first folded 2x2 into channels (Real-ESRGAN's
# pixel-unshuffle; ONNX's SpaceToDepth orders the channels differently at the same cost), a 3x3 conv
# to 64 features, 23 residual-in-residual dense blocks (three dense blocks of five 3x3 convs growing
# by 32 channels, residuals scaled by 0.2), a 3x3 conv added back, two nearest x2 upsamplings each
# with a 3x3 conv, two last 3x3 convs to RGB; LeakyReLU 0.2. x4 skips the fold. ~16.7 M parameters,
# ~293.8 GMACs on a 256 px tile for x2 (docs/model-contracts.md).
ESRGAN_FEAT, ESRGAN_BLOCKS, ESRGAN_GROW, ESRGAN_RESIDUAL = 64, 23, 32, 0.2


def _esrgan_dense(b: _Builder, x: str) -> str:
    feats = [x]
    for i in range(4):
        joined = feats[0] if len(feats) == 1 else b.node("Concat", feats, "cat", axis=1)
        feats.append(b.conv(joined, ESRGAN_FEAT + i * ESRGAN_GROW, ESRGAN_GROW))
    last = b.conv(
        b.node("Concat", feats, "cat", axis=1), ESRGAN_FEAT + 4 * ESRGAN_GROW, ESRGAN_FEAT, act=None
    )
    return b.node("Add", [b.node("Mul", [last, b.scalar(ESRGAN_RESIDUAL, "res")]), x], "res_add")


def build_esrgan_standin(scale: int = 2, tile: int = 256, seed: int = 0) -> onnx.ModelProto:
    """Real-ESRGAN x`scale` (2 or 4) stand-in: `input` [1,3,tile,tile] -> `output` [1,3,s*tile,s*tile]."""
    if scale not in (2, 4):
        raise ValueError(f"Real-ESRGAN stand-ins are x2 or x4, not x{scale}")
    b = _Builder(seed)
    x, cin = "input", 3
    if scale == 2:
        x, cin = b.node("SpaceToDepth", [x], "unshuffle", blocksize=2), 12
    feat = b.conv(x, cin, ESRGAN_FEAT, act=None)
    body = feat
    for _ in range(ESRGAN_BLOCKS):
        inner = body
        for _ in range(3):
            inner = _esrgan_dense(b, inner)
        body = b.node("Add", [b.node("Mul", [inner, b.scalar(ESRGAN_RESIDUAL, "res")]), body], "rrdb_add")
    feat = b.node("Add", [feat, b.conv(body, ESRGAN_FEAT, ESRGAN_FEAT, act=None)], "trunk")
    for _ in range(2):
        feat = b.conv(b.upsample2(feat, mode="nearest"), ESRGAN_FEAT, ESRGAN_FEAT)
    out = b.conv(b.conv(feat, ESRGAN_FEAT, ESRGAN_FEAT), ESRGAN_FEAT, 3, act=None)
    b.nodes.append(helper.make_node("Identity", [out], ["output"], name="output"))
    big = tile * scale
    shapes = ([1, 3, tile, tile], [1, 3, big, big])
    return b.model(
        f"real_esrgan_x{scale}_standin", [_tensor("input", shapes[0])], [_tensor("output", shapes[1])]
    )


# --------------------------------------------------------------------------------------------------
# Cost accounting
# --------------------------------------------------------------------------------------------------

# Initializers with more elements than this are replaced by typed graph inputs in the skeleton:
# shape inference needs their dims, never their values (only small int64 shape constants are read).
_SKELETON_KEEP = 64


def _skeleton(
    model: onnx.ModelProto, input_shapes: Mapping[str, Sequence[int]] | None = None
) -> onnx.ModelProto:
    """The model without its large weights (they become typed inputs), optionally with fixed input
    shapes. Lets shape inference and the checker run in milliseconds on a 554 MB model."""
    g = model.graph
    inputs: list[onnx.ValueInfoProto] = []
    for vi in g.input:
        if input_shapes is not None and vi.name in input_shapes:
            elem = vi.type.tensor_type.elem_type
            inputs.append(helper.make_tensor_value_info(vi.name, elem, list(input_shapes[vi.name])))
        else:
            inputs.append(vi)
    small: list[onnx.TensorProto] = []
    declared = {vi.name for vi in g.input}
    for init in g.initializer:
        if int(np.prod(init.dims)) <= _SKELETON_KEEP:
            small.append(init)
        elif init.name not in declared:
            inputs.append(helper.make_tensor_value_info(init.name, init.data_type, list(init.dims)))
    graph = helper.make_graph(list(g.node), g.name, inputs, list(g.output), initializer=small)
    skel = helper.make_model(graph, opset_imports=list(model.opset_import), producer_name=model.producer_name)
    skel.ir_version = model.ir_version
    return skel


def _dims(shapes: Mapping[str, list[int | None]], name: str, node: onnx.NodeProto) -> list[int]:
    dims = shapes.get(name)
    if dims is None or any(d is None for d in dims):
        raise ValueError(
            f"{node.op_type} node {node.name or node.output[0]!r}: shape of {name!r} unknown after shape "
            "inference; pass input_shapes for the dynamic inputs."
        )
    return [int(d) for d in dims if d is not None]


def count_macs(model: onnx.ModelProto, input_shapes: Mapping[str, Sequence[int]] | None = None) -> int:
    """Multiply-accumulates of one run: Conv, Gemm and MatMul nodes of the main graph, with shapes from
    onnx.shape_inference. Dynamic inputs need `input_shapes` ({"input.1": (1, 3, 640, 640)}).
    Element-wise ops, norms and resizes are left out (<1% of these models, and not how MACs are quoted)."""
    inferred = onnx.shape_inference.infer_shapes(_skeleton(model, input_shapes), strict_mode=True)
    shapes: dict[str, list[int | None]] = {}
    for vi in [*inferred.graph.input, *inferred.graph.value_info, *inferred.graph.output]:
        tt = vi.type.tensor_type
        shapes[vi.name] = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
    for init in inferred.graph.initializer:
        shapes[init.name] = list(init.dims)
    total = 0
    for node in inferred.graph.node:
        if node.op_type == "Conv":
            out = _dims(shapes, node.output[0], node)
            w = _dims(shapes, node.input[1], node)
            # Each output element costs (C_in / groups) * kh * kw MACs: exactly the weight's dims 1..n.
            total += int(np.prod(out)) * int(np.prod(w[1:]))
        elif node.op_type == "Gemm":
            a = _dims(shapes, node.input[0], node)
            trans_a = any(att.name == "transA" and att.i for att in node.attribute)
            k = a[0] if trans_a else a[1]
            total += int(np.prod(_dims(shapes, node.output[0], node))) * k
        elif node.op_type == "MatMul":
            k = _dims(shapes, node.input[0], node)[-1]
            total += int(np.prod(_dims(shapes, node.output[0], node))) * k
    return total


def count_params(model: onnx.ModelProto) -> int:
    """Elements in the floating-point initializers (weights, biases, norms and the emap): what the
    published figures count and what the file size is made of. Integer shape constants are left out."""
    return sum(int(np.prod(t.dims)) for t in model.graph.initializer if t.data_type in _FLOAT_TYPES)


# --------------------------------------------------------------------------------------------------
# The on-disk cache
# --------------------------------------------------------------------------------------------------


def _build_arcface_double() -> onnx.ModelProto:
    # The recogniser runs once per source photo, never per frame: its cost does not matter to a
    # benchmark, so the contract-exact double stands in (lazy import: see _scrfd_double_outputs).
    from models.fakes.pixel_doubles import build_arcface

    return build_arcface()


class _Standin(NamedTuple):
    name: str  # catalogue entry name (the `which` key)
    filename: str  # catalogue file name
    approx_mb: int  # for the progress line, before the build
    build: Callable[[], onnx.ModelProto]


_STANDINS: tuple[_Standin, ...] = (
    _Standin("det_10g", "det_10g.onnx", 17, build_scrfd_standin),
    _Standin("w600k_r50", "w600k_r50.onnx", 1, _build_arcface_double),
    _Standin("inswapper_128", "inswapper_128.onnx", 554, build_inswapper_standin),
    _Standin(
        "inswapper_128_fp16", "inswapper_128_fp16.onnx", 277, lambda: build_inswapper_standin(fp16=True)
    ),
    _Standin("gfpgan_1.4", "gfpgan_1.4.onnx", 340, build_gfpgan_standin),
    _Standin("GPEN-BFR-256", "GPEN-BFR-256.onnx", 76, build_gpen256_standin),
    _Standin("real_esrgan_x2", "real_esrgan_x2.onnx", 67, lambda: build_esrgan_standin(2)),
)
STANDIN_NAMES: tuple[str, ...] = tuple(s.name for s in _STANDINS)

# Files we wrote start with ir_version then producer_name (protobuf writes fields in number order),
# so the first bytes tell our files from real downloads without parsing 554 MB.
_OUR_PRODUCERS = (PRODUCER.encode(), b"facecast-doubles")
_HEAD_BYTES = 64


def _ours(path: Path) -> bool:
    with path.open("rb") as f:
        head = f.read(_HEAD_BYTES)
    return any(p in head for p in _OUR_PRODUCERS)


def _read_manifest(path: Path, log: Callable[[str], None]) -> dict[str, Any]:
    """The manifest's file entries if it is this version's, else {} (everything gets rebuilt)."""
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        log(f"stand-in manifest {path} unreadable ({exc}); rebuilding")
        return {}
    if not isinstance(data, dict) or data.get("version") != STANDINS_VERSION:
        found = data.get("version") if isinstance(data, dict) else None
        log(f"stand-ins in {path.parent} are version {found}, need {STANDINS_VERSION}; rebuilding")
        return {}
    files = data.get("files")
    return dict(files) if isinstance(files, dict) else {}


def _save(model: onnx.ModelProto, path: Path) -> None:
    # format given: the temporary name has no .onnx suffix to infer it from.
    onnx.save(model, str(path), format="protobuf")


def _atomic_write(path: Path, write: Callable[[Path], None]) -> None:
    """write(tmp) then os.replace: an interrupted build leaves the old file or none, never half a file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        # Only after a failure is there anything left to remove; the error itself propagates.
        tmp.unlink(missing_ok=True)


def ensure_standins(
    cache_dir: Path,
    which: Sequence[str] = DEFAULT_STANDINS,
    log: Callable[[str], None] = print,
) -> Path:
    """Write the stand-ins named in `which` (catalogue names, see STANDIN_NAMES) into cache_dir under
    the catalogue's file names, once; later calls reuse them while `standins.json` records this
    STANDINS_VERSION and the file's size. Returns cache_dir.

    Refuses (FileExistsError) to overwrite a model file it did not write, so pointing it at a real
    model folder cannot replace a downloaded inswapper_128.onnx with random weights.
    """
    unknown = [w for w in which if w not in STANDIN_NAMES]
    if unknown:
        raise ValueError(f"unknown stand-in(s) {unknown}; known: {', '.join(STANDIN_NAMES)}")
    cache_dir = Path(cache_dir)
    cache_dir.mkdir(parents=True, exist_ok=True)
    manifest_path = cache_dir / MANIFEST_NAME
    files = _read_manifest(manifest_path, log)

    def save_manifest() -> None:
        text = json.dumps({"version": STANDINS_VERSION, "files": files}, indent=2, sort_keys=True) + "\n"

        def write(tmp: Path) -> None:
            tmp.write_text(text, encoding="utf-8")

        _atomic_write(manifest_path, write)

    reused: list[str] = []
    for spec in _STANDINS:
        if spec.name not in which:
            continue
        path = cache_dir / spec.filename
        entry = files.get(spec.filename)
        if isinstance(entry, dict) and path.is_file() and path.stat().st_size == entry.get("bytes"):
            reused.append(spec.filename)
            continue
        if path.is_file() and not _ours(path):
            raise FileExistsError(
                f"{path} exists and is not a FaceCast stand-in; use an empty cache folder for stand-ins."
            )
        log(f"building {spec.name} stand-in ({spec.approx_mb} MB) ...")
        start = time.perf_counter()
        model = spec.build()
        _atomic_write(path, functools.partial(_save, model))
        del model  # up to 554 MB: free it before the next build
        size = path.stat().st_size
        elapsed = time.perf_counter() - start
        files[spec.filename] = {"name": spec.name, "bytes": size, "build_s": round(elapsed, 2)}
        # Recorded after each file, so an interruption later keeps what is already built.
        save_manifest()
        log(f"wrote {path.name} ({size / 1e6:.1f} MB) in {elapsed:.1f} s")
    if not manifest_path.is_file():
        save_manifest()
    if reused:
        log(f"using cached stand-ins in {cache_dir}: {', '.join(reused)}")
    return cache_dir
