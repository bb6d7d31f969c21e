"""`bench --swappers` and `bench --service` in miniature: every family measured at batch 1 and 4
through its shared service (its batch axis held), and the service bench's figures consistent with
what it ran. Figures of speed belong to the benches, not to these tests."""

from __future__ import annotations

import io
import json

import pytest

import main
from models.files.catalogue import names_of_role
from models.wrappers.swappers.registry import FAMILIES, family_of
from realtime.tools import bench_service
from realtime.tools.bench_swappers import ONE_PER_FAMILY


def bench(*args: str) -> dict:  # type: ignore[type-arg]
    out = io.StringIO()
    assert main.main(["bench", "--json", *args], out=out) == 0
    return json.loads(out.getvalue())  # type: ignore[no-any-return]


def test_every_family_is_measured_at_batch_one_and_four_with_its_batch_axis() -> None:
    assert {family_of(n).facts.family for n in ONE_PER_FAMILY} == set(FAMILIES)
    assert set(ONE_PER_FAMILY) <= set(names_of_role("swapper"))
    data = bench("--swappers", "--frames", "2")
    rows = {r["model"]: r for r in data["swappers"]}
    assert set(rows) == set(ONE_PER_FAMILY)
    for row in rows.values():
        assert row["ms_per_face_batch1"] > 0 and row["ms_per_face_batch4"] > 0
        assert row["max_batch"] == 4  # every double's batch axis was given and proven
    assert rows["simswap_unofficial_512"]["crop"] == 512 and rows["inswapper_128"]["crop"] == 128
    assert data["peak_rss_mb"] > 0


def test_the_service_bench_runs_each_stream_count_shared_and_not() -> None:
    data = bench("--service", "--streams", "1,2", "--duration", "1")
    runs = [(r["streams"], r["mode"]) for r in data["runs"]]
    assert runs == [(1, "shared"), (1, "own"), (2, "shared"), (2, "own")]
    for r in data["runs"]:
        assert r["frames_per_s"] > 0 and r["calls_per_s"] > 0
        assert r["swap_ms_p99"] >= r["swap_ms_p50"] > 0
        if r["mode"] == "own":
            assert r["faces_per_call"] == 1.0 and r["added_ms_p50"] == 0.0
        else:
            assert 1.0 <= r["faces_per_call"] <= r["streams"]  # one face per stream and frame


def test_the_service_bench_without_a_duration_runs_its_default_and_measures(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(bench_service, "DEFAULT_SECONDS", 1.0)  # (10 s by default)
    data = bench("--service", "--streams", "1")
    assert [r["frames_per_s"] > 0 and r["calls_per_s"] > 0 for r in data["runs"]] == [True, True]
