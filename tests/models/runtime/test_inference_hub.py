"""The process's inference hub: one service per model, shared; a fixed-batch file batched once
proven; device tensors batched on the device (Concat and Split graphs) with the same outputs as
the host path, each result a tensor of its own."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from models.fakes.swapper_doubles import build_swapper_double
from models.runtime.batch_window import BatchPolicy
from models.runtime.inference_hub import VERDICTS_FILE, InferenceHub
from models.runtime.session import SessionConfig, SessionFactory
from tests.models.runtime.test_batch_axis import hidden_batch_model


@pytest.fixture
def factory(tmp_path: Path) -> SessionFactory:
    return SessionFactory(SessionConfig(provider="cpu", cache_dir=tmp_path / "cache"))


@pytest.fixture
def model(tmp_path: Path) -> Path:
    path = tmp_path / "hyperswap_1a_256.onnx"
    onnx.save(build_swapper_double("hyperswap_1a_256.onnx"), str(path))
    return path


def feeds(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "source": rng.standard_normal((1, 512)).astype(np.float32) / 22.6,
        "target": rng.uniform(-1, 1, (1, 3, 256, 256)).astype(np.float32),
    }


def test_one_service_per_model_shared_and_batched_once_proven(factory: SessionFactory, model: Path) -> None:
    hub = InferenceHub(BatchPolicy(max_batch=4))
    first = hub.service(model, factory, outputs=["output"])
    again = hub.service(model, factory, outputs=["output"])
    assert again is first and len(hub) == 1
    assert first.max_batch == 4 and first.session.get_inputs()[0].shape[0] == "N"
    assert (factory.config.cache_dir / VERDICTS_FILE).is_file()  # type: ignore[operator]
    device = hub.service(model, factory, outputs=["output"], kind="device")
    assert device is not first and len(hub) == 2


def test_a_model_whose_batch_cannot_be_proven_runs_one_request_a_call(
    factory: SessionFactory, tmp_path: Path
) -> None:
    path = tmp_path / "hidden.onnx"
    onnx.save(hidden_batch_model(), str(path))
    shared = InferenceHub().service(path, factory, outputs=["y"])
    assert shared.max_batch == 1 and shared.service.max_batch == 1 and "batch of 1" in shared.note


def test_device_tensors_batched_on_the_device_give_the_host_paths_outputs(
    factory: SessionFactory, model: Path
) -> None:
    hub = InferenceHub(BatchPolicy(max_batch=8, max_delay_us=0))
    host = hub.service(model, factory, outputs=["output", "mask"])
    device = hub.service(model, factory, outputs=["output", "mask"], kind="device")
    clients = [device.service.client(f"s{k}") for k in range(3)]
    tickets = [
        c.submit({name: ort.OrtValue.ortvalue_from_numpy(v) for name, v in feeds(k).items()})
        for k, c in enumerate(clients)
    ]
    results = [t.result() for t in tickets]
    assert max(t.batch_size for t in tickets) == 3  # one call for the three
    for k, result in enumerate(results):
        expected = host.service.client("h").run(feeds(k))
        for got, want in zip(result, expected, strict=True):
            assert isinstance(got, ort.OrtValue)  # a tensor of its own, on the device
            np.testing.assert_allclose(got.numpy(), want, atol=1e-5)
    before = results[0][0].numpy().copy()
    clients[0].run({name: ort.OrtValue.ortvalue_from_numpy(v) for name, v in feeds(7).items()})
    np.testing.assert_array_equal(results[0][0].numpy(), before)  # a later call does not overwrite it
