"""The face-swap models and the embedding converters some of them need: files, hashes, sources,
licences (docs/model-contracts.md, "Face swappers" and "Embedding converters").

Each swapper names its `family` (the class that feeds it, models.wrappers.swappers.registry).
Hashes: a SHA-256 is pinned only where its publisher shows it (FaceFusion's page for
hyperswap_1a_256, ReSwapper's for its two files, the insightface originals' widely mirrored
files). FaceFusion publishes a CRC-32 file (NAME.hash) beside each of its models and no SHA-256
for most: those files are checked against that CRC-32, pinned here where the publisher's page
shows its value, else read from the publisher's .hash file at download time. Sizes not pinned are
the publisher's rounded figures, shown but not checked.
"""

from __future__ import annotations

from models.files.model_entry import ModelEntry, ModelFile

INSIGHTFACE_LICENCE = "non-commercial research only (insightface)"
INSIGHTFACE_LICENCE_URL = "https://github.com/deepinsight/insightface#license"

_FF_GITHUB = "https://github.com/facefusion/facefusion-assets/releases/download"
_FF_HF = "https://huggingface.co/facefusion"
_RESWAPPER_HF = "https://huggingface.co/somanchiu/reswapper/resolve/main"
_ROOP_HF = "https://huggingface.co/CountFloyd/deepfake/resolve/main"


def _ff_urls(release: str, filename: str) -> tuple[str, ...]:
    """FaceFusion's two hosts for a file of `release`: its GitHub release, its Hugging Face copy."""
    return (f"{_FF_GITHUB}/{release}/{filename}", f"{_FF_HF}/{release}/resolve/main/{filename}")


def _ff_file(
    release: str,
    filename: str,
    *,
    approx_mb: float,
    sha256: str | None = None,
    size: int | None = None,
    crc32: str | None = None,
) -> ModelFile:
    """A FaceFusion model file, with its publisher's CRC-32 file beside it."""
    stem = filename.rsplit(".", 1)[0]
    return ModelFile(
        filename,
        sha256,
        size,
        crc32=crc32,
        crc32_urls=_ff_urls(release, f"{stem}.hash"),
        approx_size=int(approx_mb * 1e6),
    )


HYPERSWAP_LICENCE = "ResearchRAIL-MS: research and non-commercial use only (FaceFusion HyperSwap)"
HYPERSWAP_LICENCE_URL = "https://github.com/facefusion/facefusion-labs/blob/master/hyperswap/LICENSE.md"
SIMSWAP_LICENCE = "CC BY-NC 4.0: non-commercial use only (SimSwap)"
SIMSWAP_LICENCE_URL = "https://github.com/neuralchen/SimSwap/blob/main/LICENSE"
GHOST_LICENCE = "Apache-2.0 (GHOST, ai-forever)"
GHOST_LICENCE_URL = "https://github.com/ai-forever/ghost/blob/main/LICENSE"
BLENDSWAP_LICENCE = "CC BY-NC-SA 4.0: non-commercial research only (BlendFace)"
BLENDSWAP_LICENCE_URL = "https://github.com/mapooon/BlendFace/blob/main/LICENSE.md"
UNKNOWN_LICENCE = (
    "no licence stated by its publishers (FaceFusion lists it as unknown): treat it as "
    "non-commercial research use only"
)
HIFIFACE_LICENCE_URL = "https://github.com/GuijiAI/HifiFace"
UNIFACE_LICENCE_URL = "https://github.com/xc-csc101/UniFace"
RESWAPPER_LICENCE = "AGPL-3.0 (ReSwapper)"
RESWAPPER_LICENCE_URL = "https://github.com/somanchiu/ReSwapper/blob/main/LICENSE"
CROSSFACE_LICENCE = "OpenRAIL-MS (FaceFusion CrossFace)"
CROSSFACE_LICENCE_URL = "https://github.com/facefusion/facefusion-labs/blob/master/crossface/LICENSE.md"


def _ff_swapper(
    name: str,
    release: str,
    *,
    approx_mb: float,
    licence: str,
    licence_url: str,
    description: str,
    family: str,
    requires: tuple[str, ...] = (),
    crc32: str | None = None,
    file: ModelFile | None = None,
) -> ModelEntry:
    """A swapper FaceFusion hosts (its two hosts; its CRC-32 file unless `file` pins more)."""
    filename = f"{name}.onnx"
    return ModelEntry(
        name=name,
        role="swapper",
        files=(file or _ff_file(release, filename, approx_mb=approx_mb, crc32=crc32),),
        urls=_ff_urls(release, filename),
        archive=None,
        licence=licence,
        licence_url=licence_url,
        description=description,
        default=False,
        family=family,
        requires=requires,
    )


def _hyperswap(variant: str, file: ModelFile | None = None) -> ModelEntry:
    return _ff_swapper(
        f"hyperswap_1{variant}_256",
        "models-3.3.0",
        approx_mb=402.7,
        licence=HYPERSWAP_LICENCE,
        licence_url=HYPERSWAP_LICENCE_URL,
        description=f"FaceFusion HyperSwap 1{variant}, 256 px; fp16 compute inside (fast on NVIDIA GPUs)",
        family="hyperswap",
        file=file,
    )


def _converter(kind: str, crc32: str | None = None) -> ModelEntry:
    return ModelEntry(
        name=f"crossface_{kind}",
        role="converter",
        files=(_ff_file("models-3.4.0", f"crossface_{kind}.onnx", approx_mb=22.1, crc32=crc32),),
        urls=_ff_urls("models-3.4.0", f"crossface_{kind}.onnx"),
        archive=None,
        licence=CROSSFACE_LICENCE,
        licence_url=CROSSFACE_LICENCE_URL,
        description=f"ArcFace embedding converter for the {kind} swappers (downloaded with them)",
        default=False,
    )


def _ghost(blocks: int, approx_mb: float) -> ModelEntry:
    return _ff_swapper(
        f"ghost_{blocks}_256",
        "models-3.0.0",
        approx_mb=approx_mb,
        licence=GHOST_LICENCE,
        licence_url=GHOST_LICENCE_URL,
        description=f"GHOST, {blocks} block{'s' if blocks > 1 else ''}, 256 px; more blocks, more detail "
        "and cost",
        family="ghost",
        requires=("crossface_ghost",),
    )


SWAPPER_ENTRIES: tuple[ModelEntry, ...] = (
    ModelEntry(
        name="inswapper_128",
        role="swapper",
        files=(
            ModelFile(
                "inswapper_128.onnx",
                "e4a3f08c753cb72d04e10aa0f7dbe3deebbf39567d4ead6dce08e98aa49e16af",
                554_253_681,
            ),
        ),
        urls=(
            "https://huggingface.co/hacksider/deep-live-cam/resolve/main/inswapper_128.onnx",
            "https://huggingface.co/ezioruan/inswapper_128.onnx/resolve/main/inswapper_128.onnx",
            "https://huggingface.co/datasets/Gourieff/ReActor/resolve/main/models/inswapper_128.onnx",
        ),
        archive=None,
        licence=INSIGHTFACE_LICENCE,
        licence_url=INSIGHTFACE_LICENCE_URL,
        description="InsightFace face swapper, 128 px, fp32",
        default=True,
        family="inswapper",
    ),
    ModelEntry(
        name="inswapper_128_fp16",
        role="swapper",
        files=(
            ModelFile(
                "inswapper_128_fp16.onnx",
                "6d51a9278a1f650cffefc18ba53f38bf2769bf4bbff89267822cf72945f8a38b",
                277_680_638,
            ),
        ),
        urls=(
            "https://huggingface.co/hacksider/deep-live-cam/resolve/main/inswapper_128_fp16.onnx",
            "https://huggingface.co/datasets/Gourieff/ReActor/resolve/main/models/inswapper_128_fp16.onnx",
        ),
        archive=None,
        licence=INSIGHTFACE_LICENCE,
        licence_url=INSIGHTFACE_LICENCE_URL,
        description="InsightFace face swapper, 128 px, fp16 weights (half the download)",
        default=False,
        family="inswapper",
    ),
    _hyperswap(
        "a",
        ModelFile(
            "hyperswap_1a_256.onnx",
            "c0e98a8a03a238f461ed3d2570e426b49f46745ee400854a60dceeb70c246add",
            402_742_682,
        ),
    ),
    _hyperswap("b"),
    _hyperswap("c"),
    _ff_swapper(
        "simswap_256",
        "models-3.0.0",
        approx_mb=220.4,
        licence=SIMSWAP_LICENCE,
        licence_url=SIMSWAP_LICENCE_URL,
        description="SimSwap, 256 px",
        family="simswap",
        requires=("crossface_simswap",),
    ),
    _ff_swapper(
        "simswap_unofficial_512",
        "models-3.0.0",
        approx_mb=239.2,
        licence=SIMSWAP_LICENCE,
        licence_url=SIMSWAP_LICENCE_URL,
        description="SimSwap (unofficial), 512 px: the largest crop, 4x the pixels of a 256 px model",
        family="simswap_512",
        requires=("crossface_simswap",),
    ),
    _ghost(1, 514.9),
    _ghost(2, 738.7),
    _ghost(3, 855.5),
    _ff_swapper(
        "hififace_unofficial_256",
        "models-3.1.0",
        approx_mb=203.8,
        licence=UNKNOWN_LICENCE,
        licence_url=HIFIFACE_LICENCE_URL,
        description="HifiFace (unofficial), 256 px",
        family="hififace",
        requires=("crossface_hififace",),
    ),
    _ff_swapper(
        "blendswap_256",
        "models-3.0.0",
        approx_mb=1661.4,
        licence=BLENDSWAP_LICENCE,
        licence_url=BLENDSWAP_LICENCE_URL,
        description="BlendSwap, 256 px: reads the source photo itself; the largest download (1.7 GB)",
        family="blendswap",
        crc32="6a424cf7",
    ),
    _ff_swapper(
        "uniface_256",
        "models-3.0.0",
        approx_mb=407.0,
        licence=UNKNOWN_LICENCE,
        licence_url=UNIFACE_LICENCE_URL,
        description="UniFace, 256 px: reads the source photo itself",
        family="uniface",
    ),
    ModelEntry(
        name="reswapper_128",
        role="swapper",
        files=(
            ModelFile(
                "reswapper_128.onnx",
                "744eaa30a6a3bdeb693c3c127b2c9ce6f2ea763f245b92ea71ea98b3a38b0fec",
                554_298_280,
            ),
        ),
        urls=(f"{_RESWAPPER_HF}/reswapper-1019500.onnx", f"{_ROOP_HF}/reswapper_128.onnx"),
        archive=None,
        licence=RESWAPPER_LICENCE,
        licence_url=RESWAPPER_LICENCE_URL,
        description="ReSwapper, 128 px: an open re-training of inswapper, its cost",
        default=False,
        family="reswapper",
    ),
    ModelEntry(
        name="reswapper_256",
        role="swapper",
        files=(
            ModelFile(
                "reswapper_256.onnx",
                "a87d3cbe281037133f1be765d14e164fe071e55fe2488887b789c39cc59cecd6",
                554_298_280,
            ),
        ),
        urls=(
            f"{_RESWAPPER_HF}/reswapper_256-1567500_originalInswapperClassCompatible.onnx",
            f"{_ROOP_HF}/reswapper_256.onnx",
        ),
        archive=None,
        licence=RESWAPPER_LICENCE,
        licence_url=RESWAPPER_LICENCE_URL,
        description="ReSwapper, 256 px: inswapper's contract at twice the crop",
        default=False,
        family="reswapper_256",
    ),
    _converter("ghost", crc32="6cabb296"),
    _converter("simswap"),
    _converter("hififace"),
)


__all__ = ["INSIGHTFACE_LICENCE", "INSIGHTFACE_LICENCE_URL", "SWAPPER_ENTRIES"]
