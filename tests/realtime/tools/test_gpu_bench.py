"""The GPU self-check: a clean "no CUDA provider" exit here, and the whole path on the CPU provider.

The CPU run uses contract-exact doubles (models/fakes/pixel_doubles.py's inswapper and a cheap 512 px
restorer) instead of the 554 MB / 340 MB stand-ins, so it takes a few seconds; the device graphs,
IOBinding, crop/paste and the single download are the same code the GPU run executes.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from models.fakes import standins
from models.fakes.pixel_doubles import build_inswapper
from realtime.tools import gpu_bench
from realtime.tools.gpu_bench import BenchModels, format_results, run_gpu_bench

TINY = (("tiny", 192, 144),)
NUMBERS = re.compile(r"\s(\d+\.\d)\s+(\d+\.\d\d)\s+(\d+\.\d\d)\s")


def enhancer_double() -> onnx.ModelProto:
    """A restorer contract: input [1,3,512,512] -> output [1,3,512,512] in [-1,1], one Tanh."""
    shape = [1, 3, 512, 512]
    graph = helper.make_graph(
        [helper.make_node("Tanh", ["input"], ["output"])],
        "enhancer_double",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, shape)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


@pytest.fixture
def doubles(tmp_path: Path) -> BenchModels:
    swapper, enhancer = tmp_path / "inswapper_128.onnx", tmp_path / "gfpgan_1.4.onnx"
    onnx.save(build_inswapper(), str(swapper))
    onnx.save(enhancer_double(), str(enhancer))
    return BenchModels(swapper, enhancer)


def no_cuda_here() -> str:
    ok, reason = gpu_bench.cuda_provider_status()
    if ok:
        pytest.skip("this machine has a working CUDA provider")
    return reason


def test_without_cuda_it_exits_cleanly_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    reason = no_cuda_here()

    def no_standins(*args: object, **kwargs: object) -> None:
        raise AssertionError("stand-ins must not be built when there is nothing to benchmark")

    monkeypatch.setattr(standins, "ensure_standins", no_standins)
    out = io.StringIO()
    assert run_gpu_bench(out) == 1  # nothing measured: not a pass
    text = out.getvalue()
    assert f"no CUDA provider: {reason}" in text
    assert "CUDA did not load" in reason and "Running on CPU" in reason
    assert "fps" not in text  # nothing measured, nothing pretended


def test_allow_cpu_runs_the_whole_path(doubles: BenchModels, tmp_path: Path) -> None:
    no_cuda_here()
    out = io.StringIO()
    code = run_gpu_bench(
        out, budget_s=60, allow_cpu=True, models=doubles, cache_dir=tmp_path, sizes=TINY, frames=3, warmup=1
    )
    text = out.getvalue()
    assert code == 0, text
    assert "no CUDA provider:" in text and "allow_cpu" in text
    rows = [line for line in text.splitlines() if line.startswith("CPU ") and "faces/s" not in line]
    assert len(rows) == 4, text  # two paths, each printed as it finishes and in the final table
    # The batching rows: faces a second through the shared service at batch 1, 4 and 8.
    batching = [line for line in text.splitlines() if "faces/s at batch" in line]
    assert [line.rsplit(" batch ", 1)[1].split()[0] for line in batching] == ["1", "4", "8"], text
    swap = next(r for r in rows if " swap " in r and "enhance" not in r)
    enhanced = next(r for r in rows if "swap + enhance" in r)
    for row in (swap, enhanced):
        assert "skipped" not in row
        fps, p50, p99 = (float(x) for x in NUMBERS.search(row).groups())  # type: ignore[union-attr]
        assert fps > 0 and 0 < p50 <= p99
        # One finished-frame download per frame and no frame upload: the ring was uploaded once.
        assert "up 0 frame" in row and "down 1 (0.1 MB)" in row
    assert "+ 3 params" in swap and "+ 6 params" in enhanced  # crop matrix; paste matrix + mask (x2)


def test_allow_cpu_runs_the_whole_engine_too(doubles: BenchModels, tmp_path: Path) -> None:
    """With a folder of every model the engine's own rows follow: fps with every frame pushed
    through, glass-to-glass p50/p99 at a 60 fps camera's pace, swap-only and with the enhancer."""
    no_cuda_here()
    from models.fakes.doubles import write_all

    folder = tmp_path / "all"
    write_all(folder)
    out = io.StringIO()
    code = run_gpu_bench(
        out,
        budget_s=120,
        allow_cpu=True,
        models=doubles,
        cache_dir=tmp_path,
        sizes=TINY,
        frames=12,
        warmup=1,
        engine_models=folder,
    )
    text = out.getvalue()
    assert code == 0, text
    rows = [line for line in text.splitlines() if line.startswith("CPU ") and " engine" in line]
    assert len(rows) == 4, text  # two engine paths, each printed as it finishes and in the table
    for row in rows:
        assert "skipped" not in row
        fps, p50, p99 = (float(x) for x in NUMBERS.search(row).groups())  # type: ignore[union-attr]
        assert fps > 0 and 0 < p50 <= p99
        # The CPU provider keeps the OpenCV path (no device transfers to count).
        assert "OpenCV path" in row


def test_a_spent_budget_skips_with_the_reason(doubles: BenchModels, tmp_path: Path) -> None:
    no_cuda_here()
    out = io.StringIO()
    run_gpu_bench(out, budget_s=0.0, allow_cpu=True, models=doubles, cache_dir=tmp_path, sizes=TINY, frames=3)
    assert "skipped: time budget used up" in out.getvalue()


def test_result_table_formats_skips_and_numbers() -> None:
    done = gpu_bench.Result("CUDA", "720p", "swap", fps=210.5, p50_ms=4.61, p99_ms=6.02, gpu_mib="2,345")
    skipped = gpu_bench.Result("TensorRT fp16", "1080p", "swap", skipped="TensorRT did not load: x")
    table = format_results([done, skipped])
    assert "210.5" in table and "4.61" in table and "2,345" in table
    assert "TensorRT fp16  1080p  swap            skipped: TensorRT did not load: x" in table


@pytest.mark.parametrize(("provider", "label"), [("cuda", "CUDA"), ("tensorrt", "TensorRT")])
def test_a_provider_that_does_not_load_is_skipped_with_its_reason(
    doubles: BenchModels, tmp_path: Path, provider: gpu_bench.ProviderName, label: str
) -> None:
    no_cuda_here()
    lines: list[str] = []
    results = gpu_bench._bench_provider(
        provider, doubles, tmp_path, TINY, 3, 1, 0, gpu_bench._Clock(60.0), lines.append
    )
    assert len(results) == 2  # swap and swap + enhance, one size
    for result in results:
        assert result.skipped.startswith(f"inswapper_128: {label} did not load:"), result.skipped
        assert "fix:" in result.skipped
