"""Frame enhancers (models/wrappers/frame_enhancers.py): the tiled run on the upscaling double against
its whole-picture numpy reference (no seams), the contract checks that refuse wrong files, and the
tiles going to the model through its shared inference service."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

from models.errors import ModelContractError
from models.fakes.onnx_model import finish_model
from models.fakes.pixel_doubles import build_restorer
from models.fakes.upscaler_double import build_upscaler, upscaler_reference
from models.files.catalogue import get_entry, names_of_role
from models.files.frame_enhancer_catalogue import FRAME_ENHANCERS, frame_enhancer_facts
from models.runtime.inference_hub import InferenceHub
from models.runtime.session import SessionConfig, SessionFactory
from models.wrappers.frame_enhancers import FrameEnhancer
from tests.real_faces import astronaut_bgr

FACTORY = SessionFactory(SessionConfig(provider="cpu", intra_op_threads=2))


@pytest.fixture(scope="module")
def doubles(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    d = Path(tmp_path_factory.mktemp("upscalers"))
    paths = {}
    for scale in (2, 4):
        paths[scale] = d / f"real_esrgan_x{scale}.onnx"
        onnx.save(build_upscaler(scale), str(paths[scale]))
    return paths


def picture(height: int, width: int, seed: int = 0) -> np.ndarray:
    """A real photo's detail (edges everywhere), tiled to any size and shifted so no two are alike."""
    photo = astronaut_bgr()
    reps = (math.ceil(height / 512) + 1, math.ceil(width / 512) + 1, 1)
    big = np.tile(photo, reps)
    return np.ascontiguousarray(big[seed % 97 : seed % 97 + height, seed % 89 : seed % 89 + width])


@pytest.mark.parametrize("scale", [2, 4])
def test_a_tiled_picture_is_the_whole_pictures_output_without_seams(
    doubles: dict[int, Path], scale: int
) -> None:
    enhancer = FrameEnhancer.from_file(f"real_esrgan_x{scale}", doubles[scale], FACTORY)
    image = picture(300, 437)  # two rows and two columns of 240 px cores, the last ones cut
    out = enhancer.upscale(image)
    assert out.shape == (300 * scale, 437 * scale, 3)
    expected = upscaler_reference(image, scale)
    diff = np.abs(out.astype(np.int16) - expected)
    assert diff.max() <= 1  # float rounding only
    # Where two tiles meet (output column/row 240 * scale): no step that the whole picture lacks.
    border = 240 * scale
    assert diff[:, border - 2 : border + 2].max() <= 1 and diff[border - 2 : border + 2].max() <= 1
    assert enhancer.tiles_run == 4


def test_without_context_round_the_tiles_the_seams_show(doubles: dict[int, Path]) -> None:
    """The check above is sensitive: the same double run on tiles without a margin steps at the
    tile borders (its upscale and its kernel reach across them)."""
    facts = replace(frame_enhancer_facts("real_esrgan_x2"), margin=0)
    enhancer = FrameEnhancer(FACTORY.create(doubles[2]), facts, "real_esrgan_x2")
    image = picture(300, 437)
    diff = np.abs(enhancer.upscale(image).astype(np.int16) - upscaler_reference(image, 2))
    assert diff[:, 510:514].max() > 8  # the column where the first two tiles meet (256 * 2)


@settings(max_examples=12, deadline=None)
@given(height=st.integers(1, 520), width=st.integers(1, 520))
def test_any_picture_size_comes_back_twice_as_large_and_whole(
    doubles: dict[int, Path], height: int, width: int
) -> None:
    enhancer = FrameEnhancer.from_file("real_esrgan_x2", doubles[2], FACTORY)
    image = picture(height, width, seed=height + width)
    out = enhancer.upscale(image)
    assert out.shape == (2 * height, 2 * width, 3)
    assert np.abs(out.astype(np.int16) - upscaler_reference(image, 2)).max() <= 1


def test_the_output_buffer_is_reused(doubles: dict[int, Path]) -> None:
    enhancer = FrameEnhancer.from_file("real_esrgan_x2", doubles[2], FACTORY)
    image = picture(100, 120)
    first = enhancer.upscale(image)
    assert enhancer.upscale(image, out=first) is first
    assert enhancer.upscale(image, out=np.zeros((1, 1, 3), np.uint8)).shape == (200, 240, 3)


def test_float16_input_and_output_are_fed_and_read(tmp_path: Path) -> None:
    path = tmp_path / "real_esrgan_x2_fp16.onnx"
    onnx.save(build_upscaler(2, fp16_io=True), str(path))
    enhancer = FrameEnhancer.from_file("real_esrgan_x2_fp16", path, FACTORY)
    assert enhancer.input_dtype == np.float16
    image = picture(90, 130)
    diff = np.abs(enhancer.upscale(image).astype(np.int16) - upscaler_reference(image, 2))
    assert diff.max() <= 2  # float16 steps of 1/2048 near 1


# ---------------------------------------------------------------------------- wrong files


def test_a_face_restorer_is_not_a_frame_enhancer(tmp_path: Path) -> None:
    path = tmp_path / "real_esrgan_x2.onnx"
    onnx.save(build_restorer(256), str(path))  # 256 in, 256 out: no upscale
    with pytest.raises(ModelContractError, match=r"real_esrgan_x2\.onnx: not a real_esrgan_x2 model") as info:
        FrameEnhancer.from_file("real_esrgan_x2", path, FACTORY)
    assert "[1,3,512,512]" in info.value.message


def test_an_x4_file_is_not_taken_for_the_x2(doubles: dict[int, Path]) -> None:
    with pytest.raises(ModelContractError, match=r"\(x2\)"):
        FrameEnhancer.from_file("real_esrgan_x2", doubles[4], FACTORY)


def _dynamic_upscaler(tmp_path: Path, scale: int) -> Path:
    """The x`scale` double with every spatial dim left open (an export with dynamic axes)."""
    model = build_upscaler(scale)
    for value in (*model.graph.input, *model.graph.output):
        dims = value.type.tensor_type.shape.dim
        dims[2].dim_param, dims[3].dim_param = "h", "w"
    path = tmp_path / f"dynamic_x{scale}.onnx"
    onnx.save(model, str(path))
    return path


def test_a_dynamic_file_runs_on_the_catalogues_tile_and_its_scale_is_checked_at_its_first_run(
    tmp_path: Path,
) -> None:
    enhancer = FrameEnhancer.from_file("real_esrgan_x2", _dynamic_upscaler(tmp_path, 2), FACTORY)
    assert (enhancer.tile, enhancer.scale) == (256, 2)
    image = picture(64, 80)
    assert np.abs(enhancer.upscale(image).astype(np.int16) - upscaler_reference(image, 2)).max() <= 1
    wrong = FrameEnhancer.from_file("real_esrgan_x4", _dynamic_upscaler(tmp_path, 2), FACTORY)
    with pytest.raises(ModelContractError, match=r"expected \(1, 3, 1024, 1024\) \(x4\)"):
        wrong.upscale(image)


def test_two_inputs_or_integer_pictures_are_refused(tmp_path: Path) -> None:
    facts = frame_enhancer_facts("real_esrgan_x2")
    two = helper.make_graph(
        [helper.make_node("Add", ["a", "b"], ["out"])],
        "two",
        [
            helper.make_tensor_value_info("a", TensorProto.FLOAT, [1, 3, 256, 256]),
            helper.make_tensor_value_info("b", TensorProto.FLOAT, [1, 3, 256, 256]),
        ],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 3, 256, 256])],
    )
    session = FACTORY.create(finish_model(two).SerializeToString())
    with pytest.raises(ModelContractError, match="one image input"):
        FrameEnhancer(session, facts, "real_esrgan_x2")
    ints = helper.make_graph(
        [helper.make_node("Identity", ["a"], ["out"])],
        "ints",
        [helper.make_tensor_value_info("a", TensorProto.UINT8, [1, 3, 256, 256])],
        [helper.make_tensor_value_info("out", TensorProto.UINT8, [1, 3, 512, 512])],
    )
    session = FACTORY.create(finish_model(ints).SerializeToString())
    with pytest.raises(ModelContractError, match="must be float or float16"):
        FrameEnhancer(session, facts, "real_esrgan_x2")


# ---------------------------------------------------------------------------- the service


def test_a_frames_tiles_share_model_calls_through_the_shared_service(doubles: dict[int, Path]) -> None:
    hub = InferenceHub()
    service = hub.service(doubles[2], FACTORY, label="real_esrgan_x2")
    assert service.max_batch > 1  # the fixed-batch-1 file got its batch axis
    enhancer = FrameEnhancer.from_file("real_esrgan_x2", doubles[2], FACTORY, service.session)
    enhancer.served.attach(service.service.client("engine"))
    image = picture(720, 1280)  # 6 x 3 tiles of 240 px cores
    out = enhancer.upscale(image)
    stats = service.service.stats()
    assert stats.requests == 18
    assert stats.calls == math.ceil(18 / hub.policy.max_batch)
    assert np.abs(out.astype(np.int16) - upscaler_reference(image, 2)).max() <= 1


def test_the_catalogue_names_each_file_with_its_facts() -> None:
    assert names_of_role("frame_enhancer") == tuple(FRAME_ENHANCERS)
    for name, facts in FRAME_ENHANCERS.items():
        entry = get_entry(name)
        assert entry.files[0].name == f"{name}.onnx"
        assert entry.files[0].crc32_urls and "BSD-3-Clause" in entry.licence
        assert (facts.tile, facts.margin) == (256, 8) and facts.scale in (2, 4)
        assert facts.fp16 == name.endswith("_fp16")
