"""Finding the mark: frames are added up as luma, then the tile grid is searched for.

For each candidate scale (a cell of `s` times the size the frame's height implies: s = 1 for the
frame as marked or scaled as a whole, about 1.1 after a 10 % crop, below 1 for a window inside a
screen recording) the summed luma is resampled to two samples per cell, whitened (each sample
minus its neighbourhood's mean, divided by the neighbourhood's spread, clipped: the picture's own
content is mostly smooth, the mark is not), and folded into one tile by adding every tile's worth
of samples. A circular cross-correlation with the key's pilot chips (FFT) then tries every shift
at once: a crop only shifts the tiles. The peak's height over the spread of the other shifts is
`z`, the detection's confidence; at the peak, each code bit is read as the sign of its cells'
correlation with its own chips, and the payload's CRC has to match.

The decision: marked when z >= Z_MARKED (7.5) anywhere, or when z >= Z_IN_PLACE (5.5) at the one
place an uncropped copy carries the mark (scale 1, tiles from the top-left corner: the frame as
written, re-encoded, scaled or made brighter). Under no mark the correlations at the tried shifts
and scales are close to Gaussian with unit spread, so the chance of a false "marked" is at most
the number of tries times the Gaussian tail beyond Z_MARKED, plus the tail beyond Z_IN_PLACE for
the one place (`false_alarm` is the bound for the test that decided); the bench measures it on
unmarked video and noise (docs/PROVENANCE.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import cv2
import numpy as np

from models.types import ImageBGR
from realtime.core.watermark.design import CELLS_PER_HEIGHT, DEFAULT_KEY, TILE, Chips, chips_for
from realtime.core.watermark.payload import CODE_BITS, Payload

Z_MARKED = 7.5  # the union bound over ~1.2e6 shifts and scales tried: < 4e-8 per decision
Z_IN_PLACE = 5.5  # one place tried: < 2e-8 per decision
SAMPLES_PER_CELL = 2
PERIOD = TILE * SAMPLES_PER_CELL  # samples per tile side
WORKING_HEIGHT = 720  # frames are added up at most this high
MIN_CELL_PX = 2.0  # smaller cells (a video shown tiny) are not looked for
# Scales tried: around the frame's own (codecs, scaling, crops up to ~25 %), and down to a fifth
# of it when that finds nothing (the video inside a larger screen recording).
NEAR_SCALES = (0.8, 1.35, 1.005)  # lowest, highest, the factor between two tried
WIDE_SCALES = (0.2, 1.35, 1.01)
STRONG = 2.0  # a peak this many times the threshold ends the search at once
# When the code bits fail their CRC, the FLIPS least reliable ones are tried flipped too (Chase
# decoding): 2**FLIPS tries, each with a 1 in 65,536 chance of passing by accident.
FLIPS = 4


@dataclass(frozen=True, slots=True)
class Detection:
    marked: bool
    z: float  # the pilot's correlation peak, in units of its spread over the other shifts
    false_alarm: float  # the chance of a peak this high without a mark, over all the shifts tried
    payload: Payload | None  # None: no mark, or its code bits did not pass their CRC
    scale: float  # the cell size found, relative to the frame's own
    frames: int  # how many frames were added up
    in_place: bool = False  # found where an uncropped copy carries it (Z_IN_PLACE needed there)
    z_in_place: float = 0.0  # z where an uncropped copy carries it, found or not

    @property
    def needed(self) -> float:
        """The z the test that decided needs."""
        return Z_IN_PLACE if self.in_place else Z_MARKED

    def summary(self) -> str:
        if not self.marked:
            needed = f"{Z_MARKED:.1f} needed, {Z_IN_PLACE:.1f} where an uncropped copy carries it"
            return f"no FaceCast watermark found (z = {self.z:.1f} over {self.frames} frame(s); {needed})"
        what = (
            f"run {self.payload.run_id}, FaceCast {self.payload.version}"
            + (", AI-modified" if self.payload.ai_modified else "")
            if self.payload is not None
            else "its payload could not be read whole from this much video"
        )
        where = " where an uncropped copy carries it" if self.in_place else ""
        odds = f"z = {self.z:.1f}{where}, chance of a false match {self.false_alarm:.1e}"
        return f"FaceCast watermark found: {what} ({odds})"


def scales(low: float, high: float, step: float) -> np.ndarray:
    count = int(math.log(high / low) / math.log(step)) + 1
    values = low * step ** np.arange(count)
    # Scale 1 exactly first: a frame as it was marked is found on the first try.
    return np.concatenate([[1.0], values[np.abs(values - 1.0) > 1e-3]])


def gaussian_tail(z: float) -> float:
    return 0.5 * math.erfc(z / math.sqrt(2.0))


class MarkDetector:
    """Add frames of one video (or one picture), then decide()."""

    def __init__(self, key: str = DEFAULT_KEY) -> None:
        self._chips = chips_for(key)
        self._sum: np.ndarray | None = None
        self._shape: tuple[int, int] | None = None  # (width, height) frames are added at
        self.frames = 0
        self._templates = _templates(self._chips)

    def add(self, image: ImageBGR) -> None:
        luma = cv2.cvtColor(image, cv2.COLOR_BGR2GRAY) if image.ndim == 3 else image
        if self._shape is None:
            h, w = luma.shape[:2]
            if h > WORKING_HEIGHT:
                w, h = round(w * WORKING_HEIGHT / h), WORKING_HEIGHT
            self._shape = (w, h)
            self._sum = np.zeros((h, w), np.float32)
        w, h = self._shape
        if luma.shape[:2] != (h, w):
            luma = cv2.resize(luma, (w, h), interpolation=cv2.INTER_AREA)
        assert self._sum is not None
        cv2.accumulate(luma, self._sum)
        self.frames += 1

    def decide(self, wide: bool = True, z_marked: float = Z_MARKED) -> Detection:
        """The best scale's result: near the frame's own scale first, then (wide) down to a fifth."""
        if self._sum is None or self.frames == 0:
            return Detection(False, 0.0, 1.0, None, 1.0, 0)
        # Each level half the one before (small scales read a small one).
        pyramid: list[np.ndarray] = [self._sum / self.frames]
        while min(pyramid[-1].shape) >= 2 * PERIOD:
            pyramid.append(_half(pyramid[-1]))
        tried = 0
        best: _Peak | None = None
        in_place: _Peak | None = None  # scale 1, read at the shift an uncropped copy has
        z_place = 0.0  # z there
        ranges = [NEAR_SCALES] + ([WIDE_SCALES] if wide else [])
        done: set[float] = set()
        for low, high, step in ranges:
            for s in scales(low, high, step):
                key = round(float(s), 4)
                if key in done:
                    continue
                done.add(key)
                found = self._try_scale(pyramid, float(s))
                if found is None:
                    continue
                tried += 1
                if key == 1.0:
                    in_place, z_place = found, found.z_at_corner()
                if best is None or found.z > best.z:
                    best = found
                if found.z >= STRONG * z_marked:
                    break  # unmistakable: the other scales cannot do better than read it
            if best is not None and best.z >= z_marked:
                break
            if z_place >= Z_IN_PLACE:
                break
        if best is None:
            return Detection(False, 0.0, 1.0, None, 1.0, self.frames)
        if best.z >= z_marked:
            false_alarm = min(1.0, tried * PERIOD * PERIOD * gaussian_tail(best.z))
            payload = self._read_payload(best.folded, best.shift)
            return Detection(True, best.z, false_alarm, payload, best.scale, self.frames, z_in_place=z_place)
        if in_place is not None and z_place >= Z_IN_PLACE:
            payload = self._read_payload(in_place.folded, (0, 0))
            return Detection(True, z_place, gaussian_tail(z_place), payload, 1.0, self.frames, True, z_place)
        false_alarm = min(1.0, tried * PERIOD * PERIOD * gaussian_tail(best.z))
        return Detection(False, best.z, false_alarm, None, best.scale, self.frames, z_in_place=z_place)

    def _try_scale(self, pyramid: list[np.ndarray], s: float) -> _Peak | None:
        h, w = pyramid[0].shape
        cell = h / CELLS_PER_HEIGHT * s
        gw, gh = round(w / cell * SAMPLES_PER_CELL), round(h / cell * SAMPLES_PER_CELL)
        if min(gw, gh) < PERIOD // 2 or cell < MIN_CELL_PX:
            return None
        # The smallest level still larger than the grid (each level is low-passed for its size), then
        # a bilinear step of less than 2x: several times faster than an area resize of the whole.
        level = 0
        while level + 1 < len(pyramid) and pyramid[level + 1].shape[0] >= gh:
            level += 1
        grid = cv2.resize(pyramid[level], (gw, gh), interpolation=cv2.INTER_LINEAR)
        folded = _fold(_whiten(grid))
        surface = np.fft.irfft2(np.fft.rfft2(folded) * self._templates.pilot_spectrum, s=folded.shape)
        at = np.unravel_index(int(np.argmax(surface)), surface.shape)
        peak = (int(at[0]), int(at[1]))
        return _Peak(_peak_z(surface, peak), peak, s, folded, surface)

    def _read_payload(self, folded: np.ndarray, shift: tuple[int, int]) -> Payload | None:
        aligned = np.roll(folded, (-shift[0], -shift[1]), axis=(0, 1))
        t = self._templates
        soft = np.bincount(t.bit_index, weights=(aligned * t.data_pn).ravel()[t.data_at], minlength=CODE_BITS)
        hard = (soft > 0).astype(np.uint8)
        weakest = np.argsort(np.abs(soft))[:FLIPS]
        for flips in range(2**FLIPS):
            bits = hard.copy()
            for i, at in enumerate(weakest):
                if flips >> i & 1:
                    bits[at] ^= 1
            payload = Payload.from_bits(bits)
            if payload is not None:
                return payload
        return None


@dataclass(frozen=True)
class _Peak:
    """One scale's correlation peak."""

    z: float
    shift: tuple[int, int]
    scale: float
    folded: np.ndarray  # the whitened samples folded into one tile
    surface: np.ndarray  # the correlation at every shift

    def z_at_corner(self) -> float:
        """z at shift (0, 0): where the tiles of an uncropped copy lie."""
        return _peak_z(self.surface, (0, 0))


@dataclass(frozen=True)
class _Templates:
    pilot_spectrum: np.ndarray  # conj(rfft2) of the pilot chips at the sampling rate
    data_pn: np.ndarray  # data chips at the sampling rate (PERIOD x PERIOD)
    data_at: np.ndarray  # flat indices of the data samples
    bit_index: np.ndarray  # the code bit of each of those samples


def _templates(chips: Chips) -> _Templates:
    up = np.ones((SAMPLES_PER_CELL, SAMPLES_PER_CELL), np.float32)
    pilot = np.kron(chips.pilot, up)
    data_pn = np.kron(chips.data_pn, up)
    bits = np.kron(chips.bit_of_cell.astype(np.int32) + 1, up.astype(np.int32)) - 1
    data_at = np.flatnonzero(bits.ravel() >= 0)
    return _Templates(np.conj(np.fft.rfft2(pilot)), data_pn, data_at, bits.ravel()[data_at])


def _half(level: np.ndarray) -> np.ndarray:
    """`level` at half its size, each pixel the mean of the 2 x 2 it covers: the result stays aligned
    with the frame's cells. (cv2.pyrDown centres its pixel on an even source pixel instead, half a
    source pixel off at each level: at 720 rows the grid then sat a fifth of a cell off, and a single
    picture's z fell by a third.)"""
    h, w = level.shape
    half = cv2.resize(level, ((w + 1) // 2, (h + 1) // 2), interpolation=cv2.INTER_AREA)
    return np.asarray(half, np.float32)


def _whiten(grid: np.ndarray) -> np.ndarray:
    k = 3  # samples: a cell and a half; wider lets more of the picture's own texture through
    residual = grid - cv2.blur(grid, (k, k), borderType=cv2.BORDER_REFLECT)
    spread = np.sqrt(cv2.blur(residual * residual, (4 * k, 4 * k), borderType=cv2.BORDER_REFLECT) + 1.0)
    return np.clip(residual / spread, -3.0, 3.0)


def _fold(samples: np.ndarray) -> np.ndarray:
    h, w = samples.shape
    ph, pw = -h % PERIOD, -w % PERIOD
    padded = np.pad(samples, ((0, ph), (0, pw)))
    tiles = padded.reshape(padded.shape[0] // PERIOD, PERIOD, padded.shape[1] // PERIOD, PERIOD)
    return tiles.sum(axis=(0, 2))


def _peak_z(surface: np.ndarray, peak: tuple[int, int]) -> float:
    """The peak's height above the other shifts' mean, in their standard deviations (the 3x3 around
    the peak left out: the chips are two samples wide, so the peak spreads to its neighbours)."""
    others = surface.copy()
    ys = [(peak[0] + d) % surface.shape[0] for d in (-1, 0, 1)]
    xs = [(peak[1] + d) % surface.shape[1] for d in (-1, 0, 1)]
    mask = np.ones(surface.shape, bool)
    mask[np.ix_(ys, xs)] = False
    rest = others[mask]
    spread = float(rest.std())
    if spread <= 0.0:
        return 0.0
    return float((surface[peak] - rest.mean()) / spread)
