"""A queue worker keeps the models of the last few settings it ran, not of every one it saw."""

from __future__ import annotations

import threading

import pytest

from realtime.jobs.model_cache import LoadedModels


def test_models_are_loaded_once_per_settings_and_the_oldest_are_dropped() -> None:
    loads: list[str] = []
    cache: LoadedModels[str] = LoadedModels(max_settings=2)

    def load(key: str) -> str:
        loads.append(key)
        return f"models for {key}"

    for key in ["a", "a", "b", "a", "c", "a", "b"]:
        assert cache.get(key, lambda k=key: load(k)) == f"models for {key}"  # type: ignore[misc]
    # "b" was the least recently used when "c" came, and came back later: loaded again.
    assert loads == ["a", "b", "c", "b"]
    assert len(cache) == 2 and cache.keys() == ["a", "b"]


def test_two_chunks_of_one_job_at_once_load_its_models_once() -> None:
    cache: LoadedModels[object] = LoadedModels(max_settings=1)
    loads = []
    started = threading.Barrier(4)

    def load() -> object:
        loads.append(1)
        return object()

    def chunk() -> None:
        started.wait()
        cache.get("job", load)

    threads = [threading.Thread(target=chunk) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert loads == [1]


def test_a_cache_must_keep_something() -> None:
    with pytest.raises(ValueError):
        LoadedModels(max_settings=0)
