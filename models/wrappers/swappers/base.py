"""The face-swapper interface: what the per-face chain, the device path and the inference service
use of any swap model, written once over a family's facts (facts.py).

Contract shared by every family (docs/model-contracts.md, "Face swappers"): two inputs, `target`
[B,3,S,S] (the aligned crop, normalised per the family) and `source` ([B,512] identity vector, or
[B,3,s,s] source picture), and the swapped crop [B,3,S,S] as the first output (a family may add
outputs after it, which are not read). B is 1 in most published files; a dynamic batch axis is
accepted. Inputs and outputs are float32 or float16: the dtypes are read from the session, never
assumed from the file name.

One instance per thread: it owns its input blobs and the crop codec's scratch buffers. Its model
calls go through an inference service (models.runtime.inference_service): the process's shared one
once `attach`ed (batched with every other stream's faces), else a private one of its own that runs
each call at once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
import onnxruntime as ort

from models.errors import ModelContractError, ModelOutputError
from models.ops.align import warp_paste_crop
from models.ops.crop_codec import CropCodec
from models.runtime.inference_service import ServiceClient, Ticket
from models.runtime.served import private_client
from models.types import FloatArray, ImageBGR, SourceFace
from models.wrappers.arcface import l2_normalise
from models.wrappers.swappers.converter import EmbeddingConverter
from models.wrappers.swappers.facts import SwapperFacts

TARGET_NAME = "target"
SOURCE_NAME = "source"
EMBEDDING_SIZE = 512
# ORT type string -> the numpy dtype to feed (read-only: no module-level mutable state).
FLOAT_TYPES: Mapping[str, type[np.floating[Any]]] = MappingProxyType(
    {"tensor(float)": np.float32, "tensor(float16)": np.float16}
)


def fmt_shape(shape: Sequence[Any] | None) -> str:
    return "[" + ",".join(str(d) if isinstance(d, int) and d > 0 else "?" for d in (shape or [])) + "]"


def _batch_ok(dim: Any) -> bool:
    """A batch dimension: 1, or dynamic (symbolic or unknown)."""
    return not isinstance(dim, int) or dim <= 0 or dim == 1


def _fits(shape: Sequence[Any] | None, rest: Sequence[int]) -> bool:
    """[B, *rest] with B as _batch_ok and every other dimension exactly as given."""
    dims = list(shape or [])
    return len(dims) == len(rest) + 1 and _batch_ok(dims[0]) and list(dims[1:]) == list(rest)


def _non_finite(label: str) -> ModelOutputError:
    # Cast to uint8, NaN would become black: a black square in the face.
    return ModelOutputError(
        f"The face swapper {label} returned NaN or infinite values (a float16 overflow?).",
        hint="Use an fp32 swapper file (swap.model), or pipeline.fp16 = false.",
    )


class FaceSwapper:
    """A face-swap model of one family: `facts` say how to feed it and read it (module doc).

    identity(face) -> the `source` tensor for a source face (computed once per identity);
    swap(crop, identity) -> the swapped crop; encode_target / run / decode are the same call in
    three parts, for the batching service and the device path.
    """

    facts: ClassVar[SwapperFacts]
    label: ClassVar[str]  # the family as users know it, for messages

    def __init__(self, session: ort.InferenceSession, converter: EmbeddingConverter | None = None) -> None:
        self.check_contract(session.get_inputs(), session.get_outputs())
        facts = self.facts
        if facts.needs_converter and converter is None:
            raise ModelContractError(
                f"{self.label} needs its ArcFace embedding converter, and none was loaded.",
                hint="Download the swapper again: its converter comes with it (models download).",
            )
        self.session = session
        self.converter = converter if facts.needs_converter else None
        by_name = {i.name: i for i in session.get_inputs()}
        self.target_dtype: type[np.floating[Any]] = FLOAT_TYPES[by_name[TARGET_NAME].type]
        self.source_dtype: type[np.floating[Any]] = FLOAT_TYPES[by_name[SOURCE_NAME].type]
        self.output_name: str = session.get_outputs()[0].name
        self.output_dtype: type[np.floating[Any]] = FLOAT_TYPES[session.get_outputs()[0].type]
        self.fixed_batch: bool = isinstance(by_name[TARGET_NAME].shape[0], int)
        size = facts.size
        self.codec = CropCodec(facts.crop_spec())
        self._target: npt.NDArray[Any] = np.zeros((1, 3, size, size), dtype=self.target_dtype)
        self._source: npt.NDArray[Any] = np.zeros(self.source_shape(), dtype=self.source_dtype)
        self._feeds = {TARGET_NAME: self._target, SOURCE_NAME: self._source}
        # Until attached to the process's shared service: a private one, each call run at once.
        self.client: ServiceClient = private_client(session, self.output_name, self.label)

    def attach(self, client: ServiceClient) -> None:
        """Send this swapper's model calls through `client` (a shared service's stream)."""
        self.client = client
    # -- what it is ------------------------------------------------------------------------------

    @property
    def input_size(self) -> int:
        return self.facts.size

    @property
    def signed_output(self) -> bool:
        """The swapped crop is RGB in [-1, 1] (else [0, 1])."""
        return self.facts.output == "signed"

    @classmethod
    def source_shape(cls) -> tuple[int, ...]:
        layout = cls.facts.identity_layout
        if layout is None:
            return (1, EMBEDDING_SIZE)
        return (1, 3, layout.size, layout.size)

    @classmethod
    def contract_text(cls) -> str:
        s = cls.facts.size
        src = fmt_shape(cls.source_shape())
        return f"inputs {TARGET_NAME}[1,3,{s},{s}] + {SOURCE_NAME}{src} and an output [1,3,{s},{s}]"

    @classmethod
    def check_contract(cls, inputs: Sequence[Any], outputs: Sequence[Any]) -> None:
        """ModelContractError saying what was expected and what the file has."""
        s = cls.facts.size
        by_name = {i.name: i for i in inputs}
        got = (
            " + ".join(f"{i.name}{fmt_shape(i.shape)}" for i in inputs)
            + " -> "
            + ", ".join(fmt_shape(o.shape) for o in outputs)
        )
        ok = (
            len(inputs) == 2
            and len(outputs) >= 1
            and TARGET_NAME in by_name
            and SOURCE_NAME in by_name
            and _fits(by_name[TARGET_NAME].shape, [3, s, s])
            and _fits(by_name[SOURCE_NAME].shape, list(cls.source_shape()[1:]))
            and _fits(outputs[0].shape, [3, s, s])
        )
        if not ok:
            article = "an" if cls.label[:1].lower() in "aeio" else "a"
            raise ModelContractError(
                f"not {article} {cls.label} model: expected {cls.contract_text()}, got {got}."
            )
        for node in (by_name[TARGET_NAME], by_name[SOURCE_NAME], outputs[0]):
            if node.type not in FLOAT_TYPES:
                raise ModelContractError(
                    f"{cls.label}: {node.name} must be float or float16, got {node.type}."
                )

    # -- identity --------------------------------------------------------------------------------

    def identity(self, face: SourceFace) -> FloatArray:
        """The `source` tensor (float32, batch 1) for `face`; computed once per identity."""
        kind = self.facts.identity
        if kind == "embedding":
            return l2_normalise(face.embedding).reshape(1, EMBEDDING_SIZE)
        if kind in ("converted", "converted_normed"):
            if face.raw_embedding is None:
                raise ValueError(f"{self.label} needs the raw ArcFace embedding of the source")
            assert self.converter is not None  # checked at construction
            converted = self.converter.convert(face.raw_embedding)
            return l2_normalise(converted).reshape(1, -1) if kind == "converted_normed" else converted
        if kind == "face_image":
            return self._source_picture(face)
        raise NotImplementedError(f"{type(self).__name__} must compute its {kind!r} identity itself")

    def _source_picture(self, face: SourceFace) -> FloatArray:
        layout = self.facts.identity_layout
        spec = self.facts.source_spec()
        assert layout is not None and spec is not None
        if face.image is None or face.kps is None:
            raise ValueError(f"{self.label} needs the source photo itself, not only its embedding")
        crop = warp_paste_crop(face.image, layout.matrix(face.kps), layout.size)
        out = np.zeros(self.source_shape(), dtype=np.float32)
        CropCodec(spec).encode(crop, out)
        return out

    # -- one face, in three parts ----------------------------------------------------------------

    def encode_target(self, crop_bgr: ImageBGR, out: npt.NDArray[Any] | None = None) -> npt.NDArray[Any]:
        """The aligned crop as the model's `target` ([1,3,S,S] in its dtype; into `out` if given)."""
        return self.codec.encode(crop_bgr, self._target if out is None else out)

    def run(self, target: npt.NDArray[Any], source: npt.NDArray[Any]) -> npt.NDArray[Any]:
        """One model call on ready tensors: [B,3,S,S] + [B,...] -> the first output [B,3,S,S]."""
        return np.asarray(self.session.run([self.output_name], {TARGET_NAME: target, SOURCE_NAME: source})[0])

    def submit(self, target: npt.NDArray[Any], source: npt.NDArray[Any]) -> Ticket:
        """Queue one face: its encoded crop ([1,3,S,S], left untouched until the result is read)
        and its identity tensor in the model's dtype; the ticket's result()[0] is the output."""
        return self.client.submit({TARGET_NAME: target, SOURCE_NAME: source})

    def decode(self, pred: npt.NDArray[Any], out: ImageBGR | None = None) -> ImageBGR:
        """A model output ([1,3,S,S] or one [3,S,S] row) as a uint8 BGR crop (into `out` if given)."""
        dst, finite = self.codec.decode(pred, out, self.facts.output)
        if not finite:
            raise _non_finite(self.label)
        return dst

    def swap(self, crop_bgr: ImageBGR, identity: npt.ArrayLike, out: ImageBGR | None = None) -> ImageBGR:
        """The swapped (S, S, 3) uint8 BGR crop for the `identity` tensor; into `out` when given."""
        self.encode_target(crop_bgr)
        self.load_source(identity)
        return self.decode(np.asarray(self.submit(self._target, self._source).result()[0]), out)

    def source_tensor(self, identity: npt.ArrayLike) -> npt.NDArray[Any]:
        """An identity tensor (from `identity()`) in the shape and dtype the model takes."""
        shaped = np.asarray(identity).reshape(self.source_shape())
        return np.ascontiguousarray(shaped, dtype=self.source_dtype)

    def load_source(self, identity: npt.ArrayLike) -> None:
        src = np.asarray(identity)
        if src.size != self._source.size:
            raise ValueError(f"expected a {self.source_shape()} identity, got shape {src.shape}")
        np.copyto(self._source, src.reshape(self._source.shape), casting="same_kind")

    def _infer(self) -> npt.NDArray[Any]:
        """The model's output for the loaded blobs ([1,3,S,S], float32 or float16)."""
        return np.asarray(self.session.run([self.output_name], self._feeds)[0])


__all__ = ["EMBEDDING_SIZE", "FLOAT_TYPES", "SOURCE_NAME", "TARGET_NAME", "FaceSwapper", "fmt_shape"]
