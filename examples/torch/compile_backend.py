#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""torch.compile(model, backend="kiln") on ResNet-50 (PyTorch 2 and later).

    python3 examples/torch/compile_backend.py --target cuda --fp16 --batch 256 \\
        --compare-inductor --kiln-perf "kiln" --check-fp32 8 --json out.json

Times the kiln backend (median of per-call times, CUDA synchronized after each call) on inputs
already on the device, PyTorch eager, and with --compare-inductor torch.compile's default
backend (Inductor) on the fp16 channels-last model (with --fp16) and on the fp32 model.
--kiln-perf CMD also exports the model to ONNX and times it with `CMD perf --device-io` (kiln's
own figure, the same model and precision). --check-fp32 B compares the fp32 kiln backend at
batch B with eager fp32 with TF32 off, and both with eager float64.
On PyTorch 1.x (Debian's 1.13) it says the backend needs PyTorch 2 and exits 0.
"""
import argparse
import copy
import inspect
import json
import os
import shlex
import statistics
import subprocess
import tempfile
import time

import torch
import torchvision

import kiln.torch


def timed(fn, x, repeats, warmup=3):
    """The last output and the median milliseconds per call of ``fn(x)``."""
    times = []
    with torch.no_grad():
        for i in range(warmup + repeats):
            start = time.perf_counter()
            out = fn(x)
            if x.is_cuda:
                torch.cuda.synchronize()
            if i >= warmup:
                times.append((time.perf_counter() - start) * 1000)
    return out, statistics.median(times)


def relative_error(out, ref):
    """||out - ref|| / ||ref|| in float64."""
    out, ref = out.double(), ref.double()
    return ((out - ref).norm() / ref.norm()).item()


def compiled(model, backend, options=None):
    torch._dynamo.reset()  # one backend's compiled code at a time
    return torch.compile(model, backend=backend, options=options, dynamic=False)


def export_onnx(model, size, path):
    """The model as ONNX (opset 17, TorchScript exporter, dynamic batch), as bench/ exports it."""
    legacy = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters \
        else {}
    torch.onnx.export(copy.deepcopy(model).cpu(), torch.randn(1, 3, size, size), path,
                      opset_version=17, input_names=["input"], output_names=["output"],
                      dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}}, **legacy)


def perf_json(command, path, flags):
    """``command perf path --json flags...``: kiln perf's JSON line."""
    cmd = shlex.split(command) + ["perf", path, "--json", *flags]
    print("running:", " ".join(cmd), flush=True)
    done = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def kiln_perf(command, model, args):
    """``command perf`` on the model exported to ONNX: kiln's own median ms (device I/O on cuda)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "resnet50.onnx")
        export_onnx(model, args.size, path)
        flags = ["--target", args.target, "--batch", str(args.batch),
                 "--iterations", str(max(args.repeats, 20)), "--warmup", "5"]
        flags += ["--fp16"] if args.fp16 else []
        flags += ["--device-io"] if args.target == "cuda" else []
        return perf_json(command, path, flags)["median_ms"]


def check_fp32(model, batch, size):
    """Relative errors of the fp32 kiln backend and of eager fp32 (TF32 off) against eager fp64."""
    tf32 = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    try:
        x = torch.randn(batch, 3, size, size, device="cuda")
        fast = compiled(model, "kiln", {"target": "cuda", "fp16": False})
        with torch.no_grad():
            out = fast(x)
            ref = model(x)
            ref64 = copy.deepcopy(model).double()(x.double())
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = tf32
    return {"batch": batch, "kiln_vs_eager": relative_error(out, ref),
            "kiln_vs_fp64": relative_error(out, ref64), "eager_vs_fp64": relative_error(ref, ref64)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--fp16", action="store_true")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--compare-inductor", action="store_true",
                        help="also time torch.compile's default backend")
    parser.add_argument("--kiln-perf", metavar="CMD",
                        help="the kiln command (e.g. 'build/ci/tools/kiln') to time the ONNX "
                             "export with `perf --device-io`")
    parser.add_argument("--check-fp32", type=int, metavar="BATCH",
                        help="check the fp32 backend against eager (TF32 off) at this batch")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()
    if not kiln.torch.backend_available():
        print(f"skipped: the kiln torch.compile backend needs PyTorch 2; this is PyTorch "
              f"{torch.__version__} (use examples/torch/lower.py instead)")
        return

    torch.manual_seed(0)
    device = "cuda" if args.target == "cuda" else "cpu"
    model = torchvision.models.resnet50().eval().to(device)
    x = torch.randn(args.batch, 3, args.size, args.size, device=device)
    figures = {"target": args.target, "fp16": args.fp16, "batch": args.batch,
               "torch": torch.__version__,
               "device": torch.cuda.get_device_name() if device == "cuda" else "cpu"}
    fast = compiled(model, "kiln", {"target": args.target, "fp16": args.fp16})
    start = time.perf_counter()
    with torch.no_grad():
        fast(x)  # Dynamo traces, kiln lowers and compiles (tuning included)
    figures["kiln_first_call_s"] = time.perf_counter() - start
    out, figures["kiln_ms"] = timed(fast, x, args.repeats)
    ref, figures["eager_ms"] = timed(model, x, args.repeats)
    figures["error_vs_eager"] = relative_error(out, ref)
    print(f"kiln backend ({args.target}, fp16={args.fp16}, batch {args.batch}): "
          f"{figures['kiln_ms']:.2f} ms (first call {figures['kiln_first_call_s']:.1f} s); "
          f"eager fp32 {figures['eager_ms']:.2f} ms; relative difference "
          f"{figures['error_vs_eager']:.2e}", flush=True)
    save(figures, args.json)
    if args.kiln_perf:
        figures["kiln_perf_ms"] = kiln_perf(args.kiln_perf, model, args)
        print(f"kiln perf{' --device-io' if device == 'cuda' else ''}: "
              f"{figures['kiln_perf_ms']:.2f} ms; backend/perf time ratio "
              f"{figures['kiln_ms'] / figures['kiln_perf_ms']:.3f}", flush=True)
        save(figures, args.json)
    if args.compare_inductor and args.fp16:
        half = copy.deepcopy(model).half().to(memory_format=torch.channels_last)
        xh = x.half().contiguous(memory_format=torch.channels_last)
        _, figures["inductor_fp16_ms"] = timed(compiled(half, "inductor"), xh, args.repeats)
        print(f"inductor fp16 channels_last: {figures['inductor_fp16_ms']:.2f} ms; "
              f"kiln/inductor time ratio {figures['kiln_ms'] / figures['inductor_fp16_ms']:.2f}",
              flush=True)
        save(figures, args.json)
    if args.check_fp32:
        figures["fp32_check"] = check_fp32(model, args.check_fp32, args.size)
        print("fp32, TF32 off, batch {batch}: kiln vs eager {kiln_vs_eager:.2e}, kiln vs fp64 "
              "{kiln_vs_fp64:.2e}, eager vs fp64 {eager_vs_fp64:.2e}".format(
                  **figures["fp32_check"]), flush=True)
        save(figures, args.json)
    if args.compare_inductor:
        _, figures["inductor_fp32_ms"] = timed(compiled(model, "inductor"), x, args.repeats)
        print(f"inductor fp32 (PyTorch's defaults, TF32 convolutions): "
              f"{figures['inductor_fp32_ms']:.2f} ms; kiln/inductor time ratio "
              f"{figures['kiln_ms'] / figures['inductor_fp32_ms']:.2f}", flush=True)
        save(figures, args.json)


def save(figures, path):
    """Writes the figures so far (a later step cut short keeps the earlier ones)."""
    if path:
        with open(path, "w") as f:
            json.dump(figures, f, indent=1)

if __name__ == "__main__":
    main()
