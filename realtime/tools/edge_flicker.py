"""How much the pasted face's edge changes from frame to frame on a still face: the feathered paste
against Poisson blending (composite.blend), through the real per-face chain.

A still face is never quite still on a camera: the sensor adds noise to every frame and the
tracked landmarks wobble by a fraction of a pixel. The clip here is the bundled astronaut photo,
still, with both (seeded), swapped by the inswapper double (half the target, half a
source-dependent colour bent by position: not a plain tint, so the blend has gradients to keep).
Each frame goes through FaceSwapWorker (host backend, or the device backend forced onto the CPU
provider); the figure is the mean absolute change of the output between consecutive frames, over
the mask's feathered edge (where the warped paste mask is between 5 % and 95 %) and over the
face inside it, next to the same figure of the input frames (the camera's own noise).
"""

from __future__ import annotations

import itertools
import tempfile
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np
import numpy.typing as npt
import onnx

from models.fakes.pixel_doubles import build_inswapper
from models.ops.align import estimate_norm, invert_affine
from models.runtime.session import SessionConfig, SessionFactory
from models.types import ImageBGR
from models.wrappers.swappers.inswapper import InSwapper
from realtime.core.contracts import FramePlan, SwapTarget
from realtime.core.settings import Settings, load_preset
from realtime.face.host.compositor import Compositor
from realtime.face.source_face import SourceIdentity
from realtime.face.swap_worker import FaceSwapWorker
from realtime.io.test_pattern import astronaut_photo

# The astronaut's landmarks in the bundled 512 px photo (MTCNN's, rounded to 0.1 px): left eye,
# right eye, nose, left and right mouth corner.
ASTRONAUT_KPS = ((203.8, 101.3), (246.4, 103.2), (224.3, 128.9), (201.8, 139.8), (244.9, 142.0))
CAMERA_NOISE = 2.0  # grey levels, standard deviation (a webcam in good light)
LANDMARK_WOBBLE = 0.25  # px, standard deviation (what One-Euro smoothing leaves on a still face)
_BAND = (0.05, 0.95)  # the warped mask's feathered edge


@dataclass(frozen=True, slots=True)
class EdgeChange:
    blend: str
    edge: float  # mean |frame k - frame k-1| over the edge band, grey levels
    inside: float  # the same over the face inside the band
    camera: float  # the input frames' own change over the edge band
    frames: int


def still_face_clip(
    width: int, height: int, frames: int, seed: int = 0
) -> tuple[list[ImageBGR], list[npt.NDArray[np.float32]]]:
    """The astronaut, still, centred on a grey canvas (her head a third of the height): each frame
    with fresh camera noise and its landmarks with a fresh wobble."""
    photo = astronaut_photo()
    scale = height / 1.5 / photo.shape[0]
    canvas = np.full((height, width, 3), 110, dtype=np.uint8)
    placed = cv2.resize(photo, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA)
    ph, pw = placed.shape[:2]
    x0, y0 = (width - pw) // 2, (height - ph) // 2
    canvas[y0 : y0 + ph, x0 : x0 + pw] = placed
    kps = np.asarray(ASTRONAUT_KPS, dtype=np.float32) * np.float32(scale) + np.array([x0, y0], np.float32)
    rng = np.random.default_rng(seed)
    clip: list[ImageBGR] = []
    points: list[npt.NDArray[np.float32]] = []
    for _ in range(frames):
        noise = rng.normal(0.0, CAMERA_NOISE, canvas.shape)
        clip.append(np.clip(canvas + noise, 0, 255).astype(np.uint8))
        points.append((kps + rng.normal(0.0, LANDMARK_WOBBLE, kps.shape)).astype(np.float32))
    return clip, points


def edge_band(
    shape: tuple[int, ...], kps: npt.NDArray[np.float32], crop_size: int = 128
) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
    """(edge, inside): the frame's pixels where the paste mask of a face at `kps` is feathered, and
    where it is (nearly) whole."""
    m = estimate_norm(kps, crop_size)
    mask = Compositor().crop_mask(crop_size, m)
    warped = cv2.warpAffine(mask, invert_affine(m), (int(shape[1]), int(shape[0])), borderValue=0.0)
    edge = (warped > _BAND[0]) & (warped < _BAND[1])
    return edge, warped >= _BAND[1]


def _change(frames: list[ImageBGR], where: npt.NDArray[np.bool_]) -> float:
    steps = [
        float(np.abs(b.astype(np.int16) - a.astype(np.int16))[where].mean())
        for a, b in itertools.pairwise(frames)
    ]
    return float(np.mean(steps))


def measure_edge_change(
    blend: str,
    *,
    width: int = 1280,
    height: int = 720,
    frames: int = 30,
    device_graphs: bool = False,
    settings: Settings | None = None,
    workdir: Path | None = None,
) -> EdgeChange:
    """Run the still-face clip through the chain with composite.blend = `blend` (module doc)."""
    base = settings or load_preset("balanced")
    s = base.with_overrides({"composite.blend": blend, "pipeline.provider": "cpu"})
    clip, points = still_face_clip(width, height, frames)
    factory = SessionFactory(SessionConfig(provider="cpu", intra_op_threads=1))
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        path = Path(tmp) / "inswapper_128.onnx"
        onnx.save(build_inswapper(), str(path))
        swapper = InSwapper.from_file(path, factory)
    v = np.random.default_rng(1).standard_normal(512).astype(np.float32)
    person = SourceIdentity(v / np.linalg.norm(v), ())
    worker = FaceSwapWorker(swapper, person, s, factory=factory, device_graphs=device_graphs)
    out: list[ImageBGR] = []
    for image, kps in zip(clip, points, strict=True):
        frame = image.copy()
        worker.apply(frame, FramePlan(targets=[SwapTarget(kps, 1.0, 1)]), s)
        out.append(frame)
    mean_kps = np.mean(points, axis=0).astype(np.float32)
    edge, inside = edge_band(clip[0].shape, mean_kps, swapper.input_size)
    return EdgeChange(blend, _change(out, edge), _change(out, inside), _change(clip, edge), frames)


__all__ = ["ASTRONAUT_KPS", "EdgeChange", "edge_band", "measure_edge_change", "still_face_clip"]
