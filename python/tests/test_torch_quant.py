# SPDX-License-Identifier: Apache-2.0
# PyTorch FX-quantized models (prepare_fx -> calibrate -> convert_to_reference_fx) lowered to
# kiln: the calibrated scales and zero points become QuantizeLinear/DequantizeLinear (per-channel
# weights included) and the numbers match PyTorch's reference model.
import copy

import numpy as np
import pytest
import torch
import torchvision
from torch import nn
from torch.ao.quantization import QConfigMapping, get_default_qconfig, get_default_qconfig_mapping
from torch.ao.quantization.quantize_fx import convert_to_reference_fx, prepare_fx

import kiln.torch


def quantize(model, example, qconfig_mapping, batches=4, seed=0):
    generator = torch.Generator().manual_seed(seed)
    prepared = prepare_fx(model.eval(), qconfig_mapping, (example,))
    with torch.no_grad():
        for _ in range(batches):
            prepared(torch.randn(example.shape, generator=generator))
    return convert_to_reference_fx(prepared)


def ops_of(lowered):
    text = "".join(m.converted_graph for m in kiln.torch.kiln_islands(lowered))
    return {op: text.count(f"= {op}") for op in ("QuantizeLinear", "DequantizeLinear", "Conv",
                                                   "Gemm", "MatMul")}


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_quantized_resnet18_matches_reference():
    torch.manual_seed(0)
    example = torch.randn(2, 3, 64, 64)
    float_model = torchvision.models.resnet18().eval()
    model = quantize(copy.deepcopy(float_model), example, get_default_qconfig_mapping("fbgemm"))
    lowered = kiln.torch.lower(model, (example,))
    assert len(kiln.torch.kiln_islands(lowered)) == 1, lowered.code
    counts = ops_of(lowered)
    # One activation quantize per observer, one weight dequantize per conv/linear at least.
    assert counts["QuantizeLinear"] >= 20 and counts["DequantizeLinear"] >= 40, counts
    x = torch.randn(2, 3, 64, 64, generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        expected, actual, fp32 = model(x), lowered(x), float_model(x)
    # fp32 emulation of the same quantization. Convolutions summed in another order round some
    # values to the neighbouring step, and such flips spread through the layers: outputs agree
    # to a few steps of the output scale, and kiln is as close to the fp32 model as PyTorch's
    # reference is (wrong scales or zero points would be far off).
    steps = (actual - expected).abs() / float(model.fc_scale_0)
    assert steps.max().item() <= 4.01 and steps.mean().item() <= 1.0
    kiln_error = (actual - fp32).abs().mean().item()
    torch_error = (expected - fp32).abs().mean().item()
    assert kiln_error <= 1.1 * torch_error, (kiln_error, torch_error)


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(16, 32), nn.Linear(32, 4)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("per_channel", [True, False])
def test_quantized_linear_weights(per_channel):
    torch.manual_seed(0)
    example = torch.randn(8, 16)
    qconfig = (get_default_qconfig("fbgemm") if per_channel
               else torch.ao.quantization.default_qconfig)
    model = quantize(Mlp(), example, QConfigMapping().set_global(qconfig))
    fc = model.fc1
    assert (fc.weight_qscheme == torch.per_channel_affine) == per_channel
    lowered = kiln.torch.lower(model, (example,), min_island=1)
    x = torch.randn(8, 16, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        expected, actual = model(x), lowered(x)
    np.testing.assert_allclose(actual.numpy(), expected.numpy(), atol=2.01 * float(model.fc2_scale_0))
    # The weights reach kiln as int8 constants with their observers' scales.
    program = kiln.torch.kiln_islands(lowered)[0].converted_graph
    assert "i8[32,16]" in program and "i8[4,32]" in program
    assert ("DequantizeLinear[axis=0]" in program) == per_channel
