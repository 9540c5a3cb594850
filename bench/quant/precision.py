#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
# kiln fp32 vs bf16 (and fp16) on the CPU: `kiln perf --json` on the same ONNX model with and
# without --bf16/--fp16, same threads, interleaved round by round; prints a table with the
# speed-up over fp32 and writes JSON. The models come from bench/cpu_vs_ort/export_models.py.
#   bench/quant/precision.py [--models resnet50] [--batches 1,16] [--threads 2] [--rounds 3]
import argparse
import json
import os
import statistics
import subprocess
import sys

import bench_json
from bench_json import ROOT


def run_perf(kiln, model, batch, threads, iterations, flags):
    cmd = [kiln, "perf", model, "--target", "cpu", "--batch", str(batch), "--threads",
           str(threads), "--iterations", str(iterations), "--warmup", "2", "--json", *flags]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"precision: {' '.join(cmd)} failed:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1]), " ".join(cmd)


def main():
    p = argparse.ArgumentParser(description="kiln fp32 vs bf16/fp16 on the CPU")
    p.add_argument("--kiln", default=bench_json.default_kiln())
    p.add_argument("--models", default="resnet50")
    p.add_argument("--precisions", default="bf16", help="compared with fp32: bf16, fp16")
    p.add_argument("--batches", default="1,16")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--iterations", type=int, default=0, help="0: 10 at batch 1, 3 above")
    p.add_argument("--cache", default=os.path.join(ROOT, "build", "bench_precision"))
    p.add_argument("--json", default=None, help="default: <cache>/precision.json")
    args = p.parse_args()
    if args.kiln is None:
        sys.exit("precision: no kiln binary; build one or pass --kiln")
    models_dir = os.path.join(args.cache, "models")
    os.makedirs(models_dir, exist_ok=True)
    models = args.models.split(",")
    subprocess.run([sys.executable, os.path.join(ROOT, "bench", "cpu_vs_ort", "export_models.py"),
                    "--out", models_dir, *models], check=True, stdout=subprocess.DEVNULL)
    precisions = ["fp32"] + args.precisions.split(",")
    rows = []
    for model in models:
        path = os.path.join(models_dir, f"{model}.onnx")
        for batch in (int(b) for b in args.batches.split(",")):
            iterations = args.iterations or (10 if batch == 1 else 3)
            medians = {q: [] for q in precisions}
            mins = {q: [] for q in precisions}
            commands = {}
            for _ in range(args.rounds):
                for q in precisions:
                    flags = [] if q == "fp32" else [f"--{q}"]
                    result, commands[q] = run_perf(args.kiln, path, batch, args.threads,
                                                   iterations, flags)
                    medians[q].append(result["median_ms"])
                    mins[q].append(result["min_ms"])
            fp32 = statistics.median(medians["fp32"])
            fp32_min = min(mins["fp32"])
            for q in precisions:
                ms = statistics.median(medians[q])
                rows.append({"model": model, "batch": batch, "precision": q, "median_ms": ms,
                             "min_ms": min(mins[q]), "round_medians_ms": medians[q],
                             "speedup_vs_fp32": fp32 / ms,
                             "min_speedup_vs_fp32": fp32_min / min(mins[q]),
                             "command": commands[q]})
    print(f"kiln fp32 vs {', '.join(precisions[1:])} on the CPU, {args.threads} threads, "
          f"median of {args.rounds} interleaved rounds\n")
    print("(min: the fastest run of all rounds, the figure least disturbed by other load)\n")
    print(f"{'model':<16} {'batch':>5} {'precision':<9} {'median ms':>10} {'vs fp32':>8} "
          f"{'min ms':>10} {'vs fp32':>8}")
    for r in rows:
        print(f"{r['model']:<16} {r['batch']:>5} {r['precision']:<9} {r['median_ms']:>10.2f} "
              f"{r['speedup_vs_fp32']:>7.2f}x {r['min_ms']:>10.2f} "
              f"{r['min_speedup_vs_fp32']:>7.2f}x")
    bench_json.write_record(args.json or os.path.join(args.cache, "precision.json"),
                            threads=args.threads, rounds=args.rounds, rows=rows)


if __name__ == "__main__":
    main()
