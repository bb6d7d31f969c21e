"""A face cut by the frame's edge: what lies beyond the edge must not leak into the picture.

The crops that are pasted back (the swapper's, the enhancer's, the colour match's reference) used to
be black beyond the frame, as insightface's are: bilinear taps mixed that black into the last row
and column (a dark line along the edge where a face touched it), and the colour match measured the
black slab as part of the face (a face at the edge went darker). The embeddings' crop keeps
insightface's black border (the reference-matching thresholds are measured on it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest

from models.fakes.doubles import write_all
from models.files.store import ModelStore
from models.ops.align import estimate_norm, warp_crop, warp_paste_crop
from models.ops.crop_geometry import ARCFACE_CROP, INSWAPPER_CROP, CropSpec
from models.runtime.session import SessionConfig, SessionFactory
from models.wrappers.swappers.inswapper import InSwapper
from realtime.core.contracts import FramePlan, SwapTarget
from realtime.core.settings import Settings
from realtime.face.host.compositor import paste_region
from realtime.face.source_face import SourceIdentity
from realtime.face.swap_worker import FaceSwapWorker
from realtime.wiring.model_loading import ModelPaths, StoreQualityModels
from tests.real_faces import astronaut_face

FACTORY = SessionFactory(SessionConfig(provider="cpu"))
GREY = 128
H, W = 360, 640


@pytest.fixture(scope="module")
def doubles(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = Path(tmp_path_factory.mktemp("edge"))
    write_all(d)
    return d


@pytest.fixture(scope="module")
def swapper(doubles: Path) -> InSwapper:
    return InSwapper.from_file(doubles / "inswapper_128.onnx", FACTORY)


def identity() -> SourceIdentity:
    v = np.random.default_rng(5).standard_normal(512).astype(np.float32)
    return SourceIdentity(v / np.linalg.norm(v), ())


def face_at(x: float, y: float) -> np.ndarray:
    """The astronaut's landmarks with their centre moved to (x, y)."""
    kps = astronaut_face().kps.astype(np.float64)
    return (kps - kps.mean(axis=0) + (x, y)).astype(np.float32)


def swap(
    swapper: InSwapper,
    doubles: Path,
    kps: np.ndarray,
    size: tuple[int, int] = (H, W),
    device: bool = False,
    **flat: Any,
) -> np.ndarray:
    """A flat grey frame of `size` (h, w) with one face swapped at `kps` (`device`: on the device
    path, run here on the CPU provider)."""
    s = Settings().with_overrides({k.replace("__", "."): v for k, v in flat.items()})
    paths = ModelPaths(ModelStore(doubles, allow_unverified=True))
    quality = StoreQualityModels(paths, FACTORY)
    worker = (
        FaceSwapWorker(swapper, identity(), s, quality, factory=FACTORY, device_graphs=True)
        if device
        else FaceSwapWorker(swapper, identity(), s, quality)
    )
    assert (worker.device_path is not None) == device
    out = np.full((*size, 3), GREY, np.uint8)
    worker.apply(out, FramePlan([SwapTarget(kps, 1.0, 7)]), s)
    return out


@pytest.mark.parametrize("flat", [{}, {"enhancer__model": "gpen_256"}], ids=["swap", "swap+enhancer"])
@pytest.mark.parametrize("edge", ["left", "top", "right", "bottom"])
def test_no_dark_line_where_a_face_meets_the_frame_edge(
    swapper: InSwapper, doubles: Path, flat: dict[str, Any], edge: str
) -> None:
    """The face cut by the edge looks as it does on a larger frame of the same grey (where nothing
    is cut), seen through the smaller frame."""
    pad = 100
    # The face's centre 20 px inside the edge: a third of the face is beyond it.
    centres = {
        "left": (20.0, H / 2),
        "right": (W - 20.0, H / 2),
        "top": (W / 2, 20.0),
        "bottom": (W / 2, H - 20.0),
    }
    x, y = centres[edge]
    kps = face_at(x, y)
    cut = swap(swapper, doubles, kps, **flat).astype(np.int16)
    whole = swap(swapper, doubles, kps + pad, size=(H + 2 * pad, W + 2 * pad), **flat).astype(np.int16)
    seen = whole[pad : pad + H, pad : pad + W]
    assert np.abs(seen - GREY).max() > 20, "the test face must be swapped"
    line = {"left": np.s_[:, 0], "right": np.s_[:, -1], "top": np.s_[0], "bottom": np.s_[-1]}[edge]
    assert np.abs(cut[line] - seen[line]).max() <= 2  # the edge line: no dark line
    assert np.abs(cut - seen).max() <= 2


@pytest.mark.parametrize("device", [False, True], ids=["opencv", "device"])
def test_colour_match_is_not_darkened_by_the_frame_edge(
    swapper: InSwapper, doubles: Path, device: bool
) -> None:
    """The same face on the same flat frame gets the same colour at the edge as in the middle (on
    the device path too, whose colour match reads the host's copy of the frame)."""
    middle = swap(swapper, doubles, face_at(W / 2, H / 2), device=device, composite__colour_match=True)
    at_edge = swap(swapper, doubles, face_at(20.0, H / 2), device=device, composite__colour_match=True)
    # The face's core: 12 px around its centre in each picture.
    core_mid = middle[H // 2 - 12 : H // 2 + 12, W // 2 - 12 : W // 2 + 12].astype(np.float64)
    core_edge = at_edge[H // 2 - 12 : H // 2 + 12, 8:32].astype(np.float64)
    assert np.abs(core_mid.mean(axis=(0, 1)) - core_edge.mean(axis=(0, 1))).max() <= 2.0


def test_only_the_embedding_crop_keeps_black_beyond_the_frame() -> None:
    frame = np.full((H, W, 3), GREY, np.uint8)
    m = estimate_norm(face_at(10.0, H / 2), 112)
    assert warp_crop(frame, m, 112)[:, 0].max() == 0  # insightface's crop: black beyond the edge
    assert np.all(warp_paste_crop(frame, m, 112) == GREY)
    assert INSWAPPER_CROP.replicate and CropSpec(256).replicate and not ARCFACE_CROP.replicate


def test_the_paste_touches_only_its_region_at_the_edge(swapper: InSwapper, doubles: Path) -> None:
    kps = face_at(20.0, H / 2)
    out = swap(swapper, doubles, kps)
    region = paste_region((H, W, 3), 128, estimate_norm(kps, 128))
    outside = np.ones((H, W), bool)
    outside[region.y0 : region.y1, region.x0 : region.x1] = False
    assert np.all(out[outside] == GREY)
    assert cv2.absdiff(out, np.full_like(out, GREY)).max() > 2  # and something was swapped
