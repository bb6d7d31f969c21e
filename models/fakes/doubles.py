"""Writes the contract-exact ONNX doubles of the real models; fake sessions for signature checks.

The doubles (no weights downloaded) have the real models' input/output names, shapes, dtypes and
output order, and tiny deterministic graphs whose outputs are easy to predict:
models/fakes/detector_double.py builds the SCRFD detector double (and the pictures it finds faces in),
models/fakes/pixel_doubles.py the per-pixel ones (ArcFace, inswapper and ReSwapper, landmarks,
restorers, xseg, BiSeNet), models/fakes/swapper_doubles.py the other swap families and the
embedding converters, models/fakes/upscaler_double.py the frame enhancers and
models/fakes/content_double.py the content classifier, with their numpy
references. write_all writes them all under the catalogue's file names.
FakeArg and FakeSession stand in for an onnxruntime session's signature.

`python -m models.fakes.doubles DIR` writes them under the real file names.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import onnx

from models.fakes.content_double import build_content_classifier
from models.fakes.detector_double import DEFAULT_FACE, DET_SIZE, STRIDES, build_scrfd, build_scrfd_fixed
from models.fakes.pixel_doubles import (
    build_arcface,
    build_bisenet,
    build_inswapper,
    build_restorer,
    build_xseg,
)
from models.fakes.swapper_doubles import swapper_doubles
from models.fakes.upscaler_double import build_upscaler

RESWAPPER_SEED = 7


def write_all(
    dirpath: Path | str, det_size: int = DET_SIZE, *, fixed_detector: bool = False
) -> dict[str, Path]:
    """Write every double under the catalogue's file names; {file name: path}. The detectors'
    outputs are sized for a det_size input (the pipeline's detector.size). fixed_detector: the
    detectors report their face without looking (build_scrfd_fixed), for the overhead benchmark."""
    d = Path(dirpath)
    d.mkdir(parents=True, exist_ok=True)
    detector = build_scrfd_fixed if fixed_detector else build_scrfd
    models = {
        "det_10g.onnx": detector([DEFAULT_FACE], det_size=det_size),
        "scrfd_2.5g.onnx": detector([DEFAULT_FACE._replace(score=0.87)], det_size=det_size),
        "w600k_r50.onnx": build_arcface(seed=0),
        "inswapper_128.onnx": build_inswapper(seed=0),
        "inswapper_128_fp16.onnx": build_inswapper(seed=0, fp16=True),
        "GPEN-BFR-256.onnx": build_restorer(256),
        "GPEN-BFR-512.onnx": build_restorer(512),
        "gfpgan_1.4.onnx": build_restorer(512),
        "codeformer.onnx": build_restorer(512, with_weight=True),
        "xseg_1.onnx": build_xseg(),
        "bisenet_resnet_34.onnx": build_bisenet(),
        # ReSwapper: inswapper's contract (seeds apart, so its doubles swap to other colours).
        "reswapper_128.onnx": build_inswapper(seed=RESWAPPER_SEED, emap_name="emap"),
        "reswapper_256.onnx": build_inswapper(seed=RESWAPPER_SEED, size=256, emap_name="emap"),
        **swapper_doubles(),
        # Frame enhancers: the fp16 files take and give float32 (FaceFusion feeds them float32).
        "real_esrgan_x2.onnx": build_upscaler(2),
        "real_esrgan_x2_fp16.onnx": build_upscaler(2),
        "real_esrgan_x4.onnx": build_upscaler(4),
        "real_esrgan_x4_fp16.onnx": build_upscaler(4),
        "nsfw_2.onnx": build_content_classifier(),
    }
    written: dict[str, Path] = {}
    for name, model in models.items():
        path = d / name
        onnx.save(model, str(path))
        written[name] = path
    return written


@dataclass(frozen=True)
class FakeArg:
    """Stands in for onnxruntime.NodeArg: name, shape, type."""

    name: str
    shape: list[Any]
    type: str = "tensor(float)"


class FakeSession:
    """A session that only answers get_inputs()/get_outputs(): enough for contract checks."""

    def __init__(self, inputs: Sequence[FakeArg], outputs: Sequence[FakeArg]) -> None:
        self._inputs = list(inputs)
        self._outputs = list(outputs)

    def get_inputs(self) -> list[FakeArg]:
        return self._inputs

    def get_outputs(self) -> list[FakeArg]:
        return self._outputs

    def run(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("FakeSession cannot run")


def scrfd_signature(n_outputs: int = 9, input_shape: Sequence[Any] = (1, 3, "h", "w")) -> FakeSession:
    """A fake session with SCRFD's signature at 640 (n_outputs 9, or 6 without keypoints)."""
    widths = (1, 4, 10)[: n_outputs // 3]
    outs = [FakeArg(f"o{g}_{s}", [(640 // s) ** 2 * 2, w]) for g, w in enumerate(widths) for s in STRIDES]
    return FakeSession([FakeArg("input.1", list(input_shape))], outs)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write contract-exact ONNX doubles of FaceCast's models.")
    parser.add_argument("dir", type=Path)
    args = parser.parse_args(argv)
    for name, path in write_all(args.dir).items():
        print(f"{name}: {path} ({path.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
