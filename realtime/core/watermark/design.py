"""The mark's geometry and its keyed chips, shared by the embedder and the detector.

The picture is divided into square cells, CELLS_PER_HEIGHT of them over the frame's height (12 px
at 1080p, 8 px at 720p): the mark lives at the scale of the picture, not of its pixels, so a
downscaled copy carries it at the same place. Every cell carries one chip, +1 or -1, added to the
luma as +-AMPLITUDE grey levels (the same on B, G and R, so the colour is untouched). The chips
repeat in a tile of TILE x TILE cells from the frame's top-left corner, so any crop still holds
whole tiles, only cyclically shifted, and the detector can add up every tile it sees.

Of a tile's cells, a keyed quarter are pilot cells (a fixed +-1 sequence the detector looks for: it
says "marked" and where the tiles lie) and the other three quarters carry the 64 code bits (payload.py),
each spread over the same number of cells with its own +-1 sequence. The key seeds all of it: a
detector with another key sees noise.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from realtime.core.watermark.payload import CODE_BITS

DEFAULT_KEY = "FaceCast AI-modified mark, v1"  # public: anyone can verify (docs/PROVENANCE.md)
TILE = 32  # cells per tile side
CELLS_PER_HEIGHT = 90
AMPLITUDE = 2  # grey levels: PSNR 42.1 dB at most (every pixel +-2), more where it clips
PILOT_FRACTION = 0.25  # enough to find the mark; the rest carries the payload


@dataclass(frozen=True)
class Chips:
    """A key's chips over one tile (TILE x TILE cells)."""

    pilot: np.ndarray  # float32, +-1 on pilot cells, 0 on data cells
    data_pn: np.ndarray  # float32, +-1 on data cells, 0 on pilot cells
    bit_of_cell: np.ndarray  # int16, the code bit a data cell carries, -1 on pilot cells

    def tile(self, code_bits: np.ndarray) -> np.ndarray:
        """The tile's chips (int8, +-1) carrying `code_bits` (CODE_BITS values, 0/1)."""
        signs = np.where(np.asarray(code_bits, dtype=np.uint8) > 0, 1.0, -1.0).astype(np.float32)
        data = self.data_pn * np.where(self.bit_of_cell >= 0, signs[np.maximum(self.bit_of_cell, 0)], 0.0)
        return (self.pilot + data).astype(np.int8)


@lru_cache(maxsize=4)
def chips_for(key: str = DEFAULT_KEY) -> Chips:
    seed = int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "little")
    rng = np.random.default_rng(seed)
    cells = TILE * TILE
    order = rng.permutation(cells)
    n_pilot = int(cells * PILOT_FRACTION)
    pilot = np.zeros(cells, np.float32)
    data_pn = np.zeros(cells, np.float32)
    bit_of_cell = np.full(cells, -1, np.int16)
    pilot[order[:n_pilot]] = rng.choice([-1.0, 1.0], n_pilot)
    data_cells = order[n_pilot:]
    data_pn[data_cells] = rng.choice([-1.0, 1.0], data_cells.size)
    bit_of_cell[data_cells] = np.arange(data_cells.size) % CODE_BITS
    shape = (TILE, TILE)
    return Chips(pilot.reshape(shape), data_pn.reshape(shape), bit_of_cell.reshape(shape))


def cell_size(height: int) -> float:
    """A cell's side in pixels for a frame `height` px high."""
    return height / CELLS_PER_HEIGHT
