#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Where kiln cuda's time goes, on the GPU machine (pack as for device_check.sh, carry .devpack):
#   bench/gpu_vs_torch/profile.sh MODEL.onnx BATCH [flags kiln perf and kiln compile take: --fp16]
# prints kiln perf's step table (steps run one by one, each synchronized) with the host steps that
# KILN_LOG_LEVEL=debug lists, then each GPU kernel's time (ncu, clocks left alone) over an artifact's
# runs: compiled first, so tuning's kernels stay out of the profile. 1 warm-up, 1 device-io check,
# 1 timed and 1 profiled run: divide each kernel's invocations by 4 (5 for fused convolutions,
# whose compile-time trial runs once).
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
[[ $# -ge 2 ]] || { echo "usage: profile.sh MODEL.onnx BATCH [kiln perf flags]" >&2; exit 2; }
model=$1 batch=$2
shift 2
kiln=(.devpack/run kiln)
shape=$(python3 -c 'import onnx, sys
m = onnx.load(sys.argv[1], load_external_data=False)
i = m.graph.input[0]
d = [str(x.dim_value) if x.dim_value else sys.argv[2] for x in i.type.tensor_type.shape.dim]
print(i.name + "=" + "x".join(d))' "$model" "$batch") || exit 1
echo "== kiln perf $model --batch $batch $*"
KILN_LOG_LEVEL=debug "${kiln[@]}" perf "$model" --target cuda --device-io --batch "$batch" \
  --iterations 50 --warmup 10 --top 15 "$@" 2>/tmp/profile_err.log
grep -E "on the host|steps \(|CUDA graph" /tmp/profile_err.log | sort | uniq -c
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
bin=/tmp/devpack-$(cksum <.devpack/pack.tar.xz | cut -d' ' -f1)/bin
artifact=/tmp/profile.kiln
"${kiln[@]}" compile "$model" --target cuda --input-shape "$shape" -o "$artifact" "$@" >/dev/null ||
  exit 1
echo "== ncu per kernel ($shape)"
.devpack/run "$ncu" --clock-control none --metrics gpu__time_duration.sum --print-summary per-kernel \
  "$bin/kiln" perf "$artifact" --target cuda --device-io --iterations 1 --warmup 1 |
  grep -v "^==PROF==" | grep -E "^  [^ ]|gpu__time_duration"
