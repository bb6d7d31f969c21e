"""Sessions shared across streams: each model opened once, whoever asks first or at once."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import onnx
import pytest

from models.errors import ModelMissingError
from models.fakes.pixel_doubles import build_arcface
from models.runtime.session import SessionConfig, SessionFactory
from models.runtime.session_pool import SessionPool


@pytest.fixture
def model(tmp_path: Path) -> Path:
    path = tmp_path / "w600k_r50.onnx"
    onnx.save(build_arcface(), str(path))
    return path


def test_factories_sharing_a_pool_open_each_model_once(model: Path) -> None:
    pool = SessionPool()
    a = SessionFactory(SessionConfig(provider="cpu"), pool=pool)
    b = SessionFactory(SessionConfig(provider="cpu"), pool=pool)
    first, second = a.create(model), b.create(model)
    assert first is second and len(pool) == 1 and pool.opened == 1 and pool.reused == 1
    other = SessionFactory(SessionConfig(provider="cpu", intra_op_threads=1), pool=pool).create(model)
    assert other is not first and len(pool) == 2  # other options: its own session
    assert SessionFactory(SessionConfig(provider="cpu")).create(model) is not first  # no pool: its own


def test_two_streams_asking_at_once_get_one_session() -> None:
    pool = SessionPool()
    opened: list[object] = []

    def slow_open() -> object:
        time.sleep(0.2)
        opened.append(object())
        return opened[-1]

    got: list[object] = []
    threads = [threading.Thread(target=lambda: got.append(pool.get("k", slow_open))) for _ in range(4)]  # type: ignore[arg-type,return-value]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    assert len(opened) == 1 and got == opened * 4


def test_a_session_that_fails_to_open_is_tried_again() -> None:
    pool = SessionPool()

    def broken() -> object:
        raise ModelMissingError("not there yet")

    with pytest.raises(ModelMissingError):
        pool.get("k", broken)  # type: ignore[arg-type]
    session = object()
    assert pool.get("k", lambda: session) is session and len(pool) == 1  # type: ignore[arg-type,return-value]
