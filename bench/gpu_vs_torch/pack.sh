#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds what device_check.sh runs and packs it into .devpack (ignored by git) for the GPU machine:
# kiln, compiler_cuda_test and onnx_backend_runner with their Debian libraries (../shared/tools/devpack)
# and the ONNX backend test data (Debian's libonnx-testdata, node + simple).
#   bench/gpu_vs_torch/pack.sh [BUILD_DIR]     # default build/ci
# then on the device machine: run(carry [".devpack"], command "bench/gpu_vs_torch/device_check.sh")
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${1:-build/ci}"
cd "$root"
devpack="${KILN_DEVPACK:-$root/../shared/tools/devpack}"
[[ -x "$devpack" ]] || devpack=/work/shared/tools/devpack
[[ -x "$devpack" ]] || { echo "pack.sh: no devpack tool (set KILN_DEVPACK)" >&2; exit 1; }
if [[ ! -f "$build/build.ninja" ]]; then cmake --preset ci >/dev/null; fi
nice -n 10 ninja -C "$build" -j2 kiln compiler_cuda_test onnx_backend_runner
[[ -f "$build/compiler/compiler_cuda_test" ]] ||
  { echo "pack.sh: $build has no compiler_cuda_test: this build has no cuda target (nvcc, cuDNN 9)" >&2; exit 1; }
"$devpack" .devpack "$build/tools/kiln" "$build/compiler/compiler_cuda_test" \
  "$build/tests/onnx_backend/onnx_backend_runner"
data=/usr/share/libonnx-testdata/data
[[ -d "$data/node" ]] || { echo "pack.sh: $data missing; apt-get install libonnx-testdata" >&2; exit 1; }
tar -C "$data" -cJf .devpack/onnx_backend_data.tar.xz node simple
du -sh .devpack
