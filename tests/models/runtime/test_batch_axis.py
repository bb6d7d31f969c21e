"""A fixed-batch model given its batch axis: batch-N equals N x batch-1 for every swapper and
converter double; a graph that hides its batch elsewhere is caught by the proof and keeps its
batch of 1; the verdict is remembered per file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import models.runtime.batch_axis as batch_axis
from models.fakes.doubles import write_all
from models.fakes.onnx_model import finish_model
from models.runtime.batch_axis import (
    has_fixed_batch,
    input_specs,
    open_batched,
    prove_batching,
    with_dynamic_batch,
)
from models.runtime.session import SessionConfig, SessionFactory

FACTORY = SessionFactory(SessionConfig(provider="cpu"))
BATCHED_FILES = (
    "inswapper_128.onnx",
    "inswapper_128_fp16.onnx",
    "reswapper_256.onnx",
    "hyperswap_1a_256.onnx",
    "simswap_256.onnx",
    "ghost_1_256.onnx",
    "hififace_unofficial_256.onnx",
    "blendswap_256.onnx",
    "uniface_256.onnx",
    "crossface_ghost.onnx",
    "GPEN-BFR-256.onnx",
)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return write_all(tmp_path_factory.mktemp("batch_doubles"))


@pytest.mark.parametrize("name", BATCHED_FILES)
def test_one_batch_of_four_equals_four_single_calls(name: str, files: dict[str, Path]) -> None:
    model = onnx.load(str(files[name]))
    assert has_fixed_batch(model)  # published (and doubled) with a batch of 1
    original = FACTORY.create(files[name])
    batched = FACTORY.create(with_dynamic_batch(model).SerializeToString())
    rng = np.random.default_rng(9)
    feeds = {s.name: rng.uniform(0.0, 1.0, (4, *s.shape)).astype(s.dtype) for s in input_specs(original)}
    together = batched.run(None, feeds)
    for k in range(4):
        one = original.run(None, {n: v[k : k + 1] for n, v in feeds.items()})
        for single, batch in zip(one, together, strict=True):
            np.testing.assert_allclose(batch[k : k + 1], single, rtol=1e-5, atol=1e-5)
    assert prove_batching(original, batched) == (True, "")


def hidden_batch_model() -> onnx.ModelProto:
    """y = x + sum(x) over ALL axes: per sample at batch 1, but a batch would mix its samples."""
    graph = helper.make_graph(
        [
            helper.make_node("ReduceSum", ["x"], ["total"], axes=[0, 1], keepdims=1),
            helper.make_node("Add", ["x", "total"], ["y"]),
        ],
        "hidden",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
    )
    return finish_model(graph)


def test_a_graph_hiding_its_batch_keeps_a_batch_of_one_and_the_verdict_is_remembered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "hidden.onnx"
    onnx.save(hidden_batch_model(), str(path))
    verdicts = tmp_path / "verdicts.json"
    opened = open_batched(path, lambda m: FACTORY.create(m, label="hidden"), max_batch=8, verdicts=verdicts)
    assert opened.max_batch == 1 and "batch of 1" in opened.note
    assert opened.session.get_inputs()[0].shape == [1, 4]  # the published graph, untouched
    calls: list[int] = []
    real = batch_axis.prove_batching
    monkeypatch.setattr(batch_axis, "prove_batching", lambda *a, **k: calls.append(1) or real(*a, **k))
    again = open_batched(path, lambda m: FACTORY.create(m, label="hidden"), max_batch=8, verdicts=verdicts)
    assert again.max_batch == 1 and calls == []  # proven once per file, not at every start


def test_a_proven_rewrite_is_kept_and_a_dynamic_model_is_left_as_it_is(
    files: dict[str, Path], tmp_path: Path
) -> None:
    opened = open_batched(files["hyperswap_1a_256.onnx"], lambda m: FACTORY.create(m), 8, tmp_path / "v.json")
    assert opened.max_batch == 8 and opened.session.get_inputs()[0].shape[0] == "N"
    bisenet = open_batched(files["bisenet_resnet_34.onnx"], lambda m: FACTORY.create(m), 8)
    assert bisenet.max_batch == 8 and bisenet.session.get_inputs()[0].shape[0] == "N"  # published dynamic
    single = open_batched(files["hyperswap_1a_256.onnx"], lambda m: FACTORY.create(m), 1)
    assert single.max_batch == 1 and single.session.get_inputs()[0].shape[0] == 1


def test_tensorrt_gets_one_profile_for_every_batch_size_of_a_batched_model(files: dict[str, Path]) -> None:
    """TensorRT builds an engine per input shape it meets unless told the range: a batched swapper
    asks for batches 1..max in one explicit profile (the option strings of docs/gpu-api-facts.md)."""
    from models.runtime.batch_axis import profile_of

    batched = with_dynamic_batch(onnx.load(str(files["inswapper_128.onnx"])))
    profile = profile_of(batched, 8)
    trt = SessionFactory(SessionConfig(provider="tensorrt")).providers(batch_profile=profile)[0]
    assert trt[0] == "TensorrtExecutionProvider"
    options = trt[1]  # type: ignore[index]
    assert options["trt_profile_min_shapes"] == "target:1x3x128x128,source:1x512"
    assert options["trt_profile_opt_shapes"] == "target:8x3x128x128,source:8x512"
    assert options["trt_profile_max_shapes"] == "target:8x3x128x128,source:8x512"
    assert (
        "trt_profile_min_shapes" not in SessionFactory(SessionConfig(provider="tensorrt")).providers()[0][1]
    )  # type: ignore[index]
