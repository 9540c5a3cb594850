# SPDX-License-Identifier: Apache-2.0
# Writes <model>_fp32.onnx and <model>_int8.onnx (QDQ) per model: the fp32 model exported as it
# is, and the same model quantized with torch 1.13's FX graph-mode PTQ (prepare_fx, calibration on
# random batches, convert_fx; fbgemm qconfig: per-channel s8 weights, u8 activations) exported
# with torch.onnx (opset 13, DequantizeLinear/QuantizeLinear around each quantized op).
import argparse
import os
import sys

import numpy as np
import torch
from torch.ao.quantization import QConfigMapping, get_default_qconfig_mapping
from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cpu_vs_ort"))
from export_models import MODELS, EncoderLayer  # noqa: E402  (bench/cpu_vs_ort's architectures)


def traceable_forward(self, x):
    """EncoderLayer.forward without iterating a shape or a split, which FX symbolic tracing cannot do."""
    b, s, h = x.shape[0], x.shape[1], self.proj.in_features
    d = h // self.heads
    qkv = self.qkv(x).split(h, dim=-1)
    q, k, v = qkv[0], qkv[1], qkv[2]
    q = q.reshape(b, s, self.heads, d).transpose(1, 2)
    k = k.reshape(b, s, self.heads, d).permute(0, 2, 3, 1)
    v = v.reshape(b, s, self.heads, d).transpose(1, 2)
    attn = torch.softmax(torch.matmul(q, k) * (1.0 / d**0.5), dim=-1)
    ctx = torch.matmul(attn, v).transpose(1, 2).reshape(b, s, h)
    x = self.norm1(x + self.proj(ctx))
    return self.norm2(x + self.fc2(torch.nn.functional.gelu(self.fc1(x))))


EncoderLayer.forward = traceable_forward

QUANT_MODELS = {"resnet50": "resnet50", "mobilenet_v2": "mobilenet_v2",
                "bert_encoder": "bert_base_seq128"}


def export(model, example, path):
    torch.onnx.export(model, example, path, opset_version=13, input_names=["input"],
                      output_names=["output"], dynamic_axes={"input": {0: "batch"},
                                                             "output": {0: "batch"}})


def write_calibration(folder, shape, count):
    """`count` inputs of one sample each (standard normal, fixed seed) as NN.npy: what kiln's own
    --int8 flow and ort_qdq.py calibrate on."""
    if os.path.isdir(folder) and len(os.listdir(folder)) == count:
        return
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(0)
    for i in range(count):
        np.save(os.path.join(folder, f"{i:02d}.npy"),
                rng.standard_normal([1] + list(shape)).astype(np.float32))


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out", required=True)
    p.add_argument("--calibration-batches", type=int, default=4)
    p.add_argument("--calibration-files", type=int, default=16,
                   help="inputs of one sample written for the own-int8 and ORT-format flows")
    p.add_argument("models", nargs="+", choices=sorted(QUANT_MODELS))
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for name in args.models:
        fp32_path = os.path.join(args.out, name + "_fp32.onnx")
        int8_path = os.path.join(args.out, name + "_int8.onnx")
        write_calibration(os.path.join(args.out, name + "_calibration"),
                          MODELS[QUANT_MODELS[name]][1], args.calibration_files)
        if os.path.exists(fp32_path) and os.path.exists(int8_path):
            continue
        torch.manual_seed(0)
        make, shape = MODELS[QUANT_MODELS[name]]
        model = make().eval()
        example = torch.randn(1, *shape)
        with torch.no_grad():
            export(model, example, fp32_path)
            qconfig = get_default_qconfig_mapping("fbgemm")
            if name == "bert_encoder":
                # torch.onnx cannot export quantized matmul, permute or transpose of activations:
                # only the Linear layers are quantized.
                qconfig = QConfigMapping().set_object_type(
                    torch.nn.Linear, qconfig.object_type_qconfigs[torch.nn.Linear])
            prepared = prepare_fx(model, qconfig, (example,))
            for _ in range(args.calibration_batches):
                prepared(torch.randn(4, *shape))
            export(convert_fx(prepared), example, int8_path)
        print(f"wrote {fp32_path} and {int8_path}", flush=True)


if __name__ == "__main__":
    main()
