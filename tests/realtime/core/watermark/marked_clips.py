"""Small clips of a real photo, marked and not, and the codecs and edits a marked video meets."""

from __future__ import annotations

import io

import av
import cv2
import numpy as np

from models.types import ImageBGR
from realtime.core.watermark.embed import Watermarker
from realtime.core.watermark.payload import Payload
from tests.real_faces import astronaut_bgr

RUN_ID = "c0ffee42"


def real_clip(frames: int, size: tuple[int, int] = (640, 360), drift_px: float = 1.0) -> list[ImageBGR]:
    """The astronaut photo filling the frame, drifting `drift_px` per frame (a hand-held camera)."""
    w, h = size
    photo = cv2.resize(astronaut_bgr(), (int(w * 1.2), int(w * 1.2)))
    out: list[ImageBGR] = []
    for i in range(frames):
        x = int(i * drift_px) % (photo.shape[1] - w)
        y = int(i * drift_px / 2) % (photo.shape[0] - h)
        out.append(np.ascontiguousarray(photo[y : y + h, x : x + w]))
    return out


def marked(frames: list[ImageBGR], run_id: str = RUN_ID) -> list[ImageBGR]:
    marker = Watermarker(Payload.for_run("0.1.0", run_id))
    out = [f.copy() for f in frames]
    for f in out:
        marker.mark(f)
    return out


def through_codec(frames: list[ImageBGR], codec: str, **options: str | int) -> list[ImageBGR]:
    """The frames encoded with PyAV's `codec` (libvpx: VP8 in WebM; libx264: H.264 in MP4) and decoded."""
    buffer = io.BytesIO()
    bit_rate = options.pop("bit_rate", None)
    with av.open(buffer, "w", format="webm" if codec == "libvpx" else "mp4") as container:
        stream = container.add_stream(codec, rate=30)
        assert isinstance(stream, av.VideoStream)
        stream.width, stream.height = frames[0].shape[1], frames[0].shape[0]
        stream.pix_fmt = "yuv420p"
        if bit_rate is not None:
            stream.bit_rate = int(bit_rate)
        stream.options = {k: str(v) for k, v in options.items()}
        for image in frames:
            container.mux(stream.encode(av.VideoFrame.from_ndarray(image, format="bgr24")))
        container.mux(stream.encode())
    buffer.seek(0)
    with av.open(buffer, "r") as reader:
        return [np.asarray(frame.to_ndarray(format="bgr24"), np.uint8) for frame in reader.decode(video=0)]
