# SPDX-License-Identifier: Apache-2.0
"""kiln fp16 vs kiln int8 ResNet-50 on one GPU, side by side, and the int8 program's accuracy.

Runs on the GPU machine (see bench/quant/gpu/pack.sh): compiles the fp32 model with --fp16 and
the QDQ int8 model (bench/quant/export_qdq.py, torch 1.13 FX PTQ) once each into artifacts (the
tuning is stored), then `kiln perf --target cuda --device-io --json` on both, interleaved rounds, then `kiln run` of the int8 model on cuda and on ref with the same
seeded inputs (cosine similarity, max abs error, top-1 agreement). Writes JSON and prints a table.
  python3 run.py --kiln KILN --fp32 resnet50.onnx --int8 resnet50_int8.onnx --json out.json
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

import numpy as np


def compile_artifact(kiln, model, batch, extra, path, timeout):
    """Compiles (and tunes) once; perf then loads the artifact with its stored choices."""
    cmd = [kiln, "compile", model, "--target", "cuda", "--batch", str(batch), "-o", path] + extra
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{out.stderr[-2000:]}")
    return path


def perf(kiln, artifact, batch, timeout):
    cmd = [kiln, "perf", artifact, "--target", "cuda", "--device-io", "--batch", str(batch),
           "--iterations", "50", "--warmup", "5", "--json"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_outputs(kiln, model, target, shape, seed, timeout):
    d = tempfile.mkdtemp()
    cmd = [kiln, "run", model, "--target", target, "--input-shape", f"input={shape}",
           "--seed", str(seed), "--output-dir", d]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{out.stderr[-2000:]}")
    return np.load(os.path.join(d, "output.npy")).astype(np.float64)


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--kiln", required=True)
    p.add_argument("--fp32", required=True, help="the float model (run with --fp16)")
    p.add_argument("--int8", required=True, help="the QDQ model")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--accuracy-batch", type=int, default=4)
    p.add_argument("--timeout", type=int, default=240)
    p.add_argument("--json", required=True)
    args = p.parse_args()

    work = tempfile.mkdtemp()
    artifacts = {
        "fp16": compile_artifact(args.kiln, args.fp32, args.batch, ["--fp16"],
                                 os.path.join(work, "fp16.kiln"), args.timeout),
        "int8": compile_artifact(args.kiln, args.int8, args.batch, [],
                                 os.path.join(work, "int8.kiln"), args.timeout),
    }
    runs = {"fp16": [], "int8": []}
    for _ in range(args.rounds):
        for name in ("fp16", "int8"):
            runs[name].append(perf(args.kiln, artifacts[name], args.batch, args.timeout))
    result = {"batch": args.batch, "device": runs["fp16"][0]["device"], "rounds": args.rounds}
    for name, rs in runs.items():
        med = statistics.median(r["median_ms"] for r in rs)
        result[name] = {"median_ms": med, "throughput_per_s": args.batch * 1000.0 / med,
                        "round_medians_ms": [r["median_ms"] for r in rs],
                        "kinds": rs[-1]["kinds"]}
    result["int8_speedup"] = result["fp16"]["median_ms"] / result["int8"]["median_ms"]

    shape = f"{args.accuracy_batch}x3x224x224"
    got = run_outputs(args.kiln, args.int8, "cuda", shape, 7, args.timeout)
    want = run_outputs(args.kiln, args.int8, "ref", shape, 7, args.timeout)
    result["accuracy_vs_ref"] = {
        "rows": int(want.shape[0]),
        "cosine": float((got * want).sum() / np.sqrt((got * got).sum() * (want * want).sum())),
        "max_abs_err": float(np.abs(got - want).max()),
        "top1_agreement": float((got.argmax(-1) == want.argmax(-1)).mean()),
    }
    with open(args.json, "w") as f:
        json.dump(result, f, indent=1)
    print(f"ResNet-50 batch {args.batch} on {result['device']}, inputs and outputs in GPU memory")
    print(f"{'precision':<10} {'median ms':>10} {'img/s':>10}")
    for name in ("fp16", "int8"):
        r = result[name]
        print(f"{name:<10} {r['median_ms']:>10.3f} {r['throughput_per_s']:>10.0f}")
    print(f"int8 speed-up over fp16: {result['int8_speedup']:.2f}x")
    a = result["accuracy_vs_ref"]
    print(f"int8 cuda vs ref ({a['rows']} rows): cosine {a['cosine']:.6f}, max abs err "
          f"{a['max_abs_err']:.4g}, top-1 agreement {100 * a['top1_agreement']:.1f}%")


if __name__ == "__main__":
    sys.exit(main())
