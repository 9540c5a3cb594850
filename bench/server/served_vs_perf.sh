#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Served ResNet-50 (compiler backend, cpu target, dynamic batching) against `kiln perf` on the same
# model, batch and threads: throughput in images/s, the served/perf ratio (target >= 0.95), written
# as JSON. Served is measured in-process (`kiln loadgen --protocol native`) and over HTTP with
# binary tensors (`kiln serve` on loopback); each sends single-image requests, 2 x batch in flight,
# which the dynamic batcher joins into full batches.
# Usage: bench/server/served_vs_perf.sh [--kiln build/ci/tools/kiln] [--batch 4] [--duration 30]
#          [--cache /tmp/kiln_bench_models] [--out build/bench_results/server/served_vs_perf.json]
#          [--skip-http]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
kiln=$root/build/ci/tools/kiln
batch=4
duration=30
cache=/tmp/kiln_bench_models
out=$root/build/bench_results/server/served_vs_perf.json
http=1
while (($#)); do
  case $1 in
    --kiln) kiln=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --duration) duration=$2; shift 2 ;;
    --cache) cache=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --skip-http) http=0; shift ;;
    *) echo "served_vs_perf: unknown option $1" >&2; exit 2 ;;
  esac
done
[[ -x $kiln ]] || { echo "served_vs_perf: $kiln is not built (ninja -C build/ci kiln)" >&2; exit 1; }
mkdir -p "$cache" "$(dirname "$out")"
model=$(/usr/bin/python3 "$root/bench/cpu_vs_ort/export_models.py" --out "$cache" resnet50 | tail -1)
work=$(mktemp -d -t kiln-served-vs-perf.XXXXXX)
server_pid=
cleanup() {
  [[ -n $server_pid ]] && kill -TERM "$server_pid" 2>/dev/null && wait "$server_pid" || true
  rm -rf "$work"
}
trap cleanup EXIT

echo "== load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== kiln perf $model --batch $batch (threads: the physical cores, as the server's)"
iterations=$(( duration < 10 ? 5 : duration / 2 ))
# perf runs before and after the served runs, and the served figures are compared with their
# mean, so a change in the machine's load during the runs shows rather than skews the ratio.
run_perf() {
  "$kiln" perf "$model" --batch "$batch" --iterations "$iterations" --warmup 2 --json >"$1"
  echo "kiln perf: $(/usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['throughput_per_s'])" "$1") images/s"
}
run_perf "$work/perf_before.json"

# The repository lives in the cache, so its compiled artifact (.kiln-cache) is reused next time.
repo=$cache/served_vs_perf_repo
mkdir -p "$repo/resnet50/1"
ln -sf "$model" "$repo/resnet50/1/model.onnx"
cat >"$repo/resnet50/config.toml" <<EOF
platform = "onnx_onnxv1"
max_batch_size = $batch
[dynamic_batching]
preferred_batch_size = [$batch]
max_queue_delay_microseconds = 100000
[parameters]
target = "cpu"
batch = $batch
EOF
inflight=$((2 * batch))
echo "== kiln loadgen --protocol native (in-process server), $inflight single-image requests in flight"
"$kiln" loadgen --protocol native --repository "$repo" --model resnet50 --concurrency "$inflight" \
  --duration "$duration" --warmup 5 --json "$work/native.json"
results=("native:$work/native.json")
if ((http)); then
  echo "== kiln loadgen over HTTP (kiln serve on loopback)"
  "$kiln" serve --repository "$repo" --host 127.0.0.1 --http-port 0 --grpc-port -1 >"$work/serve.log" 2>&1 &
  server_pid=$!
  port=
  for _ in $(seq 1200); do
    port=$(sed -n 's|.*listening on http://[^:]*:\([0-9]*\).*|\1|p' "$work/serve.log" | head -1)
    [[ -n $port ]] && break
    kill -0 "$server_pid" 2>/dev/null || { cat "$work/serve.log" >&2; exit 1; }
    sleep 0.1
  done
  "$kiln" loadgen --url "http://127.0.0.1:$port" --model resnet50 --concurrency "$inflight" \
    --duration "$duration" --warmup 5 --json "$work/http.json"
  results+=("http:$work/http.json")
fi
if [[ -n $server_pid ]]; then
  kill -TERM "$server_pid"
  wait "$server_pid" || true
  server_pid=
fi
echo "== kiln perf again"
run_perf "$work/perf_after.json"
/usr/bin/python3 - "$work/perf_before.json" "$out" "$batch" "${results[@]}" <<'EOF'
import json, sys
before = json.load(open(sys.argv[1]))
after = json.load(open(sys.argv[1].replace("perf_before", "perf_after")))
perf = {"throughput_per_s": (before["throughput_per_s"] + after["throughput_per_s"]) / 2,
        "median_ms": (before["median_ms"] + after["median_ms"]) / 2}
out, batch = sys.argv[2], int(sys.argv[3])
rows = []
for spec in sys.argv[4:]:
    protocol, path = spec.split(":", 1)
    level = json.load(open(path))["levels"][0]
    served = level["infer_per_s"]
    rows.append({"protocol": protocol, "infer_per_s": served,
                 "ratio_to_perf": served / perf["throughput_per_s"],
                 "p50_us": level["p50_us"], "p99_us": level["p99_us"],
                 "failures": level["failures"], "server": level["server"]})
    # The share of the time the model was computing: 1.0 means it never waited for requests.
    if level["server"] and level["server"]["compute_us_per_batch"]:
        rows[-1]["model_busy"] = (served * level["server"]["compute_us_per_batch"] /
                                  (level["server"]["avg_batch"] * 1e6))
with open("/proc/loadavg") as f:
    load = [float(x) for x in f.read().split()[:3]]
report = {"model": "resnet50", "batch": batch, "perf_throughput_per_s": perf["throughput_per_s"],
          "perf_median_ms": perf["median_ms"],
          "perf_before_after_per_s": [before["throughput_per_s"], after["throughput_per_s"]],
          "served": rows, "load_average_after": load, "target_ratio": 0.95}
json.dump(report, open(out, "w"), indent=1)
print(f"{'path':<8} {'images/s':>9} {'vs perf':>8} {'avg batch':>9} {'model busy':>10}")
print(f"{'perf':<8} {perf['throughput_per_s']:>9.2f} {1:>8.3f} {batch:>9} {'':>10}"
      f"  (before {before['throughput_per_s']:.2f}, after {after['throughput_per_s']:.2f})")
for r in rows:
    avg = r["server"]["avg_batch"] if r["server"] else float("nan")
    print(f"{r['protocol']:<8} {r['infer_per_s']:>9.2f} {r['ratio_to_perf']:>8.3f} {avg:>9.2f} "
          f"{r.get('model_busy', float('nan')):>10.3f}")
print(f"load average after: {load}; JSON: {out}")
EOF
