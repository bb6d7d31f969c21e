"""The content classifier behind the server's content policy: Marqo's NSFW picture classifier
(`nsfw_2.onnx`, FaceFusion's second content model). One small class for its contract.

Contract (docs/model-contracts.md, "Content check"): `input` [N,3,384,384] float32, RGB,
(x/255 - 0.5)/0.5, the picture fitted whole into the square (scaled to fit, centred, the rest
black) -> [N,2]: the NSFW score first, the safe score second. A picture is flagged when the first
exceeds the second by more than FLAG_MARGIN (FaceFusion's threshold for this model).

The session is injected and its signature checked at load; the calls go through ServedModel, so
the server's streams can share the process's inference hub. One instance per thread (its input
buffer is reused).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from models.errors import ModelContractError
from models.runtime.served import ServedModel
from models.runtime.session import SessionFactory, open_wrapped, wrap_checked
from models.types import FloatArray, ImageBGR

CONTENT_SIZE = 384
CONTENT_MEAN = 0.5  # per RGB channel, after x/255
CONTENT_STD = 0.5
FLAG_MARGIN = 0.25  # NSFW score minus safe score above this: flagged


@dataclass(frozen=True, slots=True)
class ContentVerdict:
    score: float  # the NSFW score minus the safe one
    flagged: bool  # score > FLAG_MARGIN


def fit_contain(image: ImageBGR, size: int) -> tuple[ImageBGR, tuple[int, int, int, int]]:
    """`image` scaled to fit a `size` square whole, centred on black; and where it lies (x, y, w, h)."""
    h, w = image.shape[:2]
    scale = min(size / h, size / w)
    fw, fh = max(1, int(w * scale)), max(1, int(h * scale))
    x, y = (size - fw) // 2, (size - fh) // 2
    square = np.zeros((size, size, 3), np.uint8)
    square[y : y + fh, x : x + fw] = cv2.resize(image, (fw, fh), interpolation=cv2.INTER_LINEAR)
    return square, (x, y, fw, fh)


def _dims_fit(got: Sequence[Any] | None, want: Sequence[int | None]) -> bool:
    dims = list(got or [])
    return len(dims) == len(want) and all(
        w is None or not isinstance(d, int) or d <= 0 or d == w for d, w in zip(dims, want, strict=True)
    )


class ContentClassifier:
    """`verdict(picture)`: how far the picture is from safe, and whether that flags it."""

    label = "nsfw_2 content classifier"
    size = CONTENT_SIZE
    contract_text = f"input[N,3,{CONTENT_SIZE},{CONTENT_SIZE}] -> [N,2] (NSFW score, safe score)"

    def __init__(self, session: Any) -> None:
        self.check_contract(session.get_inputs(), session.get_outputs())
        self.session = session
        self.input_name: str = session.get_inputs()[0].name
        output_name: str = session.get_outputs()[0].name
        self.served = ServedModel(session, output_name, self.label)  # shared once attached
        s = self.size
        self._blob: FloatArray = np.zeros((1, 3, s, s), dtype=np.float32)
        self._feeds = {self.input_name: self._blob}
        # (x/255 - mean)/std = x * scale - shift
        self._scale = np.float32(1.0 / (255.0 * CONTENT_STD))
        self._shift = np.float32(CONTENT_MEAN / CONTENT_STD)

    @classmethod
    def check_contract(cls, inputs: Sequence[Any], outputs: Sequence[Any]) -> None:
        s = cls.size
        ok = (
            len(inputs) == 1
            and len(outputs) >= 1
            and _dims_fit(inputs[0].shape, [None, 3, s, s])
            and _dims_fit(outputs[0].shape, [None, 2])
        )
        if not ok:
            got = f"{[i.shape for i in inputs]} -> {[o.shape for o in outputs]}"
            raise ModelContractError(f"not the content classifier: expected {cls.contract_text}, got {got}.")
        for node in (inputs[0], outputs[0]):
            if node.type != "tensor(float)":
                raise ModelContractError(f"{cls.label}: {node.name} must be float32, got {node.type}.")

    @classmethod
    def from_file(cls, path: Path | str, factory: SessionFactory, session: Any = None) -> ContentClassifier:
        """The classifier in `path` (session: its session opened already, a shared service's)."""
        return open_wrapped(path, factory, cls) if session is None else wrap_checked(Path(path), session, cls)

    def verdict(self, picture: ImageBGR) -> ContentVerdict:
        if picture.ndim != 3 or picture.shape[2] != 3 or picture.dtype != np.uint8:
            raise ValueError(f"expected an (H, W, 3) uint8 BGR picture, got {picture.shape} {picture.dtype}")
        square, _ = fit_contain(picture, self.size)
        blob = self._blob[0]
        np.multiply(square[:, :, ::-1].transpose(2, 0, 1), self._scale, out=blob)
        np.subtract(blob, self._shift, out=blob)
        scores = self.served.run(self._feeds)
        if scores.shape != (1, 2) or not np.isfinite(scores).all():
            raise ModelContractError(f"{self.label}: output {scores.shape} is not two finite scores.")
        score = float(scores[0, 0] - scores[0, 1])
        return ContentVerdict(score, score > FLAG_MARGIN)


__all__ = ["CONTENT_SIZE", "FLAG_MARGIN", "ContentClassifier", "ContentVerdict", "fit_contain"]
