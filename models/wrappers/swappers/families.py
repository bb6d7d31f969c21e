"""The face-swap families FaceCast runs besides inswapper: one small class each, stating its facts.

Every fact here is restated with its source in docs/model-contracts.md ("Face swappers"). The
FaceFusion-published families are fed as FaceFusion's face_swapper processor feeds them (the
files were exported for it): the crop's template and size, (x / 255 - mean) / std in RGB, the
identity path, and the output range. All read output 0 (HyperSwap adds a `mask` output after it).
"""

from __future__ import annotations

from models.wrappers.swappers.base import FaceSwapper
from models.wrappers.swappers.facts import SwapperFacts
from models.wrappers.swappers.inswapper import InSwapper

HALF = (0.5, 0.5, 0.5)
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


class HyperSwap(FaceSwapper):
    """FaceFusion's HyperSwap 1a/1b/1c, 256 px: the normalised ArcFace embedding as is."""

    facts = SwapperFacts(
        "hyperswap", 256, "arcface_128", identity="embedding", output="signed", mean=HALF, std=HALF
    )
    label = "HyperSwap"


class SimSwap256(FaceSwapper):
    """SimSwap 256 px: ImageNet normalisation; its converter's embedding, normalised."""

    facts = SwapperFacts(
        "simswap",
        256,
        "arcface_112_v1",
        identity="converted_normed",
        output="unit",
        mean=IMAGENET_MEAN,
        std=IMAGENET_STD,
    )
    label = "SimSwap"


class SimSwap512(FaceSwapper):
    """The unofficial SimSwap 512 px: x / 255 in; its converter's embedding, normalised."""

    facts = SwapperFacts("simswap_512", 512, "arcface_112_v1", identity="converted_normed", output="unit")
    label = "SimSwap"


class Ghost(FaceSwapper):
    """GHOST (1, 2 or 3 blocks), 256 px: its converter's embedding as is (not normalised)."""

    facts = SwapperFacts(
        "ghost", 256, "arcface_112_v1", identity="converted", output="signed", mean=HALF, std=HALF
    )
    label = "Ghost"


class HifiFace(FaceSwapper):
    """The unofficial HifiFace, 256 px in the MTCNN layout: its converter's embedding, normalised."""

    facts = SwapperFacts(
        "hififace", 256, "mtcnn_512", identity="converted_normed", output="signed", mean=HALF, std=HALF
    )
    label = "HifiFace"


class BlendSwap(FaceSwapper):
    """BlendSwap (BlendFace), 256 px FFHQ layout: the source enters as a 112 px ArcFace-aligned
    picture, x / 255 (its identity encoder is inside the model)."""

    facts = SwapperFacts(
        "blendswap",
        256,
        "ffhq_512",
        identity="face_image",
        output="unit",
        identity_template="arcface_112_v2",
        identity_size=112,
    )
    label = "BlendSwap"


class UniFace(FaceSwapper):
    """UniFace, 256 px FFHQ layout: the source enters as a 256 px FFHQ-aligned picture, x / 255
    (while the target is in [-1, 1]: as FaceFusion feeds its export)."""

    facts = SwapperFacts(
        "uniface",
        256,
        "ffhq_512",
        identity="face_image",
        output="signed",
        mean=HALF,
        std=HALF,
        identity_template="ffhq_512",
        identity_size=256,
    )
    label = "UniFace"


class ReSwapper128(InSwapper):
    """ReSwapper 128 px: an open re-training of inswapper, the same contract (its `emap` is the
    last initializer; the latent renormalised, as ReSwapper's own code does)."""

    facts = SwapperFacts("reswapper", 128, "arcface_128", identity="emap", output="unit")
    label = "ReSwapper"


class ReSwapper256(InSwapper):
    """ReSwapper 256 px: inswapper's contract at 256 px, in ReSwapper's own 256 px alignment."""

    facts = SwapperFacts("reswapper_256", 256, "reswapper_256", identity="emap", output="unit")
    label = "ReSwapper"


__all__ = [
    "BlendSwap",
    "Ghost",
    "HifiFace",
    "HyperSwap",
    "ReSwapper128",
    "ReSwapper256",
    "SimSwap256",
    "SimSwap512",
    "UniFace",
]
