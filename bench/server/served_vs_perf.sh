#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Served ResNet-50 (compiler backend, cpu target, dynamic batching) against `kiln perf` on the same
# model, batch and threads: throughput in images/s, the served/perf ratio (target >= 0.95), written
# as JSON. Served is measured in-process (`kiln loadgen --protocol native`), over HTTP with binary
# tensors and over gRPC with raw contents (one `kiln serve` on loopback); each sends single-image
# requests, 2 x batch in flight, which the dynamic batcher joins into full batches.
#
# On a machine shared with other work the runs are interleaved: each round runs perf, then every
# path (in an order that rotates from round to round), and each served figure is compared with the mean of the perf runs before and after it; the
# summary gives the median over the rounds. Each served run also reports where the CPU time went:
# the model's threads (`kiln-model`, the batcher's instance threads and their OpenMP workers), the
# HTTP threads (`kiln-http`), the server's other threads (gRPC's), and the load generator.
#
# Usage: bench/server/served_vs_perf.sh [--kiln build/ci/tools/kiln] [--batch 4] [--duration 30]
#          [--rounds 1] [--paths native,http,grpc] [--http-threads 0]
#          [--cache /tmp/kiln_bench_models] [--out build/bench_results/server/served_vs_perf.json]
#          [--skip-http]   (same as --paths native)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
kiln=$root/build/ci/tools/kiln
batch=4
duration=30
rounds=1
paths=native,http,grpc
http_threads=0
cache=/tmp/kiln_bench_models
out=$root/build/bench_results/server/served_vs_perf.json
while (($#)); do
  case $1 in
    --kiln) kiln=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --duration) duration=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --paths) paths=$2; shift 2 ;;
    --http-threads) http_threads=$2; shift 2 ;;
    --cache) cache=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --skip-http) paths=native; shift ;;
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

# The repository lives in the cache, so its compiled artifact (.kiln-cache) is reused next time.
repo=$cache/served_vs_perf_repo
mkdir -p "$repo/resnet50/1"
rm -f "$repo/resnet50/1/model.onnx"  # a symbolic link out of the repository is refused
cp "$model" "$repo/resnet50/1/model.onnx"
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
warmup=5
iterations=$((duration < 10 ? 5 : duration / 2))

# Per-thread CPU seconds of PIDs, grouped: "<pid> <thread name> <seconds>" lines.
cpu_snapshot() {
  local pid task
  for pid in "$@"; do
    for task in /proc/"$pid"/task/*; do
      [[ -r $task/stat ]] || continue
      awk -v pid="$pid" -v name="$(cat "$task/comm" 2>/dev/null)" -v hz="$(getconf CLK_TCK)" \
        '{sub(/^.*\) /, ""); print pid, name, ($12 + $13) / hz}' "$task/stat" 2>/dev/null || true
    done
  done
}

run_perf() {  # run_perf OUT.json
  "$kiln" perf "$model" --batch "$batch" --iterations "$iterations" --warmup 2 --json >"$1"
  echo "kiln perf: $(/usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['throughput_per_s'])" "$1") images/s"
}

# run_served PATH OUT.json: loadgen on one path, with the CPU split over its measured window.
run_served() {
  local path=$1 json=$2 args=()
  case $path in
    native) args=(--protocol native --repository "$repo") ;;
    http) args=(--url "http://127.0.0.1:$http_port") ;;
    grpc) args=(--protocol grpc --url "127.0.0.1:$grpc_port" --stats-url "http://127.0.0.1:$http_port") ;;
  esac
  "$kiln" loadgen "${args[@]}" --model resnet50 --concurrency "$inflight" --duration "$duration" \
    --warmup "$warmup" --json "$json" >"$json.log" 2>&1 &
  local loadgen=$! pids
  # native: the model runs inside the load generator (loading it takes a few seconds first).
  if [[ $path == native ]]; then pids=$loadgen; else pids="$server_pid $loadgen"; fi
  # native loads the model first (0.5-3 s): the CPU window starts 3 s later and ends 3 s sooner,
  # so it stays inside the measured one however long the load took.
  local late=0
  [[ $path == native ]] && late=3
  sleep $((warmup + late))
  cpu_snapshot $pids >"$json.cpu0"
  local t0 t1
  t0=$(date +%s.%N)
  sleep $((duration - 1 - 2 * late))
  cpu_snapshot $pids >"$json.cpu1"
  t1=$(date +%s.%N)
  awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }' >"$json.cpu_seconds"
  echo "$loadgen" >"$json.loadgen_pid"
  wait "$loadgen" || { cat "$json.log" >&2; return 1; }
  tail -n +3 "$json.log" | head -1 | sed "s/^/$path: /"
}

echo "== load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
if [[ $paths == *http* || $paths == *grpc* ]]; then
  "$kiln" serve --repository "$repo" --host 127.0.0.1 --http-port 0 --grpc-port 0 \
    --threads "$http_threads" >"$work/serve.log" 2>&1 &
  server_pid=$!
  http_port= grpc_port=
  for _ in $(seq 1200); do
    http_port=$(sed -n 's|.*listening on http://[^:]*:\([0-9]*\).*|\1|p' "$work/serve.log" | head -1)
    grpc_port=$(sed -n 's|.*listening on grpc://[^:]*:\([0-9]*\).*|\1|p' "$work/serve.log" | head -1)
    [[ -n $http_port && -n $grpc_port ]] && break
    kill -0 "$server_pid" 2>/dev/null || { cat "$work/serve.log" >&2; exit 1; }
    sleep 0.1
  done
  echo "$server_pid" >"$work/server_pid"
fi
for ((r = 0; r < rounds; ++r)); do
  echo "== round $((r + 1))/$rounds: kiln perf --batch $batch, then ${paths//,/, } ($inflight requests in flight, ${duration} s)"
  run_perf "$work/perf_$r.json"
  # Each round starts one path later, so no path always runs first or last while the load drifts.
  order=(${paths//,/ })
  for ((k = 0; k < ${#order[@]}; ++k)); do
    path=${order[$(((k + r) % ${#order[@]}))]}
    run_served "$path" "$work/${path}_$r.json"
  done
done
echo "== kiln perf again"
run_perf "$work/perf_$rounds.json"
if [[ -n $server_pid ]]; then
  kill -TERM "$server_pid"
  wait "$server_pid" || true
  server_pid=
fi

/usr/bin/python3 - "$work" "$out" "$batch" "$rounds" "$paths" <<'EOF'
import json, os, statistics, sys
work, out, batch, rounds, paths = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5].split(",")
perf = [json.load(open(f"{work}/perf_{r}.json"))["throughput_per_s"] for r in range(rounds + 1)]
server_pid = open(f"{work}/server_pid").read().strip() if os.path.exists(f"{work}/server_pid") else None

def cpu_split(prefix):
    """CPU seconds over the measured window by group, and the window's length."""
    def load(path):
        d = {}
        for line in open(path):
            pid, rest = line.split(" ", 1)
            name, sec = rest.rsplit(" ", 1)
            d.setdefault((pid, name), 0.0)
            d[(pid, name)] += float(sec)
        return d
    a, b = load(prefix + ".cpu0"), load(prefix + ".cpu1")
    loadgen = open(prefix + ".loadgen_pid").read().strip()
    split = {"model": 0.0, "http": 0.0, "server_other": 0.0, "loadgen": 0.0}
    for key, sec in b.items():
        pid, name = key
        delta = max(0.0, sec - a.get(key, 0.0))
        if name == "kiln-model":
            split["model"] += delta
        elif pid == loadgen:
            split["loadgen"] += delta
        elif name == "kiln-http":
            split["http"] += delta
        else:
            split["server_other"] += delta
    seconds = float(open(prefix + ".cpu_seconds").read())
    return {k: round(v / seconds, 3) for k, v in split.items()}  # cores in use

rows = []
for r in range(rounds):
    perf_mean = (perf[r] + perf[r + 1]) / 2
    for path in paths:
        level = json.load(open(f"{work}/{path}_{r}.json"))["levels"][0]
        served = level["infer_per_s"]
        row = {"round": r + 1, "protocol": path, "infer_per_s": served, "perf_per_s": perf_mean,
               "ratio_to_perf": served / perf_mean, "p50_us": level["p50_us"],
               "p99_us": level["p99_us"], "failures": level["failures"], "server": level["server"],
               "cpu_cores": cpu_split(f"{work}/{path}_{r}.json")}
        # The share of the time the model was computing: 1.0 means it never waited for requests.
        if level["server"] and level["server"]["compute_us_per_batch"]:
            row["model_busy"] = (served * level["server"]["compute_us_per_batch"] /
                                 (level["server"]["avg_batch"] * 1e6))
        rows.append(row)
summary = {}
for path in paths:
    mine = [x for x in rows if x["protocol"] == path]
    summary[path] = {"median_ratio_to_perf": statistics.median(x["ratio_to_perf"] for x in mine),
                     "median_infer_per_s": statistics.median(x["infer_per_s"] for x in mine)}
    if path != "native" and "native" in paths:
        native = {x["round"]: x["infer_per_s"] for x in rows if x["protocol"] == "native"}
        summary[path]["median_ratio_to_native"] = statistics.median(
            x["infer_per_s"] / native[x["round"]] for x in mine)
with open("/proc/loadavg") as f:
    load = [float(x) for x in f.read().split()[:3]]
report = {"model": "resnet50", "batch": batch, "rounds": rounds, "perf_runs_per_s": perf,
          "served": rows, "summary": summary, "load_average_after": load, "target_ratio": 0.95}
json.dump(report, open(out, "w"), indent=1)
print(f"{'round':>5} {'path':<7} {'images/s':>9} {'perf':>7} {'vs perf':>8} {'avg batch':>9} "
      f"{'busy':>6}  cores: model http other loadgen")
for x in rows:
    avg = x["server"]["avg_batch"] if x["server"] else float("nan")
    c = x["cpu_cores"]
    print(f"{x['round']:>5} {x['protocol']:<7} {x['infer_per_s']:>9.2f} {x['perf_per_s']:>7.2f} "
          f"{x['ratio_to_perf']:>8.3f} {avg:>9.2f} {x.get('model_busy', float('nan')):>6.3f}  "
          f"{c['model']:>12.3f} {c['http']:>5.3f} {c['server_other']:>5.3f} {c['loadgen']:>7.3f}")
for path, s in summary.items():
    extra = f", {s['median_ratio_to_native']:.3f} x native" if "median_ratio_to_native" in s else ""
    print(f"median {path}: {s['median_infer_per_s']:.2f} images/s, {s['median_ratio_to_perf']:.3f} x perf{extra}")
print(f"kiln perf runs: {', '.join(f'{p:.2f}' for p in perf)} images/s; load average after: {load}; JSON: {out}")
EOF
