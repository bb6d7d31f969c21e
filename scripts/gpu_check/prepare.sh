#!/usr/bin/env bash
# Run HERE (no GPU): fetch the wheels the GPU machine lacks and cut them into carry-sized parts.
#
# The lent H200 has Python 3.12 with numpy, onnx, OpenCV and the CPU onnxruntime, but not
# onnxruntime-gpu (256 MB), PyAV or platformdirs. One device call carries at most 64 MiB with the
# working tree, so the wheels travel in parts, one ignored folder per call: .gpu_carry/part1 ...
# See docs/GPU.md, "Running the GPU check on a lent machine".
set -euo pipefail
cd "$(dirname "$0")/../.."
grep -qxF '/.gpu_carry/' .git/info/exclude 2>/dev/null || echo '/.gpu_carry/' >> .git/info/exclude
rm -rf .gpu_carry && mkdir -p .gpu_carry/wheels
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 -d .gpu_carry/wheels \
  "onnxruntime-gpu==1.31.1" "av==18.1.0" "platformdirs"
# 50 MiB pieces, packed into parts of at most 52 MiB: room for the working tree (~2 MB) under the
# 64 MiB carry limit.
for whl in .gpu_carry/wheels/*.whl; do
  split -b 50M -d -a 2 "$whl" ".gpu_carry/wheels/$(basename "$whl").part"
  rm "$whl"
done
n=0; room=0
for piece in $(ls -S .gpu_carry/wheels/*.part*); do
  size=$(stat -c %s "$piece")
  if [ "$n" -eq 0 ] || [ "$size" -gt "$room" ]; then
    n=$((n + 1)); mkdir -p ".gpu_carry/part$n"; room=$((52 * 1024 * 1024))
  fi
  mv "$piece" ".gpu_carry/part$n/"; room=$((room - size))
done
rmdir .gpu_carry/wheels
echo "$n parts: carry .gpu_carry/part1 .. .gpu_carry/part$n, one per device call (stage.sh K), then run.sh"
ls -la .gpu_carry/part*
