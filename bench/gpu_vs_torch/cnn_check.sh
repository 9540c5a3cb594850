#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The CNN half of the cuda target's check on the GPU machine, in one call of about 7 minutes:
# compiler_cuda_test, the fp16 step tables of MobileNetV2 and EfficientNet-B0 at batch 256, fp16
# `kiln verify` on calibrated exports (activations fp16 can hold) of ResNet-50, MobileNetV2 and
# EfficientNet-B0, and bench/gpu_vs_torch/run.py at batch 256 (eager, torch.compile, kiln); also
# kiln perf with the depthwise kernel's other pixel counts (DW_PIXELS, default "1 4") and with
# cuDNN's fused epilogues off (step "fused"). SKIP="verify fused ..." leaves steps out;
# VERIFY="mobilenet_v2" verifies fewer models (ResNet-50's fp32 reference takes about a minute).
#   here:   PACK=DIR bench/gpu_vs_torch/cnn_check.sh --pack   # build, pack into DIR (.devpack-cnn)
#   device: run(carry [PACK], timeout_s 560, command "bash PACK/cnn_check.sh")
# The pack holds kiln, compiler_cuda_test, this script, run.py and export_models.py, so it runs
# from any checkout. Logs go to $OUT/cnn_check.tgz; a summary is printed last.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if [[ "${1:-}" == "--pack" ]]; then
  root="$(cd "$here/../.." && pwd)"
  pack="${PACK:-$root/.devpack-cnn}"
  devpack="${KILN_DEVPACK:-$root/../shared/tools/devpack}"
  [[ -x "$devpack" ]] || devpack=/work/shared/tools/devpack
  cd "$root" && nice -n 10 ninja -C build/ci -j2 kiln compiler_cuda_test || exit 1
  "$devpack" "$pack" build/ci/tools/kiln build/ci/compiler/compiler_cuda_test || exit 1
  mkdir -p "$pack/bench/gpu_vs_torch" "$pack/bench/cpu_vs_ort"
  cp "$here/cnn_check.sh" "$pack/"
  cp "$here/run.py" "$pack/bench/gpu_vs_torch/"
  cp "$root/bench/cpu_vs_ort/export_models.py" "$pack/bench/cpu_vs_ort/"
  du -sh "$pack"
  exit 0
fi
pack="$here"
out="${OUT:-/tmp/cnn_check}"
logs="$out/logs"
mkdir -p "$logs"
export PYTHONUNBUFFERED=1
kiln=("$pack/run" kiln)
models=/tmp/cnn_models
inputs=/tmp/cnn_inputs
batch=${BATCH:-256}
start=$SECONDS
summary=()
step() {  # step NAME SECONDS COMMAND...: appends to $logs/NAME.log, records rc and seconds
  local name=$1 limit=$2 t=$SECONDS rc
  shift 2
  [[ " ${SKIP:-} " == *" $name "* ]] && return 0
  echo "== $*" >>"$logs/$name.log"
  timeout --kill-after=10 "$limit" "$@" >>"$logs/$name.log" 2>&1
  rc=$?
  summary+=("$(printf '%-8s rc=%-3s %4d s  %.90s' "$name" "$rc" $((SECONDS - t)) "$*")")
  echo "[$((SECONDS - start)) s] $name rc $rc"
}
{
  nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv
  python3 -c 'import torch; print("torch", torch.__version__, "cudnn", torch.backends.cudnn.version())'
} >"$logs/env.log" 2>&1
cat "$logs/env.log"
cnn="resnet50 mobilenet_v2 efficientnet_b0"
step export 120 python3 "$pack/bench/cpu_vs_ort/export_models.py" --out "$models" $cnn
step export 150 python3 "$pack/bench/cpu_vs_ort/export_models.py" --out "$models" --calibrate \
  --inputs "$inputs" --inputs-count 2 $cnn
step test 150 "$pack/run" compiler_cuda_test
for m in mobilenet_v2 efficientnet_b0; do
  KILN_LOG_LEVEL=debug step perf_$m 90 "${kiln[@]}" perf "$models/$m.onnx" --target cuda --fp16 \
    --device-io --batch "$batch" --iterations 30 --warmup 5 --top 30
done
# The vectorized depthwise kernel's output pixels a thread (kiln's default is 2), and every
# convolution epilogue in the bias kernel instead of cuDNN's fused call.
for m in mobilenet_v2 efficientnet_b0; do
  for px in ${DW_PIXELS:-1 4}; do
    KILN_CUDA_DW_PIXELS=$px step perf_$m 60 "${kiln[@]}" perf "$models/$m.onnx" --target cuda \
      --fp16 --device-io --batch "$batch" --iterations 30 --warmup 5 --top 0
  done
  KILN_CUDA_FUSED_BIAS=0 step fused 60 "${kiln[@]}" perf "$models/$m.onnx" --target cuda --fp16 \
    --device-io --batch "$batch" --iterations 30 --warmup 5 --top 0
done
budget=${BENCH_SECONDS:-200}
step bench $((budget + 40)) python3 "$pack/bench/gpu_vs_torch/run.py" --kiln "${kiln[*]}" \
  --models mobilenet_v2,efficientnet_b0 --batches "$batch" --models-dir "$models" \
  --json "$logs/gpu_vs_torch.json" --time-budget "$budget" --compile-timeout 90 --no-artifact
for m in ${VERIFY:-$cnn}; do
  step verify 150 "${kiln[@]}" verify "$models/$m.calibrated.onnx" --target cuda --fp16 \
    --rtol 1e-2 --atol 1e-3 --min-cosine 0.999 --min-top1 100 --inputs "$inputs/$m"
done
tar -C "$out" -czf "$out/cnn_check.tgz" logs && rm -rf "$logs"
echo
printf '%s\n' "${summary[@]}"
tar -xzOf "$out/cnn_check.tgz" logs/test.log | grep -E "PASSED|FAILED|SKIPPED" | head -20
tar -xzOf "$out/cnn_check.tgz" logs/verify.log | grep -E -i "^output  |within|outside|error" |
  head -20
tar -xzOf "$out/cnn_check.tgz" logs/perf_mobilenet_v2.log | grep -E "^==|latency"
tar -xzOf "$out/cnn_check.tgz" logs/perf_efficientnet_b0.log | grep -E "^==|latency"
tar -xzOf "$out/cnn_check.tgz" logs/fused.log 2>/dev/null | grep -E "^==|latency"
tar -xzOf "$out/cnn_check.tgz" logs/perf_efficientnet_b0.log | grep -E -A14 "time by kind" | head -15
tar -xzOf "$out/cnn_check.tgz" logs/bench.log | sed -n '/^gpu_vs_torch on/,$p'
