#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Served ResNet-50 on the cuda target, one GPU against every GPU of the machine (the model's
# `gpus` list): `kiln perf --target cuda` (host I/O) as the reference, then `kiln serve` with
# gpus = [0] and with gpus = [0, ..., N-1] (same instances per GPU, same dynamic batching), each
# loaded by `kiln loadgen` over gRPC and HTTP at every concurrency level given (clients of batch 1,
# binary tensors). Reports images/s per configuration, protocol and level, the served/perf ratio,
# and the N-GPU/1-GPU ratio at each configuration's best level; writes JSON. `native` (the server
# inside the load generator, no transport) shows what the GPUs scale to when no socket is in the way.
# --chain cpu|gpu also serves resnet50_chain (PNG bytes -> resnet50_pipeline: decode, resize 224,
# normalize, its resize and normalize on that device -> resnet50) and loads it with one 224x224
# PNG per request beside the model alone: what the data pipeline costs a served model. The pipeline
# model runs --pipeline-instances pipelines (default: --instances), each on every core.
#
# Usage: bench/server/served_gpus.sh [--kiln build/ci/tools/kiln] [--python /usr/bin/python3]
#          [--precision fp16] [--batch 64] [--instances 3] [--delay-us 4000]
#          [--concurrency "192 384"] [--duration 8] [--warmup 3] [--threads 16]
#          [--gpus N (default: every GPU nvidia-smi lists)] [--paths grpc,http,native]
#          [--cache /tmp/kiln_bench_models] [--chain cpu|gpu] [--pipeline-instances N]
#          [--out build/bench_results/server/served_gpus.json]
# On the GPU machine: python with torch exports the model (--python /opt/torch/.venv/bin/python3).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
kiln=$root/build/ci/tools/kiln
python=/usr/bin/python3
precision=fp16
batch=64
instances=3
delay_us=4000
concurrency="192 384"
duration=8
warmup=3
threads=16
gpus=
paths=grpc,http,native
cache=/tmp/kiln_bench_models
out=$root/build/bench_results/server/served_gpus.json
chain=
pipeline_instances=
while (($#)); do
  case $1 in
    --pipeline-instances) pipeline_instances=$2; shift 2 ;;
    --chain) chain=$2; shift 2 ;;
    --kiln) kiln=$2; shift 2 ;;
    --python) python=$2; shift 2 ;;
    --precision) precision=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --instances) instances=$2; shift 2 ;;
    --delay-us) delay_us=$2; shift 2 ;;
    --concurrency) concurrency=$2; shift 2 ;;
    --duration) duration=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --gpus) gpus=$2; shift 2 ;;
    --paths) paths=$2; shift 2 ;;
    --cache) cache=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "served_gpus: unknown option $1" >&2; exit 2 ;;
  esac
done
[[ -x $kiln || $(command -v "$kiln") ]] || { echo "served_gpus: $kiln is not built (ninja -C build/ci kiln)" >&2; exit 1; }
if [[ -z $gpus ]]; then
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
  [[ $gpus -ge 1 ]] || { echo "served_gpus: nvidia-smi lists no GPU; this benchmark needs one (or give --gpus N)" >&2; exit 1; }
fi
pipeline_instances=${pipeline_instances:-$instances}
mkdir -p "$cache" "$(dirname "$out")"
model=$("$python" "$root/bench/cpu_vs_ort/export_models.py" --out "$cache" --opset 17 resnet50 | tail -1)
export KILN_CACHE_DIR=$cache/kiln-cache
work=$(mktemp -d -t kiln-served-gpus.XXXXXX)
logs=$(dirname "$out")  # the servers' logs: serve_1.log, serve_N.log
server_pid=
cleanup() {
  [[ -n $server_pid ]] && kill -TERM "$server_pid" 2>/dev/null && wait "$server_pid" || true
  rm -rf "$work"
}
trap cleanup EXIT

if [[ -n $chain ]]; then
  [[ $chain == cpu || $chain == gpu ]] || { echo "served_gpus: --chain cpu or gpu" >&2; exit 2; }
  # One 224x224 photo-like PNG (smooth gradients and grain), the model's input and output names.
  "$python" - "$work/image.png" "$model" >"$work/names" <<'EOF'
import sys
import numpy as np
import onnx
from PIL import Image
rng = np.random.default_rng(7)
y, x = np.mgrid[0:224, 0:224]
img = np.stack([120 + 80 * np.sin(x / 23.0 + c) * np.cos(y / 31.0 - c) for c in range(3)], -1)
img += rng.normal(0, 6, img.shape)
Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).save(sys.argv[1])
graph = onnx.load(sys.argv[2], load_external_data=False).graph
print(graph.input[0].name, graph.output[0].name)
EOF
  read -r model_input model_output <"$work/names"
fi

# write_chain REPO: the pipeline and chain models beside resnet50.
write_chain() {
  local repo=$1
  mkdir -p "$repo/resnet50_pipeline/1" "$repo/resnet50_chain"
  cat >"$repo/resnet50_pipeline/config.toml" <<EOF
backend = "pipeline"
max_batch_size = $batch
instances = $pipeline_instances
[dynamic_batching]
max_queue_delay_microseconds = $delay_us
[[inputs]]
name = "image_bytes"
datatype = "BYTES"
shape = [-1]
EOF
  cat >"$repo/resnet50_pipeline/1/pipeline.json" <<EOF
{"num_threads": 0, "operators": [
  {"op": "readers.external_source"},
  {"op": "decoders.image", "args": {"output_type": "RGB"}},
  {"op": "resize", "device": "$chain", "args": {"resize_x": 224, "resize_y": 224}},
  {"op": "crop_mirror_normalize", "device": "$chain",
   "args": {"mean": [123.675, 116.28, 103.53], "std": [58.395, 57.12, 57.375]}}],
 "outputs": ["images"]}
EOF
  cat >"$repo/resnet50_chain/config.toml" <<EOF
backend = "chain"
max_batch_size = $batch
instances = $instances
[[steps]]
model = "resnet50_pipeline"
input_map = { image_bytes = "image_bytes" }
output_map = { images = "images" }
[[steps]]
model = "resnet50"
input_map = { "$model_input" = "images" }
output_map = { "$model_output" = "scores" }
EOF
}

precision_flag=()
[[ $precision == fp16 ]] && precision_flag=(--fp16)
[[ $precision == bf16 ]] && precision_flag=(--bf16)
echo "== kiln perf $model --target cuda --batch $batch ${precision_flag[*]} (host I/O)"
"$kiln" perf "$model" --target cuda --batch "$batch" "${precision_flag[@]}" --iterations 100 \
  --warmup 10 --json >"$work/perf.json"
"$python" -c "import json,sys; print('kiln perf:', round(json.load(open(sys.argv[1]))['throughput_per_s']), 'images/s')" "$work/perf.json"

# serve_and_load N: serves the model on GPUs 0..N-1, loads it over gRPC and HTTP.
serve_and_load() {
  local n=$1 list
  list=$(seq -s ', ' 0 $((n - 1)))
  local repo=$work/repo_$n
  mkdir -p "$repo/resnet50/1"
  cp "$model" "$repo/resnet50/1/model.onnx"  # a symbolic link out of the repository is refused
  cat >"$repo/resnet50/config.toml" <<EOF
platform = "onnx_onnxv1"
max_batch_size = $batch
instances = $instances
gpus = [$list]
[dynamic_batching]
max_queue_delay_microseconds = $delay_us
[parameters]
target = "cuda"
precision = "$precision"
EOF
  [[ -n $chain ]] && write_chain "$repo"
  "$kiln" serve --repository "$repo" --host 127.0.0.1 --http-port 0 --grpc-port 0 \
    --threads "$threads" >"$logs/serve_$n.log" 2>&1 &
  server_pid=$!
  local http_port= grpc_port=
  for _ in $(seq 6000); do  # compiling for a GPU the cache has not seen takes a while
    http_port=$(sed -n 's|.*listening on http://[^:]*:\([0-9]*\).*|\1|p' "$logs/serve_$n.log" | head -1)
    grpc_port=$(sed -n 's|.*listening on grpc://[^:]*:\([0-9]*\).*|\1|p' "$logs/serve_$n.log" | head -1)
    [[ -n $http_port && -n $grpc_port ]] && break
    kill -0 "$server_pid" 2>/dev/null || { cat "$logs/serve_$n.log" >&2; exit 1; }
    sleep 0.1
  done
  [[ -n $http_port ]] || { echo "served_gpus: the server did not listen in 10 minutes" >&2; exit 1; }
  # The model compiles (or loads from the cache) per GPU after the server listens.
  local t0=$SECONDS
  until "$python" -c "import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)" \
      "http://127.0.0.1:$http_port/v2/models/resnet50/ready" 2>/dev/null; do
    if ! kill -0 "$server_pid" 2>/dev/null || grep -q UNAVAILABLE "$logs/serve_$n.log" ||
        ((SECONDS - t0 > 900)); then
      echo "served_gpus: resnet50 did not become ready; the server's log:" >&2
      cat "$logs/serve_$n.log" >&2
      exit 1
    fi
    sleep 1
  done
  echo "== resnet50 ready on $n GPU(s) after $((SECONDS - t0)) s"
  echo "== gpus = [$list]: $instances instances per GPU, batch $batch, ${delay_us} us queue delay"
  local path args
  for path in ${paths//,/ }; do
    case $path in
      grpc) args=(--protocol grpc --url "127.0.0.1:$grpc_port" --stats-url "http://127.0.0.1:$http_port") ;;
      http) args=(--protocol http --url "http://127.0.0.1:$http_port") ;;
      native) args=(--protocol native --repository "$repo") ;;
      *) echo "served_gpus: unknown path $path (grpc, http or native)" >&2; exit 2 ;;
    esac
    # shellcheck disable=SC2086
    "$kiln" loadgen --model resnet50 "${args[@]}" --concurrency $concurrency --duration "$duration" \
      --warmup "$warmup" --json "$work/${path}_$n.json" | sed "s/^/$path: /"
    if [[ -n $chain ]]; then
      # shellcheck disable=SC2086
      "$kiln" loadgen --model resnet50_chain "${args[@]}" --input "image_bytes=$work/image.png" \
        --concurrency $concurrency --duration "$duration" --warmup "$warmup" \
        --json "$work/${path}_${n}_chain.json" | sed "s/^/$path chain: /"
    fi
  done
  # Every model's statistics: where a chain's time goes (its pipeline and model steps).
  "$python" -c "import sys, urllib.request; open(sys.argv[2], 'wb').write(urllib.request.urlopen(sys.argv[1]).read())" \
    "http://127.0.0.1:$http_port/v2/models/stats" "$work/stats_$n.json"
  kill -TERM "$server_pid"
  wait "$server_pid" || true
  server_pid=
}
serve_and_load 1
[[ $gpus -gt 1 ]] && serve_and_load "$gpus"

"$python" - "$work" "$out" "$gpus" "$batch" "$precision" "$instances" "$paths" "$chain" \
  "$pipeline_instances" <<'EOF'
import json, os, sys
work, out, gpus, batch, precision, instances = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], int(sys.argv[6])
paths = sys.argv[7].split(",")
chain = sys.argv[8]
pipeline_instances = int(sys.argv[9])
perf = json.load(open(f"{work}/perf.json"))["throughput_per_s"]
rows, best = [], {}
for n in sorted({1, gpus}):
    for proto in paths:
        for level in json.load(open(f"{work}/{proto}_{n}.json"))["levels"]:
            server = level.get("server") or {}
            row = {"gpus": n, "protocol": proto, "concurrency": level["concurrency"],
                   "infer_per_s": level["infer_per_s"], "ratio_to_perf": level["infer_per_s"] / perf,
                   "p50_us": level["p50_us"], "p99_us": level["p99_us"],
                   "failures": level["failures"], "avg_batch": server.get("avg_batch")}
            rows.append(row)
            key = (n, proto)
            best[key] = max(best.get(key, 0.0), row["infer_per_s"])
scaling = {proto: best[(gpus, proto)] / best[(1, proto)] for proto in paths} if gpus > 1 else {}
# The chain (PNG bytes through the pipeline, then the model) against the model alone.
chain_rows, chain_vs_model = [], {}
for n in sorted({1, gpus}) if chain else []:
    for proto in paths:
        name = f"{work}/{proto}_{n}_chain.json"
        if not os.path.exists(name):
            continue
        levels = json.load(open(name))["levels"]
        for level in levels:
            chain_rows.append({"gpus": n, "protocol": proto, "concurrency": level["concurrency"],
                               "infer_per_s": level["infer_per_s"], "p99_us": level["p99_us"],
                               "failures": level["failures"]})
        top = max(level["infer_per_s"] for level in levels)
        chain_vs_model[f"{n}gpu_{proto}"] = top / best[(n, proto)]
report = {"model": "resnet50", "precision": precision, "batch": batch, "instances_per_gpu": instances,
          "gpus": gpus, "perf_per_s": perf, "served": rows,
          "best_per_s": {f"{n}gpu_{p}": v for (n, p), v in best.items()},
          "scaling_vs_one_gpu": scaling, "chain_pipeline_device": chain or None,
          "chain_pipeline_instances": pipeline_instances if chain else None,
          "chain": chain_rows, "chain_vs_model": chain_vs_model}
# Per model, over the whole run: executions, mean batch, compute per execution.
steps = {}
for n in sorted({1, gpus}):
    for m in json.load(open(f"{work}/stats_{n}.json"))["model_stats"]:
        runs = sum(b["compute_infer"]["count"] for b in m["batch_stats"])
        ns = sum(b["compute_infer"]["ns"] for b in m["batch_stats"])
        if runs:
            steps[f"{n}gpu_{m['name']}"] = {"executions": runs,
                                            "mean_batch": m["inference_count"] / runs,
                                            "compute_ms_per_execution": ns / runs / 1e6}
report["models"] = steps
json.dump(report, open(out, "w"), indent=1)
print(f"{'gpus':>4} {'path':<6} {'clients':>7} {'images/s':>9} {'vs perf':>8} {'avg batch':>9} {'p99 ms':>7} {'fail':>5}")
for r in rows:
    avg = r["avg_batch"] if r["avg_batch"] is not None else float("nan")
    print(f"{r['gpus']:>4} {r['protocol']:<6} {r['concurrency']:>7} {r['infer_per_s']:>9.0f} "
          f"{r['ratio_to_perf']:>8.2f} {avg:>9.1f} {r['p99_us'] / 1000:>7.1f} {r['failures']:>5}")
for r in chain_rows:
    print(f"{r['gpus']:>4} {r['protocol'] + '+png':<10} {r['concurrency']:>3} {r['infer_per_s']:>9.0f} "
          f"{'':>8} {'':>9} {r['p99_us'] / 1000:>7.1f} {r['failures']:>5}  (chain, pipeline on {chain})")
for key, m in steps.items():
    print(f"{key}: {m['executions']} executions, mean batch {m['mean_batch']:.1f}, "
          f"{m['compute_ms_per_execution']:.2f} ms compute each")
for key, ratio in chain_vs_model.items():
    print(f"chain (PNG in) / model alone, {key}, best level each: {ratio:.2f}")
print(f"kiln perf --target cuda --batch {batch} (host I/O): {perf:.0f} images/s")
for proto, s in scaling.items():
    print(f"{gpus} GPUs / 1 GPU, {proto}, best level each: {s:.2f}x")
print(f"JSON: {out}")
EOF
