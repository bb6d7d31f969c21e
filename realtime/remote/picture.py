"""How good the returned picture is: PSNR and SSIM of each frame that came back against the frame
it was made from, over the part of the picture the swap does not touch (the face, grown by a
margin, and the disclosure label are left out), so what is measured is the transport's loss.

The bench and the tests use it: `BackgroundMask` says where to measure, `PictureMeter` keeps the
originals it is shown (a few seconds' worth, by index) and scores each returned frame as it comes.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

import cv2
import numpy as np
import numpy.typing as npt

from realtime.api import (
    FrameSink,
    FrameSource,
    ImageBGR,
    SourceWrapper,
    VideoFrame,
    astronaut_photo,
    draw_disclosure_label,
)

Mask = npt.NDArray[np.uint8]
Notify = Callable[[str, str], None]
Box = tuple[int, int, int, int]  # x1, y1, x2, y2

PEAK = 255.0
CLEAN_DB = 99.0  # the PSNR reported for a picture identical to its original
SSIM_EVERY = 15  # frames between two SSIM samples (SSIM costs ~10 ms a 720p frame)
SSIM_SAMPLES = 16


def label_box(width: int, height: int) -> Box | None:
    """Where the disclosure label is drawn on a picture of this size (None: it is not drawn)."""
    blank = np.full((height, width, 3), 128, np.uint8)
    draw_disclosure_label(blank)
    changed = np.argwhere(np.any(blank != 128, axis=2))
    if changed.size == 0:
        return None
    (y1, x1), (y2, x2) = changed.min(axis=0), changed.max(axis=0)
    return int(x1), int(y1), int(x2) + 1, int(y2) + 1


def background_mask(width: int, height: int, faces: tuple[Box, ...], margin: float = 0.5) -> Mask:
    """255 where the swap leaves the picture as it is: not on a face (each box grown by `margin`
    of its size on every side, for the paste's feathering), not on the disclosure label."""
    mask = np.full((height, width), 255, np.uint8)
    boxes = [(face, margin) for face in faces]
    label = label_box(width, height)
    if label is not None:
        boxes.append((label, 0.0))
    for (x1, y1, x2, y2), grow in boxes:
        dx, dy = round((x2 - x1) * grow), round((y2 - y1) * grow)
        mask[max(0, y1 - dy) : min(height, y2 + dy), max(0, x1 - dx) : min(width, x2 + dx)] = 0
    return mask


def psnr_db(original: ImageBGR, returned: ImageBGR, mask: Mask) -> float:
    """Peak signal-to-noise ratio over the masked pixels (all three channels)."""
    count = int(cv2.countNonZero(mask)) * 3
    if count == 0:
        return CLEAN_DB
    squared = float(cv2.norm(original, returned, cv2.NORM_L2SQR, mask))
    if squared <= 0.0:
        return CLEAN_DB
    return min(CLEAN_DB, 10.0 * math.log10(PEAK * PEAK * count / squared))


def luma(image: ImageBGR) -> npt.NDArray[np.uint8]:
    return np.asarray(cv2.cvtColor(image, cv2.COLOR_BGR2GRAY), dtype=np.uint8)


def ssim(original: ImageBGR, returned: ImageBGR, mask: Mask) -> float:
    """Structural similarity of the luma (Gaussian window, sigma 1.5, as Wang et al.), averaged
    over the masked pixels."""
    return ssim_of_luma(luma(original), luma(returned), mask)


def ssim_of_luma(original: npt.NDArray[np.uint8], returned: npt.NDArray[np.uint8], mask: Mask) -> float:
    a, b = original.astype(np.float32), returned.astype(np.float32)
    c1, c2 = (0.01 * PEAK) ** 2, (0.03 * PEAK) ** 2

    def blur(x: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        return np.asarray(cv2.GaussianBlur(x, (11, 11), 1.5), dtype=np.float32)

    mu_a, mu_b = blur(a), blur(b)
    var_a = blur(a * a) - mu_a * mu_a
    var_b = blur(b * b) - mu_b * mu_b
    cov = blur(a * b) - mu_a * mu_b
    score = ((2 * mu_a * mu_b + c1) * (2 * cov + c2)) / ((mu_a**2 + mu_b**2 + c1) * (var_a + var_b + c2))
    return float(cv2.mean(score, mask=mask)[0])


@dataclass(frozen=True, slots=True)
class PictureScore:
    """The returned picture against its originals: `psnr_db` the mean over the frames scored,
    `psnr_db_p5` the worst twentieth (smears show there), `ssim` the mean of a sample,
    `longest_gap_ms` the longest wait between two returned frames (a freeze shows there)."""

    frames: int
    psnr_db: float
    psnr_db_p5: float
    ssim: float
    longest_gap_ms: float


class PictureMeter:
    """Keeps the originals of the last `keep` frames by index (what `sent` is shown, from the
    capture thread; 1.5 s at 30 fps: a frame not back by then is not scored) and scores every
    returned frame against its own (`returned`, from the output thread); frames in the first
    `settle_frames` after the first one scored are left out (both encoders' first frames, before
    their rate control settles)."""

    def __init__(self, mask: Mask, keep: int = 45, settle_frames: int = 30) -> None:
        self.mask = mask
        self._keep = keep
        self._settle = settle_frames
        self._originals: OrderedDict[int, ImageBGR] = OrderedDict()
        self._lock = threading.Lock()
        self._psnr: list[float] = []
        self._ssim_pairs: list[tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint8]]] = []  # luma
        self._seen = 0
        self._last_return: float | None = None
        self._longest_gap = 0.0
        self.unmatched = 0  # returned frames whose original was not kept

    def sent(self, index: int, image: ImageBGR) -> None:
        with self._lock:
            self._originals[index] = image
            while len(self._originals) > self._keep:
                self._originals.popitem(last=False)

    def returned(self, index: int, image: ImageBGR) -> None:
        with self._lock:
            original = self._originals.get(index)
        if original is None or original.shape != image.shape:
            self.unmatched += 1
            return
        self._seen += 1
        if self._seen <= self._settle:
            return
        now = time.perf_counter()
        if self._last_return is not None:
            self._longest_gap = max(self._longest_gap, now - self._last_return)
        self._last_return = now
        self._psnr.append(psnr_db(original, image, self.mask))
        if self._seen % SSIM_EVERY == 0 and len(self._ssim_pairs) < SSIM_SAMPLES:
            self._ssim_pairs.append((luma(original), luma(image)))

    def score(self) -> PictureScore:
        values = np.array(self._psnr, dtype=np.float64)
        if values.size == 0:
            return PictureScore(0, 0.0, 0.0, 0.0, 0.0)
        ssims = [ssim_of_luma(a, b, self.mask) for a, b in self._ssim_pairs]
        return PictureScore(
            int(values.size),
            round(float(values.mean()), 2),
            round(float(np.percentile(values, 5)), 2),
            round(float(np.mean(ssims)), 4) if ssims else 0.0,
            round(self._longest_gap * 1000, 1),
        )


class MeteredSource(SourceWrapper):
    """A FrameSource that shows each frame it reads to a PictureMeter (the picture is not copied:
    sources hand out pictures they never reuse); all else is the inner source's."""

    def __init__(self, inner: FrameSource, meter: PictureMeter) -> None:
        super().__init__(inner)
        self._meter = meter

    def read(self) -> VideoFrame | None:
        frame = self._inner.read()
        if frame is not None:
            self._meter.sent(frame.index, frame.image)
        return frame


class MeteredSink:
    """A FrameSink that scores each frame it is sent against its original, then passes it on."""

    def __init__(self, inner: FrameSink, meter: PictureMeter) -> None:
        self._inner = inner
        self._meter = meter

    def open(self, width: int, height: int, fps: float) -> None:
        self._inner.open(width, height, fps)

    def send(self, frame: VideoFrame) -> None:
        self._meter.returned(frame.index, frame.image)
        self._inner.send(frame)

    def close(self) -> None:
        self._inner.close()

    def abort(self) -> None:
        self._inner.abort()

    @property
    def description(self) -> str:
        return self._inner.description


HEAD_CROP = (128, 16, 320, 240)  # the astronaut's head and shoulders in the bundled 512x512 photo
HEAD_HEIGHT = 0.45  # of the picture's height
SCROLL_S = 8.0  # the background moves one picture width in this long


def scene_background(width: int, height: int) -> ImageBGR:
    """Twice the picture's width, so that scrolling is a slice: a smooth sweep of hues from green
    through cyan and blue to violet and back (no skin tones, which the face detector would take
    for a face), darker towards the bottom, with a faint, soft grid."""
    wide = 2 * width
    phase = np.arange(wide, dtype=np.float32) / wide
    hue = 80.0 + 75.0 * (1.0 - np.abs(2.0 * phase - 1.0))  # OpenCV hue: 80 green .. 155 violet
    hsv = np.empty((height, wide, 3), dtype=np.uint8)
    hsv[:, :, 0] = hue.astype(np.uint8)[None, :]
    hsv[:, :, 1] = 130
    hsv[:, :, 2] = np.linspace(215, 110, height, dtype=np.float32).astype(np.uint8)[:, None]
    bgr = np.asarray(cv2.cvtColor(hsv, cv2.COLOR_HSV2BGR), dtype=np.uint8)
    step = max(height // 9, 8)
    bgr[::step, :] = (bgr[::step, :].astype(np.uint16) * 4 // 5).astype(np.uint8)
    bgr[:, ::step] = (bgr[:, ::step].astype(np.uint16) * 4 // 5).astype(np.uint8)
    # Softened as a camera's optics would: a one-pixel line is detail no 4:2:0 picture keeps.
    return np.ascontiguousarray(cv2.GaussianBlur(bgr, (0, 0), 1.2), dtype=np.uint8)


class FaceScene:
    """A camera-like FrameSource to measure the picture with: a smooth, colourful background that
    scrolls, a frame counter and a sweeping hand (edges that move), and the astronaut's head
    standing still at the centre (`face_box`), so that where the swap works is known for every
    frame and the rest can be compared with what comes back."""

    def __init__(
        self, width: int, height: int, fps: float = 30.0, *, realtime: bool = True, frames: int | None = None
    ) -> None:
        self._size = (width, height)
        self._fps = fps
        self._realtime = realtime
        self._frames = frames
        self._background = scene_background(width, height)
        x1, y1, x2, y2 = HEAD_CROP
        head_h = max(int(height * HEAD_HEIGHT), 16)
        head_w = min(max(int((x2 - x1) * head_h / (y2 - y1)), 16), width)
        self._head = np.asarray(
            cv2.resize(astronaut_photo()[y1:y2, x1:x2], (head_w, head_h), interpolation=cv2.INTER_AREA),
            dtype=np.uint8,
        )
        left, top = (width - head_w) // 2, (height - head_h) // 2
        self.face_box: Box = (left, top, left + head_w, top + head_h)
        self._start = 0.0
        self._index = 0
        self._stop = threading.Event()
        self.notify: Notify | None = None

    def open(self) -> None:
        self._start = time.perf_counter()
        self._index = 0
        self._stop.clear()

    def read(self) -> VideoFrame | None:
        index = self._index
        if self._frames is not None and index >= self._frames:
            return None
        t = index / self._fps
        if self._realtime:
            delay = self._start + t - time.perf_counter()
            if delay > 0 and self._stop.wait(delay):
                return None
        if self._stop.is_set():
            return None
        self._index += 1
        w = self._size[0]
        offset = int(t * w / SCROLL_S) % w
        image: ImageBGR = np.ascontiguousarray(self._background[:, offset : offset + w])
        x1, y1, x2, y2 = self.face_box
        image[y1:y2, x1:x2] = self._head
        self._draw_motion(image, index, t)
        return VideoFrame(image, index, time.perf_counter(), t)

    def _draw_motion(self, image: ImageBGR, index: int, t: float) -> None:
        w, h = self._size
        scale = max(h / 720.0, 0.35)
        org = (int(16 * scale) + 2, int(40 * scale) + 8)
        cv2.putText(image, f"#{index:06d}  {t:7.2f} s", org, cv2.FONT_HERSHEY_SIMPLEX, scale,
                    (255, 255, 255), max(int(round(2 * scale)), 1), cv2.LINE_AA)  # fmt: skip
        radius = int(50 * scale)
        centre = (w - radius - int(20 * scale), radius + int(20 * scale))
        angle = 2 * math.pi * (t % 1.0)
        tip = (int(centre[0] + radius * math.sin(angle)), int(centre[1] - radius * math.cos(angle)))
        cv2.line(image, centre, tip, (0, 220, 255), max(int(round(4 * scale)), 1), cv2.LINE_AA)

    def interrupt(self) -> None:
        self._stop.set()

    def close(self) -> None:
        self._stop.set()

    def mask(self) -> Mask:
        """Where to measure: everything but the head (and a margin) and the disclosure label."""
        w, h = self._size
        return background_mask(w, h, (self.face_box,))

    @property
    def size(self) -> tuple[int, int]:
        return self._size

    @property
    def fps(self) -> float:
        return self._fps

    @property
    def is_live(self) -> bool:
        return self._realtime

    @property
    def description(self) -> str:
        w, h = self._size
        return f"test scene ({w}x{h} @ {self._fps:g} fps)"
