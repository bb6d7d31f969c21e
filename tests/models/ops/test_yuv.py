"""YUV -> BGR in the stream's own colour (matrix, range): the device graph, its CPU twin, and FFmpeg."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import numpy.typing as npt
import pytest

from models.ops.device_ops import DeviceOps, Nv12ToBgr
from models.ops.yuv import BT601_LIMITED, YuvColour, colour_of, nv12_to_bgr_host, nv12_to_bgr_reference
from models.runtime.session import SessionConfig, SessionFactory

FACTORY = SessionFactory(SessionConfig(provider="cpu"))
COLOURS = [YuvColour(m, full) for m in ("bt601", "bt709") for full in (False, True)]  # type: ignore[arg-type]
# Flat colour patches (chroma interpolation cannot matter), as B, G, R.
PATCHES = [(40, 60, 200), (200, 120, 30), (20, 20, 20), (235, 235, 235), (90, 200, 90), (128, 128, 128)]


@pytest.mark.parametrize("colour", COLOURS, ids=str)
@pytest.mark.parametrize(("h", "w"), [(6, 10), (240, 320)])
def test_device_graph_matches_its_cpu_twin(colour: YuvColour, h: int, w: int) -> None:
    nv12 = np.random.default_rng(h * w).integers(0, 256, (h * 3 // 2, w), dtype=np.uint8)
    graph = Nv12ToBgr(FACTORY, h, w, colour).run(nv12).numpy()
    twin = nv12_to_bgr_reference(nv12, colour)
    diff = np.abs(graph.astype(np.int16) - twin)
    assert diff.max() <= 1 and (diff > 0).mean() <= 1e-3


@pytest.mark.parametrize("colour", COLOURS, ids=str)
@pytest.mark.parametrize(("h", "w"), [(6, 10), (240, 320), (1080, 1920)])
def test_the_opencv_conversion_matches_the_numpy_twin_within_one_level(
    colour: YuvColour, h: int, w: int
) -> None:
    """The host path's BT.709 / full-range conversion (cv2, 1.8 ms a 1080p frame) against the
    numpy maths it replaced (29 ms): ties round to even in OpenCV, half up in the twin."""
    nv12 = np.random.default_rng(h + w).integers(0, 256, (h * 3 // 2, w), dtype=np.uint8)
    nv12[: h // 4] = 16  # limited-range black and below-black luma: the clamp at 16
    nv12[h // 4 : h // 4 + 2] = 3
    ours = nv12_to_bgr_host(nv12, colour)
    twin = nv12_to_bgr_reference(nv12, colour)
    assert ours.shape == twin.shape == (h, w, 3) and ours.dtype == np.uint8
    assert np.abs(ours.astype(np.int16) - twin).max() <= 1
    into = np.empty_like(ours)
    assert nv12_to_bgr_host(nv12, colour, out=into) is into and (into == ours).all()


def test_device_ops_rebuild_the_graph_when_the_colour_changes() -> None:
    ops = DeviceOps(FACTORY, use_graphs=True)
    nv12 = np.full((12, 8), 128, np.uint8)
    nv12[:8] = 235  # limited-range white
    limited = ops.nv12_to_bgr(nv12, BT601_LIMITED).numpy()
    full = ops.nv12_to_bgr(nv12, YuvColour("bt601", full_range=True)).numpy()
    assert (limited == 255).all() and (full == 235).all()
    host = DeviceOps(FACTORY, use_graphs=False).nv12_to_bgr(nv12, YuvColour("bt601", True)).numpy()
    assert (host == 235).all()


@pytest.mark.parametrize(
    ("tags", "expected"),
    [
        ((1, 1, "yuv420p"), YuvColour("bt709", False)),
        ((2, 0, "yuv420p"), YuvColour("bt601", False)),  # untagged: FFmpeg's default, BT.601
        ((6, 1, "yuv420p"), YuvColour("bt601", False)),
        ((5, 2, "yuv420p"), YuvColour("bt601", True)),
        ((2, 0, "yuvj420p"), YuvColour("bt601", True)),
        ((1, 2, "yuvj420p"), YuvColour("bt709", True)),
    ],
)
def test_colour_follows_the_stream_tags(tags: tuple[int, int, str], expected: YuvColour) -> None:
    assert colour_of(*tags) == expected


def patches_clip(path: Path, pix_fmt: str, colorspace: int, color_range: int) -> Path:
    h, w = 32, 16 * len(PATCHES)
    image = np.zeros((h, w, 3), np.uint8)
    for i, bgr in enumerate(PATCHES):
        image[:, 16 * i : 16 * (i + 1)] = bgr
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=Fraction(25))
        stream.width, stream.height, stream.pix_fmt = w, h, pix_fmt
        stream.codec_context.colorspace = colorspace
        stream.codec_context.color_range = color_range
        stream.options = {"qp": "0"}  # lossless: the code values are what was encoded
        frame = av.VideoFrame.from_ndarray(image, format="bgr24")
        frame.colorspace, frame.color_range = colorspace, color_range
        container.mux(stream.encode(frame.reformat(format=pix_fmt)))
        container.mux(stream.encode(None))
    return path


def nv12_of(frame: av.VideoFrame) -> npt.NDArray[np.uint8]:
    """The decoder's own code values as NV12, as NVDEC would hand them out."""
    h, w = frame.height, frame.width
    planes = [np.frombuffer(bytes(p), np.uint8).reshape(-1, p.line_size) for p in frame.planes]
    nv12 = np.empty((h * 3 // 2, w), np.uint8)
    nv12[:h] = planes[0][:h, :w]
    uv = nv12[h:].reshape(h // 2, w // 2, 2)
    uv[..., 0], uv[..., 1] = planes[1][: h // 2, : w // 2], planes[2][: h // 2, : w // 2]
    return nv12


@pytest.mark.parametrize(
    ("pix_fmt", "colorspace", "color_range"),
    [("yuv420p", 1, 1), ("yuvj420p", 5, 2), ("yuv420p", 6, 1)],
    ids=["bt709-limited", "bt601-full", "bt601-limited"],
)
def test_the_gpu_path_sees_the_colours_the_cpu_path_sees(
    tmp_path: Path, pix_fmt: str, colorspace: int, color_range: int
) -> None:
    clip = patches_clip(tmp_path / "patches.mp4", pix_fmt, colorspace, color_range)
    with av.open(str(clip)) as container:
        ctx = container.streams.video[0].codec_context
        colour = colour_of(ctx.colorspace, ctx.color_range, ctx.pix_fmt)
        frame = next(container.decode(video=0))
        cpu = frame.to_ndarray(format="bgr24")  # what realtime.io.sources' CPU decoding gives
    nv12 = nv12_of(frame)
    centres = [(16, 16 * i + 8) for i in range(len(PATCHES))]
    ours = nv12_to_bgr_host(nv12, colour)
    for y, x in centres:
        assert np.abs(ours[y, x].astype(int) - cpu[y, x]).max() <= 2, (colour, cpu[y, x], ours[y, x])
    if not colour.is_opencv:
        # Converting every stream as BT.601 limited range would be visibly off here.
        wrong = nv12_to_bgr_host(nv12, BT601_LIMITED)
        assert max(np.abs(wrong[y, x].astype(int) - cpu[y, x]).max() for y, x in centres) > 5
