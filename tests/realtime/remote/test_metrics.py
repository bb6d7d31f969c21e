"""GET /metrics: Prometheus text; a running stream's rates, latency and drops; GPU memory with and
without nvidia-smi."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

import pytest
import requests

from realtime.remote.gpu import METRIC
from realtime.remote.runner import ServerThread
from tests.realtime.remote.conftest import TOKEN
from tests.realtime.remote.test_faults import wait_for
from tests.realtime.remote.test_stream_control import swapping_call

pytestmark = pytest.mark.timeout(60)

# The text exposition format: comments, then `name{label="value",...} number`.
NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
SAMPLE = re.compile(rf'^({NAME})(\{{(?:[a-zA-Z_]\w*="[^"]*",?)*\}})? ([-+]?[0-9.eE+-]+|NaN|[+-]Inf)$')
COMMENT = re.compile(rf"^# (HELP|TYPE) ({NAME}) (.+)$")


def _parse(text: str) -> tuple[dict[str, list[float]], dict[str, str], dict[str, str]]:
    """Samples by name, HELP and TYPE by name; any line outside the format fails the test."""
    samples: dict[str, list[float]] = {}
    helps: dict[str, str] = {}
    types: dict[str, str] = {}
    assert text.endswith("\n")
    for line in text.splitlines():
        comment = COMMENT.match(line)
        if comment:
            (helps if comment[1] == "HELP" else types)[comment[2]] = comment[3]
            continue
        sample = SAMPLE.match(line)
        assert sample, f"not Prometheus text: {line!r}"
        samples.setdefault(sample[1], []).append(float(sample[3]))
    return samples, helps, types


def _metrics(server: ServerThread) -> str:
    r = requests.get(f"{server.url}/metrics", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10)
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/plain")
    return r.text


def test_gpu_memory_is_zero_with_a_help_line_without_a_gpu(
    start_server: Callable[..., ServerThread], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))  # no nvidia-smi to find
    samples, helps, types = _parse(_metrics(start_server()))
    assert samples[METRIC] == [0.0]
    assert "no GPU" in helps[METRIC] and types[METRIC] == "gauge"
    assert samples["facecast_streams"] == [0.0]


def test_gpu_memory_per_gpu_from_nvidia_smi(
    start_server: Callable[..., ServerThread], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "nvidia-smi"
    fake.write_text("#!/bin/sh\nprintf '0, 1024\\n1, 3\\n'\n", encoding="utf-8")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    text = _metrics(start_server())
    samples, helps, types = _parse(text)
    assert samples[METRIC] == [1024 * 1024 * 1024.0, 3 * 1024 * 1024.0]  # MiB -> bytes
    assert f'{METRIC}{{gpu="1"}} {3 * 1024 * 1024}' in text.splitlines()
    assert "no GPU" not in helps[METRIC] and types[METRIC] == "gauge"


def test_a_running_stream_reports_its_rates_latency_and_where_it_dropped_frames(
    start_server: Callable[..., ServerThread], photo: Path, tmp_path: Path
) -> None:
    server = start_server()
    client, _, _, session = swapping_call(server, photo, tmp_path)  # a 10 fps camera
    try:
        wait_for(lambda: client.client.stats.remote_frames > 25, 40, "frames back")
        text = _metrics(server)
    finally:
        client.stop()
    samples, helps, types = _parse(text)
    lines = text.splitlines()
    label = f'stream="{session.stream_id}"'

    def value(series: str) -> float:
        (line,) = [line for line in lines if line.startswith(series + " ")]
        return float(line.rsplit(" ", 1)[1])

    assert samples["facecast_streams"] == [1.0]
    assert 3 < value(f"facecast_stream_fps_in{{{label}}}") < 20
    assert 3 < value(f"facecast_stream_fps_out{{{label}}}") < 20
    p50 = value(f'facecast_stream_latency_ms{{{label},quantile="0.5"}}')
    assert 0 < p50 <= value(f'facecast_stream_latency_ms{{{label},quantile="0.99"}}')
    assert (
        value(f"facecast_stream_frames_in_total{{{label}}}")
        >= value(f"facecast_stream_frames_out_total{{{label}}}")
        > 20
    )
    drops = [value(f'facecast_stream_frames_dropped_total{{{label},at="{at}"}}') for at in
             ("arrival", "engine", "sending")]  # fmt: skip
    assert all(n >= 0 for n in drops)
    assert types["facecast_stream_frames_dropped_total"] == "counter"
    assert "on arrival" in helps["facecast_stream_frames_dropped_total"]
