"""Whole-frame super-resolution models (frame enhancers): Real-ESRGAN x2 and x4 and their fp16 files.

Contract (docs/model-contracts.md, "Frame enhancers"): one image input [1,3,T,T] (T = the tile,
256 px for Real-ESRGAN; dynamic dims accepted), RGB in [0, 1], float32 or float16; one output
[1,3,sT,sT] in [0, 1] (s = the upscale factor) -> x 255, clipped, rounded. The file's own static
dims win over the catalogue's tile; a static output that is not s times the input is refused at
load, a dynamic one at its first run.

A picture of any size is run in overlapping tiles (models.ops.tiles): each tile is one request to
the model's inference service, so a frame's tiles (and other streams' tiles) share model calls.
One instance per worker thread: it keeps the padded picture, the tiles' input blob and the decoding
scratch for reuse.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np
import numpy.typing as npt
import onnxruntime as ort

from models.errors import ModelContractError, ModelOutputError
from models.files.frame_enhancer_catalogue import FrameEnhancerFacts, frame_enhancer_facts
from models.ops.tiles import TileGrid, pad_for_tiles, tile_grid
from models.runtime.served import ServedModel
from models.runtime.session import SessionFactory, open_wrapped, wrap_checked
from models.types import ImageBGR

_IMAGE_TYPES: Mapping[str, type[np.floating[Any]]] = MappingProxyType(
    {"tensor(float)": np.float32, "tensor(float16)": np.float16}
)


def _static(dim: Any) -> int | None:
    return dim if isinstance(dim, int) and dim > 0 else None


def _fmt(shape: Sequence[Any] | None) -> str:
    return "[" + ",".join(str(d) if isinstance(d, int) else "?" for d in (shape or [])) + "]"


class FrameEnhancer:
    """One frame enhancer file, checked against its catalogue facts (module doc)."""

    def __init__(self, session: ort.InferenceSession, facts: FrameEnhancerFacts, label: str) -> None:
        self.tile, self.scale = self.check_contract(session.get_inputs(), session.get_outputs(), facts, label)
        self.session = session
        self.label = label
        self.margin = facts.margin
        image = session.get_inputs()[0]
        self.input_name: str = image.name
        self.input_dtype: type[np.floating[Any]] = _IMAGE_TYPES[image.type]
        self.output_name: str = session.get_outputs()[0].name
        self.served = ServedModel(session, self.output_name, label)
        self._grid: TileGrid | None = None
        self._padded: ImageBGR | None = None
        self._blob: npt.NDArray[Any] = np.zeros((0, 3, self.tile, self.tile), dtype=self.input_dtype)
        self._decoded: npt.NDArray[np.float32] = np.zeros(0, dtype=np.float32)
        self.tiles_run = 0  # for tests and metrics

    @staticmethod
    def check_contract(
        inputs: Sequence[Any], outputs: Sequence[Any], facts: FrameEnhancerFacts, label: str
    ) -> tuple[int, int]:
        """(tile, scale) the file runs at; ModelContractError for a file that is not a x`scale`
        image-to-image model."""
        got = " + ".join(f"{i.name}{_fmt(i.shape)}" for i in inputs) + " -> "
        got += ", ".join(_fmt(o.shape) for o in outputs)
        s, t = facts.scale, facts.tile
        bad = ModelContractError(
            f"not a {label} model: expected one image input [1,3,{t},{t}] and an output "
            f"[1,3,{s * t},{s * t}] (x{s}), got {got}.",
            hint="Download it again with `models download`, or name the right file.",
        )
        if len(inputs) != 1 or not outputs:
            raise bad
        image, out = inputs[0], outputs[0]
        if len(image.shape or []) != 4 or len(out.shape or []) != 4:
            raise bad
        for node in (image, out):
            if node.type not in _IMAGE_TYPES:
                raise ModelContractError(f"{label}: {node.name} must be float or float16, got {node.type}.")
        in_dims = [_static(d) for d in image.shape]
        out_dims = [_static(d) for d in out.shape]
        if in_dims[0] not in (None, 1) or in_dims[1] not in (None, 3) or out_dims[1] not in (None, 3):
            raise bad
        h, w = in_dims[2], in_dims[3]
        if (h is None) != (w is None) or (h is not None and h != w):
            raise bad  # a square tile, or both sides dynamic
        tile = h if h is not None else t
        if tile <= 2 * facts.margin:
            raise bad
        for dim in out_dims[2:]:
            if dim is not None and dim != s * tile:
                raise bad
        return tile, s

    @classmethod
    def from_file(
        cls, name: str, path: Path | str, factory: SessionFactory, session: Any = None
    ) -> FrameEnhancer:
        """The frame enhancer `name` (its catalogue facts) in `path` (session: the file's session,
        opened already by a shared service)."""
        facts = frame_enhancer_facts(name)

        def wrap(opened: Any) -> FrameEnhancer:
            return cls(opened, facts, name)

        if session is None:
            return open_wrapped(path, factory, wrap)
        return wrap_checked(Path(path), session, wrap)

    def output_shape(self, height: int, width: int) -> tuple[int, int, int]:
        return height * self.scale, width * self.scale, 3

    def upscale(self, image: ImageBGR, out: ImageBGR | None = None) -> ImageBGR:
        """`image` (uint8 BGR, any size) `scale` times larger, through the model in tiles; written
        into `out` when it has the output's shape."""
        h, w = int(image.shape[0]), int(image.shape[1])
        shape = self.output_shape(h, w)
        dst = (
            out
            if out is not None and out.shape == shape and out.dtype == np.uint8
            else np.empty(shape, np.uint8)
        )
        grid = self._grid_for(w, h)
        self._padded = padded = pad_for_tiles(image, grid, self._padded)
        blob = self._tiles_blob(len(grid.tiles))
        t = self.tile
        for i, tile in enumerate(grid.tiles):
            window = padded[tile.y : tile.y + t, tile.x : tile.x + t, ::-1].transpose(2, 0, 1)
            np.multiply(window, np.float32(1.0 / 255.0), out=blob[i], dtype=np.float32, casting="unsafe")
        with self.served.client.holding():
            tickets = [self.served.submit({self.input_name: blob[i : i + 1]}) for i in range(len(grid.tiles))]
        for tile, ticket in zip(grid.tiles, tickets, strict=True):
            self._place(np.asarray(ticket.result()[0]), tile.core, dst)
        self.tiles_run += len(grid.tiles)
        return dst

    def _grid_for(self, width: int, height: int) -> TileGrid:
        grid = self._grid
        if grid is None or (grid.width, grid.height) != (width, height):
            grid = self._grid = tile_grid(width, height, self.tile, self.margin)
        return grid

    def _tiles_blob(self, n: int) -> npt.NDArray[Any]:
        if self._blob.shape[0] < n:
            self._blob = np.zeros((n, 3, self.tile, self.tile), dtype=self.input_dtype)
        return self._blob

    def _place(self, pred: npt.NDArray[Any], core: Any, dst: ImageBGR) -> None:
        """One tile's output, its core decoded into `dst` (x 255, clipped, rounded, RGB -> BGR)."""
        s, t, m = self.scale, self.tile, self.margin
        if pred.shape != (1, 3, s * t, s * t):
            raise ModelContractError(
                f"{self.label}: a {t} px tile gave an output of shape {pred.shape}, "
                f"expected (1, 3, {s * t}, {s * t}) (x{s})."
            )
        ch, cw = (core.y1 - core.y0) * s, (core.x1 - core.x0) * s
        kept = pred[0, ::-1, s * m : s * m + ch, s * m : s * m + cw].transpose(1, 2, 0)
        n = ch * cw * 3
        if self._decoded.size < n:
            self._decoded = np.empty(n, dtype=np.float32)
        scratch = self._decoded[:n].reshape(ch, cw, 3)
        np.multiply(kept, np.float32(255.0), out=scratch, dtype=np.float32, casting="unsafe")
        if not np.isfinite(scratch).all():
            raise ModelOutputError(f"{self.label} returned NaN or infinite values.")
        np.clip(scratch, 0.0, 255.0, out=scratch)
        np.rint(scratch, out=scratch)
        np.copyto(
            dst[core.y0 * s : core.y0 * s + ch, core.x0 * s : core.x0 * s + cw], scratch, casting="unsafe"
        )


__all__ = ["FrameEnhancer"]
