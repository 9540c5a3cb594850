# SPDX-License-Identifier: Apache-2.0
# Exports torchvision architectures and a transformer encoder with Debian's torch (fixed seeds),
# runs them with `kiln run` on the ref target and compares every output with PyTorch's, then
# checks `kiln verify`. Small models run in the default set; large ones are marked `large`.
import json
import os
import subprocess
import tempfile

import numpy as np
import pytest
import torch
import torchvision

KILN = os.environ.get("KILN_CLI", "build/ci/tools/kiln")


class Encoder(torch.nn.Module):
    """A BERT-shaped encoder: embeddings, positional encoding, 2 post-norm layers, pooled head."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(1000, 128)
        self.position = torch.nn.Parameter(torch.randn(1, 64, 128) * 0.02)
        layer = torch.nn.TransformerEncoderLayer(128, 4, 256, dropout=0.0, batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = torch.nn.Linear(128, 2)

    def forward(self, tokens):
        x = self.embed(tokens) + self.position[:, : tokens.shape[1]]
        return self.head(self.encoder(x)[:, 0])


def image(size):
    return torch.rand(1, 3, size, size)


# name -> (builder, input maker, opset)
MODELS = {
    "squeezenet1_1": (lambda: torchvision.models.squeezenet1_1(), lambda: image(224), 13),
    "mobilenet_v2": (lambda: torchvision.models.mobilenet_v2(), lambda: image(224), 13),
    "resnet50": (lambda: torchvision.models.resnet50(), lambda: image(224), 13),
    "efficientnet_b0": (lambda: torchvision.models.efficientnet_b0(), lambda: image(224), 13),
    "transformer_encoder": (Encoder, lambda: torch.randint(0, 1000, (2, 16)), 14),
    "densenet121": (lambda: torchvision.models.densenet121(), lambda: image(224), 13),
    "inception_v3": (lambda: torchvision.models.inception_v3(aux_logits=False, init_weights=True),
                     lambda: image(299), 13),
    "vit_b_16": (lambda: torchvision.models.vit_b_16(), lambda: image(224), 14),
}
LARGE = {"densenet121", "inception_v3", "vit_b_16"}


def export(name, folder):
    build, make_input, opset = MODELS[name]
    torch.manual_seed(0)
    model = build().eval()
    x = make_input()
    with torch.no_grad():
        expected = model(x).numpy()
    path = os.path.join(folder, name + ".onnx")
    torch.onnx.export(model, (x,), path, input_names=["input"], output_names=["output"],
                      opset_version=opset, do_constant_folding=False)
    np.save(os.path.join(folder, "input.npy"), x.numpy())
    return path, expected


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.large) if n in LARGE else n for n in MODELS])
def test_kiln_matches_pytorch(name):
    with tempfile.TemporaryDirectory() as folder:
        path, expected = export(name, folder)
        out_dir = os.path.join(folder, "out")
        run = subprocess.run([KILN, "run", path, "--input", "input=" + os.path.join(folder, "input.npy"),
                              "--output-dir", out_dir], capture_output=True, text=True)
        assert run.returncode == 0, run.stdout + run.stderr
        listing = json.load(open(os.path.join(out_dir, "outputs.json")))
        got = np.load(os.path.join(out_dir, listing["outputs"][0]["file"]))
        assert got.shape == expected.shape
        np.testing.assert_allclose(got, expected, rtol=1e-3, atol=1e-4)

        verify = subprocess.run([KILN, "verify", path, "--target", "ref", "--input",
                                 "input=" + os.path.join(folder, "input.npy")], capture_output=True, text=True)
        assert verify.returncode == 0, verify.stdout + verify.stderr
        assert "all outputs agree" in verify.stdout
