"""realtime.face.host.poisson: the gradient-domain blend of a swapped crop, on real faces.

The swap `g` is another real person's face (t1.jpg), made brighter, in the astronaut's crop `t`:
the lighting differs, which is where a feathered paste shows a seam.
"""

from __future__ import annotations

import cv2
import numpy as np
import numpy.typing as npt
import pytest

from models.ops.align import estimate_norm, warp_paste_crop
from realtime.face.host.compositor import Compositor
from realtime.face.host.poisson import PoissonBlender
from tests.real_faces import astronaut_bgr, astronaut_face, group_photo_bgr, group_photo_faces

S = 128


@pytest.fixture(scope="module")
def crops() -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint8], npt.NDArray[np.float32]]:
    """(swap, reference, mask): a brighter stranger's face, the astronaut's, the feathered mask."""
    m_t = estimate_norm(astronaut_face().kps, S)
    reference = warp_paste_crop(astronaut_bgr(), m_t, S)
    stranger = group_photo_faces()[3]
    swap = warp_paste_crop(group_photo_bgr(), estimate_norm(stranger.kps, S), S)
    swap = cv2.convertScaleAbs(swap, alpha=1.0, beta=40)
    return swap, reference, Compositor().crop_mask(S, m_t)


def pasted(
    crop: npt.NDArray[np.uint8], reference: npt.NDArray[np.uint8], mask: npt.NDArray[np.float32]
) -> npt.NDArray[np.float64]:
    """The feathered paste of `crop` over `reference`, in crop space."""
    a = mask[:, :, None].astype(np.float64)
    return a * crop + (1.0 - a) * reference


def laplacian(image: npt.NDArray[np.uint8]) -> npt.NDArray[np.float32]:
    return np.asarray(cv2.Laplacian(image.astype(np.float32), cv2.CV_32F))


def test_the_blend_keeps_the_swaps_detail_and_takes_the_frames_lighting(crops) -> None:  # type: ignore[no-untyped-def]
    swap, reference, mask = crops
    blended = PoissonBlender().blend(swap, reference, mask)
    inside = mask > 0.99
    # The face's detail (its second derivatives) is the swap's, not the frame's ...
    assert np.abs(laplacian(blended) - laplacian(swap))[inside].mean() < 2.0
    assert np.abs(laplacian(reference) - laplacian(swap))[inside].mean() > 10.0
    # ... and across the feathered edge the paste meets the frame: no brighter rim round the face.
    edge = (mask > 0.05) & (mask < 0.95)
    feather_gap = np.abs(pasted(swap, reference, mask) - reference)[edge].mean()
    poisson_gap = np.abs(pasted(blended, reference, mask) - reference)[edge].mean()
    assert poisson_gap < 0.6 * feather_gap

    # The seam: brightness steps across the edge band's rows.
    def step(image: npt.NDArray[np.float64]) -> float:
        grey = image.mean(axis=2)
        return float(np.abs(np.diff(grey, axis=1))[edge[:, 1:]].mean())

    assert step(pasted(blended, reference, mask)) < step(pasted(swap, reference, mask))


def test_outside_the_mask_the_blend_is_the_frame(crops) -> None:  # type: ignore[no-untyped-def]
    swap, reference, mask = crops
    blended = PoissonBlender().blend(swap, reference, mask)
    # Where the mask is 0 (the crop's rim) the membrane follows t - g: there the crop takes the
    # frame's colours, its local means within a few levels (the lattice is coarser than the crop,
    # so the finest texture stays the swap's; the paste shows the frame there anyway).
    rim = mask < 0.01
    assert rim.sum() > 500

    def local_mean(image: npt.NDArray[np.uint8]) -> npt.NDArray[np.float32]:
        return np.asarray(cv2.blur(image.astype(np.float32), (7, 7)))

    assert np.abs(local_mean(blended) - local_mean(reference))[rim].mean() < 6.0
    assert np.abs(local_mean(swap) - local_mean(reference))[rim].mean() > 30.0


def test_a_mask_of_ones_shifts_the_face_to_the_frames_mean_colour(crops) -> None:  # type: ignore[no-untyped-def]
    swap, reference, _ = crops
    ones = np.ones((S, S), dtype=np.float32)
    blended = PoissonBlender().blend(swap, reference, ones)
    shift = reference.astype(np.float64).mean(axis=(0, 1)) - swap.astype(np.float64).mean(axis=(0, 1))
    expected = np.clip(swap + shift, 0, 255)
    assert np.abs(blended - expected).mean() < 1.5


def test_a_mask_met_again_is_not_factorised_again(crops) -> None:  # type: ignore[no-untyped-def]
    swap, reference, mask = crops
    blender = PoissonBlender()
    out = swap.copy()
    for _ in range(3):
        blender.blend(swap, reference, mask, out=out)
    assert blender.factorisations == 1
    other = Compositor().crop_mask(S, estimate_norm(astronaut_face().kps * 1.3, S))
    blender.blend(swap, reference, other, out=out)
    assert blender.factorisations == 2


def test_a_small_change_of_the_mask_moves_the_result_a_little(crops) -> None:  # type: ignore[no-untyped-def]
    """No hard domain edge: the mask moved by a third of a pixel (a mask's wobble from frame to
    frame) changes the blend by a fraction of a level, not by a row of nodes flipping in or out."""
    swap, reference, mask = crops
    shift = np.array([[1.0, 0.0, 0.3], [0.0, 1.0, 0.2]])
    nudged = np.asarray(cv2.warpAffine(mask, shift, (S, S), borderMode=cv2.BORDER_REPLICATE))
    a = PoissonBlender().blend(swap, reference, mask)
    b = PoissonBlender().blend(swap, reference, nudged)
    assert np.abs(a.astype(np.int16) - b).mean() < 1.0


def test_in_place_and_mismatched_shapes(crops) -> None:  # type: ignore[no-untyped-def]
    swap, reference, mask = crops
    blender = PoissonBlender()
    expected = blender.blend(swap, reference, mask)
    work = swap.copy()
    assert blender.blend(work, reference, mask, out=work) is work
    assert np.array_equal(work, expected)
    with pytest.raises(ValueError, match="differ"):
        blender.blend(swap, reference[:64, :64], mask)
    with pytest.raises(ValueError, match="differ"):
        blender.blend(swap, reference, mask[:64])


@pytest.mark.parametrize("size", [32, 256])
def test_other_crop_sizes(size: int) -> None:
    """Smaller crops than the lattice are solved at their own size; larger ones on the lattice."""
    rng = np.random.default_rng(size)
    swap = rng.integers(60, 120, (size, size, 3), dtype=np.uint8)
    reference = np.full((size, size, 3), 180, dtype=np.uint8)
    m = np.zeros((size, size), dtype=np.float32)
    m[size // 4 : -size // 4, size // 4 : -size // 4] = 1.0
    mask = cv2.GaussianBlur(m, (0, 0), size / 32)
    blended = PoissonBlender().blend(swap, reference, mask)
    assert blended.shape == swap.shape and blended.dtype == np.uint8
    # The face is lifted towards the frame's brightness; its texture (the swap's noise) stays.
    core = mask > 0.99
    assert blended[core].mean() > swap[core].mean() + 40
    assert blended[core].std() > 0.5 * swap[core].std()
