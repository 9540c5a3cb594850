#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""ViT's residual Add + LayerNorm row steps on the GPU, side by side: kiln cuda with the Add fused
into a generated row kernel (KILN_CUDA_NVRTC=1, the default: "Add+LayerNormalization" steps) and
kiln's nvcc kernels one op a step (KILN_CUDA_NVRTC=0: "Add" and "LayerNormalization" steps), from
kiln perf's per-kind step times (--json; steps run one by one, each synchronized).

  python3 bench/cpu_vs_ort/export_models.py --out /tmp/m vit_b_16
  python3 bench/gpu_vs_torch/rows_bench.py --kiln ".devpack/run kiln" --model /tmp/m/vit_b_16.onnx \\
      --batches 256,1 --json rows.json

Prints, per batch and mode, each kind's steps and median milliseconds a step, and for the fused
kind its bandwidth counting `--passes` row-sized f16 tensors (default 4: x and the residual read,
the sum and the normalized row written; the last LayerNorm of the encoder writes no sum, so this is
an upper bound on the bytes moved). The JSON holds every figure and the commands run.
"""
import argparse
import json
import os
import shlex
import subprocess
import sys

KINDS = ("Add+LayerNormalization", "LayerNormalization", "Add")


def perf(kiln, model, batch, nvrtc, iterations):
    cmd = shlex.split(kiln) + [
        "perf", model, "--target", "cuda", "--fp16", "--device-io", "--batch", str(batch),
        "--iterations", str(iterations), "--warmup", "5", "--json"]
    env = dict(os.environ, KILN_CUDA_NVRTC=nvrtc)
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        sys.exit(f"rows_bench: {' '.join(cmd)} failed ({out.returncode}):\n{out.stderr[-2000:]}")
    line = [l for l in out.stdout.splitlines() if l.startswith("{")][-1]
    return f"KILN_CUDA_NVRTC={nvrtc} " + " ".join(cmd), json.loads(line)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kiln", required=True, help='the kiln command, e.g. ".devpack/run kiln"')
    ap.add_argument("--model", required=True, help="ViT ONNX model (bench/cpu_vs_ort/export_models.py)")
    ap.add_argument("--batches", default="256,1")
    ap.add_argument("--tokens", type=int, default=197, help="rows a sample")
    ap.add_argument("--cols", type=int, default=768, help="the LayerNorm's width")
    ap.add_argument("--passes", type=int, default=4)
    ap.add_argument("--iterations", type=int, default=30)
    ap.add_argument("--json", help="write every figure here")
    args = ap.parse_args()

    results = []
    print(f"{'batch':>5} {'mode':<9} {'kind':<24} {'steps':>5} {'ms/step':>9} {'GB/s':>8} {'model ms':>9}")
    for batch in [int(b) for b in args.batches.split(",")]:
        for nvrtc, mode in (("1", "fused"), ("0", "separate")):
            command, r = perf(args.kiln, args.model, batch, nvrtc, args.iterations)
            for k in r["kinds"]:
                if k["kind"] not in KINDS:
                    continue
                per_step = k["ms"] / k["steps"]
                gbs = None
                if k["kind"] == "Add+LayerNormalization":
                    bytes_ = args.passes * batch * args.tokens * args.cols * 2
                    gbs = bytes_ / (per_step * 1e-3) / 1e9
                row = {"batch": batch, "mode": mode, "kind": k["kind"], "steps": k["steps"],
                       "ms_per_step": per_step, "min_ms": k["min_ms"], "gb_per_s": gbs,
                       "model_median_ms": r["median_ms"], "command": command}
                results.append(row)
                print(f"{batch:>5} {mode:<9} {k['kind']:<24} {k['steps']:>5} {per_step:>9.4f} "
                      f"{'' if gbs is None else f'{gbs:8.0f}':>8} {r['median_ms']:>9.3f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"passes": args.passes, "rows": results}, f, indent=1)


if __name__ == "__main__":
    main()
