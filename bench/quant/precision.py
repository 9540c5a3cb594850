#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
# kiln fp32 vs bf16 (and fp16) on the CPU: `kiln perf --json` on the same ONNX model with and
# without --bf16/--fp16, same threads, interleaved round by round; prints a table with the
# speed-up over fp32 and writes JSON. The models come from bench/cpu_vs_ort/export_models.py.
#
# Three figures per row: the median wall time of a run (what a user sees on a quiet machine), the
# fastest run, and the CPU time of a run — the process's user+system time of a perf command with
# N more iterations minus that of one with the same warm-up and 1 iteration, over N, with
# OMP_WAIT_POLICY=PASSIVE so that waiting threads sleep instead of spinning. On a machine shared
# with other work the wall figures swing; the CPU time does not count time spent waiting for a
# core, so its ratio is the steadiest measure of the work bf16 saves.
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
    """(perf's JSON, the CPU seconds the command used, the command)."""
    cmd = [kiln, "perf", model, "--target", "cpu", "--batch", str(batch), "--threads",
           str(threads), "--iterations", str(iterations), "--warmup", "2", "--json", *flags]
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        sys.exit(f"precision: {' '.join(cmd)} failed:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1]), " ".join(cmd)


def cpu_seconds(kiln, model, batch, threads, iterations, flags):
    """The children's user+system CPU seconds of one perf command."""
    before = os.times()
    result, cmd = run_perf(kiln, model, batch, threads, iterations, flags)
    after = os.times()
    used = (after.children_user - before.children_user) + \
        (after.children_system - before.children_system)
    return result, used, cmd


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
            cpu_ms = {q: [] for q in precisions}
            commands = {}
            for _ in range(args.rounds):
                for q in precisions:
                    flags = [] if q == "fp32" else [f"--{q}"]
                    result, long_cpu, commands[q] = cpu_seconds(
                        args.kiln, path, batch, args.threads, iterations + 1, flags)
                    _, short_cpu, _ = cpu_seconds(args.kiln, path, batch, args.threads, 1, flags)
                    medians[q].append(result["median_ms"])
                    mins[q].append(result["min_ms"])
                    cpu_ms[q].append(1e3 * (long_cpu - short_cpu) / iterations)
            base = {"median": statistics.median(medians["fp32"]), "min": min(mins["fp32"]),
                    "cpu": statistics.median(cpu_ms["fp32"])}
            for q in precisions:
                median, fastest, cpu = (statistics.median(medians[q]), min(mins[q]),
                                        statistics.median(cpu_ms[q]))
                rows.append({"model": model, "batch": batch, "precision": q,
                             "median_ms": median, "min_ms": fastest, "cpu_ms_per_run": cpu,
                             "round_medians_ms": medians[q], "round_cpu_ms": cpu_ms[q],
                             "speedup_vs_fp32": base["median"] / median,
                             "min_speedup_vs_fp32": base["min"] / fastest,
                             "cpu_speedup_vs_fp32": base["cpu"] / cpu, "command": commands[q]})
    print(f"kiln fp32 vs {', '.join(precisions[1:])} on the CPU, {args.threads} threads, "
          f"{args.rounds} interleaved rounds (wall: median of round medians; min: fastest run; "
          f"cpu: CPU time per run)\n")
    print(f"{'model':<12} {'batch':>5} {'precision':<9} {'wall ms':>9} {'x':>6} {'min ms':>9} "
          f"{'x':>6} {'cpu ms':>9} {'x':>6}")
    for r in rows:
        print(f"{r['model']:<12} {r['batch']:>5} {r['precision']:<9} {r['median_ms']:>9.1f} "
              f"{r['speedup_vs_fp32']:>5.2f}x {r['min_ms']:>9.1f} "
              f"{r['min_speedup_vs_fp32']:>5.2f}x {r['cpu_ms_per_run']:>9.1f} "
              f"{r['cpu_speedup_vs_fp32']:>5.2f}x")
    bench_json.write_record(args.json or os.path.join(args.cache, "precision.json"),
                            threads=args.threads, rounds=args.rounds, rows=rows)


if __name__ == "__main__":
    main()
