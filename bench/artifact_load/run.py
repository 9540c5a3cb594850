#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Compile and load times of .kiln artifacts against importing the ONNX model, side by side.

For each model: `kiln compile` wall time; then, interleaved, `kiln run MODEL.kiln` (load the
artifact + first inference) and `kiln run MODEL.onnx` (import + passes + finalize + first
inference) on the same random input, with each process's peak RSS; plus the artifact's size
against the model's fp32 weights and the compile's peak RSS.
Prints a table and writes JSON. Models default to torchvision ResNet-50 (random weights, exported
to the work folder); pass --model PATH.onnx to add others.

  /usr/bin/python3 bench/artifact_load/run.py --kiln build/release/tools/kiln --runs 5
"""
import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time


def export_resnet50(path):
    import torch
    import torchvision
    torch.manual_seed(0)
    model = torchvision.models.resnet50(weights=None).eval()
    torch.onnx.export(model, torch.randn(1, 3, 224, 224), path, input_names=["input"],
                      output_names=["logits"], dynamic_axes={"input": {0: "batch"}},
                      opset_version=13)


def fp32_weight_bytes(path):
    import onnx
    model = onnx.load(path)
    total = 0
    for t in model.graph.initializer:
        n = 1
        for d in t.dims:
            n *= d
        total += n * 4 if t.data_type == onnx.TensorProto.FLOAT else 0
    return total


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.machine()


# OpenMP threads that wait sleep instead of spinning (as bench/quant runs them): on a machine shared
# with other work, spinning turns their waits into CPU time and slows everyone. Set it to override.
ENV = dict(os.environ, OMP_WAIT_POLICY=os.environ.get("OMP_WAIT_POLICY", "PASSIVE"))


def run(cmd):
    """Runs `cmd`: its wall time in ms, its output, its peak RSS in MiB and its CPU time in ms
    (user + system: on a busy machine the wall time measures the other processes too)."""
    start = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=ENV)
    out = p.stdout.read()
    _, status, usage = os.wait4(p.pid, 0)
    wall = (time.perf_counter() - start) * 1000
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        sys.exit(f"artifact_load: {' '.join(cmd)} failed:\n{out}")
    return wall, out, usage.ru_maxrss / 1024, (usage.ru_utime + usage.ru_stime) * 1000


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kiln", default="build/release/tools/kiln")
    ap.add_argument("--target", default="cpu")
    ap.add_argument("--model", action="append", default=[], help=".onnx models (default: ResNet-50)")
    ap.add_argument("--input-shape", action="append", default=[],
                    help="NAME=1x3x224x224 for --model inputs with dynamic dims")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--work", default="build/bench_data/artifact_load")
    ap.add_argument("--json", default="build/bench_results/artifact_load.json")
    args = ap.parse_args()

    os.makedirs(args.work, exist_ok=True)
    models = [(m, args.input_shape) for m in args.model]
    resnet = os.path.join(args.work, "resnet50.onnx")
    if not args.model:
        if not os.path.exists(resnet):
            print(f"exporting torchvision ResNet-50 to {resnet}")
            export_resnet50(resnet)
        models = [(resnet, ["input=1x3x224x224"])]

    results = []
    for onnx_path, input_shapes in models:
        name = os.path.splitext(os.path.basename(onnx_path))[0]
        kiln_path = os.path.join(args.work, name + "." + args.target + ".kiln")
        shape_args = [a for s in input_shapes for a in ("--input-shape", s)]
        compile_cmd = [args.kiln, "compile", onnx_path, "--target", args.target, *shape_args,
                       "-o", kiln_path]
        compiles = [run(compile_cmd) for _ in range(args.runs)]
        compile_ms = [c[0] for c in compiles]
        load_ms, first_ms, artifact_wall, onnx_wall, onnx_compile_ms, onnx_first_ms = \
            [], [], [], [], [], []
        artifact_rss, onnx_rss, artifact_cpu, onnx_cpu = [], [], [], []
        for _ in range(args.runs):
            wall, out, rss, cpu = run([args.kiln, "run", kiln_path])
            artifact_rss.append(rss)
            artifact_cpu.append(cpu)
            m = re.search(r"loaded the artifact in ([\d.]+) ms, ran in ([\d.]+) ms", out)
            load_ms.append(float(m.group(1)))
            first_ms.append(float(m.group(2)))
            artifact_wall.append(wall)
            wall, out, rss, cpu = run([args.kiln, "run", onnx_path, "--target", args.target,
                                       "--no-cache", *shape_args])
            onnx_rss.append(rss)
            onnx_cpu.append(cpu)
            m = re.search(r"compiled in ([\d.]+) ms, ran in ([\d.]+) ms", out)
            onnx_compile_ms.append(float(m.group(1)))
            onnx_first_ms.append(float(m.group(2)))
            onnx_wall.append(wall)
        size = os.path.getsize(kiln_path)
        weights = fp32_weight_bytes(onnx_path)
        med = statistics.median
        r = {
            "model": name,
            "target": args.target,
            "compile_wall_ms": med(compile_ms),
            "artifact_load_ms": med(load_ms),
            "artifact_first_run_ms": med(first_ms),
            "artifact_load_plus_first_run_ms": med([a + b for a, b in zip(load_ms, first_ms)]),
            "artifact_load_plus_first_run_min_ms": min(a + b for a, b in zip(load_ms, first_ms)),
            "compile_wall_min_ms": min(compile_ms),
            "artifact_process_wall_ms": med(artifact_wall),
            "onnx_import_compile_ms": med(onnx_compile_ms),
            "onnx_first_run_ms": med(onnx_first_ms),
            "onnx_process_wall_ms": med(onnx_wall),
            "compile_cpu_ms": med([c[3] for c in compiles]),
            "artifact_process_cpu_ms": med(artifact_cpu),
            "onnx_process_cpu_ms": med(onnx_cpu),
            "compile_peak_rss_mib": max(c[2] for c in compiles),
            "artifact_run_peak_rss_mib": max(artifact_rss),
            "onnx_run_peak_rss_mib": max(onnx_rss),
            "artifact_bytes": size,
            "fp32_weight_bytes": weights,
            "artifact_over_weights": size / weights if weights else None,
        }
        r["process_wall_ratio_artifact_over_onnx"] = r["artifact_process_wall_ms"] / r["onnx_process_wall_ms"]
        results.append(r)

    print("medians of --runs runs (load+1st min: the best run)")
    print(f"{'model':<12} {'compile':>9} {'load':>8} {'1st run':>8} {'load+1st':>9} {'min':>7} "
          f"{'wall .kiln':>11} {'wall .onnx':>11} {'ratio':>6} {'size/weights':>13} "
          f"{'RSS .kiln':>10} {'RSS .onnx':>10} {'RSS compile':>12} {'CPU .kiln':>10} "
          f"{'CPU .onnx':>10} {'CPU compile':>12}")
    for r in results:
        print(f"{r['model']:<12} {r['compile_wall_ms']:>7.0f}ms {r['artifact_load_ms']:>6.0f}ms "
              f"{r['artifact_first_run_ms']:>6.0f}ms {r['artifact_load_plus_first_run_ms']:>7.0f}ms "
              f"{r['artifact_load_plus_first_run_min_ms']:>5.0f}ms "
              f"{r['artifact_process_wall_ms']:>9.0f}ms {r['onnx_process_wall_ms']:>9.0f}ms "
              f"{r['process_wall_ratio_artifact_over_onnx']:>6.2f} "
              f"{r['artifact_over_weights'] or 0:>13.4f} "
              f"{r['artifact_run_peak_rss_mib']:>7.0f}MiB {r['onnx_run_peak_rss_mib']:>7.0f}MiB "
              f"{r['compile_peak_rss_mib']:>9.0f}MiB {r['artifact_process_cpu_ms']:>8.0f}ms "
              f"{r['onnx_process_cpu_ms']:>8.0f}ms {r['compile_cpu_ms']:>10.0f}ms")
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    report = {
        "bench": "artifact_load",
        "device": {"cpu": cpu_name(), "cores": os.cpu_count(),
                   "load_average_1min": os.getloadavg()[0]},
        "commit": commit,
        "options": {"runs": args.runs, "target": args.target, "kiln": args.kiln,
                    "omp_wait_policy": ENV["OMP_WAIT_POLICY"]},
        "results": results,
    }
    os.makedirs(os.path.dirname(args.json) or ".", exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(report, f, indent=2)
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
