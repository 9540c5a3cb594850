#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The cuda target's whole check on the GPU machine, in one call of about 8 minutes: build and pack
# here with bench/gpu_vs_torch/pack.sh, then run there (carry [".devpack"], timeout 560):
#   bench/gpu_vs_torch/device_check.sh [run.py options, e.g. --precision fp32 --max-autotune]
# Steps in this order, each with a time limit cut to what is left of TOTAL_SECONDS (default 530; a
# step with under 20 s left is skipped), each writing $OUT/<step>.log (7 files come back):
#   env          GPU, driver, CUDA/cuDNN, PyTorch
#   cuda_test    compiler_cuda_test (every case against ref)
#   verify       kiln verify --target cuda on the benchmark models (fp32; fp16/bf16 when kiln has
#                the flags, the CNNs on --calibrate exports), exported by
#                bench/cpu_vs_ort/export_models.py
#   bench        bench/gpu_vs_torch/run.py (JSON: $OUT/gpu_vs_torch.json), BENCH_SECONDS (240)
#   sanitizer    compute-sanitizer racecheck and memcheck on the bundled model and kernel cases
#   backend      ONNX backend suite (node + simple) on cuda, against ref's expected failures
# A summary table is printed last. SKIP leaves steps out (e.g. SKIP="backend sanitizer"); a second
# call with SKIP="cuda_test verify bench" runs what the first had no time for.
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
out="${OUT:-/tmp/device_check}"
mkdir -p "$out"
export PYTHONUNBUFFERED=1
if [[ ! -x .devpack/run ]]; then
  echo "device_check: no .devpack; run bench/gpu_vs_torch/pack.sh here and carry .devpack" >&2
  exit 1
fi
kiln=(.devpack/run kiln)
start=$SECONDS
summary=()
fails=0
total=${TOTAL_SECONDS:-530}
step() {  # step NAME SECONDS COMMAND...: runs it into $out/NAME.log (appending), records the result
  local name=$1 limit=$2 t=$SECONDS rc left
  shift 2
  [[ " ${SKIP:-} " == *" $name "* ]] && return 0
  left=$((total - (SECONDS - start)))
  if ((left < 20)); then
    summary+=("$(printf '%-10s %-60.60s skipped: no time left' "$name" "$*")")
    return 0
  fi
  ((limit > left)) && limit=$left
  echo "== $* (limit ${limit} s)" >>"$out/$name.log"
  timeout --kill-after=10 "$limit" "$@" >>"$out/$name.log" 2>&1
  rc=$?
  [[ $rc -ne 0 ]] && fails=$((fails + 1))
  summary+=("$(printf '%-10s %-60.60s rc=%-3s %4d s' "$name" "$*" "$rc" $((SECONDS - t)))")
  echo "[$((SECONDS - start)) s] $name: rc $rc: $*"
}

# ---- env
{
  nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv
  nvcc --version 2>/dev/null | tail -2
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda,
                                  "cudnn", torch.backends.cudnn.version())'
  "${kiln[@]}" devices
  "${kiln[@]}" --version
} >"$out/env.log" 2>&1
cat "$out/env.log"

# ---- tests
step cuda_test 120 "${kiln[0]}" compiler_cuda_test
# ---- verify on the benchmark models
models=/tmp/gpu_vs_torch_models
step verify 150 python3 bench/cpu_vs_ort/export_models.py --out "$models" resnet50 mobilenet_v2 \
  efficientnet_b0 vit_b_16 bert_base_seq128
# fp16/bf16 compare the CNNs on calibrated exports (activations fp16 can hold; docs/cuda.md).
step verify 150 python3 bench/cpu_vs_ort/export_models.py --out "$models" --calibrate \
  --inputs "$models/inputs" --inputs-count 2 resnet50 mobilenet_v2 efficientnet_b0
precisions=("")
help=$("${kiln[@]}" verify --help 2>&1)
for p in fp16 bf16; do [[ $help == *"--$p"* ]] && precisions+=("--$p"); done
for p in "${precisions[@]}"; do
  tol=()
  [[ -n $p ]] && tol=(--rtol 1e-2 --atol 1e-3)
  check=("${kiln[@]}" verify --target cuda $p "${tol[@]}")
  for m in resnet50 mobilenet_v2 efficientnet_b0; do
    if [[ -n $p ]]; then
      step verify 90 "${check[@]}" --min-cosine 0.999 --min-top1 100 \
        "$models/$m.calibrated.onnx" --inputs "$models/inputs/$m"
    else
      step verify 60 "${check[@]}" "$models/$m.onnx" --input-shape input=2x3x224x224
    fi
  done
  step verify 90 "${check[@]}" "$models/vit_b_16.onnx" --input-shape input=1x3x224x224
  step verify 90 "${check[@]}" "$models/bert_base_seq128.onnx" --input-shape input=1x128x768
done

# ---- the benchmark: eager and kiln first, torch.compile in what is left of its budget
budget=${BENCH_SECONDS:-240}
left=$((total - (SECONDS - start) - 10))
((budget > left)) && budget=$left
step bench $((budget + 30)) python3 bench/gpu_vs_torch/run.py --kiln "${kiln[*]}" \
  --models-dir "$models" --json "$out/gpu_vs_torch.json" --time-budget "$budget" "$@"

# ---- compute-sanitizer: shared-memory races and out-of-bounds accesses in our kernels
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
# This pack's unpacked binaries (.devpack/run unpacks to /tmp/devpack-<cksum>; a warm machine may
# hold other packs' folders too).
bin=/tmp/devpack-$(cksum <.devpack/pack.tar.xz | cut -d' ' -f1)/bin
filter='--gtest_filter=*Bundled*:*Pool*:*Elementwise*:*Transformer*:*Depthwise*:*Encoder*:*RowKernels*:*Silu*:CudaInt8*'
step sanitizer 90 "${kiln[0]}" "$sanitizer" --tool racecheck --error-exitcode 1 \
  "$bin/compiler_cuda_test" "$filter"
step sanitizer 90 "${kiln[0]}" "$sanitizer" --tool memcheck --error-exitcode 1 \
  "$bin/compiler_cuda_test" "$filter"
# The fused attention kernel alone under racecheck (cuBLASLt's GEMMs of the projected form stop
# racecheck with an internal sanitizer error; memcheck runs them clean).
step sanitizer 90 "${kiln[0]}" "$sanitizer" --tool racecheck --error-exitcode 1 \
  --kernel-name kns=attention_kernel "$bin/compiler_cuda_test" \
  '--gtest_filter=Forms/CudaFusedAttention.MatchesRef/Bert:*/Sdpa:*/Bmm'
step sanitizer 90 "${kiln[0]}" "$sanitizer" --tool memcheck --error-exitcode 1 \
  "$bin/compiler_cuda_test" '--gtest_filter=Forms/CudaFusedAttention.*:*ElementwiseChains*'

# ---- ONNX backend suite
data=/tmp/onnx_backend_data
mkdir -p "$data" && tar -C "$data" -xJf .devpack/onnx_backend_data.tar.xz
step backend 150 "${kiln[0]}" onnx_backend_runner --data "$data" --kinds node,simple --target cuda \
  --expected tests/onnx_backend/expected_failures_ref.txt

echo
echo "device_check: $fails step(s) failed; $((SECONDS - start)) s; logs in $out"
printf '%s\n' "${summary[@]}"
grep -E "passed|failed|FAILED|agree|differ|ERROR SUMMARY|RACECHECK SUMMARY" \
  "$out/cuda_test.log" "$out/backend.log" "$out/verify.log" "$out/sanitizer.log" 2>/dev/null |
  tail -40
echo
sed -n '/^gpu_vs_torch on/,$p' "$out/bench.log" 2>/dev/null
exit $((fails > 0))
