# SPDX-License-Identifier: Apache-2.0
# Every converter of kiln.torch against PyTorch eager on real values: each case is a small module
# calling the op, lowered whole to kiln's cpu target (min_island=1), fp32 within 1e-4 relative.
import math
import operator

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import kiln
import kiln.torch
from kiln.torch import _registry


class Fn(nn.Module):
    """Wraps a function of the inputs as a module, so that FX traces it."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


class Fn2(Fn):
    def forward(self, x, y):
        return self.fn(x, y)


def rand(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


X4 = rand(2, 3, 8, 8)
X3 = rand(2, 5, 16)
CONV = nn.Conv2d(3, 4, 3, padding=1)
W = rand(6, 16, seed=1)
BN = rand(4, 3, seed=4).abs()

# name -> (module, inputs)
CASES = {
    "relu": (Fn(torch.relu), X4), "F.relu": (Fn(F.relu), X4), "nn.ReLU": (nn.ReLU(), X4),
    "Tensor.relu": (Fn(lambda x: x.relu()), X4),
    "relu6": (nn.ReLU6(), X4 * 4), "F.relu6": (Fn(F.relu6), X4 * 4),
    "hardtanh": (nn.Hardtanh(-0.5, 0.5), X4), "F.hardtanh": (Fn(F.hardtanh), X4),
    "gelu": (nn.GELU(), X4), "gelu_tanh": (nn.GELU(approximate="tanh"), X4),
    "F.gelu": (Fn(F.gelu), X4), "silu": (nn.SiLU(), X4), "F.silu": (Fn(F.silu), X4),
    "sigmoid": (nn.Sigmoid(), X4), "torch.sigmoid": (Fn(torch.sigmoid), X4),
    "tanh": (nn.Tanh(), X4), "hardswish": (nn.Hardswish(), X4 * 4),
    "hardsigmoid": (nn.Hardsigmoid(), X4 * 4), "leaky_relu": (nn.LeakyReLU(0.1), X4),
    "F.leaky_relu": (Fn(lambda x: F.leaky_relu(x, 0.2)), X4),
    "softplus": (nn.Softplus(), X4),
    "exp": (Fn(torch.exp), X4), "log": (Fn(lambda x: torch.log(x.abs() + 1)), X4),
    "sqrt": (Fn(lambda x: torch.sqrt(x.abs())), X4), "abs": (Fn(torch.abs), X4),
    "neg": (Fn(lambda x: -x), X4), "erf": (Fn(torch.erf), X4),
    "reciprocal": (Fn(lambda x: torch.reciprocal(x.abs() + 1)), X4),
    "floor_ceil": (Fn(lambda x: torch.floor(x) + torch.ceil(x)), X4),
    "sin_cos": (Fn(lambda x: torch.sin(x) * torch.cos(x)), X4),
    "add_scalar": (Fn(lambda x: x + 1.5), X4), "radd": (Fn(lambda x: 2 + x), X4),
    "sub": (Fn(lambda x: x - 0.5), X4), "rsub": (Fn(lambda x: 1 - x), X4),
    "mul": (Fn(lambda x: x * 3), X4), "rmul": (Fn(lambda x: 3 * x), X4),
    "div": (Fn(lambda x: x / 4), X4), "rdiv": (Fn(lambda x: 1 / (x.abs() + 1)), X4),
    "pow": (Fn(lambda x: x ** 2), X4),
    "torch.add_alpha": (Fn(lambda x: torch.add(x, x, alpha=2)), X4),
    "iadd": (Fn(lambda x: operator.iadd(x * 1, x)), X4),
    "add_tensors": (Fn2(operator.add), (X4, rand(1, 3, 1, 8, seed=2))),
    "mul_tensors": (Fn2(torch.mul), (X4, rand(2, 3, 8, 8, seed=3))),
    "maximum": (Fn2(torch.maximum), (X4, rand(2, 3, 8, 8, seed=3))),
    "minimum": (Fn2(torch.minimum), (X4, rand(2, 3, 8, 8, seed=3))),
    "torch.rsub": (Fn(lambda x: torch.rsub(x, 2.0)), X4),
    "clamp": (Fn(lambda x: torch.clamp(x, -0.3, 0.4)), X4),
    "clamp_min": (Fn(lambda x: x.clamp(min=0.1)), X4),
    "conv2d": (CONV, X4),
    "conv2d_stride_dil": (nn.Conv2d(3, 6, 3, stride=2, dilation=2, padding=2), X4),
    "conv2d_groups_nobias": (nn.Conv2d(4, 8, 3, groups=2, bias=False), rand(1, 4, 7, 7)),
    "conv2d_same": (nn.Conv2d(3, 4, 4, padding="same"), X4),
    "conv1d": (nn.Conv1d(5, 7, 3, padding=1), X3),
    "F.conv2d": (Fn(lambda x: F.conv2d(x, CONV.weight.detach(), CONV.bias.detach(), padding=1)),
                 X4),
    "batchnorm2d": (nn.BatchNorm2d(3), X4), "batchnorm1d": (nn.BatchNorm1d(5), X3),
    "F.batch_norm": (Fn(lambda x: F.batch_norm(x, BN[0], BN[1] + 0.5, BN[2], BN[3])), X4),
    "layer_norm": (nn.LayerNorm(16), X3), "layer_norm_2d": (nn.LayerNorm([5, 16]), X3),
    "F.layer_norm": (Fn(lambda x: F.layer_norm(x, (16,))), X3),
    "maxpool2d": (nn.MaxPool2d(3, 2, 1), X4),
    "maxpool2d_ceil": (nn.MaxPool2d(2, ceil_mode=True), rand(1, 3, 7, 7)),
    "F.max_pool2d": (Fn(lambda x: F.max_pool2d(x, 2)), X4),
    # The builtins Dynamo graphs record for F.max_pool2d, F.avg_pool2d, ...
    "torch.max_pool2d": (Fn(lambda x: torch.max_pool2d(x, 3, 2, 1)), X4),
    "_nn.avg_pool2d": (Fn(lambda x: torch._C._nn.avg_pool2d(x, 2)), X4),
    "_nn.adaptive_avg_pool2d": (Fn(lambda x: torch._C._nn.adaptive_avg_pool2d(x, 1)), X4),
    "avgpool2d": (nn.AvgPool2d(2), X4),
    "avgpool2d_pad": (nn.AvgPool2d(3, 1, 1, count_include_pad=False), X4),
    "F.avg_pool2d": (Fn(lambda x: F.avg_pool2d(x, 2, 2)), X4),
    "adaptive_avg_pool_1": (nn.AdaptiveAvgPool2d(1), X4),
    "adaptive_avg_pool_2": (nn.AdaptiveAvgPool2d((2, 4)), X4),
    "F.adaptive_avg_pool2d": (Fn(lambda x: F.adaptive_avg_pool2d(x, (1, 1))), X4),
    "linear": (nn.Linear(16, 6), X3[0]), "linear_3d": (nn.Linear(16, 6), X3),
    "F.linear": (Fn(lambda x: F.linear(x, W)), X3),
    "matmul": (Fn(lambda x: torch.matmul(x, W.t())), X3),
    "matmul_op": (Fn(lambda x: x @ x.transpose(1, 2)), X3),
    "bmm": (Fn(lambda x: torch.bmm(x, x.transpose(1, 2))), X3),
    "flatten": (Fn(lambda x: torch.flatten(x, 1)), X4),
    "Tensor.flatten": (Fn(lambda x: x.flatten(2)), X4),
    "nn.Flatten": (nn.Flatten(), X4),
    "view": (Fn(lambda x: x.view(x.size(0), -1)), X4),
    "reshape": (Fn(lambda x: x.reshape(2, 3, 64)), X4),
    "torch.reshape": (Fn(lambda x: torch.reshape(x, (-1, 8))), X4),
    "permute": (Fn(lambda x: x.permute(0, 2, 3, 1)), X4),
    "transpose": (Fn(lambda x: x.transpose(1, -1)), X4), "t": (Fn(lambda x: (x * 2)[0].t()), X3),
    "unsqueeze_squeeze": (Fn(lambda x: x.unsqueeze(1).squeeze(1).unsqueeze(-1)), X3),
    "cat": (Fn(lambda x: torch.cat([x, x * 2], dim=1)), X4),
    "stack": (Fn(lambda x: torch.stack([x, x + 1], dim=-1)), X3),
    "chunk": (Fn(lambda x: x.chunk(2, dim=-1)[1]), X3),
    "split": (Fn(lambda x: torch.split(x, [4, 12], dim=2)[0]), X3),
    "softmax": (Fn(lambda x: F.softmax(x, dim=-1)), X3), "nn.Softmax": (nn.Softmax(dim=1), X3),
    "Tensor.softmax": (Fn(lambda x: x.softmax(1)), X3),
    "log_softmax": (Fn(lambda x: F.log_softmax(x, dim=-1)), X3),
    "mean": (Fn(lambda x: x.mean(dim=(2, 3), keepdim=True)), X4),
    "sum": (Fn(lambda x: torch.sum(x, 1)), X4), "amax": (Fn(lambda x: x.amax(-1)), X3),
    "dropout": (nn.Dropout(0.5), X4), "F.dropout": (Fn(lambda x: F.dropout(x, 0.3, False)), X4),
    "identity_contiguous": (nn.Sequential(nn.Identity(), Fn(lambda x: x.contiguous() * 1)), X4),
    # (getitem needs a neighbour: torch's partitioner drops islands of getitem alone)
    "getitem": (Fn(lambda x: (x + 1)[:, 0] * 2), X3),
    "getitem_slices": (Fn(lambda x: (x + 1)[..., 1:5, None] * 2), X3),
    "shape_ops": (Fn(lambda x: x.reshape(x.shape[0], x.size(1) * x.dim(), -1)), X4),
    "to_dtype": (Fn(lambda x: (x * 4).to(torch.int32).float()), X4),
}

A = torch.ops.aten
CW, CB = CONV.weight.detach(), CONV.bias.detach()
BN_W, BN_B, BN_M, BN_V = BN[0], BN[1], BN[2], BN[3] + 0.5
# ATen overloads (torch.export graphs, PT2E models on PyTorch 2), called directly.
CASES.update({
    "aten.conv2d": (Fn(lambda x: A.conv2d.default(x, CW, CB, [1, 1], [1, 1])), X4),
    "aten.relu_add": (Fn(lambda x: A.relu.default(A.add.Tensor(x, x, alpha=2))), X4),
    "aten.arith": (Fn(lambda x: A.div.Tensor(A.sub.Tensor(A.mul.Tensor(x, 3.0), 1.0), 2.0)), X4),
    "aten.unary": (Fn(lambda x: A.tanh.default(A.sigmoid.default(A.silu.default(x)))), X4),
    "aten.hard": (Fn(lambda x: A.hardsigmoid.default(A.hardswish.default(
        A.hardtanh.default(A.clamp.default(x, -2.0, 2.0), -1.5, 1.5)))), X4),
    "aten.gelu": (Fn(lambda x: A.gelu.default(x, approximate="tanh")), X4),
    "aten.batch_norm": (Fn(lambda x: A.batch_norm.default(
        x, BN_W, BN_B, BN_M, BN_V, False, 0.1, 1e-5, False)), X4),
    "aten.native_batch_norm": (Fn(lambda x: A.native_batch_norm.default(
        x, BN_W, BN_B, BN_M, BN_V, False, 0.1, 1e-5)[0] * 2), X4),
    "aten.pools": (Fn(lambda x: A.adaptive_avg_pool2d.default(A.avg_pool2d.default(
        A.max_pool2d.default(x, [2, 2], [1, 1]), [2, 2]), [1, 1])), X4),
    "aten.flatten_linear": (Fn(lambda x: A.linear.default(A.flatten.using_ints(x, 1), W[:, :12])),
                            rand(2, 3, 2, 2)),
    "aten.addmm": (Fn(lambda x: A.addmm.default(W[0, :6], x, A.t.default(W), beta=0.5)), X3[0]),
    "aten.shapes": (Fn(lambda x: A.permute.default(A.view.default(
        A.transpose.int(x, 1, 2), [2, 16, 5]), [2, 0, 1])), X3),
    "aten.squeeze_cat": (Fn(lambda x: A.cat.default([A.squeeze.dim(A.unsqueeze.default(
        x, 1), 1), x], 1)), X3),
    "aten.softmax_mean": (Fn(lambda x: A.mean.dim(A._softmax.default(x, -1, False), [1], True)),
                          X3),
    "aten.matmul": (Fn(lambda x: A.bmm.default(x, A.transpose.int(x, 1, 2))), X3),
    "aten.layer_norm": (Fn(lambda x: A.layer_norm.default(x, [16])), X3),
    "aten.select_slice": (Fn(lambda x: A.select.int(A.slice.Tensor(
        A.clone.default(x), 2, 3, 2 ** 63 - 1), 1, 2) * 2), X3),
    "aten.dropout": (Fn(lambda x: A.dropout.default(x * 2, 0.5, False)), X3),
    # make_fx's spellings (PyTorch's ATen tracer)
    "aten.convolution": (Fn(lambda x: A.convolution.default(
        x, CW, CB, [2, 2], [1, 1], [1, 1], False, [0, 0], 1)), X4),
    "aten.max_pool_indices": (Fn(lambda x: A.max_pool2d_with_indices.default(
        x * 2, [3, 3], [2, 2], [1, 1])[0]), X4),
    "aten._reshape_alias": (Fn(lambda x: A._reshape_alias.default(x * 2, [2, 3, 64],
                                                                  [192, 64, 1])), X4),
})



def _with_affine(norm, seed):
    """``norm`` with random weight and bias (PyTorch initializes them to ones and zeros)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        norm.weight.copy_(torch.randn(norm.weight.shape, generator=g))
        norm.bias.copy_(torch.randn(norm.bias.shape, generator=g))
    return norm


def _running(norm, seed):
    g = torch.Generator().manual_seed(seed)
    norm.running_mean.copy_(torch.randn(norm.running_mean.shape, generator=g))
    norm.running_var.copy_(torch.rand(norm.running_var.shape, generator=g) + 0.5)
    return norm


X79 = rand(2, 3, 7, 9, seed=5)
GRID = rand(2, 5, 6, 2, seed=6) * 0.6  # mostly inside [-1, 1], some points outside
# Vision models (kiln/torch/vision.py): interpolate's modes with PyTorch's coordinate rules,
# grid sampling, instance and group normalization, torchvision's stochastic depth.
CASES.update({
    "interpolate_nearest_size": (Fn(lambda x: F.interpolate(x, size=(14, 5))), X79),
    "interpolate_nearest_scale": (Fn(lambda x: F.interpolate(x, scale_factor=(1.5, 0.5))), X79),
    "interpolate_nearest_exact": (Fn(lambda x: F.interpolate(
        x, size=(11, 13), mode="nearest-exact")), X79),
    "interpolate_bilinear": (Fn(lambda x: F.interpolate(
        x, scale_factor=2.0, mode="bilinear", align_corners=False)), X79),
    "interpolate_bilinear_corners": (Fn(lambda x: F.interpolate(
        x, scale_factor=(1.5, 0.5), mode="bilinear", align_corners=True)), X79),
    "interpolate_bicubic": (Fn(lambda x: F.interpolate(
        x, size=(5, 4), mode="bicubic", align_corners=False)), X79),
    "interpolate_recompute": (Fn(lambda x: F.interpolate(
        x, scale_factor=3.0, mode="bilinear", recompute_scale_factor=True)), X79),
    "interpolate_shape_of": (Fn2(lambda x, y: F.interpolate(
        x, size=y.shape[-2:], mode="bilinear", align_corners=False) + y),
        (X79, rand(2, 3, 10, 12, seed=7))),
    "interpolate_linear_1d": (Fn(lambda x: F.interpolate(x, scale_factor=2, mode="linear")), X3),
    "interpolate_trilinear": (Fn(lambda x: F.interpolate(
        x, scale_factor=2, mode="trilinear")), rand(1, 2, 3, 4, 5)),
    "nn.Upsample": (nn.Upsample(scale_factor=2, mode="bilinear"), X79),
    "nn.UpsamplingBilinear2d": (nn.UpsamplingBilinear2d(size=(10, 10)), X79),
    "aten.upsample_nearest2d": (Fn(lambda x: A.upsample_nearest2d.vec(x, None, [2.0, 2.0])),
                                X79),
    "aten.upsample_bilinear2d": (Fn(lambda x: A.upsample_bilinear2d.vec(
        x, [11, 13], False, None)), X79),
    "grid_sample_bilinear": (Fn2(lambda x, g: F.grid_sample(x, g, align_corners=False)),
                             (X79, GRID)),
    "grid_sample_nearest_border": (Fn2(lambda x, g: F.grid_sample(
        x, g * 2, mode="nearest", padding_mode="border", align_corners=True)), (X79, GRID)),
    "grid_sample_bicubic_reflection": (Fn2(lambda x, g: F.grid_sample(
        x, g * 2, mode="bicubic", padding_mode="reflection", align_corners=False)),
        (X79, GRID)),
    "instance_norm": (nn.InstanceNorm2d(3), X79),
    "instance_norm_affine": (_with_affine(nn.InstanceNorm2d(3, affine=True), 8), X79),
    "instance_norm_running": (_running(nn.InstanceNorm1d(5, track_running_stats=True), 9), X3),
    "F.instance_norm": (Fn(lambda x: F.instance_norm(x, eps=1e-3)), X79),
    "group_norm": (_with_affine(nn.GroupNorm(3, 6), 10), rand(2, 6, 5, 5)),
    "F.group_norm": (Fn(lambda x: F.group_norm(x, 2)), rand(2, 6, 5, 5)),
})
try:
    import torchvision.ops

    CASES["stochastic_depth"] = (nn.Sequential(
        nn.ReLU(), torchvision.ops.StochasticDepth(0.5, "row"), nn.Sigmoid()), X4)
    CASES["F.stochastic_depth"] = (Fn(lambda x: torchvision.ops.stochastic_depth(
        x.relu(), 0.2, "batch", False) * 2), X4)
except ImportError:  # pragma: no cover - torchvision is part of the test set-up
    pass

if hasattr(A, "_native_batch_norm_legit_no_training"):  # PyTorch 2
    CASES["aten.batch_norm_no_training"] = (Fn(
        lambda x: A._native_batch_norm_legit_no_training.default(
            x, BN_W, BN_B, BN_M, BN_V, 0.1, 1e-5)[0] * 2), X4)


class Attention(nn.Module):
    def __init__(self, batch_first):
        super().__init__()
        self.mha = nn.MultiheadAttention(16, 4, batch_first=batch_first)

    def forward(self, x):
        return self.mha(x, x, x, need_weights=False)[0]


CASES["multihead_attention"] = (Attention(False), X3)
CASES["multihead_attention_batch_first"] = (Attention(True), X3)
CASES["encoder_layer"] = (nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True), X3)
CASES["encoder"] = (nn.TransformerEncoder(
    nn.TransformerEncoderLayer(16, 2, 32, batch_first=True), 2, norm=nn.LayerNorm(16)), X3)


@pytest.mark.parametrize("name", sorted(CASES))
def test_converter_matches_pytorch(name):
    torch.manual_seed(0)
    module, inputs = CASES[name]
    module = module.eval()
    inputs = inputs if isinstance(inputs, tuple) else (inputs,)
    lowered = kiln.torch.lower(module, inputs, min_island=1)
    # The whole computation runs in kiln: one island, fed by the inputs.
    calls = [n for n in lowered.graph.nodes
             if n.op in ("call_function", "call_method", "call_module")]
    assert [n.target for n in calls] == ["fused_0"], lowered.code
    with torch.no_grad():
        expected = module(*inputs)
        actual = lowered(*inputs)
    assert actual.shape == expected.shape and actual.dtype == expected.dtype
    scale = expected.abs().max().clamp(min=1e-6)
    assert ((actual - expected).abs().max() / scale).item() <= 1e-4, name


CALLED = set()  # the converter functions the cases above ran


@pytest.fixture(autouse=True, scope="module")
def record_converters():
    from kiln.torch import _interpreter

    original = _interpreter.lookup

    def recording(key):
        fn = original(key)
        CALLED.add(fn)
        return fn

    _interpreter.lookup = recording
    yield
    _interpreter.lookup = original


def test_unsupported_arguments_stay_in_pytorch():
    module = Fn(lambda x: F.max_pool2d(x, 2, return_indices=True)[0])
    lowered = kiln.torch.lower(module, (X4,), min_island=1)
    assert not kiln.torch.kiln_islands(lowered)
    torch.testing.assert_close(lowered(X4), module(X4))


def test_builder_api_matches_numpy():
    import numpy as np

    p = kiln.program()
    m = p.get_main_module()
    x = m.add_parameter("x", kiln.shape("float_type", [2, 3]))
    w = m.add_literal(np.arange(12, dtype=np.float32).reshape(3, 4))
    y = m.add_instruction(kiln.op("MatMul"), [x, w])
    z = m.add_instruction(kiln.op("Softmax", axis=1), [y])
    assert y.shape().lens() == [2, 4]
    m.add_return([z, y])
    with pytest.raises(kiln.KilnError, match="unknown attribute \"axes\""):
        kiln.op("Softmax", axes=1)
    with pytest.raises(kiln.KilnError, match="no op \"Frobnicate\""):
        kiln.op("Frobnicate")
    with pytest.raises(kiln.KilnError, match="do not broadcast"):
        m.add_instruction(kiln.op("Add"), [x, w])
    p.compile(kiln.get_target("cpu"))
    data = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    z_out, y_out = (np.asarray(a) for a in p.run({"x": data}))
    expected = data @ np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_allclose(y_out, expected, rtol=1e-5)
    e = np.exp(expected - expected.max(1, keepdims=True))
    np.testing.assert_allclose(z_out, e / e.sum(1, keepdims=True), rtol=1e-5)
    with pytest.raises(kiln.KilnError, match="compiled"):
        m.add_instruction(kiln.op("Relu"), [y])
    assert math.isclose(float(np.asarray(kiln.load_buffer(kiln.save_buffer(p)).run(
        {"x": data})[1]).sum()), float(expected.sum()), rel_tol=1e-5)


def test_every_converter_ran():
    # Runs last in this file: every converter function of the table ran in a case above, except
    # the quantization ones (fused modules included: tracing goes through their float forms),
    # which test_torch_quant.py runs on quantized models.
    from kiln.torch import converters

    from kiln.torch._interpreter import _convert_fused

    quantization = {converters.convert_quantize_per_tensor, converters.convert_dequantize,
                    converters.convert_reference_conv, converters.convert_reference_linear,
                    _convert_fused}
    missing = set(_registry.CONVERTERS.values()) - CALLED - quantization
    assert not missing, ", ".join(sorted(f.__name__ for f in missing))
    assert len(_registry.CONVERTERS) > 180
