#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Quantize ResNet-50 with PyTorch's FX graph mode (calibrated in PyTorch) and run it with kiln.

prepare_fx -> calibrate -> convert_to_reference_fx gives a graph of quantize/dequantize pairs
and reference modules; kiln.torch.lower turns them into QuantizeLinear/DequantizeLinear with the
calibrated scales and zero points (per-channel weights included).

    /usr/bin/python3 examples/torch/quantized.py --size 224 --calibration 8
"""
import argparse
import copy
import warnings

import torch
import torchvision
from torch.ao.quantization import get_default_qconfig_mapping
from torch.ao.quantization.quantize_fx import convert_to_reference_fx, prepare_fx

import kiln.torch


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--calibration", type=int, default=8, help="calibration batches")
    parser.add_argument("--target", default="cpu")
    args = parser.parse_args()
    warnings.filterwarnings("ignore", category=UserWarning)  # torch.ao's reduce_range notice

    torch.manual_seed(0)
    model = getattr(torchvision.models, args.model)().eval()
    float_model = copy.deepcopy(model)  # prepare_fx takes the model over
    example = torch.randn(args.batch, 3, args.size, args.size)
    prepared = prepare_fx(model, get_default_qconfig_mapping("fbgemm"), (example,))
    with torch.no_grad():
        for _ in range(args.calibration):  # stand-in for real images
            prepared(torch.randn_like(example))
    reference = convert_to_reference_fx(prepared)

    lowered = kiln.torch.lower(reference, (example,), target=args.target)
    graph = "".join(m.converted_graph for m in kiln.torch.kiln_islands(lowered))
    print(f"kiln graph: {graph.count('= QuantizeLinear')} QuantizeLinear, "
          f"{graph.count('= DequantizeLinear')} DequantizeLinear, {graph.count('= Conv')} Conv")

    x = torch.randn_like(example)
    with torch.no_grad():
        fp32, fake_quant, kiln_out = float_model(x), reference(x), lowered(x)
    steps = (kiln_out - fake_quant).abs() / float(reference.fc_scale_0)
    print(f"kiln vs PyTorch's quantized reference: {steps.mean().item():.2f} output steps on "
          f"average, at most {steps.max().item():.0f} (rounding flips of fp32 emulation)")
    print(f"mean |error| against the fp32 model: kiln {(kiln_out - fp32).abs().mean().item():.4f}, "
          f"PyTorch's reference {(fake_quant - fp32).abs().mean().item():.4f} "
          f"(|fp32| up to {fp32.abs().max().item():.2f})")
    print(f"top-1 agrees with the quantized reference: "
          f"{bool((kiln_out.argmax(1) == fake_quant.argmax(1)).all())}")


if __name__ == "__main__":
    main()
