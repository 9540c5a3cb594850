# SPDX-License-Identifier: Apache-2.0
# Writes <model>_fp32.onnx and <model>_int8.onnx (QDQ) per model: the fp32 model exported as it
# is, and the same model quantized with torch 1.13's FX graph-mode PTQ (prepare_fx, calibration on
# random batches, convert_fx; fbgemm qconfig: per-channel s8 weights, u8 activations) exported
# with torch.onnx (opset 13, DequantizeLinear/QuantizeLinear around each quantized op).
import argparse
import os
import sys

import torch
from torch.ao.quantization import get_default_qconfig_mapping
from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cpu_vs_ort"))
from export_models import MODELS  # noqa: E402  (the same architectures as bench/cpu_vs_ort)

QUANT_MODELS = {"resnet50": "resnet50", "mobilenet_v2": "mobilenet_v2",
                "bert_encoder": "bert_base_seq128"}


def export(model, example, path):
    torch.onnx.export(model, example, path, opset_version=13, input_names=["input"],
                      output_names=["output"], dynamic_axes={"input": {0: "batch"},
                                                             "output": {0: "batch"}})


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out", required=True)
    p.add_argument("--calibration-batches", type=int, default=4)
    p.add_argument("models", nargs="+", choices=sorted(QUANT_MODELS))
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for name in args.models:
        fp32_path = os.path.join(args.out, name + "_fp32.onnx")
        int8_path = os.path.join(args.out, name + "_int8.onnx")
        if os.path.exists(fp32_path) and os.path.exists(int8_path):
            continue
        torch.manual_seed(0)
        make, shape = MODELS[QUANT_MODELS[name]]
        model = make().eval()
        example = torch.randn(1, *shape)
        with torch.no_grad():
            export(model, example, fp32_path)
            prepared = prepare_fx(model, get_default_qconfig_mapping("fbgemm"), (example,))
            for _ in range(args.calibration_batches):
                prepared(torch.randn(4, *shape))
            export(convert_fx(prepared), example, int8_path)
        print(f"wrote {fp32_path} and {int8_path}", flush=True)


if __name__ == "__main__":
    main()
