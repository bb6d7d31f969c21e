"""The models FaceCast knows how to fetch: file names, pinned sizes and hashes, sources and licences.

Facts are those of docs/model-contracts.md. A `sha256` of None means no trustworthy hash is
published for that file: such a file is checked against its publisher's CRC-32 where one is
published, else accepted and reported as "unpinned". The swap models and their converters are
models.files.swapper_catalogue; the record types are models.files.model_entry.
"""

from __future__ import annotations

from collections.abc import Sequence

from models.errors import ModelMissingError
from models.files.frame_enhancer_catalogue import FRAME_ENHANCER_ENTRIES
from models.files.model_entry import ModelEntry, ModelFile, Role
from models.files.swapper_catalogue import INSIGHTFACE_LICENCE, INSIGHTFACE_LICENCE_URL, SWAPPER_ENTRIES

GPEN_LICENCE = "academic and non-commercial use only (GPEN, Alibaba)"
GPEN_LICENCE_URL = "https://github.com/yangxy/GPEN"

_FF_ASSETS = "https://github.com/facefusion/facefusion-assets/releases/download"


def _ff_hash(release: str, stem: str) -> tuple[str, ...]:
    """Where FaceFusion's CRC-32 of one of its assets lies (NAME.hash beside NAME.onnx)."""
    return (
        f"{_FF_ASSETS}/{release}/{stem}.hash",
        f"https://huggingface.co/facefusion/{release}/resolve/main/{stem}.hash",
    )


_BUFFALO_L_URLS = ("https://github.com/deepinsight/insightface/releases/download/v0.7/buffalo_l.zip",)

DET_10G = ModelFile(
    "det_10g.onnx", "5838f7fe053675b1c7a08b633df49e7af5495cee0493c7dcf6697200b85b5b91", 16_923_827
)
W600K_R50 = ModelFile(
    "w600k_r50.onnx", "4c06341c33c2ca1f86781dab0e829f88ad5b64be9fba56e56bc9ebdefc619e43", 174_383_860
)
LMK_2D106 = ModelFile(
    "2d106det.onnx", "f001b856447c413801ef5c42091ed0cd516fcd21f2d6b79635b1e733a7109dbf", 5_030_888
)
LMK_3D68 = ModelFile(
    "1k3d68.onnx", "df5c06b8a0c12e422b2ed8947b8869faa4105387f199c477af038aa01f9a45cc", 143_607_619
)

CATALOGUE: tuple[ModelEntry, ...] = (
    *SWAPPER_ENTRIES,
    ModelEntry(
        name="buffalo_l",
        role="detector",
        files=(DET_10G, W600K_R50, LMK_2D106, LMK_3D68),
        urls=_BUFFALO_L_URLS,
        archive="buffalo_l.zip",
        licence=INSIGHTFACE_LICENCE,
        licence_url=INSIGHTFACE_LICENCE_URL,
        description="InsightFace pack: SCRFD-10G detector, ArcFace R50 recognizer, 2D/3D landmarks",
        default=True,
    ),
    # Logical entries for single members of the pack: same archive, so one download serves all.
    ModelEntry(
        name="det_10g",
        role="detector",
        files=(DET_10G,),
        urls=_BUFFALO_L_URLS,
        archive="buffalo_l.zip",
        licence=INSIGHTFACE_LICENCE,
        licence_url=INSIGHTFACE_LICENCE_URL,
        description="SCRFD-10G face detector (from the buffalo_l pack)",
        default=False,
    ),
    ModelEntry(
        name="w600k_r50",
        role="recognizer",
        files=(W600K_R50,),
        urls=_BUFFALO_L_URLS,
        archive="buffalo_l.zip",
        licence=INSIGHTFACE_LICENCE,
        licence_url=INSIGHTFACE_LICENCE_URL,
        description="ArcFace R50 (WebFace600K) recognizer (from the buffalo_l pack)",
        default=False,
    ),
    ModelEntry(
        name="scrfd_2.5g",
        role="detector",
        files=(ModelFile("scrfd_2.5g.onnx", None, None, crc32_urls=_ff_hash("models-3.0.0", "scrfd_2.5g")),),
        urls=(f"{_FF_ASSETS}/models-3.0.0/scrfd_2.5g.onnx",),
        archive=None,
        licence=INSIGHTFACE_LICENCE,
        licence_url=INSIGHTFACE_LICENCE_URL,
        description="SCRFD-2.5G face detector (4x cheaper than det_10g)",
        default=False,
    ),
    ModelEntry(
        name="GPEN-BFR-256",
        role="enhancer",
        files=(
            ModelFile(
                "GPEN-BFR-256.onnx",
                "aa5bd3ab238640a378c59e4a560f7a7150627944cf2129e6311ae4720e833271",
                75_715_262,
            ),
        ),
        urls=(
            "https://github.com/harisreedhar/Face-Upscalers-ONNX/releases/download/GPEN-BFR/GPEN-BFR-256.onnx",
        ),
        archive=None,
        licence=GPEN_LICENCE,
        licence_url=GPEN_LICENCE_URL,
        description="GPEN face restorer, 256 px (cheap enough for every frame)",
        default=False,
    ),
    ModelEntry(
        name="GPEN-BFR-512",
        role="enhancer",
        files=(
            ModelFile(
                "GPEN-BFR-512.onnx",
                "0960f836488735444d508b588e44fb5dfd19c68fde9163ad7878aa24d1d5115e",
                284_250_449,
            ),
        ),
        urls=(
            "https://github.com/harisreedhar/Face-Upscalers-ONNX/releases/download/GPEN-BFR/GPEN-BFR-512.onnx",
        ),
        archive=None,
        licence=GPEN_LICENCE,
        licence_url=GPEN_LICENCE_URL,
        description="GPEN face restorer, 512 px",
        default=False,
    ),
    ModelEntry(
        name="gfpgan_1.4",
        role="enhancer",
        files=(
            ModelFile(
                "gfpgan_1.4.onnx", None, 340_299_087, crc32_urls=_ff_hash("models-3.0.0", "gfpgan_1.4")
            ),
        ),
        urls=(f"{_FF_ASSETS}/models-3.0.0/gfpgan_1.4.onnx",),
        archive=None,
        licence="Apache-2.0 (GFPGAN)",
        licence_url="https://github.com/TencentARC/GFPGAN/blob/master/LICENSE",
        description="GFPGAN 1.4 face restorer, 512 px",
        default=False,
    ),
    ModelEntry(
        name="codeformer",
        role="enhancer",
        files=(ModelFile("codeformer.onnx", None, None, crc32_urls=_ff_hash("models-3.0.0", "codeformer")),),
        urls=(f"{_FF_ASSETS}/models-3.0.0/codeformer.onnx",),
        archive=None,
        licence="S-Lab License 1.0: non-commercial use only (CodeFormer, NTU S-Lab)",
        licence_url="https://github.com/sczhou/CodeFormer/blob/master/LICENSE",
        description="CodeFormer face restorer, 512 px, fidelity weight (heaviest: 404.9 GMACs)",
        default=False,
    ),
    ModelEntry(
        name="xseg_1",
        role="occluder",
        files=(ModelFile("xseg_1.onnx", None, 70_324_286, crc32_urls=_ff_hash("models-3.1.0", "xseg_1")),),
        urls=(f"{_FF_ASSETS}/models-3.1.0/xseg_1.onnx",),
        archive=None,
        licence="GPL-3.0 (DeepFaceLab XSeg)",
        licence_url="https://github.com/iperov/DeepFaceLab/blob/master/LICENSE",
        description="XSeg occlusion mask (hands, hair, objects in front of the face)",
        default=False,
    ),
    ModelEntry(
        name="bisenet_resnet_34",
        role="parser",
        files=(
            ModelFile(
                "bisenet_resnet_34.onnx",
                None,
                93_632_546,
                crc32_urls=_ff_hash("models-3.0.0", "bisenet_resnet_34"),
            ),
        ),
        urls=(f"{_FF_ASSETS}/models-3.0.0/bisenet_resnet_34.onnx",),
        archive=None,
        licence="MIT (face-parsing.PyTorch)",
        licence_url="https://github.com/zllrunning/face-parsing.PyTorch/blob/master/LICENSE",
        description="BiSeNet ResNet-34 face parser (skin, eyes, mouth regions)",
        default=False,
    ),
    *FRAME_ENHANCER_ENTRIES,
    ModelEntry(
        name="nsfw_2",
        role="content",
        files=(
            ModelFile(
                "nsfw_2.onnx",
                None,
                None,
                crc32_urls=_ff_hash("models-3.3.0", "nsfw_2"),
                approx_size=22_500_000,
            ),
        ),
        urls=(f"{_FF_ASSETS}/models-3.3.0/nsfw_2.onnx",),
        archive=None,
        licence="Apache-2.0 (Marqo nsfw-image-detection-384)",
        licence_url="https://huggingface.co/Marqo/nsfw-image-detection-384",
        description="NSFW picture classifier, 384 px (the server's `--content-policy`)",
        default=False,
    ),
)


def get_entry(name: str, catalogue: Sequence[ModelEntry] = CATALOGUE) -> ModelEntry:
    """The entry called `name`; ModelMissingError listing the known names otherwise."""
    for entry in catalogue:
        if entry.name == name:
            return entry
    known = ", ".join(e.name for e in catalogue)
    raise ModelMissingError(f"Unknown model '{name}'.", hint=f"Known models: {known}.")


def entry_for_file(filename: str, catalogue: Sequence[ModelEntry] = CATALOGUE) -> ModelEntry:
    """The entry that provides `filename`.

    A file can belong to a pack and to a logical single-file entry (det_10g.onnx is in both buffalo_l and
    det_10g); the entry with the fewest files wins so hints name the most specific thing to download.
    """
    owners = [e for e in catalogue if any(f.name == filename for f in e.files)]
    if not owners:
        known = ", ".join(sorted({f.name for e in catalogue for f in e.files}))
        raise ModelMissingError(f"Unknown model file '{filename}'.", hint=f"Known files: {known}.")
    return min(owners, key=lambda e: len(e.files))


def names_of_role(role: Role, catalogue: Sequence[ModelEntry] = CATALOGUE) -> tuple[str, ...]:
    """The entries of one role, in catalogue order (e.g. every face swapper)."""
    return tuple(e.name for e in catalogue if e.role == role)


def one_swapper_per_family(catalogue: Sequence[ModelEntry] = CATALOGUE) -> tuple[str, ...]:
    """The first swapper of each family, in catalogue order: the others share its class and differ
    only in their files (what the benches and the per-family tests run)."""
    seen: dict[str | None, str] = {}
    for entry in catalogue:
        if entry.role == "swapper":
            seen.setdefault(entry.family, entry.name)
    return tuple(seen.values())


def default_entries(catalogue: Sequence[ModelEntry] = CATALOGUE) -> tuple[ModelEntry, ...]:
    """The default download set."""
    return tuple(e for e in catalogue if e.default)


__all__ = [
    "CATALOGUE",
    "ModelEntry",
    "ModelFile",
    "Role",
    "default_entries",
    "entry_for_file",
    "get_entry",
    "names_of_role",
]
