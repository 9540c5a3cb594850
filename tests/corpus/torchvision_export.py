# SPDX-License-Identifier: Apache-2.0
"""Exports torchvision's detection, segmentation, video and optical-flow architectures to ONNX
(opset 17) with Debian's torch, at fixed seeds and without pretrained weights (nothing is
downloaded), for the corpus's `torchvision` models. The manifest names the builder, its keyword
arguments and the example inputs' shapes; the export is cached next to a stamp of those.

usage: /usr/bin/python3 tests/corpus/torchvision_export.py OUT.onnx '<manifest torchvision JSON>'
"""
import contextlib
import json
import sys

import torch
import torchvision


class Flow(torch.nn.Module):
    """RAFT returns every refinement step; the corpus compares the last."""

    def __init__(self, model, updates):
        super().__init__()
        self.model = model
        self.updates = updates

    def forward(self, image1, image2):
        return self.model(image1, image2, num_flow_updates=self.updates)[-1]


class Detection(torch.nn.Module):
    """A detector on one image tensor (not a list), returning boxes, scores and labels."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, image):
        out = self.model([image[0]])[0]
        return out["boxes"], out["scores"], out["labels"]


class Segmentation(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, image):
        return self.model(image)["out"]


def build(spec):
    torch.manual_seed(spec.get("seed", 0))
    family = spec["family"]
    module = {"detection": torchvision.models.detection,
              "segmentation": torchvision.models.segmentation,
              "video": torchvision.models.video,
              "optical_flow": torchvision.models.optical_flow}[family]
    kwargs = dict(spec.get("kwargs", {}))
    updates = kwargs.pop("num_flow_updates", 12)
    kwargs.setdefault("weights", None)
    if family in ("detection", "segmentation"):
        kwargs.setdefault("weights_backbone", None)
    model = getattr(module, spec["builder"])(**kwargs).eval()
    if family == "detection":
        return Detection(model)
    if family == "segmentation":
        return Segmentation(model)
    if family == "optical_flow":
        return Flow(model, updates)
    return model


@contextlib.contextmanager
def float64_coordinates():
    """RAFT builds its pixel-coordinate grid with `.float()`, which a float64 model cannot add to
    its float64 flow: for the float64 run the grid is built in float64."""
    from torchvision.models.optical_flow import raft
    grid = raft.make_coords_grid
    raft.make_coords_grid = lambda *args, **kwargs: grid(*args, **kwargs).double()
    try:
        yield
    finally:
        raft.make_coords_grid = grid


def export(out_path, spec):
    model = build(spec)
    names = list(spec["inputs"])
    torch.manual_seed(1)
    examples = tuple(torch.rand(*spec["inputs"][n]) for n in names)
    with torch.no_grad():
        torch.onnx.export(model, examples, out_path, opset_version=17, input_names=names,
                          output_names=spec.get("outputs"), do_constant_folding=True)


if __name__ == "__main__":
    export(sys.argv[1], json.loads(sys.argv[2]))
