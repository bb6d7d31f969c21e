"""Compute-equivalent stand-ins: real contracts, real costs, loadable by the real wrappers, cached once.

The stand-ins are built once per module (about 10 s on a 2-core CPU, 1.3 GB written to a temporary
folder). Only one full inswapper inference runs (~3 s); GFPGAN's (~6 s) is covered by GPEN's, which
comes from the same U-Net builder.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from models.fakes import standins
from models.fakes.detector_double import (
    DEFAULT_FACE,
    build_scrfd,
    face_in_frame,
    frame_with_faces,
    scrfd_constant_outputs,
)
from models.fakes.standins import (
    MANIFEST_NAME,
    STANDIN_NAMES,
    STANDINS_VERSION,
    count_macs,
    count_params,
    ensure_standins,
)
from models.runtime.session import SessionConfig, SessionFactory
from models.wrappers.router import load_detector
from models.wrappers.scrfd import SCRFD
from models.wrappers.swappers.inswapper import InSwapper
from models.wrappers.swappers.registry import load_swapper

FACTORY = SessionFactory(SessionConfig())
DET_SHAPE = {"input.1": (1, 3, 640, 640)}

# docs/model-contracts.md: GMACs, parameters (given, or the published file's bytes / 4 for float32
# files), published bytes. inswapper_128_fp16 has inswapper_128's cost in half the bytes.
CONTRACT_COSTS = {
    "det_10g.onnx": (10.0, 16_923_827 / 4, 16_923_827),
    "inswapper_128.onnx": (174.6, 138.6e6, 554_253_681),
    "inswapper_128_fp16.onnx": (174.6, 138.6e6, 277_680_638),
    "gfpgan_1.4.onnx": (197.8, 340_299_087 / 4, 340_299_087),
    "GPEN-BFR-256.onnx": (8.7, 75_715_262 / 4, 75_715_262),
}
# docs/gpu-api-facts.md §4-5: ops TensorRT imports, with their inputs constant where it needs them.
TRT_FRIENDLY_OPS = {
    "Conv", "Gemm", "MatMul", "InstanceNormalization", "LeakyRelu", "Relu", "Resize", "Pad", "Concat",
    "Split", "Reshape", "ReduceMean", "Tanh", "Add", "Mul", "Cast", "MaxPool",
}  # fmt: skip


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    cache = tmp_path_factory.mktemp("standins")
    lines: list[str] = []
    ensure_standins(cache, which=STANDIN_NAMES, log=lines.append)
    return cache, lines


@pytest.fixture(scope="module")
def cache(built: tuple[Path, list[str]]) -> Path:
    return built[0]


@pytest.fixture(scope="module")
def protos(cache: Path) -> Iterator[dict[str, onnx.ModelProto]]:
    loaded = {name: onnx.load(str(cache / name)) for name in CONTRACT_COSTS}
    yield loaded
    loaded.clear()  # 1.3 GB: let it go with the module


@pytest.fixture(scope="module")
def swapper(cache: Path) -> InSwapper:
    return load_swapper(cache / "inswapper_128.onnx", FACTORY)


# ------------------------------------------------------------------------------------------------
# Costs and structure


@pytest.mark.parametrize("filename", list(CONTRACT_COSTS))
def test_costs_match_model_contracts(filename: str, cache: Path, protos: dict[str, onnx.ModelProto]) -> None:
    gmacs, params, nbytes = CONTRACT_COSTS[filename]
    model = protos[filename]
    macs = count_macs(model, DET_SHAPE if filename == "det_10g.onnx" else None)
    assert macs / 1e9 == pytest.approx(gmacs, rel=0.05)
    assert count_params(model) == pytest.approx(params, rel=0.05)
    assert (cache / filename).stat().st_size == pytest.approx(nbytes, rel=0.05)


@pytest.mark.parametrize("filename", list(CONTRACT_COSTS))
def test_graphs_are_tensorrt_friendly(filename: str, protos: dict[str, onnx.ModelProto]) -> None:
    model = protos[filename]
    assert model.producer_name == standins.PRODUCER
    assert all(o.domain in ("", "ai.onnx") and 11 <= o.version <= 17 for o in model.opset_import)
    assert {n.op_type for n in model.graph.node} <= TRT_FRIENDLY_OPS
    inits = {t.name for t in model.graph.initializer}
    for node in model.graph.node:
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        if node.op_type == "Resize":
            assert attrs["mode"] in (b"nearest", b"linear")
            assert set(node.input[1:]) <= inits  # constant roi/scales
        if node.op_type in ("Pad", "Reshape"):
            assert node.input[1] in inits
        if node.op_type == "Split":
            assert "split" in attrs


def test_inswapper_matches_the_published_architecture(protos: dict[str, onnx.ModelProto]) -> None:
    model = protos["inswapper_128.onnx"]
    convs = [n for n in model.graph.node if n.op_type == "Conv"]
    ops = [n.op_type for n in model.graph.node]
    assert len(convs) == 4 + 12 + 4  # encoder, six two-conv residual blocks, decoder
    assert ops.count("InstanceNormalization") == 12 and ops.count("Gemm") == 12
    assert ops.count("Resize") == 2 and ops.count("Pad") == 2 and ops[-3:] == ["Tanh", "Add", "Mul"]
    shapes = {t.name: list(t.dims) for t in model.graph.initializer}
    assert [shapes[c.input[1]] for c in convs[:4]] == [
        [128, 3, 7, 7],
        [256, 128, 3, 3],
        [512, 256, 3, 3],
        [1024, 512, 3, 3],
    ]
    assert [shapes[c.input[1]] for c in convs[-4:]] == [
        [512, 1024, 3, 3],
        [256, 512, 3, 3],
        [128, 256, 3, 3],
        [3, 128, 7, 7],
    ]
    # 66% of the cost sits in the twelve 32x32 bottleneck convs (docs/model-contracts.md).
    assert 12 * 1024 * 1024 * 9 * 32 * 32 / count_macs(model) == pytest.approx(0.66, abs=0.01)


def test_fp16_inswapper_stores_float16_behind_float32_io(protos: dict[str, onnx.ModelProto]) -> None:
    model = protos["inswapper_128_fp16.onnx"]
    io = [*model.graph.input, *model.graph.output]
    assert {v.type.tensor_type.elem_type for v in io} == {TensorProto.FLOAT}
    weights = [t for t in model.graph.initializer if len(t.dims) == 4]
    assert weights and {t.data_type for t in weights} == {TensorProto.FLOAT16}
    assert model.graph.node[0].op_type == "Cast" and model.graph.node[-1].op_type == "Cast"


def test_count_macs_counts_conv_gemm_and_matmul() -> None:
    w = np.zeros((8, 2, 3, 3), dtype=np.float32)  # grouped conv: 4 -> 8 channels, 2 groups
    g = np.zeros((200, 7), dtype=np.float32)
    m = np.zeros((7, 3), dtype=np.float32)
    conv3: dict[str, Any] = {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "group": 2}
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], **conv3),  # [1, 8, 5, 5]
        helper.make_node("Flatten", ["c"], ["f"]),  # [1, 200]
        helper.make_node("Transpose", ["f"], ["ft"]),  # [200, 1]
        helper.make_node("Gemm", ["ft", "g"], ["y"], transA=1),  # [1, 200] @ [200, 7]
        helper.make_node("MatMul", ["y", "m"], ["z"]),  # [1, 7] @ [7, 3]
    ]
    graph = helper.make_graph(
        nodes,
        "t",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 10, 10])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)],
        initializer=[onnx.numpy_helper.from_array(a, n) for a, n in ((w, "w"), (g, "g"), (m, "m"))],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    conv = (8 * 5 * 5) * (2 * 3 * 3)  # per output element: C_in / groups * kh * kw
    assert count_macs(model) == conv + 7 * 200 + 3 * 7
    assert count_params(model) == w.size + g.size + m.size


def test_count_macs_needs_shapes_for_dynamic_inputs(protos: dict[str, onnx.ModelProto]) -> None:
    with pytest.raises(ValueError, match="input_shapes"):
        count_macs(protos["det_10g.onnx"])
    at_320 = count_macs(protos["det_10g.onnx"], {"input.1": (1, 3, 320, 320)})
    assert at_320 == pytest.approx(count_macs(protos["det_10g.onnx"], DET_SHAPE) / 4, rel=0.01)


# ------------------------------------------------------------------------------------------------
# Through the real wrappers


def test_inswapper_standin_loads_through_the_router(
    swapper: InSwapper, protos: dict[str, onnx.ModelProto]
) -> None:
    sess = swapper.session
    assert [(i.name, i.shape, i.type) for i in sess.get_inputs()] == [
        ("target", [1, 3, 128, 128], "tensor(float)"),
        ("source", [1, 512], "tensor(float)"),
    ]
    assert [(o.name, o.shape) for o in sess.get_outputs()] == [("output", [1, 3, 128, 128])]
    last = protos["inswapper_128.onnx"].graph.initializer[-1]
    assert last.name == "buff2fs" and list(last.dims) == [512, 512]
    np.testing.assert_array_equal(swapper.emap, onnx.numpy_helper.to_array(last))


def test_fp16_inswapper_standin_loads_through_the_router(cache: Path) -> None:
    sw = load_swapper(cache / "inswapper_128_fp16.onnx", FACTORY)
    assert sw.target_dtype is np.float32 and sw.source_dtype is np.float32  # fed float32, like the apps
    assert sw.emap.shape == (512, 512) and np.all(np.isfinite(sw.emap))


def test_one_inswapper_standin_run_is_finite_in_unit_range(swapper: InSwapper) -> None:
    rng = np.random.default_rng(0)
    crop = rng.integers(0, 256, (1, 3, 128, 128)).astype(np.float32) / 255.0
    latent = swapper.latent(rng.standard_normal(512) / np.sqrt(512))
    (out,) = swapper.session.run(["output"], {"target": crop, "source": latent})  # the one full run
    assert out.shape == (1, 3, 128, 128) and out.dtype == np.float32
    assert np.all(np.isfinite(out)) and out.min() >= 0.0 and out.max() <= 1.0
    assert out.std() > 0.01  # a picture, not a constant: the weights did not collapse


def test_scrfd_standin_finds_one_face_in_the_middle_of_a_720p_frame(cache: Path) -> None:
    det = load_detector(cache / "det_10g.onnx", FACTORY)
    frame = np.random.default_rng(0).integers(0, 256, (720, 1280, 3), dtype=np.uint8)
    faces = det.detect(frame)
    assert len(faces) == 1
    box, kps = face_in_frame(DEFAULT_FACE, 1280, 720)
    np.testing.assert_allclose(faces[0].box, box, atol=0.01)
    np.testing.assert_allclose(faces[0].kps, kps, atol=0.01)
    assert faces[0].score == pytest.approx(DEFAULT_FACE.score, abs=1e-5)
    assert ((box[0] + box[2]) / 2, (box[1] + box[3]) / 2) == (640.0, 360.0)


def test_scrfd_standin_backbone_runs_and_barely_moves_the_outputs(cache: Path) -> None:
    sess = FACTORY.create(cache / "det_10g.onnx")
    dark = np.full((1, 3, 640, 640), -1.0, dtype=np.float32)
    bright = np.full((1, 3, 640, 640), 1.0, dtype=np.float32)
    a, b = sess.run(None, {"input.1": dark}), sess.run(None, {"input.1": bright})
    expected = scrfd_constant_outputs([DEFAULT_FACE])
    assert [o.shape for o in a] == [(12800, 1), (3200, 1), (800, 1), (12800, 4), (3200, 4), (800, 4),
                                    (12800, 10), (3200, 10), (800, 10)]  # fmt: skip
    # The outputs depend on the picture (ONNX Runtime could not fold the backbone away) ...
    assert any(not np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    # ... by at most 1e-6 around the double's tensors.
    for got, want in zip([*a, *b], expected * 2, strict=True):
        np.testing.assert_allclose(got, want, rtol=0, atol=2e-6)


def test_restorer_standins_load_and_gpen_runs_in_range(cache: Path) -> None:
    for filename, size in (("gfpgan_1.4.onnx", 512), ("GPEN-BFR-256.onnx", 256)):
        sess = FACTORY.create(cache / filename)
        assert [(i.name, i.shape) for i in sess.get_inputs()] == [("input", [1, 3, size, size])]
        assert [(o.name, o.shape) for o in sess.get_outputs()] == [("output", [1, 3, size, size])]
    x = np.random.default_rng(0).uniform(-1, 1, (1, 3, 256, 256)).astype(np.float32)
    (out,) = sess.run(None, {"input": x})  # GPEN: 0.2 s
    assert np.all(np.isfinite(out)) and out.min() >= -1.0 and out.max() <= 1.0 and out.std() > 0.01


# ------------------------------------------------------------------------------------------------
# The cache


def _mtimes(d: Path) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in d.iterdir()}


def test_ensure_standins_builds_once_with_progress_lines(built: tuple[Path, list[str]]) -> None:
    cache, lines = built
    assert lines[0] == "building det_10g stand-in (17 MB) ..."
    assert "building inswapper_128 stand-in (554 MB) ..." in lines
    assert sum(line.startswith("building ") for line in lines) == len(STANDIN_NAMES)
    manifest = json.loads((cache / MANIFEST_NAME).read_text())
    assert manifest["version"] == STANDINS_VERSION
    for filename, entry in manifest["files"].items():
        assert (cache / filename).stat().st_size == entry["bytes"]
    # real_esrgan_x2's cost is held by tests/models/fakes/test_esrgan_standin.py.
    assert sorted(manifest["files"]) == sorted([*CONTRACT_COSTS, "w600k_r50.onnx", "real_esrgan_x2.onnx"])
    assert not [p for p in cache.iterdir() if p.name.endswith(".partial")]


def test_ensure_standins_reuses_what_it_built(built: tuple[Path, list[str]]) -> None:
    cache = built[0]
    before = _mtimes(cache)
    lines: list[str] = []
    assert ensure_standins(cache, which=STANDIN_NAMES, log=lines.append) == cache
    assert not [line for line in lines if line.startswith("building")]
    assert _mtimes(cache) == before


CHEAP = ("det_10g", "w600k_r50")


def _built(lines: list[str]) -> list[str]:
    return [line.split()[1] for line in lines if line.startswith("building ")]


def test_ensure_standins_rebuilds_on_version_change_or_damage(tmp_path: Path) -> None:
    lines: list[str] = []
    ensure_standins(tmp_path, which=CHEAP, log=lines.append)
    assert _built(lines) == list(CHEAP)

    manifest = tmp_path / MANIFEST_NAME
    data = json.loads(manifest.read_text())
    data["version"] = STANDINS_VERSION - 1
    manifest.write_text(json.dumps(data))
    lines.clear()
    ensure_standins(tmp_path, which=CHEAP, log=lines.append)
    assert _built(lines) == list(CHEAP)
    assert json.loads(manifest.read_text())["version"] == STANDINS_VERSION

    (tmp_path / "w600k_r50.onnx").unlink()
    with (tmp_path / "det_10g.onnx").open("ab") as f:  # size no longer what the manifest says
        f.write(b"\0")
    lines.clear()
    ensure_standins(tmp_path, which=CHEAP, log=lines.append)
    assert _built(lines) == list(CHEAP)

    lines.clear()
    ensure_standins(tmp_path, which=("det_10g",), log=lines.append)
    assert _built(lines) == []


def test_ensure_standins_refuses_to_overwrite_a_real_model(tmp_path: Path) -> None:
    real = helper.make_model(
        helper.make_graph([], "g", [], []),
        producer_name="pytorch",
        opset_imports=[helper.make_opsetid("", 11)],
    )
    onnx.save(real, str(tmp_path / "det_10g.onnx"))
    before = (tmp_path / "det_10g.onnx").read_bytes()
    with pytest.raises(FileExistsError, match="not a FaceCast stand-in"):
        ensure_standins(tmp_path, which=("det_10g",), log=lambda _: None)
    assert (tmp_path / "det_10g.onnx").read_bytes() == before


def test_interrupted_build_leaves_nothing_half_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def save_half(model: onnx.ModelProto, path: Path) -> None:
        path.write_bytes(model.SerializeToString()[:1000])
        raise KeyboardInterrupt

    monkeypatch.setattr(standins, "_save", save_half)
    with pytest.raises(KeyboardInterrupt):
        ensure_standins(tmp_path, which=CHEAP, log=lambda _: None)
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    monkeypatch.undo()
    lines: list[str] = []
    ensure_standins(tmp_path, which=CHEAP, log=lines.append)
    assert _built(lines) == list(CHEAP)


def test_ensure_standins_rejects_unknown_names(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="known: det_10g"):
        ensure_standins(tmp_path, which=("inswapper_256",), log=lambda _: None)


def test_the_double_finding_its_face_where_given_emits_the_stand_ins_tensors() -> None:
    det = SCRFD(FACTORY.create(build_scrfd([DEFAULT_FACE]).SerializeToString(), "d"))
    blob, _ = det.preprocess(frame_with_faces([DEFAULT_FACE], 640, 640))
    got = det.session.run(det.output_names, {det.input_name: blob})
    for g, want in zip(got, scrfd_constant_outputs([DEFAULT_FACE]), strict=True):
        np.testing.assert_allclose(g, want, atol=0.02)


def test_the_inswapper_standins_batch_axis_holds_one_batch_equals_single_calls(cache: Path) -> None:
    """inswapper's architecture (AdaIN style vectors reshaped per sample, instance norms, reflect
    pads) given a batch axis: one batch of 2 equals 2 single calls (docs/model-contracts.md)."""
    from models.runtime.batch_axis import has_fixed_batch, prove_batching, with_dynamic_batch

    path = cache / "inswapper_128.onnx"
    model = onnx.load(str(path))
    assert has_fixed_batch(model)
    original = FACTORY.create(path)
    batched = FACTORY.create(with_dynamic_batch(model).SerializeToString())
    assert prove_batching(original, batched, n=2) == (True, "")
