#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Packs the GPU half of bench/quant for the device machine into DIR (default .devpack-quant,
# ignored by git): kiln and compiler_cuda_test with their Debian libraries, the QDQ ResNet-50
# exported HERE with Debian torch 1.13's FX quantization (bench/quant/export_qdq.py; the device's
# torch 2.11 quantizes differently), the digit classifier with its data, and the device-side
# scripts.
#   bench/quant/gpu/pack.sh [DIR] [BUILD_DIR]
# then on the device machine: run(carry ["DIR"], command "bash DIR/device_run.sh")
set -euo pipefail
root="$(cd "$(dirname "$0")/../../.." && pwd)"
dir="${1:-.devpack-quant}"
build="${2:-build/ci}"
cd "$root"
devpack="${KILN_DEVPACK:-$root/../shared/tools/devpack}"
[[ -x "$devpack" ]] || devpack=/work/shared/tools/devpack
[[ -x "$devpack" ]] || { echo "pack.sh: no devpack tool (set KILN_DEVPACK)" >&2; exit 1; }
if [[ ! -f "$build/build.ninja" ]]; then cmake --preset ci >/dev/null; fi
nice -n 10 ninja -C "$build" -j2 kiln compiler_cuda_test
cache="${KILN_BENCH_CACHE:-$root/build/quant}/models"
/usr/bin/python3 bench/quant/export_qdq.py --out "$cache" resnet50
"$devpack" "$dir" "$build/tools/kiln" "$build/compiler/compiler_cuda_test"
cp "$cache/resnet50_int8.onnx" bench/quant/gpu/run.py bench/quant/gpu/device_run.sh "$dir/"
# The trained digit classifier's accuracy on cuda: its model, the calibration and test digits
# (written here: the GPU machine has no copy of them) and the table's scripts.
/usr/bin/python3 bench/quant/calibration_table.py --data-only --work "$dir/quant_digits"
cp examples/repository/digits/1/model.onnx "$dir/digits.onnx"
cp bench/quant/calibration_table.py bench/quant/bench_json.py examples/repository/digits_data.py \
  "$dir/"
printf '#!/bin/bash\nexec "$(cd "$(dirname "$0")" && pwd)/run" kiln "$@"\n' > "$dir/kiln"
chmod +x "$dir/kiln" "$dir/device_run.sh"
du -sh "$dir"
