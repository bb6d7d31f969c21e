"""Enhance the swapped face in FFHQ-aligned space: one warp in, one paste out.

FaceFusion and Deep-Live-Cam paste the swap into the frame, then warp the frame again for the
restorer and paste its output once more: two full round trips through the frame per face. Here:

1. warp the frame ONCE into the restorer's FFHQ crop (template scaled to its size);
2. put the swapped 128 px face into that crop through crop128 -> FFHQ = M_ffhq ∘ M_arc⁻¹ (where the
   swapped crop has pixels; the feather is applied once, at the final paste, so with blend 0 the
   result is the plain swap);
3. run the restorer and blend by strength: out = in + blend * (restored - in);
4. return the FFHQ crop, its matrix and the face's mask carried into FFHQ space, for ONE
   region-limited paste by the compositor.

Enhancing every Nth frame (`enhancer.every_n`): the restorer's correction (restored - in) is kept
per face in aligned space and added to the current frame's crop, which was warped with the current
frame's alignment. The face keeps moving and talking at the camera's rate, and nothing of the
cached frame is pasted at the head's old position (no ghost); only the correction is older.
Each worker keeps its own corrections and counts its own frames, so with F frames in flight the
restorer still runs on about 1 in `every_n` frames overall.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Collection, Hashable
from dataclasses import dataclass

import cv2
import numpy as np
import numpy.typing as npt

from models.ops.align import Matrix2x3, invert_affine, similarity_transform, warp_paste_crop
from models.types import FloatArray, ImageBGR
from models.wrappers.enhancers import FaceRestorer, ffhq_template
from realtime.face.host.compositor import MaskArray, compose_affine

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class EnhancedFace:
    """One enhanced face, ready for the compositor (arrays are the stage's buffers: valid until
    its next call).

    crop: (S, S, 3) uint8, the blended result in FFHQ space; m: frame -> FFHQ crop;
    mask: (S, S) float32 paste alpha in FFHQ space; ran_model: False when a cached correction was used.
    """

    crop: ImageBGR
    m: Matrix2x3
    mask: MaskArray
    ran_model: bool


@dataclass(slots=True)
class _Correction:
    delta: FloatArray  # (S, S, 3) restored - input, in aligned space
    age: int = 0  # frames since the restorer produced it


class FaceEnhanceStage:
    """Runs one restorer for one worker. Not thread-safe (reused buffers).

    max_faces: corrections kept for reuse (oldest dropped first).
    """

    def __init__(self, restorer: FaceRestorer, *, max_faces: int = 8) -> None:
        self.restorer = restorer
        self.max_faces = max_faces
        s = restorer.size
        self.size = s
        self._template = ffhq_template(s)
        self._frame_crop: ImageBGR = np.zeros((s, s, 3), dtype=np.uint8)  # the frame, FFHQ-aligned
        self._input: ImageBGR = np.zeros((s, s, 3), dtype=np.uint8)  # ... with the swap in it
        self._restored: ImageBGR = np.zeros((s, s, 3), dtype=np.uint8)
        self._out: ImageBGR = np.zeros((s, s, 3), dtype=np.uint8)
        self._mask: MaskArray = np.zeros((s, s), dtype=np.float32)
        self._acc: FloatArray = np.zeros((s, s, 3), dtype=np.float32)
        self._fresh: FloatArray = np.zeros((s, s, 3), dtype=np.float32)  # correction when not cached
        self._cache: OrderedDict[Hashable, _Correction] = OrderedDict()
        self.model_runs = 0  # for metrics and tests

    @property
    def frame_crop(self) -> ImageBGR:
        """The last face's FFHQ crop of the frame itself (before the swap went in)."""
        return self._frame_crop

    def matrix(self, kps: npt.ArrayLike) -> Matrix2x3:
        """frame -> FFHQ crop for these landmarks."""
        return similarity_transform(np.asarray(kps, dtype=np.float64).reshape(5, 2), self._template)

    def enhance(
        self,
        frame: ImageBGR,
        kps: npt.ArrayLike,
        swapped: ImageBGR,
        m_swap: Matrix2x3,
        mask_swap: MaskArray,
        *,
        blend: float,
        every_n: int = 1,
        key: Hashable | None = None,
    ) -> EnhancedFace:
        """Enhance one swapped face.

        frame: the frame (read only); kps: the face's landmarks in it; swapped: the swapper's
        output crop, aligned by m_swap (frame -> swap crop); mask_swap: the face's alpha in swap
        crop space; blend: restorer strength 0..1; every_n: run the restorer on every Nth call for
        `key` (a face's track id and identity), reusing its correction in between; key None = no reuse.
        """
        s = self.size
        m = self.matrix(kps)
        # 1. The single warp of the frame.
        warp_paste_crop(frame, m, s, out=self._frame_crop)
        # 2. The swap into the FFHQ crop. BORDER_TRANSPARENT leaves the crop's own pixels wherever the
        # 128 px square does not reach, with no black fringe from sampling beyond its edge.
        to_ffhq = compose_affine(m, invert_affine(m_swap))
        np.copyto(self._input, self._frame_crop)
        cv2.warpAffine(swapped, to_ffhq, (s, s), dst=self._input, borderMode=cv2.BORDER_TRANSPARENT)
        cv2.warpAffine(mask_swap, to_ffhq, (s, s), dst=self._mask, borderValue=0.0)

        # 3. Restore (or reuse this face's correction) and blend by strength.
        cached = self._cache.get(key) if key is not None else None
        run = cached is None or cached.age + 1 >= max(every_n, 1)
        if run:
            self.restorer.enhance(self._input, out=self._restored)
            self.model_runs += 1
            if key is not None and every_n > 1:
                delta = self._store(key)
            else:
                delta = self._fresh
                if key is not None:
                    # Not kept this time: an older kept correction must not come back when reuse is
                    # switched on again (it would ghost an expression from minutes ago).
                    self._cache.pop(key, None)
            np.subtract(self._restored, self._input, out=delta, dtype=np.float32)
        else:
            assert cached is not None
            cached.age += 1
            self._cache.move_to_end(key)
            delta = cached.delta
        np.multiply(delta, np.float32(blend), out=self._acc)
        np.add(self._acc, self._input, out=self._acc)
        np.clip(self._acc, 0.0, 255.0, out=self._acc)
        np.rint(self._acc, out=self._acc)
        np.copyto(self._out, self._acc, casting="unsafe")
        return EnhancedFace(self._out, m, self._mask, run)

    def forget_except(self, keys: Collection[Hashable]) -> None:
        """Drop the corrections of faces that are gone (call once per frame with the live keys)."""
        for key in [k for k in self._cache if k not in keys]:
            del self._cache[key]

    def _store(self, key: Hashable) -> FloatArray:
        """The correction buffer for `key`, reset to age 0 (reusing its array when it has one)."""
        entry = self._cache.get(key)
        if entry is None:
            entry = _Correction(np.zeros((self.size, self.size, 3), dtype=np.float32))
            self._cache[key] = entry
            while len(self._cache) > self.max_faces:
                self._cache.popitem(last=False)
        entry.age = 0
        self._cache.move_to_end(key)
        return entry.delta
