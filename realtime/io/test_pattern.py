"""A built-in animated test pattern: a live FrameSource that needs no camera.

It scrolls a colour gradient with a bar strip, sweeps a one-revolution-per-second clock hand (so
lag and stutter are visible at a glance), stamps the frame number, and moves the bundled astronaut photo
(data/astronaut.jpg, a real, detectable face) around the picture so the face swap has something to act on.
Frames are paced like a camera from one absolute start time (realtime.io.source_parts.Pacer).
"""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path

import cv2
import numpy as np
import numpy.typing as npt

from models.types import ImageBGR
from realtime.core.frames import VideoFrame
from realtime.io.source_parts import KnownFormat, Pacer

log = logging.getLogger(__name__)

F32 = npt.NDArray[np.float32]

ASTRONAUT_PHOTO = Path(__file__).with_name("data") / "astronaut.jpg"  # NASA, public domain

# The astronaut's head and shoulders in the 512x512 photo (x1, y1, x2, y2): the face that
# MTCNN finds at (182, 61, 268, 172) plus hair and chin, so the pasted patch looks like a portrait.
_ASTRONAUT_CROP = (128, 16, 320, 240)
_FACE_HEIGHT_FRACTION = 0.45  # of the frame height
_BAR_COLOURS_BGR = (
    (192, 192, 192),
    (0, 192, 192),
    (192, 192, 0),
    (0, 192, 0),
    (192, 0, 192),
    (0, 0, 192),
    (192, 0, 0),
)


def astronaut_photo() -> ImageBGR:
    """The bundled 512x512 astronaut photo (scikit-image's, NASA), as BGR."""
    image = cv2.imdecode(np.fromfile(ASTRONAUT_PHOTO, dtype=np.uint8), cv2.IMREAD_COLOR)
    if image is None:
        raise OSError(f"{ASTRONAUT_PHOTO} cannot be decoded")
    return np.ascontiguousarray(image, dtype=np.uint8)


def astronaut_patch() -> ImageBGR | None:
    """The astronaut's head crop as BGR, or None when the bundled photo is missing or unreadable."""
    try:
        photo = astronaut_photo()
    except OSError as exc:
        log.warning("the test pattern has no face to swap: %s", exc)
        return None
    x1, y1, x2, y2 = _ASTRONAUT_CROP
    return np.ascontiguousarray(photo[y1:y2, x1:x2])


def _soft_ellipse(width: int, height: int) -> F32:
    """An (h, w) alpha mask: 1 inside an ellipse filling the patch, fading out at its border."""
    mask = np.zeros((height, width), dtype=np.uint8)
    centre = (width // 2, height // 2)
    axes = (max(width // 2 - 2, 1), max(height // 2 - 2, 1))
    cv2.ellipse(mask, centre, axes, 0.0, 0.0, 360.0, 255, thickness=-1)
    blur = max(3, (min(width, height) // 8) | 1)
    soft = cv2.GaussianBlur(mask, (blur, blur), 0)
    return np.asarray(soft, dtype=np.float32) / np.float32(255.0)


def _background(width: int, height: int) -> ImageBGR:
    """Twice as wide as the frame, so scrolling is a slice: a hue sweep above a strip of bars."""
    wide = 2 * width
    hue = (np.arange(wide, dtype=np.float32) * (180.0 / width)) % 180.0
    hsv = np.empty((height, wide, 3), dtype=np.uint8)
    hsv[:, :, 0] = hue.astype(np.uint8)[None, :]
    hsv[:, :, 1] = 110
    rows = np.linspace(200, 120, height, dtype=np.float32)
    hsv[:, :, 2] = rows.astype(np.uint8)[:, None]
    bgr = np.asarray(cv2.cvtColor(hsv, cv2.COLOR_HSV2BGR), dtype=np.uint8)
    strip = max(height // 10, 4)
    bar_w = max(width // len(_BAR_COLOURS_BGR), 1)
    for i in range(0, wide, bar_w):
        colour = _BAR_COLOURS_BGR[(i // bar_w) % len(_BAR_COLOURS_BGR)]
        bgr[height - strip :, i : i + bar_w] = colour
    # A faint grid shows geometric distortion and scaling in the output.
    step = max(height // 9, 8)
    bgr[::step, :] = (bgr[::step, :].astype(np.uint16) * 3 // 4).astype(np.uint8)
    bgr[:, ::step] = (bgr[:, ::step].astype(np.uint16) * 3 // 4).astype(np.uint8)
    return np.ascontiguousarray(bgr)


class TestPatternSource(KnownFormat):
    """A live, camera-like FrameSource rendering a moving synthetic pattern at `fps`.

    face: paste the moving astronaut (skipped when scikit-image is missing).
    realtime: pace frames to `fps` like a camera; False renders as fast as it is read (tests).
    frames: stop after this many frames (None: until closed).
    """

    __test__ = False  # not a pytest test class, despite the name

    def __init__(
        self,
        width: int = 1280,
        height: int = 720,
        fps: float = 30.0,
        *,
        face: bool = True,
        realtime: bool = True,
        frames: int | None = None,
    ) -> None:
        if width < 64 or height < 48:
            raise ValueError(f"test pattern size must be at least 64x48, got {width}x{height}")
        if fps <= 0:
            raise ValueError(f"fps must be positive, got {fps}")
        self._size = (int(width), int(height))
        self._fps = float(fps)
        self._want_face = face
        self._realtime = realtime
        self._limit = frames
        self._pacer = Pacer()
        self._background: ImageBGR | None = None
        self._face: ImageBGR | None = None
        self._alpha: F32 | None = None
        self._inverse_alpha: F32 | None = None
        self._next_index = 0

    @property
    def is_live(self) -> bool:
        return self._realtime

    @property
    def has_face(self) -> bool:
        """True once open() has prepared the moving face."""
        return self._face is not None

    @property
    def description(self) -> str:
        w, h = self._size
        return f"test pattern ({w}x{h} @ {self._fps:g} fps)"

    def open(self) -> None:
        w, h = self._size
        self._background = _background(w, h)
        self._face = self._alpha = self._inverse_alpha = None
        patch = astronaut_patch() if self._want_face else None
        if patch is not None:
            target_h = max(int(h * _FACE_HEIGHT_FRACTION), 16)
            target_w = max(int(patch.shape[1] * target_h / patch.shape[0]), 16)
            target_w, target_h = min(target_w, w - 2), min(target_h, h - 2)
            resized = cv2.resize(patch, (target_w, target_h), interpolation=cv2.INTER_AREA)
            self._face = np.asarray(resized, dtype=np.uint8)
            self._alpha = _soft_ellipse(target_w, target_h)
            self._inverse_alpha = np.float32(1.0) - self._alpha
        self._pacer.rearm()
        self._next_index = 0

    def read(self) -> VideoFrame | None:
        background = self._background
        if background is None:
            raise RuntimeError("TestPatternSource.read() called before open()")
        index = self._next_index
        if self._limit is not None and index >= self._limit:
            return None
        self._next_index += 1
        media_time = index / self._fps
        if self._realtime:
            self._pacer.wait_until(media_time)
        image = self._render(background, index, media_time)
        return VideoFrame(image, index, time.perf_counter(), media_time)

    def interrupt(self) -> None:
        """From another thread: end a paced wait at once (the run is stopping)."""
        self._pacer.interrupt()

    def close(self) -> None:
        self._background = None
        self._face = self._alpha = self._inverse_alpha = None

    # ---- drawing ---------------------------------------------------------------------------------

    def _render(self, background: ImageBGR, index: int, t: float) -> ImageBGR:
        w, h = self._size
        offset = int(t * w / 8.0) % w  # the gradient scrolls one frame width every 8 s
        image: ImageBGR = np.ascontiguousarray(background[:, offset : offset + w])
        self._paste_face(image, t)
        self._draw_clock(image, t)
        scale = max(h / 720.0, 0.35)
        thickness = max(int(round(2 * scale)), 1)
        label = f"FaceCast test pattern  #{index:06d}  {t:8.2f} s"
        org = (int(16 * scale) + 2, int(40 * scale) + 8)
        font, aa = cv2.FONT_HERSHEY_SIMPLEX, cv2.LINE_AA
        cv2.putText(image, label, org, font, scale, (0, 0, 0), thickness + 2, aa)  # outline
        cv2.putText(image, label, org, font, scale, (255, 255, 255), thickness, aa)
        return image

    def _paste_face(self, image: ImageBGR, t: float) -> None:
        face, alpha, inverse = self._face, self._alpha, self._inverse_alpha
        if face is None or alpha is None or inverse is None:
            return
        w, h = self._size
        fh, fw = face.shape[:2]
        # A slow Lissajous path that keeps the whole face inside the frame.
        free_x, free_y = max(w - fw, 0), max(h - fh, 0)
        x = int(free_x * (0.5 + 0.35 * math.sin(0.6 * t)))
        y = int(free_y * (0.5 + 0.3 * math.sin(0.9 * t + 0.5)))
        roi = image[y : y + fh, x : x + fw]
        roi[:] = cv2.blendLinear(face, roi, alpha, inverse)

    def _draw_clock(self, image: ImageBGR, t: float) -> None:
        w, h = self._size
        radius = max(min(w, h) // 12, 8)
        centre = (w - radius - max(w // 40, 4), radius + max(h // 30, 4))
        angle = 2.0 * math.pi * (t % 1.0) - math.pi / 2.0
        tip = (int(centre[0] + radius * math.cos(angle)), int(centre[1] + radius * math.sin(angle)))
        thickness = max(radius // 10, 1)
        cv2.circle(image, centre, radius, (30, 30, 30), thickness=-1, lineType=cv2.LINE_AA)
        cv2.circle(image, centre, radius, (255, 255, 255), thickness=thickness, lineType=cv2.LINE_AA)
        cv2.line(image, centre, tip, (0, 220, 255), thickness=thickness + 1, lineType=cv2.LINE_AA)
