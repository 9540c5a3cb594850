#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# ViT-B/16 and the BERT-base encoder on the GPU machine in one call: the transformer cases of
# compiler_cuda_test, kiln perf step tables (fp16, device I/O; host steps listed), kiln verify
# (fp32 and fp16) and bench/gpu_vs_torch/run.py against PyTorch eager and torch.compile.
#   pack here:  /work/shared/tools/devpack .devpack-xfmr build/ci/tools/kiln build/ci/compiler/compiler_cuda_test
#               cp bench/gpu_vs_torch/xfmr_check.sh .devpack-xfmr/
#   device:     run(carry [".devpack-xfmr"], command "bash .devpack-xfmr/xfmr_check.sh")
# STEPS (default "export tests perf verify bench") picks steps; BENCH_SECONDS (default 200) is
# run.py's time budget. Logs go to $OUT/xfmr.tgz; a summary is printed last.
set -uo pipefail
pack=${PACK:-.devpack-xfmr}
kiln=("$pack/run" kiln)
out=${OUT:-/tmp/xfmr_out}
logs=$out/logs
models=/tmp/m
mkdir -p "$logs"
steps=" ${STEPS:-export tests perf bench verify} "
export PYTHONUNBUFFERED=1
step() {  # step NAME SECONDS COMMAND...
  local name=$1 limit=$2
  shift 2
  local t0=$SECONDS
  timeout "$limit" "$@" >"$logs/$name.log" 2>&1
  local rc=$?
  echo "$name rc=$rc $((SECONDS - t0))s" | tee -a "$logs/summary.txt"
}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >"$logs/env.log" 2>&1
if [[ $steps == *" export "* ]]; then
  step export 180 python3 bench/cpu_vs_ort/export_models.py --out "$models" vit_b_16 bert_base_seq128
fi
if [[ $steps == *" tests "* ]]; then
  step tests 150 "$pack/run" compiler_cuda_test \
    --gtest_filter='*Encoder*:*Transformer*:*HalfPrecision*:*GemmAndMatMul*:*PoolSoftmax*:*Bundled*:*RowKernels*:*HeadSplits*:CudaViews*'
fi
if [[ $steps == *" perf "* ]]; then
  for cfg in ${PERF_CONFIGS:-"vit_b_16:256" "bert_base_seq128:64" "vit_b_16:1" "bert_base_seq128:1"}; do
    IFS=: read -r m b <<<"$cfg"
    KILN_LOG_LEVEL=debug step "perf_${m}_$b" 75 "${kiln[@]}" perf "$models/$m.onnx" --target cuda \
      --fp16 --device-io --batch "$b" --iterations 30 --warmup 5 --top 25
  done
fi
if [[ $steps == *" bench "* ]]; then
  step bench $((${BENCH_SECONDS:-200} + 60)) python3 bench/gpu_vs_torch/run.py --kiln "${kiln[*]}" \
    --models vit_b_16,bert_base_seq128 --time-budget "${BENCH_SECONDS:-200}" --compile-timeout 120 \
    --models-dir "$models" --json "$logs/bench.json"
fi
if [[ $steps == *" verify "* ]]; then
  # torchvision's ViT starts with a zero head (every output 0 whatever the body computes): the
  # check uses a copy with a random head (seed 0). fp16 compares over 2 random input files.
  step export_vit_rh 120 python3 bench/cpu_vs_ort/export_models.py --out "$models" vit_b_16_rh
  python3 -c '
import sys, numpy as np
rng = np.random.default_rng(0)
for d, shape in (("in_vit", (1, 3, 224, 224)), ("in_bert", (1, 128, 768))):
    import os; os.makedirs(f"/tmp/{d}", exist_ok=True)
    for i in range(2): np.save(f"/tmp/{d}/{i}.npy", rng.standard_normal(shape).astype(np.float32))'
  for m in vit_b_16_rh:input=1x3x224x224:in_vit bert_base_seq128:input=1x128x768:in_bert; do
    IFS=: read -r name shape dir <<<"$m"
    step "verify_${name}_fp32" 90 "${kiln[@]}" verify "$models/$name.onnx" --target cuda \
      --input-shape "$shape"
    step "verify_${name}_fp16" "${VERIFY_SECONDS:-240}" "${kiln[@]}" verify "$models/$name.onnx" --target cuda \
      --fp16 --rtol 1e-2 --inputs "/tmp/$dir"
  done
fi
tar -C "$out" -czf "$out/xfmr.tgz" logs
echo "== summary"
cat "$logs/summary.txt"
for f in "$logs"/perf_*.log; do
  [[ -f $f ]] || continue
  echo "== $(basename "$f")"
  grep -vE "^\s*$|tuning" "$f" | head -${PERF_LINES:-30}
done
for f in "$logs"/verify_*.log; do [[ -f $f ]] && { echo "== $(basename "$f")"; tail -4 "$f"; }; done
[[ -f $logs/bench.log ]] && tail -25 "$logs/bench.log"
