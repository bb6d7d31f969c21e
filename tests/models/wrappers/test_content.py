"""The content classifier (models/wrappers/content.py) against its double's numpy reference, on real
photos and a flagged one; the double sees what it is fed; a wrong file is refused; the catalogue
entry checks the publisher's CRC-32."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from models.errors import ModelContractError
from models.fakes.content_double import FLAGGED_BGR, build_content_classifier, content_reference
from models.fakes.doubles import FakeArg, FakeSession, write_all
from models.fakes.pixel_doubles import build_xseg
from models.files.catalogue import get_entry
from models.runtime.session import SessionConfig, SessionFactory
from models.wrappers.content import FLAG_MARGIN, ContentClassifier, fit_contain
from tests.real_faces import astronaut_bgr, group_photo_bgr

FACTORY = SessionFactory(SessionConfig(provider="cpu"))


def session() -> ort.InferenceSession:
    return ort.InferenceSession(
        build_content_classifier().SerializeToString(), providers=["CPUExecutionProvider"]
    )


def flagged_photo() -> np.ndarray:
    """The group photo with a violet panel on its right: what the double calls not safe for work."""
    photo = group_photo_bgr().copy()
    photo[150:450, 800:1150] = FLAGGED_BGR
    return photo


@pytest.mark.parametrize(
    "picture",
    [pytest.param(astronaut_bgr, id="astronaut"), pytest.param(group_photo_bgr, id="group photo")],
)
def test_real_photos_score_as_the_reference_says_and_are_not_flagged(
    picture: Callable[[], np.ndarray],
) -> None:
    verdict = ContentClassifier(session()).verdict(picture())
    assert verdict.score == pytest.approx(content_reference(picture()), abs=1e-4)
    assert not verdict.flagged


def test_a_flagged_photo_is_flagged_and_scores_as_the_reference_says() -> None:
    verdict = ContentClassifier(session()).verdict(flagged_photo())
    assert verdict.flagged and verdict.score > FLAG_MARGIN
    assert verdict.score == pytest.approx(content_reference(flagged_photo()), abs=1e-4)


def test_the_double_sees_the_channel_order_the_normalisation_and_the_orientation() -> None:
    """A wrapper that fed the picture as BGR, unnormalised or transposed would get other answers."""
    photo = flagged_photo()
    right = content_reference(photo)
    swapped = content_reference(np.ascontiguousarray(photo[:, :, ::-1]))
    transposed = content_reference(np.ascontiguousarray(photo.transpose(1, 0, 2)))
    assert right > FLAG_MARGIN and swapped < FLAG_MARGIN  # violet read as BGR is crimson
    assert abs(transposed - right) > 0.05
    # Fed x/255 only (no mean and spread), the same picture is not flagged.
    square, _ = fit_contain(photo, 384)
    blob = (square[:, :, ::-1].transpose(2, 0, 1)[None] / np.float32(255.0)).astype(np.float32)
    out = session().run(None, {"input": blob})[0]
    assert float(out[0, 0] - out[0, 1]) < FLAG_MARGIN


def test_the_picture_is_fitted_whole_and_centred_on_black() -> None:
    wide = np.full((100, 400, 3), 200, np.uint8)
    square, (x, y, w, h) = fit_contain(wide, 384)
    assert (x, w) == (0, 384) and (y, h) == (144, 96)
    assert (square[:y] == 0).all() and (square[y + h :] == 0).all() and (square[y : y + h] == 200).all()


def test_a_file_of_another_contract_is_refused_with_what_was_expected() -> None:
    xseg = ort.InferenceSession(build_xseg().SerializeToString(), providers=["CPUExecutionProvider"])
    with pytest.raises(
        ModelContractError, match=r"not the content classifier: expected input\[N,3,384,384\]"
    ):
        ContentClassifier(xseg)
    half = FakeSession(
        [FakeArg("input", [1, 3, 384, 384], "tensor(float16)")],
        [FakeArg("output", [1, 2], "tensor(float16)")],
    )
    with pytest.raises(ModelContractError, match="must be float32"):
        ContentClassifier(half)


def test_the_written_double_loads_from_its_catalogue_name(tmp_path: Path) -> None:
    path = write_all(tmp_path)["nsfw_2.onnx"]
    classifier = ContentClassifier.from_file(path, FACTORY)
    assert classifier.verdict(flagged_photo()).flagged


def test_the_catalogue_entry_is_a_content_model_checked_against_the_publishers_crc32() -> None:
    entry = get_entry("nsfw_2")
    assert entry.role == "content" and not entry.default
    (file,) = entry.files
    assert file.name == "nsfw_2.onnx" and file.sha256 is None
    assert file.crc32_urls and all(
        "models-3.3.0" in u and u.endswith("/nsfw_2.hash") for u in file.crc32_urls
    )
    assert "Apache-2.0" in entry.licence
