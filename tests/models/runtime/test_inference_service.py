"""The shared inference service: a lone stream runs at once, streams in phase meet in one call,
every caller gets its own rows back, a stream with many faces cannot starve one with few, a
stalled, closed or vanished stream never holds the others, and a failing call fails only its
callers. Against a real ONNX model (the HyperSwap double with its batch axis), with real threads."""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from models.fakes.swapper_doubles import build_swapper_double
from models.runtime.batch_axis import with_dynamic_batch
from models.runtime.batch_window import BatchPolicy, BatchWindow, WindowState
from models.runtime.inference_service import (
    HostBatchRunner,
    InferenceService,
    ServiceClosedError,
)
from models.runtime.session import SessionConfig, SessionFactory

FACTORY = SessionFactory(SessionConfig(provider="cpu", intra_op_threads=1))


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Any:
    model = with_dynamic_batch(build_swapper_double("hyperswap_1a_256.onnx"))
    path = Path(tmp_path_factory.mktemp("service")) / "batched.onnx"
    onnx.save(model, str(path))
    return FACTORY.create(path)


def request(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "target": rng.uniform(-1, 1, (1, 3, 256, 256)).astype(np.float32),
        "source": (rng.standard_normal((1, 512)) / 22.6).astype(np.float32),
    }


def service_for(session: Any, policy: BatchPolicy, instances: int = 1) -> InferenceService:
    def run(feeds: Any) -> Sequence[Any]:
        return session.run(["output"], dict(feeds))

    return InferenceService([HostBatchRunner(run) for _ in range(instances)], policy, "double")


def direct(session: Any, seed: int) -> np.ndarray:
    return np.asarray(session.run(["output"], request(seed))[0])


# -- the window -----------------------------------------------------------------------------------


@given(
    queued=st.integers(0, 20),
    streams_in=st.integers(0, 8),
    extra_active=st.integers(0, 8),
    waited_us=st.floats(0, 5000),
    max_batch=st.integers(1, 16),
)
def test_the_window_closes_at_max_batch_at_the_deadline_or_when_every_active_stream_is_in(
    queued: int, streams_in: int, extra_active: int, waited_us: float, max_batch: int
) -> None:
    streams_in = min(streams_in, queued)
    window = BatchWindow(BatchPolicy(max_batch=max_batch, max_delay_us=1000))
    state = WindowState(queued, streams_in, streams_in + extra_active, waited_us)
    expected = queued > 0 and (queued >= max_batch or extra_active == 0 or waited_us >= 1000)
    assert window.ready(state) == expected
    if not expected and queued > 0:
        assert window.wait_s(state) == pytest.approx((1000 - waited_us) / 1e6)


# -- the service ----------------------------------------------------------------------------------


def test_a_lone_stream_runs_each_request_at_once_and_gets_the_models_own_output(session: Any) -> None:
    # A 60 s window: a lone stream that waited for company would take minutes here.
    service = service_for(session, BatchPolicy(max_batch=8, max_delay_us=60_000_000))
    client = service.client("alone")
    outputs: dict[int, np.ndarray] = {}

    def calls() -> None:
        for seed in range(3):
            ticket = client.submit(request(seed))
            outputs[seed] = ticket.result()[0]
            assert ticket.batch_size == 1

    worker = threading.Thread(target=calls)
    worker.start()
    worker.join(30)
    assert sorted(outputs) == [0, 1, 2]
    for seed, out in outputs.items():
        np.testing.assert_allclose(out, direct(session, seed), atol=1e-6)
    assert service.stats().per_call == 1.0


def in_phase(streams: int, each: Callable[[int], None]) -> None:
    barrier = threading.Barrier(streams)
    errors: list[BaseException] = []

    def body(k: int) -> None:
        try:
            barrier.wait()
            each(k)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=body, args=(k,)) for k in range(streams)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors


def test_streams_in_phase_meet_in_one_call_and_each_gets_its_own_rows(session: Any) -> None:
    # A generous window: on a busy machine the four threads still meet (the figure for a real
    # window is the bench's, not a test's).
    service = service_for(session, BatchPolicy(max_batch=8, max_delay_us=2_000_000, active_s=30.0))
    clients = [service.client(f"stream-{k}") for k in range(4)]
    for k, client in enumerate(clients):
        client.run(request(100 + k))  # each stream is heard from: active
    service.reset_stats()
    got: dict[int, np.ndarray] = {}

    def each(k: int) -> None:
        for frame in range(3):
            got[k * 10 + frame] = clients[k].run(request(k * 10 + frame))[0]

    in_phase(4, each)
    stats = service.stats()
    assert stats.requests == 12 and stats.per_call >= 3.0, stats
    for key, out in got.items():
        np.testing.assert_allclose(out, direct(session, key), atol=1e-5)  # scattered to the right caller


def test_a_stream_with_many_faces_cannot_starve_a_stream_with_one(session: Any) -> None:
    service = service_for(session, BatchPolicy(max_batch=4, max_delay_us=0))
    crowd, single = service.client("crowd"), service.client("single")
    crowded = [crowd.submit(request(k)) for k in range(12)]
    alone = single.submit(request(99))
    crowded[0].result()  # leads the first batch: four requests, taken in turns
    assert alone.done and alone.batch_size == 4
    assert sum(t.done for t in crowded) == 3
    for t in crowded:
        t.result()


def test_a_stalled_stream_holds_the_others_no_longer_than_the_window(session: Any) -> None:
    service = service_for(session, BatchPolicy(max_batch=8, max_delay_us=20_000, active_s=30.0))
    stalled, working = service.client("stalled"), service.client("working")
    stalled.run(request(1))  # heard from, then silent (a frozen camera)
    for k in range(3):
        ticket = working.submit(request(k))
        np.testing.assert_allclose(ticket.result()[0], direct(session, k), atol=1e-5)
        assert ticket.batch_size == 1  # served once the window closed, alone


def test_a_vanished_or_closed_stream_is_not_waited_for(session: Any) -> None:
    # A 60 s window: were the gone stream still expected, the request would wait a minute.
    service = service_for(session, BatchPolicy(max_batch=8, max_delay_us=60_000_000, active_s=300.0))
    gone = service.client("gone")
    gone.run(request(1))
    del gone
    gc.collect()
    closed = service.client("closed")
    closed.run(request(2))
    closed.close()
    working = service.client("working")
    done = threading.Event()
    worker = threading.Thread(target=lambda: (working.run(request(3)), done.set()))
    worker.start()
    worker.join(20)
    assert done.is_set()


def test_a_closed_stream_loses_only_its_own_queued_requests(session: Any) -> None:
    service = service_for(session, BatchPolicy(max_batch=8, max_delay_us=0))
    leaving, staying = service.client("leaving"), service.client("staying")
    dropped = leaving.submit(request(1))
    leaving.close()
    with pytest.raises(ServiceClosedError):
        dropped.result()
    with pytest.raises(ServiceClosedError):
        leaving.submit(request(2))
    np.testing.assert_allclose(staying.run(request(3))[0], direct(session, 3), atol=1e-5)


def test_a_failing_call_fails_its_own_callers_and_the_service_goes_on(session: Any) -> None:
    calls: list[int] = []

    def flaky(feeds: Any) -> Sequence[Any]:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("device lost")
        return session.run(["output"], dict(feeds))

    service = InferenceService([HostBatchRunner(flaky)], BatchPolicy(max_batch=8, max_delay_us=0), "flaky")
    client = service.client("s")
    with pytest.raises(RuntimeError, match="device lost"):
        client.run(request(1))
    np.testing.assert_allclose(client.run(request(2))[0], direct(session, 2), atol=1e-5)


def test_two_instances_let_one_batch_form_while_another_runs(session: Any) -> None:
    running = threading.Event()
    release = threading.Event()
    order: list[str] = []

    def slow_first(feeds: Any) -> Sequence[Any]:
        if not running.is_set():
            running.set()
            order.append("first starts")
            release.wait(10)
            order.append("first ends")
        else:
            order.append("second runs")
        return session.run(["output"], dict(feeds))

    service = InferenceService(
        [HostBatchRunner(slow_first), HostBatchRunner(slow_first)], BatchPolicy(max_delay_us=0), "two"
    )
    a, b = service.client("a"), service.client("b")
    first = threading.Thread(target=lambda: a.run(request(1)))
    first.start()
    assert running.wait(10)
    b.run(request(2))  # runs on the other instance while the first call is still running
    release.set()
    first.join(10)
    assert order == ["first starts", "second runs", "first ends"]


def test_a_frames_faces_held_while_submitted_go_to_one_call_together(session: Any) -> None:
    service = service_for(session, BatchPolicy(max_batch=8, max_delay_us=0))
    frame, other = service.client("frame"), service.client("other")
    with frame.holding():
        first = frame.submit(request(1))
        alone = other.submit(request(2))
        alone.result()  # runs now, without the held faces
        assert alone.batch_size == 1 and not first.done
        second = frame.submit(request(3))
    first.result()
    assert first.batch_size == second.batch_size == 2  # the frame's two faces, one call
    np.testing.assert_allclose(second.result()[0], direct(session, 3), atol=1e-5)
