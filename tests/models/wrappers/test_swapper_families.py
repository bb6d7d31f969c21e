"""Every swap family feeds its model exactly what the published model takes, proven on its
contract-exact double: the expected tensors are computed HERE from the documented facts
(docs/model-contracts.md, "Face swappers"), with this file's own template numbers, its own
similarity fit (skimage's) and warp, never from the product's code.

And each double sees its input: a transposed, unnormalised or channel-swapped target (or a
normalised identity where the raw one belongs) comes back different.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np
import numpy.typing as npt
import onnx
import pytest
from onnx import numpy_helper
from skimage.transform import SimilarityTransform

from models.fakes.doubles import write_all
from models.fakes.pixel_doubles import inswapper_reference
from models.fakes.swapper_doubles import DOUBLES, converter_reference, swapper_reference
from models.files.catalogue import get_entry
from models.runtime.session import SessionConfig, SessionFactory
from models.types import SourceFace
from models.wrappers.swappers.base import FaceSwapper
from models.wrappers.swappers.registry import (
    converter_entry,
    family_of,
    load_swapper,
    swapper_entries,
    swapper_names,
)
from tests.real_faces import astronaut_bgr, astronaut_face, group_photo_bgr, group_photo_faces

FACTORY = SessionFactory(SessionConfig(provider="cpu"))

# The published templates, in units of the crop's side (FaceFusion's WARP_TEMPLATE_SET).
TEMPLATES = {
    "arcface_112_v1": [(0.35473214, 0.45658929), (0.64526786, 0.45658929), (0.50000000, 0.61154464),
                       (0.37913393, 0.77687500), (0.62086607, 0.77687500)],
    "arcface_112_v2": [(0.34191607, 0.46157411), (0.65653393, 0.45983393), (0.50022500, 0.64050536),
                       (0.37097589, 0.82469196), (0.63151696, 0.82325089)],
    "arcface_128": [(0.36167656, 0.40387734), (0.63696719, 0.40235469), (0.50019687, 0.56044219),
                    (0.38710391, 0.72160547), (0.61507734, 0.72034453)],
    "ffhq_512": [(0.37691676, 0.46864664), (0.62285697, 0.46912813), (0.50123859, 0.61331904),
                 (0.39308822, 0.72541100), (0.61150205, 0.72490465)],
    "mtcnn_512": [(0.36562865, 0.46733799), (0.63305391, 0.46585885), (0.50019127, 0.61942959),
                  (0.39032951, 0.77598822), (0.61178945, 0.77476328)],
}  # fmt: skip
IMAGENET = ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))
HALF = ((0.5, 0.5, 0.5), (0.5, 0.5, 0.5))
PLAIN = ((0.0, 0.0, 0.0), (1.0, 1.0, 1.0))


@dataclass(frozen=True)
class Documented:
    """One family as docs/model-contracts.md states it."""

    size: int
    template: str  # or "reswapper_256": arcface_128 at 256 px plus 0.5 px
    norm: tuple[tuple[float, float, float], tuple[float, float, float]]  # mean, std on x / 255, RGB
    identity: str  # emap | embedding | converted | converted_normed | picture
    signed: bool  # output in [-1, 1] (else [0, 1])
    picture: tuple[str, int] | None = None  # the source picture's template and size


DOCUMENTED = {
    "inswapper_128": Documented(128, "arcface_128", PLAIN, "emap", False),
    "inswapper_128_fp16": Documented(128, "arcface_128", PLAIN, "emap", False),
    "hyperswap_1a_256": Documented(256, "arcface_128", HALF, "embedding", True),
    "hyperswap_1b_256": Documented(256, "arcface_128", HALF, "embedding", True),
    "hyperswap_1c_256": Documented(256, "arcface_128", HALF, "embedding", True),
    "simswap_256": Documented(256, "arcface_112_v1", IMAGENET, "converted_normed", False),
    "simswap_unofficial_512": Documented(512, "arcface_112_v1", PLAIN, "converted_normed", False),
    "ghost_1_256": Documented(256, "arcface_112_v1", HALF, "converted", True),
    "ghost_2_256": Documented(256, "arcface_112_v1", HALF, "converted", True),
    "ghost_3_256": Documented(256, "arcface_112_v1", HALF, "converted", True),
    "hififace_unofficial_256": Documented(256, "mtcnn_512", HALF, "converted_normed", True),
    "blendswap_256": Documented(256, "ffhq_512", PLAIN, "picture", False, ("arcface_112_v2", 112)),
    "uniface_256": Documented(256, "ffhq_512", HALF, "picture", True, ("ffhq_512", 256)),
    "reswapper_128": Documented(128, "arcface_128", PLAIN, "emap", False),
    "reswapper_256": Documented(256, "reswapper_256", PLAIN, "emap", False),
}


def documented_points(template: str, size: int) -> npt.NDArray[np.float64]:
    if template == "reswapper_256":
        return np.asarray(TEMPLATES["arcface_128"], dtype=np.float64) * 256 + 0.5
    return np.asarray(TEMPLATES[template], dtype=np.float64) * size


def documented_crop(
    image: npt.NDArray[np.uint8], kps: npt.ArrayLike, template: str, size: int
) -> npt.NDArray[np.uint8]:
    fit = SimilarityTransform.from_estimate(
        np.asarray(kps, dtype=np.float64), documented_points(template, size)
    )
    m = fit.params[:2]
    return np.asarray(
        cv2.warpAffine(image, m, (size, size), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
    )


def documented_tensor(
    crop: npt.NDArray[np.uint8], norm: tuple[tuple[float, ...], tuple[float, ...]]
) -> npt.NDArray[np.float64]:
    rgb = crop[:, :, ::-1].astype(np.float64) / 255.0
    mean, std = (np.asarray(v, dtype=np.float64) for v in norm)
    return ((rgb - mean) / std).transpose(2, 0, 1)[None]


def decode(pred: npt.NDArray[np.float64], signed: bool) -> npt.NDArray[np.float64]:
    """The output as 0..255 BGR floats, before the wrappers' own rounding."""
    x = (np.clip(pred[0], -1.0, 1.0) + 1.0) * 127.5 if signed else np.clip(pred[0], 0.0, 1.0) * 255.0
    return x.transpose(1, 2, 0)[:, :, ::-1]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return write_all(tmp_path_factory.mktemp("swap_doubles"))


def load(name: str, files: dict[str, Path]) -> FaceSwapper:
    converter = converter_entry(name)
    return load_swapper(
        files[get_entry(name).files[0].name],
        FACTORY,
        family_of(name).facts.family,
        None if converter is None else files[get_entry(converter).files[0].name],
    )


def the_source() -> SourceFace:
    """A source identity: the astronaut's photo and face, and an ArcFace-like raw embedding."""
    raw = np.random.default_rng(5).standard_normal(512).astype(np.float32) * 0.7  # norm ~15.8
    return SourceFace(
        (raw / np.linalg.norm(raw)).astype(np.float32), raw, astronaut_bgr(), astronaut_face().kps
    )


def documented_source(
    name: str, source: SourceFace, file: Path, files: dict[str, Path]
) -> npt.NDArray[np.float64]:
    doc = DOCUMENTED[name]
    normed = np.asarray(source.embedding, dtype=np.float64).reshape(1, 512)
    if doc.identity == "embedding":
        return normed
    if doc.identity == "emap":
        emap = numpy_helper.to_array(onnx.load(str(file)).graph.initializer[-1]).astype(np.float64)
        latent = normed @ emap
        return latent / np.linalg.norm(latent)
    if doc.identity.startswith("converted"):
        converter = converter_entry(name)
        assert converter is not None, f"{name} needs a converter in the catalogue"
        out = converter_reference(get_entry(converter).files[0].name, source.raw_embedding)
        return out / np.linalg.norm(out) if doc.identity == "converted_normed" else out
    assert doc.picture is not None and source.image is not None
    template, side = doc.picture
    picture = documented_crop(source.image, source.kps, template, side)
    return documented_tensor(picture, PLAIN)


def test_every_catalogue_swapper_is_documented_here_and_has_a_family() -> None:
    assert set(swapper_names()) == set(DOCUMENTED)
    for entry in swapper_entries():
        assert family_of(entry.name).facts.family == entry.family


@pytest.mark.parametrize("name", sorted(DOCUMENTED))
def test_the_model_receives_the_documented_tensors_and_its_output_is_read_as_documented(
    name: str, files: dict[str, Path]
) -> None:
    doc = DOCUMENTED[name]
    swapper = load(name, files)
    source = the_source()
    # The target: a real face of the group photo, aligned by the product and by the documentation.
    target_face = group_photo_faces()[2]
    frame = group_photo_bgr()
    layout = swapper.facts.layout
    m = layout.matrix(target_face.kps)
    fit = SimilarityTransform.from_estimate(
        np.asarray(target_face.kps, dtype=np.float64), documented_points(doc.template, doc.size)
    )
    np.testing.assert_allclose(m, fit.params[:2], atol=1e-3)  # the same crop, to a thousandth of a pixel
    crop = cv2.warpAffine(frame, m, (doc.size, doc.size), borderMode=cv2.BORDER_REPLICATE)

    identity = swapper.identity(source)
    expected_source = documented_source(name, source, files[get_entry(name).files[0].name], files)
    got_source = identity.astype(np.float64).reshape(expected_source.shape)
    if doc.identity == "picture":  # a warp fitted 1e-4 px apart rounds a few pixels the other way
        assert np.abs(got_source - expected_source).max() <= 3.0 / 255.0
        assert np.abs(got_source - expected_source).mean() < 1e-4
    else:
        np.testing.assert_allclose(got_source, expected_source, atol=2e-4)

    swapped = swapper.swap(crop, identity).astype(np.float64)
    file = get_entry(name).files[0].name
    if doc.identity == "emap":
        expected = inswapper_reference(crop, expected_source, seed=0 if "inswapper" in name else 7)
        assert np.abs(swapped - expected).max() <= 1.0
        return
    pred = swapper_reference(file, documented_tensor(crop, doc.norm), expected_source)
    # Within one level: the unit range is truncated, the signed one rounded.
    assert np.abs(swapped - decode(pred, doc.signed)).max() < 1.001


@pytest.mark.parametrize("file", sorted(DOUBLES))
def test_each_double_sees_its_input(file: str, files: dict[str, Path]) -> None:
    """A transposed, mirrored, unnormalised or channel-swapped target, or an identity of the wrong
    scale, comes back visibly different from the double (mean difference > 4 levels)."""
    spec = DOUBLES[file]
    session = FACTORY.create(files[file])
    rng = np.random.default_rng(1)
    crop = cv2.resize(group_photo_bgr()[300:420, 460:580], (spec.size, spec.size))
    target = documented_tensor(crop, HALF if spec.output == "signed" else PLAIN).astype(np.float32)
    if len(spec.source) == 2:
        source = rng.standard_normal((1, 512)).astype(np.float32)
        source *= spec.source_norm / np.linalg.norm(source)
    else:
        picture = cv2.resize(astronaut_bgr()[40:200, 150:310], spec.source[2:])
        source = documented_tensor(picture, PLAIN).astype(np.float32)

    def run(t: npt.NDArray[np.float32], s: npt.NDArray[np.float32]) -> npt.NDArray[np.float64]:
        out = session.run(["output"], {"target": np.ascontiguousarray(t), "source": np.ascontiguousarray(s)})[
            0
        ]
        return decode(np.asarray(out, dtype=np.float64), spec.output == "signed")

    good = run(target, source)
    np.testing.assert_allclose(
        good, decode(swapper_reference(file, target, source), spec.output == "signed"), atol=0.05
    )
    mutations = {
        "transposed": (target.transpose(0, 1, 3, 2), source),
        "mirrored": (target[:, :, :, ::-1], source),
        "unnormalised": (crop[:, :, ::-1].transpose(2, 0, 1)[None].astype(np.float32), source),
        "BGR for RGB": (target[:, ::-1], source),
    }
    if len(spec.source) == 2:
        mutations["identity 10x"] = (target, source * 10.0 if spec.source_norm == 1.0 else source / 17.35)
    else:
        mutations["source transposed"] = (target, source.transpose(0, 1, 3, 2))
        mutations["source BGR for RGB"] = (target, source[:, ::-1])
        mutations["source as [-1, 1]"] = (target, source * 2.0 - 1.0)
    for what, (t, s) in mutations.items():
        assert np.abs(run(t, s) - good).mean() > 4.0, what
