"""`main.py bench` as a user runs it: a table, or JSON on stdout that a script can parse."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import REPO_ROOT

ROOT = REPO_ROOT


def bench(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    cmd = [
        sys.executable,
        str(ROOT / "main.py"),
        "bench",
        "--frames",
        "6",
        "--width",
        "320",
        "--height",
        "180",
    ]
    return subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=240, cwd=ROOT, env=env)


def test_json_on_stdout_parses_and_holds_both_loops(tmp_path: Path) -> None:
    own_tmp = tmp_path / "tmp"
    own_tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(own_tmp), "TEMP": str(own_tmp), "TMP": str(own_tmp)}
    done = bench("--json", "--duration", "0.02", env=env)  # a live run too short to measure a drift
    assert done.returncode == 0, done.stderr

    def refuse(constant: str) -> None:
        raise ValueError(f"not strict JSON: {constant}")

    payload = json.loads(done.stdout, parse_constant=refuse)  # nothing else on stdout, and no NaN
    names = [r["name"] for r in payload["results"]]
    assert names == [
        "naive loop (insightface)",
        "Deep-Live-Cam-style loop",
        "FaceCast engine (every frame)",
        "FaceCast engine (live 30 fps)",
    ]
    payload["results"].pop()
    # No run leaves its 2 MB of model doubles in the temp folder.
    assert not list(own_tmp.glob("facecast-bench-*"))  # (a library of insightface leaves a .ses file)
    assert payload["speedup"] > 0 and payload["speedup_vs_dlc_style"] > 0
    for result in payload["results"]:
        assert result["frames"] == 6 and result["fps"] > 0
        assert {"p50", "p99"} <= set(result["latency_ms"])


@pytest.mark.parametrize("preset", ["ultra-low-latency", "quality"])
def test_every_preset_runs_in_the_table_mode(preset: str) -> None:
    """Every preset runs all the loops, the ultra-low-latency preset's 320 px detector included
    (a detector double that only answers at 640 would crash the naive loop)."""
    done = bench("--preset", preset)
    assert done.returncode == 0, done.stderr
    assert "speed-up FaceCast / naive:" in done.stdout
    assert "speed-up FaceCast / Deep-Live-Cam-style:" in done.stdout
    assert f"preset {preset}" in done.stdout


def test_repeats_report_each_loops_median_run_and_the_median_speed_up() -> None:
    done = bench("--json", "--repeat", "3")
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    assert payload["repeats"] == 3 and "median of 3 interleaved runs" in payload["header"]
    naive, dlc, engine = payload["results"]
    for result in (naive, dlc, engine):
        runs = result["runs_ms_per_frame"]
        assert len(runs) == 3
        assert result["ms_per_frame"] == sorted(runs)[1]  # the median run is the one reported
    # Peak memory as after each loop's first run: it only grows from row to row.
    assert naive["peak_rss_mb"] <= dlc["peak_rss_mb"] <= engine["peak_rss_mb"]
    for key, slower in (("speedup", naive), ("speedup_vs_dlc_style", dlc)):
        per_run = sorted(
            a / b for a, b in zip(slower["runs_ms_per_frame"], engine["runs_ms_per_frame"], strict=True)
        )
        assert payload[key] == pytest.approx(per_run[1])  # each run's own ratio, then the median


def test_the_compiled_kernels_cache_in_the_users_cache_folder(tmp_path: Path) -> None:
    """Not next to the code, which a system-wide install cannot write (Numba then fails the
    import); a user's own NUMBA_CACHE_DIR wins."""
    code = "import main, os; print(os.environ['NUMBA_CACHE_DIR'])"
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env)
    assert done.returncode == 0, done.stderr
    if sys.platform.startswith("linux"):
        assert done.stdout.strip() == str(tmp_path / "cache" / "FaceCast" / "numba")
    own = {**env, "NUMBA_CACHE_DIR": str(tmp_path / "mine")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=own)
    assert done.stdout.strip() == str(tmp_path / "mine")
