"""`main.py bench --picture` in miniature: its parts give figures (not speeds: no timing asserted) and
its table names every row."""

from __future__ import annotations

import argparse
import io
import json

import pytest

import realtime.tools.bench_picture as bench
from realtime.tools.edge_flicker import EdgeChange


def test_the_bench_runs_and_reports_every_stage(monkeypatch: pytest.MonkeyPatch) -> None:
    # A short run: fewer frames and one size (the figures' meaning is the same).
    monkeypatch.setattr(bench, "SIZES", ((320, 180),))
    monkeypatch.setattr(bench, "BLEND_FRAMES", 5)
    monkeypatch.setattr(bench, "FLICKER_FRAMES", 3)
    monkeypatch.setattr(bench, "DOUBLE_FRAMES", 2)
    monkeypatch.setattr(bench, "measure_edge_change", lambda blend, **kw: EdgeChange(blend, 1.0, 0.5, 2.0, 3))
    out = io.StringIO()
    assert bench.run_picture_bench_cli(argparse.Namespace(standins=False, json=True), out) == 0
    text = out.getvalue()
    result = json.loads(text[text.index("{") :])
    assert {(b["path"], b["face"]) for b in result["blend"]} == {
        ("host", "still"),
        ("host", "resized every frame"),
        ("device (fallback)", "still"),
        ("device (fallback)", "resized every frame"),
    }
    for row in result["blend"]:
        assert row["blend_ms"] > 0 and row["factorisations"] >= 1
        assert row["crop_round_trips"] == (1.0 if row["path"].startswith("device") else 0.0)
    assert set(result["blend_crops_ms"]) == {"128", "256", "512"}
    assert [(e["mode"], e["tiles"]) for e in result["enhance"]] == [("keep size", 2), ("upscale", 2)]
    assert result["peak_rss_mb"] > 0 and "load average" in result["machine"]
    table = bench.format_picture_bench(bench.run_picture_bench(False, lambda _m: None))
    assert "Poisson blend per face" in table and "Frame enhancer per frame" in table
