#!/usr/bin/env bash
# Run ON THE DEVICE machine, once per part: `bash scripts/gpu_check/stage.sh K` with .gpu_carry/partK
# carried. Parts collect in /tmp, which lasts while the machine stays warm (30 s between calls).
set -euo pipefail
mkdir -p /tmp/facecast-wheels
cp -v .gpu_carry/part"$1"/* /tmp/facecast-wheels/
ls /tmp/facecast-wheels | wc -l
