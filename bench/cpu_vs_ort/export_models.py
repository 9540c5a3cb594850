# SPDX-License-Identifier: Apache-2.0
"""Exports the cpu_vs_ort models to ONNX (random-init weights, fixed seed, dynamic batch dim).

  python3 bench/cpu_vs_ort/export_models.py --out DIR [MODELS]
  python3 bench/cpu_vs_ort/export_models.py --out DIR --calibrate --inputs IN mobilenet_v2

--calibrate writes NAME.calibrated.onnx: the same random weights, but every BatchNorm's running
statistics measured on a few random batches and the last Linear scaled so the logits have unit
spread. torchvision's default init leaves the activations shrinking layer by layer (its depthwise
filters get a fan-out of C*k*k), down to logits of 1e-9 (MobileNetV2) and 1e-14 (EfficientNet-B0):
below fp16's range, so an fp16 comparison of those exports says nothing. --inputs writes
IN/NAME/NNN.npy, random batches for `kiln verify --fp16 --inputs IN/NAME`.
"""
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


def vit_random_head():
    """torchvision's ViT-B/16 with a random head (seed 1, std 0.02): its own head starts at zero,
    so every output is 0 whatever the body computes and comparing them says nothing."""
    model = torchvision_model("vit_b_16")()
    torch.manual_seed(1)
    torch.nn.init.normal_(model.heads.head.weight, std=0.02)
    torch.nn.init.normal_(model.heads.head.bias, std=0.02)
    return model


# Variants for checks, exported only when named.
MODELS["vit_b_16_rh"] = (vit_random_head, [3, 224, 224])
NAMED_ONLY = {"vit_b_16_rh"}

EXPORT_WITH_GRAD = {"vit_b_16", "vit_b_16_rh"}


def make_model(name, models=None):
    """The model `name` of `models` (default MODELS), made with seed 0 so every caller gets the
    same weights, in eval mode; and the shape of one sample."""
    make, sample = (models or MODELS)[name]
    torch.manual_seed(0)
    return make().eval(), sample


def calibrate(model, sample, batches=2, batch=8):
    """Sets every BatchNorm's running statistics to those of `model`'s activations on random
    inputs (seed 0; the rest of the model, dropout included, stays in eval mode), then scales the
    last Linear so the logits have a standard deviation of 1. Returns `model`."""
    norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if not norms:
        raise RuntimeError("--calibrate: the model has no BatchNorm to calibrate")
    gen = torch.Generator().manual_seed(0)
    xs = [torch.rand([batch] + sample, generator=gen) for _ in range(batches)]
    with torch.no_grad():
        # Cumulative averages (momentum None) over all batches, the BatchNorms in train mode (each
        # normalizing by its batch's statistics, close to the running ones it ends with).
        for bn in norms:
            bn.reset_running_stats()
            bn.momentum = None
            bn.train()
        for x in xs:
            model(x)
        for bn in norms:
            bn.eval()
        linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
        if linears:
            spread = float(torch.cat([model(x) for x in xs]).std())
            if spread > 0:
                linears[-1].weight.mul_(1.0 / spread)
                if linears[-1].bias is not None:
                    linears[-1].bias.mul_(1.0 / spread)
    return model


def write_inputs(name, out_dir, models=None, count=4, batch=2):
    """`count` random batches of `batch` samples (seed 1) as OUT_DIR/NAME/NNN.npy; the folder."""
    import numpy as np

    _, sample = (models or MODELS)[name]
    folder = os.path.join(out_dir, name)
    os.makedirs(folder, exist_ok=True)
    gen = torch.Generator().manual_seed(1)
    for i in range(count):
        x = torch.rand([batch] + sample, generator=gen).numpy().astype(np.float32)
        np.save(os.path.join(folder, f"{i:03d}.npy"), x)
    return folder


def export(name, out_dir, models=None, calibrated=False, opset=17):
    """Writes OUT_DIR/NAME.onnx (opset 17), or NAME_opN.onnx at another opset: the forms other
    exporters write (opset 13: ReLU6 as Clip with min and max inputs, Split with a split input,
    LayerNorm decomposed), the same weights."""
    suffix = "" if opset == 17 else f"_op{opset}"
    path = os.path.join(out_dir, name + suffix + (".calibrated" if calibrated else "") + ".onnx")
    if os.path.exists(path):
        return path
    model, sample = make_model(name, models)
    if calibrated:
        calibrate(model, sample)
    x = torch.rand([1] + sample)
    tmp = path + ".tmp"
    # PyTorch 2.x (the GPU machine's) exports through dynamo by default, at opset 18 with external
    # data; the TorchScript exporter keeps opset 17 and one file, as Debian's torch 1.13 does.
    legacy = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
    # Under no_grad, nn.MultiheadAttention (ViT) takes its fused fast path, which the TorchScript
    # exporter cannot write; with gradients on it traces the plain ops. The graph is the same.
    with torch.set_grad_enabled(name in EXPORT_WITH_GRAD):
        torch.onnx.export(model, x, tmp, opset_version=opset, input_names=["input"],
                          output_names=["output"],
                          dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}}, **legacy)
    os.replace(tmp, path)
    return path


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", required=True, help="cache directory for the .onnx files")
    parser.add_argument("--calibrate", action="store_true",
                        help="write NAME.calibrated.onnx: BatchNorm statistics measured on random "
                        "batches, logits of unit spread (activations that fp16 can hold)")
    parser.add_argument("--inputs", help="also write random input batches as INPUTS/NAME/NNN.npy")
    parser.add_argument("--inputs-count", type=int, default=4, help="batches per model")
    parser.add_argument("--inputs-batch", type=int, default=2, help="samples per batch")
    parser.add_argument("--opset", type=int, default=17,
                        help="the opset to export at (other than 17: files NAME_opN.onnx)")
    parser.add_argument("models", nargs="*", default=[m for m in MODELS if m not in NAMED_ONLY],
                        help="models to export")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for name in args.models:
        if name not in MODELS:
            sys.exit(f"export_models: unknown model \"{name}\"; known: {', '.join(MODELS)}")
        try:
            print(export(name, args.out, calibrated=args.calibrate, opset=args.opset), flush=True)
        except RuntimeError as e:
            sys.exit(f"export_models: {name}: {e}")
        if args.inputs:
            print(write_inputs(name, args.inputs, count=args.inputs_count,
                               batch=args.inputs_batch), flush=True)


if __name__ == "__main__":
    main()
