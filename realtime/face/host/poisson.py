"""Gradient-domain (Poisson) blending of a swapped face crop, in the face's crop space.

Poisson image editing keeps the swap's gradients inside the face's mask and meets the frame's own
pixels at the mask's edge, so a face lit differently from the frame shows no seam. With g the swap,
t the frame's pixels under the same crop and f the result, f = g + h, where the correction h is a
membrane: smooth (harmonic) where the mask is 1 and equal to t - g where it is 0.

Two choices make it cheap and steady from frame to frame:

* It is solved in crop space, where a still face stays put: the mask and the lattice it is solved
  on do not move with the face, and the feathered paste that follows hides the rest of the edge.
* It is solved on a GRID x GRID lattice laid over the crop (area averages of t - g and of the
  mask). h is smooth wherever the mask is 1, so a coarse lattice loses nothing there; and the
  averaging calms the camera's noise on the boundary, which a pixel-exact solve passes into the
  whole face as flicker.

The mask is soft (the feathered box, the occlusion and region masks), so there is no hard domain
edge to flip from one frame to the next: each lattice node gets a data weight w = LAMBDA * (1 - m)^2
pulling h towards t - g, and (L + W) h = W (t - g) is solved, L the lattice's Laplacian (no flux
across the crop's border). Where m = 1 it is the pure Laplace equation; where m = 0 h follows the
frame within about half a node. The matrix depends on the mask only: its sparse LU factorisation is
kept per mask (quantised to 1/255), so a face whose mask does not change costs one back-substitution.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import cv2
import numpy as np
import numpy.typing as npt
import scipy.sparse as sparse
import scipy.sparse.linalg as sparse_linalg

from models.types import ImageBGR

GRID = 64  # lattice nodes per side (crops smaller than this are solved at their own size)
LAMBDA = 4.0  # data weight where the mask is 0, against the Laplacian's 4 per node
_EPSILON = 1e-6  # keeps the system regular when the mask is 1 everywhere (h is then t - g's mean)
_MAX_FACTORS = 8  # factorisations kept (masks of the faces on screen)

MaskArray = npt.NDArray[np.float32]


def lattice_size(crop_size: int) -> int:
    return min(GRID, int(crop_size))


def _laplacian(n: int) -> sparse.csc_matrix:
    """The n x n lattice's graph Laplacian: each node's neighbours count, minus each neighbour."""
    idx = np.arange(n * n).reshape(n, n)
    pairs = [(idx[:, :-1].ravel(), idx[:, 1:].ravel()), (idx[:-1, :].ravel(), idx[1:, :].ravel())]
    rows = np.concatenate([np.concatenate([a, b]) for a, b in pairs])
    cols = np.concatenate([np.concatenate([b, a]) for a, b in pairs])
    adjacency = sparse.csc_matrix((np.ones(rows.size), (rows, cols)), shape=(n * n, n * n))
    degree = np.asarray(adjacency.sum(axis=1)).ravel()
    return (sparse.diags(degree) - adjacency).tocsc()


def data_weights(lattice_mask: npt.NDArray[np.uint8]) -> npt.NDArray[np.float64]:
    """Per node: how strongly h follows t - g there (LAMBDA * (1 - m)^2, m the mask in 1/255)."""
    m = lattice_mask.astype(np.float64).ravel() / 255.0
    return np.asarray(LAMBDA * (1.0 - m) ** 2 + _EPSILON)


@dataclass(slots=True)
class _Factor:
    weights: npt.NDArray[np.float64]
    lu: Any  # scipy.sparse.linalg.SuperLU


@dataclass
class PoissonBlender:
    """Blends crops in the gradient domain (module doc). One per worker: it keeps the lattice's
    Laplacian, the factorisations per mask and scratch buffers (not thread-safe)."""

    factorisations: int = 0  # how many masks were factorised (tests, metrics)
    _laplacians: dict[int, sparse.csc_matrix] = field(default_factory=dict, repr=False)
    _factors: OrderedDict[tuple[int, bytes], _Factor] = field(default_factory=OrderedDict, repr=False)
    _scratch: dict[tuple[str, tuple[int, ...]], npt.NDArray[np.float32]] = field(
        default_factory=dict, repr=False
    )

    def blend(
        self, crop: ImageBGR, reference: ImageBGR, mask: MaskArray, *, out: ImageBGR | None = None
    ) -> ImageBGR:
        """The swap `crop` with its colours carried to meet `reference` (the frame's own pixels
        under the crop) where `mask` falls to 0; its gradients kept where the mask is 1. `out` may
        be `crop` itself (in place). All three are crop-sized (mask: float32 in [0, 1])."""
        size = int(crop.shape[0])
        if crop.shape != reference.shape or crop.shape[:2] != (size, size) or mask.shape != (size, size):
            raise ValueError(f"crop {crop.shape}, reference {reference.shape} and mask {mask.shape} differ")
        dst = np.empty_like(crop) if out is None else out
        n = lattice_size(size)
        swap = self._buffer("swap", crop.shape)
        diff = self._buffer("diff", crop.shape)
        np.copyto(swap, crop, casting="unsafe")
        np.subtract(reference, swap, out=diff, dtype=np.float32)
        coarse_diff = cv2.resize(diff, (n, n), interpolation=cv2.INTER_AREA)
        coarse_mask = cv2.resize(mask, (n, n), interpolation=cv2.INTER_AREA)
        quantised = np.rint(np.clip(coarse_mask, 0.0, 1.0) * 255.0).astype(np.uint8)
        factor = self._factor(n, quantised)
        rhs = coarse_diff.reshape(n * n, 3).astype(np.float64) * factor.weights[:, None]
        membrane = np.asarray(factor.lu.solve(rhs), dtype=np.float32).reshape(n, n, 3)
        correction = self._buffer("correction", crop.shape)
        cv2.resize(membrane, (size, size), dst=correction, interpolation=cv2.INTER_LINEAR)
        np.add(swap, correction, out=swap)
        np.rint(swap, out=swap)
        np.clip(swap, 0.0, 255.0, out=swap)
        np.copyto(dst, swap, casting="unsafe")
        return dst

    def _factor(self, n: int, quantised: npt.NDArray[np.uint8]) -> _Factor:
        key = (n, hashlib.blake2b(quantised.tobytes(), digest_size=16).digest())
        found = self._factors.get(key)
        if found is not None:
            self._factors.move_to_end(key)
            return found
        laplacian = self._laplacians.get(n)
        if laplacian is None:
            laplacian = self._laplacians[n] = _laplacian(n)
        weights = data_weights(quantised)
        system = (laplacian + sparse.diags(weights)).tocsc()
        found = self._factors[key] = _Factor(weights, sparse_linalg.splu(system))
        self.factorisations += 1
        while len(self._factors) > _MAX_FACTORS:
            self._factors.popitem(last=False)
        return found

    def _buffer(self, name: str, shape: tuple[int, ...]) -> npt.NDArray[np.float32]:
        key = (name, shape)
        buf = self._scratch.get(key)
        if buf is None:
            buf = self._scratch[key] = np.empty(shape, dtype=np.float32)
        return buf


__all__ = ["GRID", "LAMBDA", "PoissonBlender", "data_weights", "lattice_size"]
