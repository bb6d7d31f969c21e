"""Overlapping square tiles over a picture of any size, for a model that takes a fixed tile.

The picture is cut into a grid of cores of `core` px; each tile is its core plus `margin` px of
context on every side (tile = core + 2 * margin), read from the picture padded by repeating its
edge pixels. A model's output for a tile is kept only over its core: every output pixel then comes
from exactly one tile, computed with at least `margin` px of the picture round it, so a model
whose reach is within the margin gives the same output as on the whole picture (no seams). The
last row and column of cores may reach past the picture: what they give beyond it is dropped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import cv2
import numpy as np

from models.types import Box, ImageBGR


@dataclass(frozen=True, slots=True)
class Tile:
    """One tile: where it reads in the padded picture (its top-left corner; it is tile x tile px)
    and which part of the picture its core covers (clipped to the picture)."""

    x: int
    y: int
    core: Box


@dataclass(frozen=True, slots=True)
class TileGrid:
    """The tiles over a `width` x `height` picture (module doc)."""

    width: int
    height: int
    tile: int
    margin: int
    tiles: tuple[Tile, ...]

    @property
    def core(self) -> int:
        return self.tile - 2 * self.margin

    @property
    def padded_size(self) -> tuple[int, int]:
        """(width, height) of the padded picture the tiles read."""
        cols = math.ceil(self.width / self.core)
        rows = math.ceil(self.height / self.core)
        return cols * self.core + 2 * self.margin, rows * self.core + 2 * self.margin


def tile_grid(width: int, height: int, tile: int, margin: int) -> TileGrid:
    """The tiles (in rows, top to bottom, left to right) over a `width` x `height` picture."""
    core = tile - 2 * margin
    if width < 1 or height < 1:
        raise ValueError(f"no picture to tile: {width}x{height}")
    if margin < 0 or core < 1:
        raise ValueError(f"a {tile} px tile has no core with a {margin} px margin")
    tiles = tuple(
        Tile(x0, y0, Box(x0, y0, min(x0 + core, width), min(y0 + core, height)))
        for y0 in range(0, height, core)
        for x0 in range(0, width, core)
    )
    return TileGrid(width, height, tile, margin, tiles)


def pad_for_tiles(image: ImageBGR, grid: TileGrid, out: ImageBGR | None = None) -> ImageBGR:
    """`image` with `grid.margin` px of its edge repeated above and to the left and enough below
    and to the right for the grid's last tiles (written into `out` when it has the right shape)."""
    h, w = image.shape[:2]
    if (w, h) != (grid.width, grid.height):
        raise ValueError(f"the grid is for {grid.width}x{grid.height}, the picture is {w}x{h}")
    pw, ph = grid.padded_size
    m = grid.margin
    shape = (ph, pw, *image.shape[2:])
    dst = out if out is not None and out.shape == shape and out.dtype == image.dtype else None
    padded = cv2.copyMakeBorder(image, m, ph - h - m, m, pw - w - m, cv2.BORDER_REPLICATE, dst=dst)
    return np.asarray(padded)


__all__ = ["Tile", "TileGrid", "pad_for_tiles", "tile_grid"]
