"""GPU memory for /metrics, read from nvidia-smi (no GPU library is imported)."""

from __future__ import annotations

import shutil
import subprocess

METRIC = "facecast_gpu_memory_used_bytes"
QUERY = ("--query-gpu=index,memory.used", "--format=csv,noheader,nounits")


def gpu_memory_used() -> list[tuple[str, int]] | None:
    """(GPU index, bytes in use) per GPU; None when there is no nvidia-smi or it fails."""
    tool = shutil.which("nvidia-smi")
    if tool is None:
        return None
    try:
        done = subprocess.run([tool, *QUERY], capture_output=True, text=True, timeout=3.0, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    found: list[tuple[str, int]] = []
    for line in done.stdout.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
            found.append((parts[0], int(parts[1]) * 1024 * 1024))  # nvidia-smi says MiB
    return found or None


def gpu_memory_lines(used: list[tuple[str, int]] | None) -> list[str]:
    """The metric in Prometheus text: one sample per GPU, or 0 when there is none."""
    if not used:
        return [
            f"# HELP {METRIC} GPU memory in use; no GPU found (no working nvidia-smi), so 0.",
            f"# TYPE {METRIC} gauge",
            f"{METRIC} 0",
        ]
    lines = [f"# HELP {METRIC} GPU memory in use, per GPU (nvidia-smi).", f"# TYPE {METRIC} gauge"]
    lines += [f'{METRIC}{{gpu="{index}"}} {value}' for index, value in used]
    return lines
