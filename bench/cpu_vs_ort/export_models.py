# SPDX-License-Identifier: Apache-2.0
# Exports the cpu_vs_ort models to ONNX (random-init weights, fixed seed, dynamic batch dim).
import argparse
import inspect
import os
import sys

import torch


class EncoderLayer(torch.nn.Module):
    """One BERT-base encoder layer: self-attention, residual + LayerNorm, GELU MLP."""

    def __init__(self, hidden=768, heads=12, ffn=3072):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(hidden, 3 * hidden)
        self.proj = torch.nn.Linear(hidden, hidden)
        self.norm1 = torch.nn.LayerNorm(hidden)
        self.fc1 = torch.nn.Linear(hidden, ffn)
        self.fc2 = torch.nn.Linear(ffn, hidden)
        self.norm2 = torch.nn.LayerNorm(hidden)

    def forward(self, x):
        b, s, h = x.shape
        d = h // self.heads
        q, k, v = self.qkv(x).split(h, dim=-1)
        q = q.reshape(b, s, self.heads, d).transpose(1, 2)
        k = k.reshape(b, s, self.heads, d).permute(0, 2, 3, 1)
        v = v.reshape(b, s, self.heads, d).transpose(1, 2)
        attn = torch.softmax(torch.matmul(q, k) * (1.0 / d**0.5), dim=-1)
        ctx = torch.matmul(attn, v).transpose(1, 2).reshape(b, s, h)
        x = self.norm1(x + self.proj(ctx))
        return self.norm2(x + self.fc2(torch.nn.functional.gelu(self.fc1(x))))


class BertEncoder(torch.nn.Module):
    """BERT-base shaped encoder (12 layers, hidden 768) over already-embedded tokens."""

    def __init__(self, layers=12):
        super().__init__()
        self.layers = torch.nn.ModuleList([EncoderLayer() for _ in range(layers)])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def torchvision_model(name):
    """A torchvision model with random weights; torchvision is imported only when asked for."""

    def make():
        try:
            import torchvision
        except ImportError as e:
            raise RuntimeError(f"model {name} needs torchvision, which is not installed") from e
        return getattr(torchvision.models, name)()

    return make


MODELS = {
    "resnet50": (torchvision_model("resnet50"), [3, 224, 224]),
    "mobilenet_v2": (torchvision_model("mobilenet_v2"), [3, 224, 224]),
    "squeezenet1_1": (torchvision_model("squeezenet1_1"), [3, 224, 224]),
    "efficientnet_b0": (torchvision_model("efficientnet_b0"), [3, 224, 224]),
    "densenet121": (torchvision_model("densenet121"), [3, 224, 224]),
    "vit_b_16": (torchvision_model("vit_b_16"), [3, 224, 224]),
    "bert_base_seq128": (lambda: BertEncoder(), [128, 768]),
}


EXPORT_WITH_GRAD = {"vit_b_16"}


def make_model(name, models=None):
    """The model `name` of `models` (default MODELS), made with seed 0 so every caller gets the
    same weights, in eval mode; and the shape of one sample."""
    make, sample = (models or MODELS)[name]
    torch.manual_seed(0)
    return make().eval(), sample


def export(name, out_dir, models=None):
    path = os.path.join(out_dir, name + ".onnx")
    if os.path.exists(path):
        return path
    model, sample = make_model(name, models)
    x = torch.rand([1] + sample)
    tmp = path + ".tmp"
    # PyTorch 2.x (the GPU machine's) exports through dynamo by default, at opset 18 with external
    # data; the TorchScript exporter keeps opset 17 and one file, as Debian's torch 1.13 does.
    legacy = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
    # Under no_grad, nn.MultiheadAttention (ViT) takes its fused fast path, which the TorchScript
    # exporter cannot write; with gradients on it traces the plain ops. The graph is the same.
    with torch.set_grad_enabled(name in EXPORT_WITH_GRAD):
        torch.onnx.export(model, x, tmp, opset_version=17, input_names=["input"],
                          output_names=["output"],
                          dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}}, **legacy)
    os.replace(tmp, path)
    return path


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", required=True, help="cache directory for the .onnx files")
    parser.add_argument("models", nargs="*", default=list(MODELS), help="models to export")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for name in args.models:
        if name not in MODELS:
            sys.exit(f"export_models: unknown model \"{name}\"; known: {', '.join(MODELS)}")
        print(export(name, args.out), flush=True)


if __name__ == "__main__":
    main()
