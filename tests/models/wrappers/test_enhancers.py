"""Face restorers (models/wrappers/enhancers.py): contracts read from the session, pre/post-processing
against a numpy re-implementation of docs/model-contracts.md's maths, the doubles end to end,
catalogue entries."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto

from models.errors import ModelContractError
from models.fakes.doubles import FakeArg, FakeSession, write_all
from models.fakes.pixel_doubles import build_restorer, restorer_reference
from models.files.catalogue import get_entry
from models.runtime.session import SessionConfig, SessionFactory
from models.wrappers.enhancers import (
    GFPGAN14,
    GPEN256,
    GPEN512,
    RESTORERS,
    CodeFormer,
    ffhq_template,
    load_restorer,
)
from realtime.wiring.model_loading import CATALOGUE_FILE

FACTORY = SessionFactory(SessionConfig(provider="cpu"))


class RecordingSession(FakeSession):
    """Answers run() with a fixed output and keeps a copy of what it was fed."""

    def __init__(self, inputs: list[FakeArg], outputs: list[FakeArg], reply: np.ndarray) -> None:
        super().__init__(inputs, outputs)
        self.reply = reply
        self.feeds: list[dict[str, np.ndarray]] = []

    def run(self, names: Any, feeds: dict[str, np.ndarray], *args: Any, **kwargs: Any) -> list[np.ndarray]:
        self.feeds.append({k: np.array(v, copy=True) for k, v in feeds.items()})
        return [self.reply]


def restorer_session(
    size: int, reply: np.ndarray, *, name: str = "input", weight: str | None = None
) -> RecordingSession:
    inputs = [FakeArg(name, [1, 3, size, size])]
    if weight is not None:
        inputs.append(FakeArg("weight", [1], weight))
    return RecordingSession(inputs, [FakeArg("output", [1, 3, size, size])], reply)


def random_crop(size: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (size, size, 3), dtype=np.uint8)


# ------------------------------------------------------------------ pre/post-processing maths


@pytest.mark.parametrize("cls", [GPEN256, GPEN512, GFPGAN14])
def test_input_is_rgb_chw_scaled_to_minus_one_one(cls: type) -> None:
    size = cls.contract.size
    crop = random_crop(size)
    session = restorer_session(size, np.zeros((1, 3, size, size), np.float32))
    cls(session).enhance(crop)
    fed = session.feeds[0]["input"]
    # Reference: docs/model-contracts.md's (x/255 - 0.5)/0.5 on RGB, NCHW, in float64.
    expected = ((crop[:, :, ::-1].astype(np.float64) / 255.0 - 0.5) / 0.5).transpose(2, 0, 1)[None]
    assert fed.dtype == np.float32 and fed.shape == (1, 3, size, size)
    np.testing.assert_allclose(fed, expected, rtol=0, atol=1e-6)


def test_output_is_clipped_rescaled_rounded_and_bgr() -> None:
    rng = np.random.default_rng(1)
    pred = rng.uniform(-1.4, 1.4, (1, 3, 256, 256)).astype(np.float32)  # beyond [-1, 1] on purpose
    out = GPEN256(restorer_session(256, pred)).enhance(random_crop(256))
    expected = np.rint((np.clip(pred[0].astype(np.float64), -1, 1) + 1) / 2 * 255).transpose(1, 2, 0)[
        :, :, ::-1
    ]
    assert out.dtype == np.uint8
    # float32 vs float64: a value within ~1e-5 of a .5 tie may round either way (2 in 196608 here).
    diff = np.abs(out.astype(np.int16) - expected)
    assert diff.max() <= 1 and (diff > 0).sum() <= 4


def test_output_written_into_the_callers_buffer() -> None:
    pred = np.full((1, 3, 256, 256), 0.5, np.float32)
    buf = np.zeros((256, 256, 3), np.uint8)
    assert GPEN256(restorer_session(256, pred)).enhance(random_crop(256), out=buf) is buf
    assert int(buf[0, 0, 0]) == 191  # (0.5 + 1) / 2 * 255 = 191.25


@pytest.mark.parametrize(
    ("declared", "dtype"), [("tensor(double)", np.float64), ("tensor(float)", np.float32)]
)
def test_codeformer_weight_dtype_comes_from_the_session(declared: str, dtype: type) -> None:
    session = restorer_session(512, np.zeros((1, 3, 512, 512), np.float32), weight=declared)
    cf = CodeFormer(session, fidelity=0.7)
    cf.enhance(random_crop(512))
    fed = session.feeds[0]["weight"]
    assert fed.dtype == dtype and fed.shape == (1,) and fed[0] == pytest.approx(0.7)
    cf.set_fidelity(0.2)
    cf.enhance(random_crop(512))
    assert session.feeds[1]["weight"][0] == pytest.approx(0.2)
    with pytest.raises(ValueError, match="fidelity"):
        cf.set_fidelity(1.5)


# ---------------------------------------------------------------------------- contracts


@pytest.mark.parametrize(
    ("cls", "inputs", "outputs", "why"),
    [
        (
            GPEN256,
            [FakeArg("input", [1, 3, 512, 512])],
            [FakeArg("output", [1, 3, 512, 512])],
            "512 file as 256",
        ),
        (
            GPEN512,
            [FakeArg("input", [1, 3, 256, 256])],
            [FakeArg("output", [1, 3, 256, 256])],
            "256 file as 512",
        ),
        (
            GFPGAN14,
            [FakeArg("x", [1, 3, 512, 512])],
            [FakeArg("output", [1, 3, 512, 512])],
            "input not named",
        ),
        (GPEN256, [FakeArg("input", [1, 3, 256, 256])], [FakeArg("output", [1, 512])], "wrong output"),
        (
            CodeFormer,
            [FakeArg("input", [1, 3, 512, 512])],
            [FakeArg("output", [1, 3, 512, 512])],
            "no weight",
        ),
        (
            GPEN256,
            [FakeArg("target", [1, 3, 128, 128]), FakeArg("source", [1, 512])],
            [FakeArg("o", [1, 3, 128, 128])],
            "a swapper",
        ),
    ],
)
def test_wrong_files_are_refused_with_the_contract(cls: type, inputs: list, outputs: list, why: str) -> None:
    with pytest.raises(
        ModelContractError, match=rf"not a {cls.contract.label} model: expected .*{cls.contract.size}"
    ):
        cls(FakeSession(inputs, outputs))


def test_integer_image_input_is_refused() -> None:
    session = FakeSession(
        [FakeArg("input", [1, 3, 256, 256], "tensor(uint8)")], [FakeArg("output", [1, 3, 256, 256])]
    )
    with pytest.raises(ModelContractError, match="float"):
        GPEN256(session)


def test_dynamic_dims_are_accepted() -> None:
    session = FakeSession([FakeArg("input", ["N", 3, "h", "w"])], [FakeArg("output", ["N", 3, "h", "w"])])
    assert GPEN256(session).size == 256


# -------------------------------------------------------------------------- doubles, end to end


@pytest.fixture(scope="module")
def doubles(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return write_all(tmp_path_factory.mktemp("restorers"))


@pytest.mark.parametrize("name", sorted(RESTORERS))
def test_each_double_loads_as_its_class_and_matches_the_reference(
    name: str, doubles: dict[str, Path]
) -> None:
    restorer = load_restorer(name, doubles[CATALOGUE_FILE[name]], FACTORY)  # type: ignore[arg-type]
    assert type(restorer) is RESTORERS[name]  # type: ignore[index]
    crop = random_crop(restorer.size, seed=3)
    weight = 0.5 if name == "codeformer" else None
    got = restorer.enhance(crop)
    diff = np.abs(got.astype(np.int16) - restorer_reference(crop, weight))
    # float32 graph vs float64 reference: a rounding boundary may fall either way.
    assert diff.max() <= 1 and (diff > 0).mean() < 0.0005


def test_a_wrong_restorer_file_is_named_in_the_error(doubles: dict[str, Path]) -> None:
    with pytest.raises(ModelContractError, match=r"GPEN-BFR-512\.onnx: not a GPEN-BFR-256 model"):
        load_restorer("gpen_256", doubles["GPEN-BFR-512.onnx"], FACTORY)
    with pytest.raises(ModelContractError, match=r"gfpgan_1\.4\.onnx: not a CodeFormer model"):
        load_restorer("codeformer", doubles["gfpgan_1.4.onnx"], FACTORY)


def test_codeformer_double_with_a_float_weight_is_fed_float(tmp_path: Path) -> None:
    path = tmp_path / "codeformer.onnx"
    onnx.save(build_restorer(512, with_weight=True, weight_type=TensorProto.FLOAT), str(path))
    cf = load_restorer("codeformer", path, FACTORY)
    assert isinstance(cf, CodeFormer) and cf.weight_dtype is np.float32
    crop = random_crop(512, seed=4)
    cf.set_fidelity(1.0)
    assert np.abs(cf.enhance(crop).astype(np.int16) - restorer_reference(crop, 1.0)).max() <= 1


def test_ffhq_template_scales_with_the_crop() -> None:
    np.testing.assert_allclose(ffhq_template(512)[0], (192.98138, 239.94708), atol=1e-4)
    np.testing.assert_allclose(ffhq_template(256), ffhq_template(512) / 2, atol=1e-5)


# -------------------------------------------------------------------------------- catalogue


def test_every_enhancer_and_mask_model_has_a_catalogue_entry_and_a_double(doubles: dict[str, Path]) -> None:
    for key in ("gpen_256", "gpen_512", "gfpgan_1.4", "codeformer", "xseg_1", "bisenet_resnet_34"):
        filename = CATALOGUE_FILE[key]
        assert filename in doubles, f"write_all lacks {filename}"
        entry = next(
            e for e in (get_entry(n) for n in _entry_names()) if any(f.name == filename for f in e.files)
        )
        assert entry.licence and entry.licence_url.startswith("https://")


def _entry_names() -> list[str]:
    from models.files.catalogue import CATALOGUE

    return [e.name for e in CATALOGUE]


def test_codeformer_entry() -> None:
    entry = get_entry("codeformer")
    assert entry.role == "enhancer" and entry.archive is None
    assert entry.urls == (
        "https://github.com/facefusion/facefusion-assets/releases/download/models-3.0.0/codeformer.onnx",
    )
    assert entry.files[0].name == "codeformer.onnx" and entry.files[0].sha256 is None
    assert "non-commercial" in entry.licence
    # The GPEN files stay pinned (docs/model-contracts.md).
    assert (
        get_entry("GPEN-BFR-256").files[0].sha256
        == "aa5bd3ab238640a378c59e4a560f7a7150627944cf2129e6311ae4720e833271"
    )


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_a_restoration_with_nan_or_inf_is_refused_not_pasted_as_blocks(bad: float) -> None:
    """NaN or infinity in a restorer's output is a ModelOutputError, not pasted (cast to uint8 they
    would be black and white blocks in the face)."""
    from models.errors import ModelOutputError

    pred = np.zeros((1, 3, 256, 256), np.float32)
    pred[0, :, 100:140, 100:140] = bad
    with pytest.raises(ModelOutputError, match="NaN or infinite"):
        GPEN256(restorer_session(256, pred)).enhance(random_crop(256))
