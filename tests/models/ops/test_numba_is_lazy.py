"""numba (1.3 s to import, ~200 MB) loads only where the CPU path's compiled loops run: the GPU
path's modules, the engine's wiring and the command line import without it."""

from __future__ import annotations

import subprocess
import sys

from tests.paths import REPO_ROOT

GPU_PATH_MODULES = (
    "main",
    "realtime.api",
    "realtime.wiring.face_swap",
    "realtime.face.device_backend",
    "realtime.face.host.compositor",
    "realtime.io.nvdec_device",
    "models.wrappers.scrfd",
    "models.wrappers.swappers.inswapper",
    "models.ops.yuv",
    "models.ops.device_ops",
)


def test_the_gpu_path_imports_without_numba() -> None:
    # numba blocked: importing it raises ImportError, so any module-level import would fail here.
    code = (
        "import sys; sys.modules['numba'] = None\n"
        f"for name in {GPU_PATH_MODULES!r}:\n"
        "    __import__(name)\n"
        "print('ok')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]


def test_the_cpu_path_still_compiles_its_loops_on_first_use() -> None:
    import numpy as np

    from models.ops.pixel_kernels import blend_bgra_into

    roi = np.zeros((4, 4, 3), np.uint8)
    warped = np.full((4, 4, 4), 255, np.uint8)
    blend_bgra_into(warped, roi, 1.0)
    assert (roi == 255).all()
