# SPDX-License-Identifier: Apache-2.0
"""Converters for ATen overloads (``torch.ops.aten.conv2d.default``, ...), the ops of graphs
from ``torch.export`` and of PT2E-quantized models (PyTorch 2), plus PT2E's
``torch.ops.quantized_decomposed`` quantize/dequantize ops. Most overloads take their arguments
in the order of the torch function whose converter they reuse; the others get an adapter here."""

import operator

import numpy as np
import torch

from kiln.torch import converters as c
from kiln.torch._registry import CONVERTERS, SUPPORTS, converter

aten = torch.ops.aten


def _overload(name):
    """``torch.ops.aten.<name>`` ("conv2d.default"), or None where this PyTorch lacks it."""
    packet, _, overload = name.partition(".")
    try:
        return getattr(getattr(aten, packet), overload)
    except (AttributeError, RuntimeError):
        return None


def _alias(names, convert, supports=None):
    for name in names:
        op = _overload(name)
        if op is not None and op not in CONVERTERS:
            converter(op, supports=supports)(convert)


_relu, _sigmoid, _tanh = (c.CONVERTERS[torch.relu], c.CONVERTERS[torch.sigmoid],
                          c.CONVERTERS[torch.tanh])
_alias(["relu.default", "relu_.default"], _relu)
_alias(["sigmoid.default"], _sigmoid)
_alias(["tanh.default"], _tanh)
_alias(["hardswish.default", "hardswish_.default"], c.CONVERTERS[torch.nn.Hardswish])
_alias(["hardsigmoid.default"], c.convert_hardsigmoid)
_alias(["silu.default", "silu_.default"], c.convert_silu)
_alias(["hardtanh.default", "hardtanh_.default"], c.convert_hardtanh)
_alias(["clamp.default"], c.convert_clamp)
_alias(["add.Tensor", "add_.Tensor", "add.Scalar"], c.CONVERTERS[torch.add])
_alias(["sub.Tensor", "sub_.Tensor", "sub.Scalar"], c.CONVERTERS[torch.sub])
_alias(["mul.Tensor", "mul_.Tensor", "mul.Scalar"], c.CONVERTERS[torch.mul])
_alias(["div.Tensor", "div_.Tensor", "div.Scalar"], c.CONVERTERS[torch.div])
_alias(["conv1d.default", "conv2d.default", "conv3d.default"], c.convert_conv)
_alias(["linear.default"], c.convert_linear)
_alias(["matmul.default", "mm.default", "bmm.default"], c.convert_matmul)
_alias(["max_pool2d.default"], c.convert_max_pool)
_alias(["avg_pool2d.default"], c.convert_avg_pool, SUPPORTS[torch.nn.functional.avg_pool2d])
_alias(["adaptive_avg_pool2d.default", "_adaptive_avg_pool2d.default"],
       c.convert_adaptive_avg_pool, SUPPORTS[torch.nn.functional.adaptive_avg_pool2d])
_alias(["flatten.using_ints"], c.convert_flatten)
_alias(["view.default", "reshape.default", "_unsafe_view.default"], c.convert_reshape)
_alias(["permute.default"], c.convert_permute)
_alias(["transpose.int", "t.default"], c.convert_transpose)
_alias(["unsqueeze.default"], c.convert_unsqueeze)
_alias(["squeeze.dim"], c.convert_squeeze)
_alias(["cat.default"], c.convert_cat)
_alias(["softmax.int", "_softmax.default"], c.CONVERTERS[torch.softmax])
_alias(["mean.dim"], c.CONVERTERS[torch.mean])
_alias(["layer_norm.default"], c.convert_layer_norm)
_alias(["clone.default", "detach.default"], c.CONVERTERS[torch.detach])
_alias(["dropout.default"], c.CONVERTERS[torch.detach],
       lambda node, target: c.arg(node.args, node.kwargs, 2, "train", False) is False)


def convert_gelu(ctx, target, args, kwargs):
    """aten.gelu.default(x, approximate="none"): approximate may come positionally."""
    approximate = args[1] if len(args) > 1 else kwargs.get("approximate", "none")
    return c.convert_gelu(ctx, target, args[:1], {"approximate": approximate})


_alias(["gelu.default"], convert_gelu)


def convert_batch_norm(ctx, target, args, kwargs):
    """aten.batch_norm.default(input, weight, bias, mean, var, training, momentum, eps, cudnn)."""
    x, weight, bias, mean, var = args[:5]
    return c._batch_norm(ctx, x, mean, var, weight, bias, c.arg(args, kwargs, 7, "eps", 1e-5))


def _batch_norm_eval(node, target):
    return c.arg(node.args, node.kwargs, 5, "training", False) is False


_alias(["batch_norm.default"], convert_batch_norm, _batch_norm_eval)


def convert_batch_norm_no_training(ctx, target, args, kwargs):
    """aten._native_batch_norm_legit_no_training(input, weight, bias, mean, var, momentum, eps):
    a tuple whose first element is the output."""
    x, weight, bias, mean, var = args[:5]
    out = c._batch_norm(ctx, x, mean, var, weight, bias, c.arg(args, kwargs, 6, "eps", 1e-5))
    return (out, None, None)


def convert_native_batch_norm(ctx, target, args, kwargs):
    """aten.native_batch_norm.default(input, weight, bias, mean, var, training, momentum, eps):
    a tuple whose first element is the output."""
    return (convert_batch_norm(ctx, target, args, kwargs), None, None)


_alias(["_native_batch_norm_legit_no_training.default"], convert_batch_norm_no_training)
_alias(["native_batch_norm.default"], convert_native_batch_norm, _batch_norm_eval)


def convert_addmm(ctx, target, args, kwargs):
    """aten.addmm.default(bias, a, b, beta=1, alpha=1) = beta * bias + alpha * (a @ b)."""
    bias, a, b = args[:3]
    a = ctx.value(a)
    return ctx.op("Gemm", [a, ctx.value(b, a), ctx.value(bias, a)],
                  beta=float(c.arg(args, kwargs, 3, "beta", 1)),
                  alpha=float(c.arg(args, kwargs, 4, "alpha", 1)))


_alias(["addmm.default"], convert_addmm)


def convert_convolution(ctx, target, args, kwargs):
    """aten.convolution.default(input, weight, bias, stride, padding, dilation, transposed,
    output_padding, groups), not transposed."""
    x, weight, bias, stride, padding, dilation = args[:6]
    return c._conv(ctx, x, weight, bias, stride, padding, dilation, args[8])


_alias(["convolution.default"], convert_convolution,
       lambda node, target: node.args[6] is False)


def convert_max_pool_with_indices(ctx, target, args, kwargs):
    """aten.max_pool2d_with_indices.default: (output, indices); only the output is converted."""
    return (c.convert_max_pool(ctx, target, args, kwargs), None)


def _indices_unused(node, target):
    return all(u.target is operator.getitem and u.args[1] == 0 for u in node.users)


_alias(["max_pool2d_with_indices.default"], convert_max_pool_with_indices, _indices_unused)
def convert_reshape_alias(ctx, target, args, kwargs):
    """aten._reshape_alias.default(x, size, stride) of a contiguous x: a reshape to size."""
    return c.convert_reshape(ctx, target, args[:2], {})


_alias(["_reshape_alias.default"], convert_reshape_alias)


def convert_select(ctx, target, args, kwargs):
    """aten.select.int(x, dim, index): x[..., index] along dim."""
    x, dim, index = ctx.value(args[0]), args[1], args[2]
    dim = c.axis(dim, ctx.rank(x))
    return c.convert_getitem(ctx, target, (x, (slice(None),) * dim + (index,)), {})


def convert_slice(ctx, target, args, kwargs):
    """aten.slice.Tensor(x, dim=0, start=None, end=None, step=1)."""
    x = ctx.value(args[0])
    dim = c.axis(c.arg(args, kwargs, 1, "dim", 0), ctx.rank(x))
    bounds = slice(c.arg(args, kwargs, 2, "start"), c.arg(args, kwargs, 3, "end"))
    end = bounds.stop
    if end is not None and end > ctx.lens(x)[dim]:  # aten writes "to the end" as INT64_MAX
        bounds = slice(bounds.start, None)
    return c.convert_getitem(ctx, target, (x, (slice(None),) * dim + (bounds,)), {})


def _slice_supported(node, target):
    return c.arg(node.args, node.kwargs, 4, "step", 1) == 1


_alias(["select.int"], convert_select)
_alias(["slice.Tensor"], convert_slice, _slice_supported)


# PT2E quantization (PyTorch 2.1+): quantize/dequantize to and from plain integer tensors.
_INT_TYPES = {torch.int8: np.int8, torch.uint8: np.uint8}


def _quant_range_supported(dtype_index):
    def supports(node, target):
        dtype = c.arg(node.args, node.kwargs, dtype_index, "dtype")
        qmin = c.arg(node.args, node.kwargs, dtype_index - 2, "quant_min")
        qmax = c.arg(node.args, node.kwargs, dtype_index - 1, "quant_max")
        if dtype not in _INT_TYPES:
            return False
        info = np.iinfo(_INT_TYPES[dtype])
        return (qmin, qmax) == (info.min, info.max)  # kiln saturates to the type's range

    return supports


def _qparams(ctx, scale, zero_point, dtype):
    s = ctx.literal(np.asarray(scale.detach().cpu() if isinstance(scale, torch.Tensor) else scale,
                               dtype=np.float32))
    zp = zero_point.detach().cpu() if isinstance(zero_point, torch.Tensor) else zero_point
    return s, ctx.literal(np.asarray(zp).astype(_INT_TYPES[dtype]))


def convert_qd_quantize(ctx, target, args, kwargs):
    """quantize_per_tensor(x, scale, zero_point, qmin, qmax, dtype) and
    quantize_per_channel(x, scales, zero_points, axis, qmin, qmax, dtype)."""
    per_channel = len(args) == 7
    x, scale, zero_point = args[:3]
    s, z = _qparams(ctx, scale, zero_point, args[-1])
    attrs = {"axis": int(args[3])} if per_channel else {}
    return ctx.op("QuantizeLinear", [ctx.value(x), s, z], **attrs)


def convert_qd_dequantize(ctx, target, args, kwargs):
    """dequantize_per_tensor / dequantize_per_channel with the same arguments."""
    per_channel = len(args) >= 7
    x, scale, zero_point = args[:3]
    dtype = args[6] if per_channel else args[5]
    s, z = _qparams(ctx, scale, zero_point, dtype)
    attrs = {"axis": int(args[3])} if per_channel else {}
    return ctx.op("DequantizeLinear", [ctx.value(x), s, z], **attrs)


_qd = getattr(torch.ops, "quantized_decomposed", None)
for _name, _fn, _dtype_index in (("quantize_per_tensor", convert_qd_quantize, 5),
                                 ("quantize_per_channel", convert_qd_quantize, 6),
                                 ("dequantize_per_tensor", convert_qd_dequantize, 5),
                                 ("dequantize_per_channel", convert_qd_dequantize, 6)):
    try:
        for _overload_name in ("default", "tensor"):
            _op = getattr(getattr(_qd, _name), _overload_name, None)
            if _op is not None:
                converter(_op, supports=_quant_range_supported(_dtype_index))(_fn)
    except (AttributeError, RuntimeError):  # PyTorch 1.x: no quantized_decomposed ops
        pass
