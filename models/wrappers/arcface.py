"""ArcFace recogniser (insightface w600k_r50): 5-point aligned 112 px crop -> 512-d identity vector.

Contract (docs/model-contracts.md, "ArcFace recognition"): input [N,3,112,112] RGB, (x - 127.5) / 127.5;
output [N,512] raw. The swapper wants the L2-normalised vector.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

import numpy as np
import numpy.typing as npt
import onnxruntime as ort

from models.errors import ModelContractError
from models.ops.align import estimate_norm, warp_crop
from models.types import FloatArray, ImageBGR

INPUT_MEAN = 127.5
INPUT_STD = 127.5
# ORT type string -> the numpy dtype to feed (read-only: no module-level mutable state).
_FLOAT_TYPES: Mapping[str, type[np.floating[Any]]] = MappingProxyType(
    {"tensor(float)": np.float32, "tensor(float16)": np.float16}
)


def _known(dim: Any) -> bool:
    return isinstance(dim, int) and dim > 0


def _fmt_shape(shape: Sequence[Any]) -> str:
    return "[" + ",".join(str(d) if _known(d) else "N" for d in shape) + "]"


def l2_normalise(vec: npt.ArrayLike) -> FloatArray:
    """vec / |vec| as float32; a zero or non-finite vector is an error, never a silent NaN."""
    v = np.asarray(vec, dtype=np.float32)
    norm = float(np.linalg.norm(v))
    if not np.isfinite(norm) or norm == 0.0:
        raise ValueError(f"cannot normalise an embedding with norm {norm}")
    return np.asarray(v / np.float32(norm), dtype=np.float32)


class ArcFace:
    """Face recogniser. One instance per thread: the crop and blob buffers are reused."""

    input_size = 112
    embedding_size = 512

    def __init__(self, session: ort.InferenceSession) -> None:
        inputs = session.get_inputs()
        outputs = session.get_outputs()
        self.check_contract(inputs, outputs)
        self.session = session
        self.input_name: str = inputs[0].name
        self.output_name: str = outputs[0].name
        self.input_dtype: type[np.floating[Any]] = _FLOAT_TYPES[inputs[0].type]
        size = self.input_size
        self._crop: ImageBGR = np.zeros((size, size, 3), dtype=np.uint8)
        self._blob: npt.NDArray[Any] = np.empty((1, 3, size, size), dtype=self.input_dtype)

    @classmethod
    def check_contract(cls, inputs: Sequence[Any], outputs: Sequence[Any]) -> None:
        size, dim = cls.input_size, cls.embedding_size
        expected = f"expected one input [N,3,{size},{size}] and one output [N,{dim}]"
        if len(inputs) != 1 or len(outputs) != 1:
            raise ModelContractError(
                f"ArcFace recogniser: {expected}; the model has {len(inputs)} inputs and "
                f"{len(outputs)} outputs."
            )
        ishape = list(inputs[0].shape or [])
        oshape = list(outputs[0].shape or [])
        if len(ishape) != 4 or ishape[1:] != [3, size, size]:
            raise ModelContractError(f"ArcFace recogniser: {expected}; the input is {_fmt_shape(ishape)}.")
        if len(oshape) != 2 or oshape[1] != dim:
            raise ModelContractError(f"ArcFace recogniser: {expected}; the output is {_fmt_shape(oshape)}.")
        if inputs[0].type not in _FLOAT_TYPES:
            raise ModelContractError(f"ArcFace recogniser: expected a float input, got {inputs[0].type}.")

    def embed_raw(self, image_bgr: ImageBGR, kps: npt.ArrayLike) -> FloatArray:
        """The raw (512,) output for the face whose 5 landmarks are `kps` (frame pixels)."""
        m = estimate_norm(kps, self.input_size)
        warp_crop(image_bgr, m, self.input_size, out=self._crop)
        return self.embed_aligned_raw(self._crop)

    def embed(self, image_bgr: ImageBGR, kps: npt.ArrayLike) -> FloatArray:
        """The L2-normalised (512,) identity vector (insightface's `normed_embedding`)."""
        return l2_normalise(self.embed_raw(image_bgr, kps))

    def embed_aligned_raw(self, crop_bgr: ImageBGR) -> FloatArray:
        """Raw (512,) output for a crop that is already ArcFace-aligned at 112 px."""
        size = self.input_size
        if crop_bgr.shape != (size, size, 3) or crop_bgr.dtype != np.uint8:
            raise ValueError(
                f"expected a ({size}, {size}, 3) uint8 crop, got {crop_bgr.shape} {crop_bgr.dtype}"
            )
        dst = self._blob[0]
        np.subtract(crop_bgr[:, :, ::-1].transpose(2, 0, 1), np.float32(INPUT_MEAN), out=dst)
        np.multiply(dst, np.float32(1.0 / INPUT_STD), out=dst)
        out = self.session.run([self.output_name], {self.input_name: self._blob})[0]
        return np.asarray(out[0], dtype=np.float32)
