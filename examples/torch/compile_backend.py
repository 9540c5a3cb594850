#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""torch.compile(model, backend="kiln") on ResNet-50 (PyTorch 2 and later).

    python3 examples/torch/compile_backend.py --target cuda --fp16 --batch 256

On PyTorch 1.x (Debian's 1.13) it says the backend needs PyTorch 2 and exits 0.
"""
import argparse
import time

import torch
import torchvision

import kiln.torch


def bench(fn, x, repeats):
    with torch.no_grad():
        fn(x)
        if x.is_cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(repeats):
            out = fn(x)
        if x.is_cuda:
            torch.cuda.synchronize()
    return out, (time.perf_counter() - start) / repeats * 1000


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--fp16", action="store_true")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--compare-inductor", action="store_true",
                        help="also time torch.compile's default backend")
    args = parser.parse_args()
    if not kiln.torch.backend_available():
        print(f"skipped: the kiln torch.compile backend needs PyTorch 2; this is PyTorch "
              f"{torch.__version__} (use examples/torch/lower.py instead)")
        return

    torch.manual_seed(0)
    device = "cuda" if args.target == "cuda" else "cpu"
    model = torchvision.models.resnet50().eval().to(device)
    x = torch.randn(args.batch, 3, args.size, args.size, device=device)
    compiled = torch.compile(model, backend="kiln",
                             options={"target": args.target, "fp16": args.fp16})
    out, kiln_ms = bench(compiled, x, args.repeats)
    ref, eager_ms = bench(model, x, args.repeats)
    error = ((out.float() - ref).abs().max() / ref.abs().max()).item()
    print(f"kiln backend ({args.target}, fp16={args.fp16}, batch {args.batch}): {kiln_ms:.2f} ms; "
          f"eager {eager_ms:.2f} ms; max relative difference {error:.2e}")
    if args.compare_inductor:
        inductor = torch.compile(model)
        _, inductor_ms = bench(inductor, x, args.repeats)
        print(f"inductor: {inductor_ms:.2f} ms; kiln/inductor time ratio "
              f"{kiln_ms / inductor_ms:.2f}")


if __name__ == "__main__":
    main()
