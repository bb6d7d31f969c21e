"""Router: identify a model by signature, load it in its role, refuse it loudly in another role."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest

from models.errors import ModelContractError, ModelMissingError
from models.fakes.detector_double import DEFAULT_FACE, build_scrfd
from models.fakes.doubles import FakeArg, FakeSession, scrfd_signature, write_all
from models.fakes.pixel_doubles import build_landmark_2d106
from models.runtime.session import SessionConfig, SessionFactory
from models.wrappers.arcface import ArcFace
from models.wrappers.router import identify_contract, load_detector, load_recognizer
from models.wrappers.scrfd import SCRFD
from models.wrappers.swappers.inswapper import InSwapper
from models.wrappers.swappers.registry import load_swapper

FACTORY = SessionFactory(SessionConfig(provider="cpu"))


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("models")
    written = write_all(d)
    for name, model in {
        "2d106det.onnx": build_landmark_2d106(),
        "no_kps.onnx": build_scrfd([DEFAULT_FACE], with_kps=False),
    }.items():
        onnx.save(model, str(d / name))
        written[name] = d / name
    (d / "corrupt.onnx").write_bytes(b"this is not a protobuf" * 10)
    written["corrupt.onnx"] = d / "corrupt.onnx"
    return written


def test_write_all_uses_the_catalogue_file_names(files: dict[str, Path]) -> None:
    for name in (
        "det_10g.onnx",
        "scrfd_2.5g.onnx",
        "w600k_r50.onnx",
        "inswapper_128.onnx",
        "inswapper_128_fp16.onnx",
    ):
        assert files[name].name == name and files[name].stat().st_size > 0


@pytest.mark.parametrize(
    "name, kind",
    [
        ("det_10g.onnx", "detector/scrfd"),
        ("scrfd_2.5g.onnx", "detector/scrfd"),
        ("no_kps.onnx", "detector/scrfd"),
        ("w600k_r50.onnx", "recognizer/arcface"),
        ("inswapper_128.onnx", "swapper"),
        ("inswapper_128_fp16.onnx", "swapper"),
        ("2d106det.onnx", "landmarks/2d106"),
    ],
)
def test_identify_contract(files: dict[str, Path], name: str, kind: str) -> None:
    assert identify_contract(FACTORY.create(files[name])) == kind


def test_identify_unknown_and_1k3d68() -> None:
    odd = FakeSession([FakeArg("x", [1, 1, 64, 64])], [FakeArg("y", [1, 10])])
    assert identify_contract(odd) == "unknown"
    lmk3d = FakeSession([FakeArg("data", ["N", 3, 192, 192])], [FakeArg("fc1", ["N", 3309])])
    assert identify_contract(lmk3d) == "landmarks/1k3d68"
    assert identify_contract(scrfd_signature(9)) == "detector/scrfd"


def test_loaders_return_the_right_class(files: dict[str, Path]) -> None:
    det = load_detector(files["det_10g.onnx"], FACTORY, score_threshold=0.3)
    assert isinstance(det, SCRFD) and det.score_threshold == 0.3
    assert isinstance(load_recognizer(files["w600k_r50.onnx"], FACTORY), ArcFace)
    assert isinstance(load_swapper(files["inswapper_128.onnx"], FACTORY), InSwapper)
    assert isinstance(load_swapper(str(files["inswapper_128_fp16.onnx"]), FACTORY), InSwapper)


def test_detector_given_as_swapper_says_what_it_is(files: dict[str, Path]) -> None:
    with pytest.raises(ModelContractError) as info:
        load_swapper(files["det_10g.onnx"], FACTORY)
    assert info.value.message == (
        "det_10g.onnx is not a face swapper: expected inputs target[1,3,128,128] + source[1,512] and an "
        "output [1,3,128,128]; this file looks like a face detector (SCRFD, 9 outputs)."
    )
    assert info.value.hint  # the user is told what to do next


@pytest.mark.parametrize(
    "loader, name, role, looks_like",
    [
        (load_detector, "inswapper_128.onnx", "a face detector", "a face swapper (128 px)"),
        (load_detector, "w600k_r50.onnx", "a face detector", "a face recogniser (ArcFace"),
        (load_recognizer, "det_10g.onnx", "a face recogniser", "a face detector (SCRFD, 9 outputs)"),
        (load_recognizer, "2d106det.onnx", "a face recogniser", "a 106-point landmark model"),
        (load_swapper, "w600k_r50.onnx", "a face swapper", "a face recogniser (ArcFace"),
    ],
)
def test_wrong_role_is_refused(files: dict[str, Path], loader, name: str, role: str, looks_like: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ModelContractError) as info:
        loader(files[name], FACTORY)
    msg = info.value.message
    assert msg.startswith(f"{name} is not {role}: expected ")
    assert f"this file looks like {looks_like}" in msg


def test_detector_without_landmarks_is_named_in_the_error(files: dict[str, Path]) -> None:
    with pytest.raises(ModelContractError, match=r"^no_kps\.onnx: SCRFD detector without landmark outputs"):
        load_detector(files["no_kps.onnx"], FACTORY)


def test_corrupt_and_missing_files_are_reported_by_the_factory(files: dict[str, Path]) -> None:
    with pytest.raises(ModelContractError, match="not a readable ONNX model"):
        load_swapper(files["corrupt.onnx"], FACTORY)
    with pytest.raises(ModelMissingError):
        load_detector(files["det_10g.onnx"].with_name("absent.onnx"), FACTORY)
