"""Render the watermark's screenshots into docs/screenshots/: a flat wall and a face, each a 1:1 crop
of a 1920x1080 frame, unmarked on the left, marked (as the engine marks it) on the right.

    python scripts/watermark_screenshots.py [--out docs/screenshots]

The wall is synthetic and perfectly flat (a gentle gradient, no camera noise): there the mark is at
half strength, and nothing else hides it (the hardest case). The face is scikit-image's astronaut
photo at its own size on that wall.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import cv2
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from realtime.core.watermark.embed import Watermarker  # noqa: E402
from realtime.core.watermark.payload import Payload  # noqa: E402
from realtime.io.test_pattern import astronaut_photo  # noqa: E402

SIZE = (1920, 1080)
CROP = (slice(300, 660), slice(640, 1280))  # rows, columns: 640 x 360


def wall(noise: float = 0.0) -> np.ndarray:
    w, h = SIZE
    ramp = np.linspace(0.0, 12.0, w)[None, :, None]
    grain = np.random.default_rng(7).normal(0.0, noise, (h, w, 1))
    return np.clip(np.array([160.0, 168.0, 176.0]) + ramp + grain, 0, 255).astype(np.uint8)


def face_on_wall() -> np.ndarray:
    frame = wall()
    photo = astronaut_photo()
    frame[300 : 300 + photo.shape[0], 700 : 700 + photo.shape[1]] = photo
    return frame


def side_by_side(frame: np.ndarray) -> tuple[np.ndarray, float]:
    marked = frame.copy()
    Watermarker(Payload.for_run("0.1", "5eed0001")).mark(marked)
    diff = marked.astype(np.float64) - frame
    psnr = 10 * np.log10(255**2 / max(float(np.mean(diff**2)), 1e-12))
    gap = np.full((CROP[0].stop - CROP[0].start, 8, 3), 255, np.uint8)
    return np.concatenate([frame[CROP], gap, marked[CROP]], axis=1), psnr


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for name, frame in (("watermark_wall.png", wall()), ("watermark_face.png", face_on_wall())):
        picture, psnr = side_by_side(frame)
        cv2.imwrite(str(args.out / name), picture)
        print(f"{args.out / name}: whole frame PSNR {psnr:.2f} dB")
    _, psnr = side_by_side(wall(noise=2.0))
    print(f"the wall with a camera's noise (2 levels; not written): whole frame PSNR {psnr:.2f} dB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
