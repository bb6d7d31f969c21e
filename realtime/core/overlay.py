"""The disclosure label: a small, legible "AI-modified" mark drawn on outgoing frames."""

from __future__ import annotations

import cv2

from models.types import ImageBGR

LABEL_TEXT = "AI-modified"


def draw_disclosure_label(image: ImageBGR, text: str = LABEL_TEXT) -> None:
    """Draw `text` in the bottom-right corner, in place, sized to stay legible at any resolution."""
    h, w = image.shape[:2]
    scale = max(h / 720.0 * 0.8, 0.45)
    thickness = max(int(round(scale * 2)), 1)
    (tw, th), base = cv2.getTextSize(text, cv2.FONT_HERSHEY_SIMPLEX, scale, thickness)
    pad = max(int(6 * scale), 3)
    x1, y1 = w - tw - 3 * pad, h - th - base - 3 * pad
    x2, y2 = w - pad, h - pad
    if x1 < 0 or y1 < 0:
        return  # frame too small to carry a legible label
    roi = image[y1:y2, x1:x2]
    # A darkened box keeps white text readable on any background without hiding the picture.
    roi[:] = (roi.astype("uint16") * 2 // 5).astype("uint8")
    cv2.putText(
        image,
        text,
        (x1 + pad, y2 - pad - base),
        cv2.FONT_HERSHEY_SIMPLEX,
        scale,
        (255, 255, 255),
        thickness,
        cv2.LINE_AA,
    )
