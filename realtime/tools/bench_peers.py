"""The peers' live loops for `main.py bench`, rebuilt on insightface's own classes and the same models.

`run_dlc_style` follows Deep-Live-Cam's current webcam loop as its source reads (hacksider/
Deep-Live-Cam, the Qt generation: modules/ui.py's processing worker, face_swapper's
`_fast_paste_back`; read, not copied): a capture thread hands frames over a 2-frame queue to one
processing thread, which
  * detects with SCRFD every `det_interval` frames (2 at 30 fps: round(fps * 0.08)) and keeps the
    leftmost face; in between it swaps at the last detected landmarks (no tracking, no smoothing);
  * swaps with INSwapper.get(..., paste_back=False), then pastes inside the face's bounding box:
    a 3-channel warp of the face (border replicated), a 1-channel warp of a fixed feathered
    128 px alpha (made once), and a uint8 multiply/multiply/add blend;
  * copies the frame twice (its `astype(np.uint8)` return and its post-processing `copy()`).
Every frame is processed here (the capture queue blocks instead of dropping), as the engine does in
the bench's every-frame mode, so ms/frame compares the two loops' work.
"""

from __future__ import annotations

import contextlib
import queue
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import cv2
import numpy as np
import numpy.typing as npt

from models.runtime.session import InferenceClock, SessionConfig, SessionFactory
from models.types import ImageBGR

DLC_DET_INTERVAL = 2  # Deep-Live-Cam: max(1, round(camera_fps * 0.08)) at 30 fps
DLC_CROP = 128


@dataclass
class InsightfaceModels:
    """insightface's SCRFD, INSwapper and the source face (its ArcFace embedding), on one clock."""

    detector: Any
    swapper: Any
    source: SimpleNamespace
    clock: InferenceClock


def load_insightface_models(models_dir: Path, source_photo: ImageBGR, det_size: int) -> InsightfaceModels:
    """The models a peer loop runs, from insightface's own model_zoo classes, CPU provider."""
    from insightface.model_zoo.arcface_onnx import ArcFaceONNX
    from insightface.model_zoo.inswapper import INSwapper
    from insightface.model_zoo.scrfd import SCRFD

    clock = InferenceClock()
    factory = SessionFactory(SessionConfig(provider="cpu"), clock=clock)

    def session(name: str) -> Any:
        return factory.create(models_dir / name)

    det = SCRFD(model_file=str(models_dir / "det_10g.onnx"), session=session("det_10g.onnx"))
    det.prepare(0, input_size=(det_size, det_size), det_thresh=0.5)
    rec = ArcFaceONNX(model_file=str(models_dir / "w600k_r50.onnx"), session=session("w600k_r50.onnx"))
    # insightface's INSwapper prints its input shape to stdout, which would corrupt `bench --json`.
    with contextlib.redirect_stdout(sys.stderr):
        swapper = INSwapper(
            model_file=str(models_dir / "inswapper_128.onnx"), session=session("inswapper_128.onnx")
        )
    _, kpss = det.detect(source_photo, input_size=(det_size, det_size))
    if kpss is None or len(kpss) == 0:
        raise ValueError("the bench's source photo has no face the detector finds")
    src = SimpleNamespace(kps=kpss[0])
    rec.get(source_photo, src)
    src.normed_embedding = src.embedding / np.linalg.norm(src.embedding)
    clock.reset()
    return InsightfaceModels(det, swapper, src, clock)


def dlc_soft_alpha(size: int = DLC_CROP) -> npt.NDArray[np.uint8]:
    """A feathered alpha for the 128 px crop, made once (Deep-Live-Cam's is a fixed template in
    crop space too; its exact shape varies between its versions and does not change the cost):
    the square eroded by size//10 and blurred with a (2 * size//20 + 1) Gaussian."""
    erode = max(size // 10, 3)
    blur = max(size // 20, 3) * 2 + 1
    white = np.full((size, size), 255, dtype=np.uint8)
    # Outside the crop counts as clear (erode's default border would keep the square all white).
    kernel = np.ones((erode, erode), dtype=np.uint8)
    eroded = cv2.erode(white, kernel, borderType=cv2.BORDER_CONSTANT, borderValue=0)
    return np.asarray(cv2.GaussianBlur(eroded, (blur, blur), 0), dtype=np.uint8)


def dlc_fast_paste(
    frame: ImageBGR, face: ImageBGR, m: npt.NDArray[np.float64], alpha: npt.NDArray[np.uint8]
) -> ImageBGR:
    """Blend the swapped 128 px `face` (aligned by `m`: frame -> crop) into `frame` in place, inside
    the bounding box of the crop's corners (+2 px), as Deep-Live-Cam's `_fast_paste_back` does."""
    im = cv2.invertAffineTransform(m)
    size = face.shape[0]
    corners = np.array([[0, 0, 1], [size, 0, 1], [0, size, 1], [size, size, 1]], dtype=np.float64) @ im.T
    h, w = frame.shape[:2]
    x0 = max(int(np.floor(corners[:, 0].min())) - 2, 0)
    y0 = max(int(np.floor(corners[:, 1].min())) - 2, 0)
    x1 = min(int(np.ceil(corners[:, 0].max())) + 2, w)
    y1 = min(int(np.ceil(corners[:, 1].max())) + 2, h)
    if x1 <= x0 or y1 <= y0:
        return frame
    im[0, 2] -= x0
    im[1, 2] -= y0
    size_wh = (x1 - x0, y1 - y0)
    face_roi = cv2.warpAffine(face, im, size_wh, borderMode=cv2.BORDER_REPLICATE)
    alpha_roi = cv2.warpAffine(alpha, im, size_wh, borderValue=0)
    alpha3 = cv2.merge([alpha_roi, alpha_roi, alpha_roi])
    target = frame[y0:y1, x0:x1]
    fg = cv2.multiply(face_roi, alpha3, scale=1.0 / 255.0)
    bg = cv2.multiply(target, 255 - alpha3, scale=1.0 / 255.0)
    frame[y0:y1, x0:x1] = cv2.add(fg, bg)
    return frame


@dataclass
class PeerRun:
    """What a peer loop measured: wall time, per-frame latency (capture to done) and stage means."""

    frames: int
    wall_s: float
    latencies_ms: npt.NDArray[np.float64]
    stages_ms: dict[str, float]
    detections: int
    model_ms: float


def run_dlc_style(
    clip: list[ImageBGR],
    frames: int,
    models: InsightfaceModels,
    *,
    det_interval: int = DLC_DET_INTERVAL,
    on_frame: Callable[[int, ImageBGR], None] | None = None,
) -> PeerRun:
    """Deep-Live-Cam's live loop (module docstring) over `frames` frames of `clip`.
    `on_frame(i, image)` sees each finished frame (tests)."""
    alpha = dlc_soft_alpha()
    handoff: queue.Queue[tuple[int, ImageBGR, float] | None] = queue.Queue(maxsize=2)
    stop = threading.Event()

    def put(item: tuple[int, ImageBGR, float] | None) -> bool:
        while not stop.is_set():
            try:
                handoff.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False  # the processing side gave up (an error): nobody reads any more

    def capture() -> None:
        for i in range(frames):
            if not put((i, clip[i % len(clip)].copy(), time.perf_counter())):  # a fresh buffer
                return
        put(None)

    latencies = np.zeros(frames)
    totals = {"detect": 0.0, "swap": 0.0, "paste": 0.0, "copies": 0.0}
    cached: SimpleNamespace | None = None
    detections = 0
    models.clock.reset()
    thread = threading.Thread(target=capture, name="dlc-capture", daemon=True)
    t_start = time.perf_counter()
    thread.start()
    try:
        n = 0
        while (item := handoff.get()) is not None:
            i, img, t_capture = item
            n += 1
            t0 = time.perf_counter()
            if n % det_interval == 0:
                bboxes, kpss = models.detector.detect(img, max_num=0)
                detections += 1
                cached = SimpleNamespace(kps=kpss[int(np.argmin(bboxes[:, 0]))]) if len(bboxes) else None
            t1 = time.perf_counter()
            totals["detect"] += t1 - t0
            if cached is not None:
                face, m = models.swapper.get(img, cached, models.source, paste_back=False)
                t2 = time.perf_counter()
                img = dlc_fast_paste(img, face, m, alpha)
                t3 = time.perf_counter()
                img = img.astype(np.uint8)  # Deep-Live-Cam's return path copies the frame
                totals["swap"] += t2 - t1
                totals["paste"] += t3 - t2
                t1 = t3
            img = img.copy()  # ... and its post-processing step copies it again
            t_done = time.perf_counter()
            totals["copies"] += t_done - t1
            latencies[i] = (t_done - t_capture) * 1000.0
            if on_frame is not None:
                on_frame(i, img)
    finally:
        stop.set()
        thread.join(timeout=5.0)
    wall = time.perf_counter() - t_start
    stages = {k: v * 1000.0 / max(frames, 1) for k, v in totals.items()}
    return PeerRun(frames, wall, latencies, stages, detections, models.clock.total_ms)
