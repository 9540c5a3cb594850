#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""torch.compile(backend="kiln") on the GPU against kiln's own figure and Inductor, layer by
layer: what the backend adds over `kiln perf --device-io`, written as JSON.

    .devpack/python/run python3 bench/torch_compile.py --kiln "kiln" --batch 256 --fp16

ResNet-50 (torchvision, random weights, seed 0), inputs already on the GPU; each row is the
median of --repeats calls (CUDA synchronized after each), in --rounds alternating rounds:
  backend      torch.compile(model, backend="kiln") (Dynamo's guards, the lowered graph module)
  graph module the lowered torch.fx module Dynamo calls (no Dynamo)
  kiln module  its KilnModule (output allocation, stream synchronization, DLPack, run_device)
  run_device   program.run_device on preallocated outputs (the extension and kiln alone)
  perf onnx    `kiln perf --device-io` on the same model exported to ONNX (kiln's own figure)
  perf artifact `kiln perf --device-io` on the backend's own compiled program (kiln.save)
and the Python layers' own cost per call (kiln's run replaced by one that takes no time);
  inductor fp16 / fp32   torch.compile's default backend (fp16: the half, channels-last model;
               fp32: PyTorch's defaults, TF32 convolutions), timed once, after the rounds
Needs PyTorch 2 and a GPU (the device machine: python/torch_device_check.sh runs it).
"""
import argparse
import copy
import datetime
import json
import os
import statistics
import sys
import tempfile

import torch
import torchvision

import kiln.torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples",
                                "torch"))
from compile_backend import compiled, export_onnx, perf_json, timed  # noqa: E402


class NoRun:
    """Stands for a kiln program whose runs take no time."""

    def run_device(self, params, outputs):
        pass


def capture_backend(options):
    """The "kiln" backend, keeping what it hands Dynamo (its ShapeCache) in ``.caches``."""
    def backend(gm, example_inputs, **kwargs):
        cache = kiln.torch.compile_backend(gm, example_inputs, options=options)
        backend.caches.append(cache)
        return cache

    backend.caches = []
    return backend


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kiln", required=True, help="the kiln CLI command")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--fp16", action="store_true")
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--overhead-calls", type=int, default=1000,
                        help="calls timed for the Python layers' own cost")
    parser.add_argument("--no-inductor", action="store_true")
    parser.add_argument("--json", default="bench-torch-compile.json")
    args = parser.parse_args()
    if not (kiln.torch.backend_available() and torch.cuda.is_available()):
        sys.exit("bench/torch_compile.py needs PyTorch 2 with a GPU")

    torch.manual_seed(0)
    model = torchvision.models.resnet50().eval().cuda()
    x = torch.randn(args.batch, 3, args.size, args.size, device="cuda")
    backend = capture_backend({"target": "cuda", "fp16": args.fp16})
    torch._dynamo.reset()
    fast = torch.compile(model, backend=backend, dynamic=False)
    with torch.no_grad():
        fast(x)
    (cache,) = backend.caches
    (graph_module,) = cache.cache.values()
    (island,) = kiln.torch.kiln_islands(graph_module)
    program = island.program
    (name,) = [n for _, n in island._inputs]
    outputs = [torch.empty(shape, dtype=dtype, device="cuda")
               for shape, dtype in island._output_specs]

    def run_device(t):
        torch.cuda.current_stream().synchronize()
        program.run_device({name: t}, outputs)

    layers = {"backend": fast, "graph module": graph_module, "kiln module": island,
              "run_device": run_device}
    flags = ["--target", "cuda", "--device-io", "--batch", str(args.batch), "--iterations",
             str(args.repeats), "--warmup", "5"]
    tmp = tempfile.mkdtemp()
    onnx_path, artifact = os.path.join(tmp, "resnet50.onnx"), os.path.join(tmp, "backend.kiln")
    export_onnx(model, args.size, onnx_path)
    kiln.save(program, artifact)
    rows = {}
    perf = {}
    for _ in range(args.rounds):
        for label, fn in layers.items():
            rows.setdefault(label, []).append(timed(fn, x, args.repeats)[1])
        for label, path, extra in (("perf onnx", onnx_path, ["--fp16"] if args.fp16 else []),
                                   ("perf artifact", artifact, [])):
            perf[label] = perf_json(args.kiln, path, flags + extra)
            rows.setdefault(label, []).append(perf[label]["median_ms"])
    # What the Python layers cost per call on their own: the program replaced by one whose
    # run_device returns at once (the extension's part is in run_device - perf artifact).
    island._program = NoRun()
    overhead_us = {}
    for label in ("backend", "graph module", "kiln module"):
        overhead_us[label] = timed(layers[label], x, args.overhead_calls)[1] * 1000
    island._program = program
    # The peers last, once each: compiling them resets Dynamo (the backend's code goes).
    if not args.no_inductor:
        half = copy.deepcopy(model).half().to(memory_format=torch.channels_last)
        xh = x.half().contiguous(memory_format=torch.channels_last)
        for label, module, inp in (("inductor fp16", half, xh), ("inductor fp32", model, x)):
            rows[label] = [timed(compiled(module, "inductor"), inp, args.repeats)[1]]

    reference = statistics.median(rows["perf onnx"])
    print(f"ResNet-50 batch {args.batch} {'fp16' if args.fp16 else 'fp32'}, "
          f"{torch.cuda.get_device_name()}, torch {torch.__version__}, median of {args.repeats} "
          f"calls per round")
    print(f"{'':<14}" + "".join(f"{'round ' + str(i + 1):>10}" for i in range(args.rounds)) +
          f"{'median':>10}{'/perf onnx':>12}")
    for label, values in rows.items():
        median = statistics.median(values)
        print(f"{label:<14}" + "".join(f"{v:>10.2f}" for v in values) +
              " " * 10 * (args.rounds - len(values)) + f"{median:>10.2f}{median / reference:>12.3f}")
    print("Python per call, kiln's run taking no time (median of "
          f"{args.overhead_calls} calls): " +
          ", ".join(f"{label} {us:.0f} us" for label, us in overhead_us.items()))
    kinds = {label: {k["kind"]: k["steps"] for k in p["kinds"]} for label, p in perf.items()}
    differ = sorted(k for k in set(kinds["perf onnx"]) | set(kinds["perf artifact"])
                    if kinds["perf onnx"].get(k) != kinds["perf artifact"].get(k))
    for k in differ:
        print(f"steps of kind {k}: onnx {kinds['perf onnx'].get(k, 0)}, "
              f"backend {kinds['perf artifact'].get(k, 0)}")
    with open(args.json, "w") as f:
        json.dump({"date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
                   "device": torch.cuda.get_device_name(), "torch": torch.__version__,
                   "batch": args.batch, "fp16": args.fp16, "repeats": args.repeats,
                   "ms": rows, "python_overhead_us": overhead_us, "perf": perf}, f, indent=1)
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
