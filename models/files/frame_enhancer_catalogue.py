"""The whole-frame super-resolution models (frame enhancers): files, sources, licences and the
facts their wrapper needs (docs/model-contracts.md, "Frame enhancers").

FaceFusion publishes Real-ESRGAN x2 and x4 as ONNX files, each also as an fp16 file, with a CRC-32
file (NAME.hash) beside each; no SHA-256 and no exact size of these files could be verified, so
each is checked against that CRC-32, read from the publisher's .hash file at download time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from models.files.model_entry import ModelEntry, ModelFile

REAL_ESRGAN_LICENCE = "BSD-3-Clause (Real-ESRGAN, Xintao Wang)"
REAL_ESRGAN_LICENCE_URL = "https://github.com/xinntao/Real-ESRGAN/blob/master/LICENSE"

_RELEASE = "models-3.0.0"
_FF_GITHUB = "https://github.com/facefusion/facefusion-assets/releases/download"
_FF_HF = "https://huggingface.co/facefusion"


@dataclass(frozen=True, slots=True)
class FrameEnhancerFacts:
    """How a frame enhancer is fed: its upscale factor, the square tile it is run on (px) and the
    context kept round each tile's core (px each side, read but not kept: no seams)."""

    scale: int
    tile: int
    margin: int
    fp16: bool = False

    @property
    def core(self) -> int:
        """The part of a tile's side that is kept."""
        return self.tile - 2 * self.margin


# FaceFusion runs every Real-ESRGAN file on 256 px tiles with 8 px of context each side.
FRAME_ENHANCERS: Mapping[str, FrameEnhancerFacts] = MappingProxyType(
    {
        "real_esrgan_x2": FrameEnhancerFacts(2, 256, 8),
        "real_esrgan_x2_fp16": FrameEnhancerFacts(2, 256, 8, fp16=True),
        "real_esrgan_x4": FrameEnhancerFacts(4, 256, 8),
        "real_esrgan_x4_fp16": FrameEnhancerFacts(4, 256, 8, fp16=True),
    }
)


def _entry(name: str, facts: FrameEnhancerFacts) -> ModelEntry:
    filename = f"{name}.onnx"
    hash_urls = (f"{_FF_GITHUB}/{_RELEASE}/{name}.hash", f"{_FF_HF}/{_RELEASE}/resolve/main/{name}.hash")
    precision = "fp16 weights" if facts.fp16 else "fp32"
    return ModelEntry(
        name=name,
        role="frame_enhancer",
        files=(ModelFile(filename, None, None, crc32_urls=hash_urls),),
        urls=(f"{_FF_GITHUB}/{_RELEASE}/{filename}", f"{_FF_HF}/{_RELEASE}/resolve/main/{filename}"),
        archive=None,
        licence=REAL_ESRGAN_LICENCE,
        licence_url=REAL_ESRGAN_LICENCE_URL,
        description=f"Real-ESRGAN x{facts.scale} whole-frame super-resolution ({precision}, "
        f"{facts.tile} px tiles)",
        default=False,
    )


FRAME_ENHANCER_ENTRIES: tuple[ModelEntry, ...] = tuple(_entry(n, f) for n, f in FRAME_ENHANCERS.items())


def frame_enhancer_names() -> tuple[str, ...]:
    """Every frame enhancer of the catalogue, in its order."""
    return tuple(FRAME_ENHANCERS)


def frame_enhancer_facts(name: str) -> FrameEnhancerFacts:
    """The facts of frame enhancer `name` (KeyError naming the known ones otherwise)."""
    try:
        return FRAME_ENHANCERS[name]
    except KeyError:
        raise KeyError(f"unknown frame enhancer {name!r}; known: {', '.join(FRAME_ENHANCERS)}") from None


__all__ = [
    "FRAME_ENHANCERS",
    "FRAME_ENHANCER_ENTRIES",
    "REAL_ESRGAN_LICENCE",
    "FrameEnhancerFacts",
    "frame_enhancer_facts",
    "frame_enhancer_names",
]
