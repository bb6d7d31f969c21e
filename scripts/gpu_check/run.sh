#!/usr/bin/env bash
# Run ON THE DEVICE machine after every part is staged: join the wheels, install them beside the
# image's packages (--no-deps: numpy, onnx, OpenCV are there), then the GPU self-check.
# Output goes to $OUT (the device tool brings it back).
set -uo pipefail
out="${OUT:-/tmp/facecast-out}"; mkdir -p "$out"
cd /tmp/facecast-wheels
for first in *.part00; do
  whl="${first%.part00}"
  cat "$whl".part* > "/tmp/$whl"
done
cd - > /dev/null
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site /tmp/*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
python3 -c "import onnxruntime as o; print(o.__version__, o.get_available_providers())" 2>&1 | tee "$out/providers.txt"
nvidia-smi 2>&1 | tee "$out/nvidia_smi.txt"
timeout 120 python3 main.py doctor --no-cameras 2>&1 | tee "$out/doctor.txt"
timeout 330 python3 main.py doctor --no-cameras --gpu-bench 2>&1 | tee "$out/gpu_bench.txt"
