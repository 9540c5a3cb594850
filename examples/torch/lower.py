#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Lower torchvision's ResNet-50 to kiln with kiln.torch.lower and compare it with PyTorch.

    /usr/bin/python3 examples/torch/lower.py --size 224 --batch 1 --target cpu
"""
import argparse
import time

import torch
import torchvision

import kiln.torch


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet50", help="a torchvision model name")
    parser.add_argument("--size", type=int, default=224, help="input height and width")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--target", default="cpu", help="cpu, cuda or ref")
    parser.add_argument("--save", help="also torch.save the lowered module to this file")
    args = parser.parse_args()

    torch.manual_seed(0)
    model = getattr(torchvision.models, args.model)().eval()  # random weights, fixed seed
    x = torch.randn(args.batch, 3, args.size, args.size)

    start = time.perf_counter()
    lowered = kiln.torch.lower(model, (x,), target=args.target)
    print(f"lowered {args.model} in {time.perf_counter() - start:.1f} s: "
          f"{len(kiln.torch.kiln_islands(lowered))} kiln island(s)")
    print(lowered.code.strip())

    with torch.no_grad():
        expected = model(x)
        actual = lowered(x)
    error = ((actual - expected).abs().max() / expected.abs().max()).item()
    print(f"output {tuple(actual.shape)}, max relative difference to PyTorch {error:.2e}")
    print(f"top-1 agrees: {bool((actual.argmax(1) == expected.argmax(1)).all())}")
    if args.save:
        torch.save(lowered, args.save)
        print(f"saved to {args.save} (torch.load it back: the kiln artifact travels inside)")


if __name__ == "__main__":
    main()
