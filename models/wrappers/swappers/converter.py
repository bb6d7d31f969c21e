"""ArcFace embedding converters: the raw ArcFace embedding into the identity space a swapper was
trained on (Ghost, SimSwap and HifiFace each learnt their own recogniser's embedding).

Contract (docs/model-contracts.md, "Embedding converters"): one input `input` [1,512] float32,
the raw (not normalised) ArcFace w600k_r50 output; one output [1,512] float32, the embedding in
the swapper's space (not normalised: the families that want it unit length normalise it).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import onnxruntime as ort

from models.errors import ModelContractError, ModelOutputError
from models.runtime.session import SessionFactory, open_wrapped
from models.types import FloatArray

INPUT_NAME = "input"
SIZE = 512


def _dims_fit(shape: Sequence[Any] | None) -> bool:
    dims = list(shape or [])
    batch_ok = len(dims) == 2 and (not isinstance(dims[0], int) or dims[0] <= 0 or dims[0] == 1)
    return batch_ok and dims[1] == SIZE


def _fmt(shape: Sequence[Any] | None) -> str:
    return "[" + ",".join(str(d) if isinstance(d, int) and d > 0 else "?" for d in (shape or [])) + "]"


class EmbeddingConverter:
    """Maps a raw ArcFace embedding to a swapper's identity space (run once per source identity)."""

    label = "ArcFace embedding converter"

    def __init__(self, session: ort.InferenceSession) -> None:
        self.check_contract(session.get_inputs(), session.get_outputs())
        self.session = session
        self.output_name: str = session.get_outputs()[0].name
        self._feed: FloatArray = np.zeros((1, SIZE), dtype=np.float32)

    @classmethod
    def check_contract(cls, inputs: Sequence[Any], outputs: Sequence[Any]) -> None:
        got = (
            " + ".join(f"{i.name}{_fmt(i.shape)}" for i in inputs)
            + " -> "
            + ", ".join(_fmt(o.shape) for o in outputs)
        )
        ok = (
            len(inputs) == 1
            and len(outputs) == 1
            and inputs[0].name == INPUT_NAME
            and _dims_fit(inputs[0].shape)
            and _dims_fit(outputs[0].shape)
            and inputs[0].type == "tensor(float)"
            and outputs[0].type == "tensor(float)"
        )
        if not ok:
            raise ModelContractError(
                f"not an {cls.label}: expected float {INPUT_NAME}[1,{SIZE}] -> [1,{SIZE}], got {got}."
            )

    @classmethod
    def from_file(cls, path: Path | str, factory: SessionFactory) -> EmbeddingConverter:
        return open_wrapped(path, factory, cls)

    def convert(self, raw_embedding: npt.ArrayLike) -> FloatArray:
        """(1, 512) float32: the converter's output for one raw ArcFace embedding."""
        raw = np.asarray(raw_embedding, dtype=np.float32)
        if raw.size != SIZE:
            raise ValueError(f"expected a {SIZE}-d embedding, got shape {raw.shape}")
        np.copyto(self._feed, raw.reshape(1, SIZE))
        out = np.asarray(self.session.run([self.output_name], {INPUT_NAME: self._feed})[0], dtype=np.float32)
        if not np.all(np.isfinite(out)):
            raise ModelOutputError(f"The {self.label} returned NaN or infinite values.")
        return np.ascontiguousarray(out.reshape(1, SIZE))


__all__ = ["EmbeddingConverter"]
