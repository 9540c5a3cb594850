#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""An elementwise chain on the GPU, side by side: kiln cuda with the chain as one kernel generated
through NVRTC (KILN_CUDA_NVRTC=1, the default) and one kernel per op (KILN_CUDA_NVRTC=0), PyTorch
eager and torch.compile on the same function. The chain is GELU's tanh form written out in
primitive ops, as older exporters write it (nine ops: Mul, Mul, Mul, Add, Mul, Tanh, Add, Mul, Mul).

  python3 bench/gpu_vs_torch/chain_bench.py --kiln ".devpack/run kiln" --json chain.json

Writes the ONNX model to --work, prints a table of median milliseconds and GB/s (one read of the
input and one write of the output per run), and the JSON with every figure.
"""
import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

K0, K1 = 0.044715, 0.7978845608028654  # GELU tanh form: 0.5x(1 + tanh(K1 (x + K0 x^3)))


def chain_model(path, shape, dtype):
    """Writes the nine-op chain over one input of `shape` and element type `dtype` (float32 or
    float16) to `path`."""
    elem = TensorProto.FLOAT if dtype == "float32" else TensorProto.FLOAT16

    def const(name, v):
        return numpy_helper.from_array(np.array(v, dtype=dtype), name)

    nodes = [
        helper.make_node("Mul", ["x", "x"], ["x2"]),
        helper.make_node("Mul", ["x2", "x"], ["x3"]),
        helper.make_node("Mul", ["x3", "k0"], ["a"]),
        helper.make_node("Add", ["x", "a"], ["b"]),
        helper.make_node("Mul", ["b", "k1"], ["c"]),
        helper.make_node("Tanh", ["c"], ["t"]),
        helper.make_node("Add", ["t", "one"], ["u"]),
        helper.make_node("Mul", ["x", "u"], ["v"]),
        helper.make_node("Mul", ["v", "half"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "gelu_tanh_chain", [helper.make_tensor_value_info("x", elem, shape)],
        [helper.make_tensor_value_info("y", elem, shape)],
        [const("k0", K0), const("k1", K1), const("one", 1.0), const("half", 0.5)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    onnx.save(model, path)


def kiln_ms(kiln, model, nvrtc, iterations):
    """kiln perf's median milliseconds and steps for `model` on cuda, with device-resident I/O."""
    env = dict(os.environ, KILN_CUDA_NVRTC="1" if nvrtc else "0")
    cmd = shlex.split(kiln) + ["perf", model, "--target", "cuda", "--device-io", "--iterations",
                               str(iterations), "--warmup", "10", "--json"]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"chain_bench: {' '.join(cmd)} failed:\n{out.stderr}")
    line = [l for l in out.stdout.splitlines() if l.startswith("{")][-1]
    report = json.loads(line)
    return report["median_ms"], len(report.get("nodes", report.get("steps", [])))


def torch_ms(shape, dtype, mode, iterations):
    import torch
    x = torch.rand(shape, generator=torch.Generator().manual_seed(1)).to(
        device="cuda", dtype=getattr(torch, dtype))

    def gelu(x):
        return x * (1.0 + torch.tanh(K1 * (x + K0 * x * x * x))) * 0.5

    fn = torch.compile(gelu) if mode == "compile" else gelu
    with torch.no_grad():
        for _ in range(10):
            fn(x)
        torch.cuda.synchronize()
        times = []
        for _ in range(iterations):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn(x)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
    return statistics.median(times)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kiln", default="kiln", help="kiln command (e.g. '.devpack/run kiln')")
    p.add_argument("--shape", default="64,768,197", help="input shape, comma-separated")
    p.add_argument("--dtypes", default="float32,float16")
    p.add_argument("--iterations", type=int, default=100)
    p.add_argument("--no-torch", action="store_true", help="leave PyTorch out")
    p.add_argument("--work", default=tempfile.gettempdir(), help="folder for the ONNX models")
    p.add_argument("--json", help="write every figure here")
    args = p.parse_args()
    shape = [int(d) for d in args.shape.split(",")]
    bytes_per = {"float32": 4, "float16": 2}
    rows = []
    for dtype in args.dtypes.split(","):
        model = os.path.join(args.work, f"gelu_chain_{dtype}.onnx")
        chain_model(model, shape, dtype)
        row = {"dtype": dtype, "shape": shape}
        row["kiln_nvrtc_ms"], row["kiln_nvrtc_steps"] = kiln_ms(args.kiln, model, True,
                                                                args.iterations)
        row["kiln_per_op_ms"], row["kiln_per_op_steps"] = kiln_ms(args.kiln, model, False,
                                                                  args.iterations)
        if not args.no_torch:
            row["eager_ms"] = torch_ms(shape, dtype, "eager", args.iterations)
            row["compile_ms"] = torch_ms(shape, dtype, "compile", args.iterations)
        moved = 2 * int(np.prod(shape)) * bytes_per[dtype]
        row["kiln_nvrtc_gb_s"] = moved / row["kiln_nvrtc_ms"] / 1e6
        rows.append(row)
    print(f"{'dtype':8} {'per-op ms':>10} {'NVRTC ms':>10} {'speed-up':>9} {'GB/s':>7} "
          f"{'eager ms':>9} {'compile ms':>11} {'NVRTC/compile':>14}")
    for r in rows:
        compile_ratio = (f"{r['compile_ms'] / r['kiln_nvrtc_ms']:.2f}x" if "compile_ms" in r
                         else "-")
        print(f"{r['dtype']:8} {r['kiln_per_op_ms']:10.3f} {r['kiln_nvrtc_ms']:10.3f} "
              f"{r['kiln_per_op_ms'] / r['kiln_nvrtc_ms']:8.2f}x {r['kiln_nvrtc_gb_s']:7.0f} "
              f"{r.get('eager_ms', float('nan')):9.3f} {r.get('compile_ms', float('nan')):11.3f} "
              f"{compile_ratio:>14}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"chain": "gelu_tanh_9_ops", "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
