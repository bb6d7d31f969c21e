"""What each face-swap model family states about itself (docs/model-contracts.md, "Face swappers").

A family's facts are everything the engine needs to feed it and read it back: the crop (template
and size), the input normalisation (per-channel mean and standard deviation on x / 255, RGB), how
the source identity enters, and the output range. The device graphs are built from the same facts
(`crop_spec`), so the host and device paths cannot disagree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from models.ops.crop_codec import OutputRange
from models.ops.crop_geometry import CropSpec
from models.ops.templates import CropLayout

# How the identity enters the model's `source` input ([1, 512] unless said):
#   emap              normalised ArcFace embedding x the model's own 512x512 map, renormalised
#   embedding         the normalised ArcFace embedding as is
#   converted         an embedding converter's output for the raw ArcFace embedding, as is
#   converted_normed  the same, L2-normalised
#   face_image        a picture of the source face, aligned, RGB, x / 255 ([1, 3, s, s])
IdentityKind = Literal["emap", "embedding", "converted", "converted_normed", "face_image"]

RGB = tuple[float, float, float]


@dataclass(frozen=True, slots=True)
class SwapperFacts:
    family: str
    size: int  # the square crop, px
    template: str  # models.ops.templates name
    identity: IdentityKind
    output: OutputRange  # unit: [0, 1]; signed: [-1, 1] (x std + mean with mean = std = 0.5)
    mean: RGB = (0.0, 0.0, 0.0)  # subtracted from x / 255, per RGB channel
    std: RGB = (1.0, 1.0, 1.0)
    # face_image only: the source picture's template and size.
    identity_template: str | None = None
    identity_size: int = 0

    def __post_init__(self) -> None:
        if (self.identity == "face_image") != (self.identity_template is not None):
            raise ValueError(f"{self.family}: a face_image identity needs its template, and only it")
        if any(s <= 0.0 for s in self.std):
            raise ValueError(f"{self.family}: standard deviations must be positive")

    @property
    def layout(self) -> CropLayout:
        return CropLayout(self.template, self.size)

    @property
    def identity_layout(self) -> CropLayout | None:
        if self.identity_template is None:
            return None
        return CropLayout(self.identity_template, self.identity_size)

    @property
    def needs_converter(self) -> bool:
        return self.identity in ("converted", "converted_normed")

    def crop_spec(self, *, fp16: bool = False) -> CropSpec:
        """The target crop as the model takes it: RGB, (x / 255 - mean) / std per channel."""
        scale = tuple(1.0 / (255.0 * s) for s in self.std)
        offset = tuple(0.0 - m / s for m, s in zip(self.mean, self.std, strict=True))  # no -0.0
        return CropSpec(
            self.size,
            rgb=True,
            scale=scale[0] if len(set(scale)) == 1 else (scale[0], scale[1], scale[2]),
            offset=offset[0] if len(set(offset)) == 1 else (offset[0], offset[1], offset[2]),
            fp16=fp16,
        )

    def source_spec(self) -> CropSpec | None:
        """The source picture's crop (face_image families): RGB, x / 255."""
        if self.identity_template is None:
            return None
        return CropSpec(self.identity_size, rgb=True, scale=1.0 / 255.0)


__all__ = ["RGB", "IdentityKind", "SwapperFacts"]
