#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The fused attention and GELU epilogue on the GPU machine in one call: compiler_cuda_test, kiln perf
# of ViT-B/16 (random head) and the BERT encoder at the batches the issue names, the same with
# KILN_CUDA_ATTENTION_BLOCKS=4 and with both fusions off (main's path), fp16 against fp32 on cuda over
# the same inputs (fused and unfused), and torch.compile (default mode) at ViT b64/b256, BERT b64.
#   pack here:  /work/shared/tools/devpack .devpack-attn build/ci/tools/kiln build/ci/compiler/compiler_cuda_test
#               cp bench/gpu_vs_torch/attn_check.sh .devpack-attn/
#   device:     run(carry [".devpack-attn"], command "bash .devpack-attn/attn_check.sh")
# EXPORT names another export_models.py (one carried in the pack, where the checkout's is older).
# TOTAL_SECONDS (default 330) bounds the whole call; torch.compile gets what is left. QUICK=1 skips
# the A/B runs and torch.compile. Logs go to
# $OUT/attn_final.tgz; a summary is printed last.
set -uo pipefail
pack=${PACK:-.devpack-attn}
kiln=("$pack/run" kiln)
out=${OUT:-/tmp/attn_out}
logs=$out/logs
models=/tmp/m
mkdir -p "$logs" "$models"
total=${TOTAL_SECONDS:-330}
start=$SECONDS
export PYTHONUNBUFFERED=1
step() {  # step NAME SECONDS COMMAND...
  local name=$1 limit=$2
  shift 2
  local left=$((total - (SECONDS - start)))
  ((left < 5)) && { echo "$name skipped (time)" | tee -a "$logs/summary.txt"; return; }
  ((limit > left)) && limit=$left
  local t0=$SECONDS
  timeout "$limit" "$@" >"$logs/$name.log" 2>&1
  echo "$name rc=$? $((SECONDS - t0))s" | tee -a "$logs/summary.txt"
}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >"$logs/env.log" 2>&1
step export 60 python3 "${EXPORT:-bench/cpu_vs_ort/export_models.py}" --out "$models" vit_b_16_rh \
  bert_base_seq128
step tests 60 "$pack/run" compiler_cuda_test
perf() {  # perf NAME MODEL BATCH [ENV...]
  local name=$1 m=$2 b=$3
  shift 3
  step "perf_$name" 40 env "$@" "${kiln[@]}" perf "$models/$m.onnx" --target cuda --fp16 --device-io \
    --batch "$b" --iterations 50 --warmup 10 --top 8
}
perf vit256 vit_b_16_rh 256
perf vit64 vit_b_16_rh 64
perf vit1 vit_b_16_rh 1
perf bert64 bert_base_seq128 64
perf bert1 bert_base_seq128 1
if [[ -z ${QUICK:-} ]]; then
  perf vit256_blocks4 vit_b_16_rh 256 KILN_CUDA_ATTENTION_BLOCKS=4
  perf bert64_blocks4 bert_base_seq128 64 KILN_CUDA_ATTENTION_BLOCKS=4
  perf vit256_off vit_b_16_rh 256 KILN_CUDA_ATTENTION=0 KILN_CUDA_GELU_EPILOGUE=0
  perf bert64_off bert_base_seq128 64 KILN_CUDA_ATTENTION=0 KILN_CUDA_GELU_EPILOGUE=0
  perf bert64_nogelu bert_base_seq128 64 KILN_CUDA_GELU_EPILOGUE=0
fi
# fp16 (fused, and the old path) against fp32 on cuda, batch 2, same inputs.
python3 -c '
import numpy as np
rng = np.random.default_rng(0)
np.save("/tmp/in_vit.npy", rng.random((2, 3, 224, 224), dtype=np.float32))
np.save("/tmp/in_bert.npy", rng.standard_normal((2, 128, 768)).astype(np.float32))'
for m in vit_b_16_rh:in_vit bert_base_seq128:in_bert; do
  IFS=: read -r name in <<<"$m"
  step "run_${name}_fp32" 40 "${kiln[@]}" run "$models/$name.onnx" --target cuda --input input=/tmp/$in.npy --output-dir /tmp/o_${name}_fp32
  step "run_${name}_fp16" 40 "${kiln[@]}" run "$models/$name.onnx" --target cuda --fp16 --input input=/tmp/$in.npy --output-dir /tmp/o_${name}_fp16
  step "run_${name}_fp16old" 40 env KILN_CUDA_ATTENTION=0 KILN_CUDA_GELU_EPILOGUE=0 "${kiln[@]}" run "$models/$name.onnx" --target cuda --fp16 --input input=/tmp/$in.npy --output-dir /tmp/o_${name}_fp16old
done
python3 -c '
import numpy as np
for name in ("vit_b_16_rh", "bert_base_seq128"):
    try:
        want = np.load(f"/tmp/o_{name}_fp32/output.npy").astype(np.float64)
        for v in ("fp16", "fp16old"):
            got = np.load(f"/tmp/o_{name}_{v}/output.npy").astype(np.float64)
            d = np.abs(got - want)
            cos = (got * want).sum() / np.sqrt((got * got).sum() * (want * want).sum())
            print(f"{name} {v} vs fp32 (cuda): max abs {d.max():.3e}, max |fp32| {np.abs(want).max():.3e}, "
                  f"max abs / max|fp32| {d.max() / np.abs(want).max():.3e}, mean abs {d.mean():.3e}, cosine {cos:.6f}")
    except Exception as e:
        print(name, "compare failed:", e)' >"$logs/compare.log" 2>&1
cat "$logs/compare.log"
left=$((total - (SECONDS - start) - 10))
[[ -n ${QUICK:-} ]] ||
  step torch $left python3 bench/gpu_vs_torch/run.py --no-kiln --models vit_b_16,bert_base_seq128 \
  --batches 64,256 --modes default --compile-timeout 100 --time-budget $((left - 10)) \
  --models-dir "$models" --json "$logs/torch.json"
tar -C "$out" -czf "$out/attn_final.tgz" logs
echo "== summary"
cat "$logs/summary.txt"
for f in "$logs"/perf_*.log; do echo "== $(basename "$f")"; grep -E "latency|^(Attention|MatMul|Transpose|Gelu|Softmax|Add) " "$f"; done
grep -E "FAILED|PASSED|tests ran" "$logs/tests.log" | head
grep -E -A3 "Failure" "$logs/tests.log" | head -30
[[ -f $logs/torch.log ]] && tail -25 "$logs/torch.log"
exit 0
