"""The engine's watermark stage: adds the run's mark to a frame's luma, in place.

Marking costs two saturating byte additions over the frame (its + and its - part, kept between
frames), so a 1080p frame takes well under a millisecond (docs/PERFORMANCE.md). The pattern is the
same on every frame of a run, which codecs keep cheaply and the detector adds up.

Flat areas: on a flat wall nothing hides the mark's cells, so there a cell carries half the
amplitude (FLAT_AMPLITUDE), and the energy that frees goes to the busiest cells, where texture
hides more (BUSIEST_AMPLITUDE): the frame's PSNR stays what it was, the mark where it is least
seen. How busy a cell is comes from a sparse sample of the frame's green
channel (every few pixels, a cell holding two samples a side): the mean distance of each sample
from its 3 x 3 neighbourhood, over the cell and its neighbours, averaged over the latest frames
(ACTIVITY_WEIGHT; every ACTIVITY_EVERY-th frame is looked at). A camera's noise or any texture is
above FLAT_BELOW; a flat synthetic wall, a blurred virtual background or a webcam's denoised wall
is below it. The + and - planes follow the map a few cell rows per frame (BANDS_PER_FRAME), so
the cost stays flat when the picture changes; a frame of a new size is built whole from its own
map.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import cv2
import numpy as np
import numpy.typing as npt

from models.types import ImageBGR
from realtime.core.watermark.design import AMPLITUDE, DEFAULT_KEY, TILE, cell_size, chips_for
from realtime.core.watermark.payload import Payload

FLAT_AMPLITUDE = 1  # grey levels, where the picture is flat (AMPLITUDE elsewhere) ...
BUSIEST_AMPLITUDE = 3  # ... and on the busiest cells, with the energy the flat ones freed
# A cell turns flat when its activity (grey levels) falls below FLAT_BELOW, and busy again above
# BUSY_ABOVE (no flicker at an edge). Not none at all on a flat cell: there the detector sees the
# mark best, and a single picture needs it (docs/PROVENANCE.md).
FLAT_BELOW = 0.5
BUSY_ABOVE = 0.75
BUSIEST_ABOVE = 8.0  # activity a cell needs to carry BUSIEST_AMPLITUDE: strong texture (hair,
# fabric, foliage) hides it; a grainy smooth backdrop (3-4) would show its blocks
# Each flat cell frees AMPLITUDE**2 - FLAT_AMPLITUDE**2 of the mark's energy; each busiest cell
# takes BUSIEST_AMPLITUDE**2 - AMPLITUDE**2: the frame's mean squared offset (its PSNR) stays
# that of AMPLITUDE everywhere.
BUSIEST_PER_FLAT = (AMPLITUDE**2 - FLAT_AMPLITUDE**2) / (BUSIEST_AMPLITUDE**2 - AMPLITUDE**2)
BANDS_PER_FRAME = 12  # rows of cells whose planes are rebuilt per frame, at most
ACTIVITY_WEIGHT = 0.25  # a new frame's share of the running activity (its noise averages out)
ACTIVITY_EVERY = 2  # frames: every other one is looked at (a flat map changes at a scene's pace)

Int8Grid = npt.NDArray[np.int8]


def _cell_of(length: int, cell: float) -> npt.NDArray[np.intp]:
    """For each pixel along a side, the (absolute) index of the cell it falls in."""
    return np.floor(np.arange(length) / cell).astype(np.intp)


def cell_activity(image: ImageBGR, rows: int, cols: int) -> npt.NDArray[np.float32]:
    """How busy each of the rows x cols cells of `image` is, in grey levels (module doc)."""
    h = image.shape[0]
    step = max(1, int(cell_size(h) / 2))
    green = np.ascontiguousarray(image[::step, ::step, 1])
    spread = cv2.absdiff(green, cv2.blur(green, (3, 3), borderType=cv2.BORDER_REFLECT))
    cells = cv2.resize(spread.astype(np.float32), (cols, rows), interpolation=cv2.INTER_AREA)
    # Over a cell's neighbours too: a few samples a cell make a noisy estimate.
    return np.asarray(cv2.blur(cells, (3, 3), borderType=cv2.BORDER_REFLECT))


def amplitudes(activity: npt.NDArray[np.float32], flat: npt.NDArray[np.bool_]) -> Int8Grid:
    """Each cell's amplitude: FLAT_AMPLITUDE where flat; BUSIEST_AMPLITUDE on the busiest cells,
    as many as the flat ones pay for (BUSIEST_PER_FLAT); AMPLITUDE elsewhere."""
    levels = np.where(flat, FLAT_AMPLITUDE, AMPLITUDE).astype(np.int8)
    budget = int(BUSIEST_PER_FLAT * np.count_nonzero(flat))
    candidates = (activity > BUSIEST_ABOVE) & ~flat
    if budget > 0 and np.count_nonzero(candidates) > 0:
        values = activity[candidates]
        if values.size > budget:
            candidates &= activity > np.partition(values, values.size - budget - 1)[values.size - budget - 1]
        levels[candidates] = BUSIEST_AMPLITUDE
    return levels


@dataclass
class _Planes:
    """The + and - planes for one frame size, and the per-cell amplitude they were built with."""

    chips: Int8Grid  # (cell rows, cell columns), +-1
    row_of: npt.NDArray[np.intp]  # each pixel row's cell row
    col_of: npt.NDArray[np.intp]  # each pixel column's cell column
    bands: list[slice]  # each cell row's pixel rows
    up: np.ndarray = field(init=False)
    down: np.ndarray = field(init=False)
    built: Int8Grid = field(init=False)  # each cell's amplitude in the planes
    flat: npt.NDArray[np.bool_] = field(init=False)  # each cell as the latest frames ask
    activity: npt.NDArray[np.float32] = field(init=False)  # averaged over the latest frames
    _next_band: int = 0

    def build(self, activity: npt.NDArray[np.float32], masking: bool) -> None:
        self.activity = activity
        self.flat = activity < FLAT_BELOW if masking else np.zeros(activity.shape, bool)
        self.built = amplitudes(activity, self.flat)
        offsets = (self.chips * self.built)[self.row_of[:, None], self.col_of[None, :]]
        self.up = np.repeat(np.clip(offsets, 0, None).astype(np.uint8)[:, :, None], 3, axis=2)
        self.down = np.repeat(np.clip(-offsets, 0, None).astype(np.uint8)[:, :, None], 3, axis=2)

    def follow(self, activity: npt.NDArray[np.float32]) -> None:
        """Move the flat map with the frame's activity (with hysteresis), then rebuild up to
        BANDS_PER_FRAME cell rows whose amplitudes differ from what it asks, round the frame."""
        self.activity += ACTIVITY_WEIGHT * (activity - self.activity)
        self.flat = np.where(self.flat, self.activity < BUSY_ABOVE, self.activity < FLAT_BELOW)
        wanted = amplitudes(self.activity, self.flat)
        changed = np.flatnonzero((wanted != self.built).any(axis=1))
        if changed.size == 0:
            return
        start = int(np.searchsorted(changed, self._next_band))
        order = np.concatenate([changed[start:], changed[:start]])[:BANDS_PER_FRAME]
        for row in order:
            self.built[row] = wanted[row]
            cells = self.chips[row] * self.built[row]
            values = np.repeat(cells[self.col_of][:, None], 3, axis=1)  # (W, 3): one pixel row
            band = self.bands[row]
            self.up[band] = np.clip(values, 0, None).astype(np.uint8)
            self.down[band] = np.clip(-values, 0, None).astype(np.uint8)
        self._next_band = int(order[-1]) + 1


@dataclass(frozen=True)
class CellOffsets:
    """The mark of one frame as its cells: pixel (y, x) gets cells[row_of[y], col_of[x]] grey levels."""

    cells: npt.NDArray[np.float32]  # (cell rows, cell columns)
    row_of: npt.NDArray[np.intp]
    col_of: npt.NDArray[np.intp]


@dataclass(slots=True)
class MarkRequest:
    """A frame's mark, offered to a swap worker that can add it where the frame is: the device path
    adds it on the GPU before the frame's one download (DeviceOps.mark), so the host never
    touches the frame for it. `offsets_for` gives the cells for the frame's host picture;
    `done` says the worker added them, and the engine's sink then leaves the frame alone."""

    offsets_for: Callable[[ImageBGR], CellOffsets]
    done: bool = False


class Watermarker:
    """Marks frames of any size with one payload. Thread-safe; keeps the planes of the newest size.
    masking=False: the full amplitude everywhere (the bench's comparison)."""

    def __init__(self, payload: Payload, key: str = DEFAULT_KEY, masking: bool = True) -> None:
        self.payload = payload
        self.masking = masking
        self._tile = chips_for(key).tile(payload.to_bits())
        self._lock = threading.Lock()
        self._size: tuple[int, int] | None = None
        self._planes: _Planes | None = None
        self._frames = 0

    def _new_planes(self, image: ImageBGR) -> _Planes:
        h, w = image.shape[:2]
        cell = cell_size(h)
        row_of, col_of = _cell_of(h, cell), _cell_of(w, cell)
        rows, cols = int(row_of[-1]) + 1, int(col_of[-1]) + 1
        chips = self._tile[(np.arange(rows) % TILE)[:, None], (np.arange(cols) % TILE)[None, :]]
        starts = np.searchsorted(row_of, np.arange(rows + 1))
        bands = [slice(int(a), int(b)) for a, b in itertools.pairwise(starts)]
        planes = _Planes(chips.astype(np.int8), row_of, col_of, bands)
        planes.build(cell_activity(image, rows, cols), self.masking)
        return planes

    def _planes_for(self, image: ImageBGR) -> _Planes:
        """(Under the lock.) The planes for this frame, following its picture."""
        h, w = image.shape[:2]
        planes = self._planes
        if planes is None or self._size != (w, h):
            planes = self._planes = self._new_planes(image)
            self._size = (w, h)
        elif self.masking and self._frames % ACTIVITY_EVERY == 0:
            planes.follow(cell_activity(image, *planes.chips.shape))
        self._frames += 1
        return planes

    def mark(self, image: ImageBGR) -> None:
        """Add the mark to `image` (H x W x 3 uint8 BGR), in place."""
        with self._lock:
            planes = self._planes_for(image)
            cv2.add(image, planes.up, dst=image)
            cv2.subtract(image, planes.down, dst=image)

    def cell_offsets(self, image: ImageBGR) -> CellOffsets:
        """What mark(image) would add, cell by cell, for a device path to add itself (DeviceOps.mark):
        the picture's host copy (`image`, left unchanged) moves the amplitudes as mark() does."""
        with self._lock:
            planes = self._planes_for(image)
            cells = (planes.chips * planes.built).astype(np.float32)
            return CellOffsets(cells, planes.row_of, planes.col_of)
