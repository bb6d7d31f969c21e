"""Face restorers: GPEN-BFR-256, GPEN-BFR-512, GFPGAN 1.4, CodeFormer. One small class per contract.

Contract (docs/model-contracts.md, "Face restorers"): an FFHQ-aligned crop (template below, scaled to the
model's size), RGB, (x/255 - 0.5)/0.5 in; [-1, 1] out -> (x + 1)/2 * 255. CodeFormer has a second
input, `weight` [1] (fidelity, float64 in the published file; the dtype is read from the session).

The session is injected; names, shapes and dtypes are read from it and checked against the class's
contract, so a wrong file fails at load time with ModelContractError instead of producing garbage.
Each instance keeps its input blob and scratch buffers: one instance per worker thread.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar, Literal

import numpy as np
import numpy.typing as npt
import onnxruntime as ort

from models.errors import ModelContractError, ModelOutputError
from models.ops.align import FFHQ_TEMPLATE_512
from models.runtime.served import ServedModel
from models.runtime.session import SessionFactory, open_wrapped, wrap_checked
from models.types import FloatArray, ImageBGR

RestorerName = Literal["gpen_256", "gpen_512", "gfpgan_1.4", "codeformer"]

_IMAGE_TYPES: Mapping[str, type[np.floating[Any]]] = MappingProxyType(
    {"tensor(float)": np.float32, "tensor(float16)": np.float16}
)
_WEIGHT_TYPES: Mapping[str, type[np.floating[Any]]] = MappingProxyType(
    {"tensor(double)": np.float64, "tensor(float)": np.float32}
)


def ffhq_template(size: int) -> FloatArray:
    """The five FFHQ landmarks for a `size` px restorer crop (the 512 px template, scaled)."""
    return np.asarray(FFHQ_TEMPLATE_512 * np.float32(size / 512.0), dtype=np.float32)


def _fmt(shape: Sequence[Any] | None) -> str:
    return "[" + ",".join(str(d) if isinstance(d, int) else "?" for d in (shape or [])) + "]"


def _shape_fits(got: Sequence[Any] | None, want: Sequence[int]) -> bool:
    """Static dims must match; symbolic/unknown dims (dynamic exports) are accepted."""
    dims = list(got or [])
    if len(dims) != len(want):
        return False
    return all(not isinstance(d, int) or d <= 0 or d == w for d, w in zip(dims, want, strict=True))


@dataclass(frozen=True, slots=True)
class RestorerContract:
    label: str  # as the catalogue and the user know it
    size: int  # square input and output, px
    image_input: str | None  # required name of the image input; None = whatever it is called
    weight_input: str | None = None  # CodeFormer's fidelity input

    def text(self) -> str:
        image = f"{self.image_input or 'image'}[1,3,{self.size},{self.size}]"
        weight = f" + {self.weight_input}[1]" if self.weight_input else ""
        return f"inputs {image}{weight} and an output [1,3,{self.size},{self.size}]"


class FaceRestorer:
    """Base for the restorers: pre/post-processing shared, the contract per subclass.

    `enhance(crop)` takes and returns a (size, size, 3) uint8 BGR crop aligned to `ffhq_template(size)`.
    """

    contract: ClassVar[RestorerContract]

    def __init__(self, session: ort.InferenceSession) -> None:
        self.check_contract(session.get_inputs(), session.get_outputs())
        self.session = session
        inputs = session.get_inputs()
        c = self.contract
        image = next(i for i in inputs if i.name != c.weight_input)
        self.size: int = c.size
        self.image_name: str = image.name
        self.image_dtype: type[np.floating[Any]] = _IMAGE_TYPES[image.type]
        # CodeFormer (and a GPEN/GFPGAN re-export with extra outputs): the restored image is the
        # first output, as FaceFusion reads it.
        self.output_name: str = session.get_outputs()[0].name
        # Its model calls: through the process's shared service once attached (realtime.wiring).
        self.served = ServedModel(session, self.output_name, c.label)
        self._blob: npt.NDArray[Any] = np.zeros((1, 3, c.size, c.size), dtype=self.image_dtype)
        self._feeds: dict[str, npt.NDArray[Any]] = {self.image_name: self._blob}
        self._scratch: FloatArray = np.empty((c.size, c.size, 3), dtype=np.float32)

    @classmethod
    def check_contract(cls, inputs: Sequence[Any], outputs: Sequence[Any]) -> None:
        c = cls.contract
        got = (
            " + ".join(f"{i.name}{_fmt(i.shape)}" for i in inputs)
            + " -> "
            + ", ".join(_fmt(o.shape) for o in outputs)
        )
        bad = ModelContractError(f"not a {c.label} model: expected {c.text()}, got {got}.")
        n_inputs = 2 if c.weight_input else 1
        if len(inputs) != n_inputs or not outputs:
            raise bad
        by_name = {i.name: i for i in inputs}
        if c.weight_input is not None:
            weight = by_name.get(c.weight_input)
            if weight is None or not _shape_fits(weight.shape, [1]):
                raise bad
            if weight.type not in _WEIGHT_TYPES:
                raise ModelContractError(
                    f"{c.label}: {weight.name} must be double or float, got {weight.type}."
                )
        images = [i for i in inputs if i.name != c.weight_input]
        if len(images) != 1:
            raise bad
        image = images[0]
        if c.image_input is not None and image.name != c.image_input:
            raise bad
        want = [1, 3, c.size, c.size]
        if not _shape_fits(image.shape, want) or not _shape_fits(outputs[0].shape, want):
            raise bad
        for node in (image, outputs[0]):
            if node.type not in _IMAGE_TYPES:
                raise ModelContractError(f"{c.label}: {node.name} must be float or float16, got {node.type}.")

    @classmethod
    def from_file(cls, path: Path | str, factory: SessionFactory, session: Any = None) -> FaceRestorer:
        """The restorer in `path` (session: its session opened already, a shared service's)."""
        if session is None:
            return open_wrapped(path, factory, cls)
        return wrap_checked(Path(path), session, cls)

    def extra_feeds(self) -> dict[str, npt.NDArray[Any]]:
        """The inputs besides the image (CodeFormer's fidelity weight), for a caller that binds the
        image itself (realtime.face.device_backend). The arrays are live: later settings changes show."""
        return {k: v for k, v in self._feeds.items() if k != self.image_name}

    def enhance(self, crop_bgr: ImageBGR, out: ImageBGR | None = None) -> ImageBGR:
        """The restored crop (uint8 BGR); written into `out` when given, else a new array."""
        self._load(crop_bgr)
        return self._decode(self._infer(), out)

    def _load(self, crop_bgr: ImageBGR) -> None:
        s = self.size
        if crop_bgr.shape != (s, s, 3) or crop_bgr.dtype != np.uint8:
            raise ValueError(f"expected a ({s}, {s}, 3) uint8 crop, got {crop_bgr.shape} {crop_bgr.dtype}")
        # BGR -> RGB, HWC -> CHW, (x/255 - 0.5)/0.5 = x/127.5 - 1, computed in float32 straight
        # into the reused blob (through the scratch buffer for a float16 input).
        fp32 = self._blob.dtype == np.float32
        # The (S, S, 3) scratch viewed as (3, S, S): same memory, no allocation per frame.
        dst = self._blob[0] if fp32 else self._scratch.reshape(3, s, s)
        np.multiply(crop_bgr[:, :, ::-1].transpose(2, 0, 1), np.float32(1.0 / 127.5), out=dst)
        np.subtract(dst, np.float32(1.0), out=dst)
        if not fp32:
            np.copyto(self._blob[0], dst, casting="same_kind")

    def _infer(self) -> npt.NDArray[Any]:
        return self.served.run(self._feeds)

    def _decode(self, pred: npt.NDArray[Any], out: ImageBGR | None) -> ImageBGR:
        s = self.size
        dst = np.empty((s, s, 3), dtype=np.uint8) if out is None else out
        if dst.shape != (s, s, 3) or dst.dtype != np.uint8:
            raise ValueError(f"out must be a ({s}, {s}, 3) uint8 array")
        if pred.shape != (1, 3, s, s):
            raise ModelContractError(
                f"{self.contract.label}: output has shape {pred.shape}, expected (1, 3, {s}, {s})."
            )
        # FaceFusion's normalisation: clip to [-1, 1], (x + 1)/2 * 255, round; RGB -> BGR.
        np.copyto(self._scratch, pred[0].transpose(1, 2, 0)[:, :, ::-1], casting="same_kind")
        if not np.isfinite(self._scratch).all():
            # Cast to uint8, NaN and -inf would become black and +inf white: blocks in the face.
            raise ModelOutputError(f"{self.contract.label} returned NaN or infinite values.")
        np.clip(self._scratch, -1.0, 1.0, out=self._scratch)
        np.add(self._scratch, np.float32(1.0), out=self._scratch)
        np.multiply(self._scratch, np.float32(127.5), out=self._scratch)
        np.rint(self._scratch, out=self._scratch)
        np.copyto(dst, self._scratch, casting="unsafe")
        return dst


class GPEN256(FaceRestorer):
    """GPEN-BFR-256 (8.7 GMACs): the restorer cheap enough for every frame."""

    contract = RestorerContract("GPEN-BFR-256", 256, None)


class GPEN512(FaceRestorer):
    """GPEN-BFR-512 (138.1 GMACs)."""

    contract = RestorerContract("GPEN-BFR-512", 512, None)


class GFPGAN14(FaceRestorer):
    """GFPGAN 1.4 (197.8 GMACs), FaceFusion's export: `input` [1,3,512,512]."""

    contract = RestorerContract("GFPGAN 1.4", 512, "input")


class CodeFormer(FaceRestorer):
    """CodeFormer (404.9 GMACs): `input` [1,3,512,512] + `weight` [1], its fidelity (0..1)."""

    contract = RestorerContract("CodeFormer", 512, "input", "weight")

    def __init__(self, session: ort.InferenceSession, fidelity: float = 0.5) -> None:
        super().__init__(session)
        weight = next(i for i in session.get_inputs() if i.name == self.contract.weight_input)
        # The published file declares float64; a float32 re-export must not be fed doubles.
        self.weight_dtype: type[np.floating[Any]] = _WEIGHT_TYPES[weight.type]
        self._weight: npt.NDArray[Any] = np.zeros(1, dtype=self.weight_dtype)
        self._feeds[weight.name] = self._weight
        self.set_fidelity(fidelity)

    @property
    def fidelity(self) -> float:
        return float(self._weight[0])

    def set_fidelity(self, fidelity: float) -> None:
        if not 0.0 <= fidelity <= 1.0:
            raise ValueError(f"CodeFormer fidelity is 0..1, got {fidelity}")
        self._weight[0] = fidelity


RESTORERS: Mapping[RestorerName, type[FaceRestorer]] = MappingProxyType(
    {"gpen_256": GPEN256, "gpen_512": GPEN512, "gfpgan_1.4": GFPGAN14, "codeformer": CodeFormer}
)


def load_restorer(
    name: RestorerName, path: Path | str, factory: SessionFactory, session: Any = None
) -> FaceRestorer:
    """The restorer class for settings' `enhancer.model`, checked against the file's signature."""
    try:
        cls = RESTORERS[name]
    except KeyError:
        raise ValueError(f"unknown restorer {name!r}; known: {', '.join(RESTORERS)}") from None
    return cls.from_file(path, factory, session)


__all__ = [
    "GFPGAN14",
    "GPEN256",
    "GPEN512",
    "RESTORERS",
    "CodeFormer",
    "FaceRestorer",
    "RestorerContract",
    "RestorerName",
    "ffhq_template",
    "load_restorer",
]
