#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# On the device machine, from the repository root, after bench/quant/gpu/pack.sh: the int8 tests,
# the trained digit classifier's accuracy table on cuda (calibration_table.py: fp32 vs fp16, bf16
# and int8 by each calibration method), the per-step profile of the int8 ResNet-50 (with each
# convolution's own-kernel-vs-cuDNN tuning in int8_choices.log), and run.py
# (kiln fp16 vs int8 at batch 256, JSON, and the int8 program against ref). Logs and JSON go to
# $OUT (default ./quant-gpu-out). STEMS="f16 int8" adds profiles with those first-convolution
# paths (KILN_CUDA_INT8_STEM).
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-$PWD/quant-gpu-out}
mkdir -p "$out"
py=/opt/torch/.venv/bin/python3
[[ -x $py ]] || py=python3
model=$here/resnet50_int8.onnx
step() {
  local name=$1 t=$2
  shift 2
  echo "=== $name"
  timeout "$t" "$@" >"$out/$name.log" 2>&1
  echo "rc=$?" >>"$out/$name.log"
  tail -"${TAILN:-25}" "$out/$name.log"
}
# The float ResNet-50 for the fp16 side (bench/cpu_vs_ort's exporter, torch on this machine).
(timeout 150 $py bench/cpu_vs_ort/export_models.py --out /tmp/quant-gpu resnet50 >"$out/export.log" 2>&1 &)
TAILN=8 step cuda_test 150 "$here/run" compiler_cuda_test --gtest_filter='CudaInt8*'
TAILN=12 step digits_cuda 200 $py "$here/calibration_table.py" --kiln "$here/kiln" --target cuda \
  --model "$here/digits.onnx" --work "$here/quant_digits" --reuse-data --json "$out/digits_cuda.json"
TAILN=45 KILN_LOG_LEVEL=debug step perf_int8 200 "$here/kiln" perf "$model" --target cuda \
  --device-io --batch 256 --top 20
# Each int8 convolution's tuning: the own kernel's best time against cuDNN's, and the choice.
grep "int8 gemm" "$out/perf_int8.log" | grep -v " own [0-9]*x[0-9]*x64/[0-9] " \
  >"$out/int8_choices.log"
for _ in $(seq 75); do [[ -f /tmp/quant-gpu/resnet50.onnx ]] && break; sleep 2; done
sleep 3
TAILN=12 step bench 300 $py "$here/run.py" --kiln "$here/kiln" --fp32 /tmp/quant-gpu/resnet50.onnx \
  --int8 "$model" --rounds "${ROUNDS:-2}" --json "$out/quant_gpu.json"
for m in ${STEMS:-}; do
  KILN_CUDA_INT8_STEM=$m TAILN=22 step "perf_int8_stem_$m" 150 "$here/kiln" perf "$model" \
    --target cuda --device-io --batch 256 --top 3
done
tar czf /tmp/quant_gpu_logs.tgz -C "$out" . && mv /tmp/quant_gpu_logs.tgz "$out/"
