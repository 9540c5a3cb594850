# SPDX-License-Identifier: Apache-2.0
"""Converters from torch functions, Tensor methods and nn.Module types to kiln ops, registered in
the one table of ``kiln.torch._registry``. Each one builds with ``ctx`` (a ``_context.Context``);
kiln's ops follow ONNX semantics, so conversions are those of torch.onnx's exporter."""

import math
import operator

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from kiln.torch._context import KILN_TYPES, QValue, is_value
from kiln.torch._registry import CONVERTERS, SUPPORTS, converter, method


def arg(args, kwargs, index, name, default=None):
    """Argument ``index`` (positional) or ``name`` (keyword), else ``default``."""
    if index < len(args):
        return args[index]
    return kwargs.get(name, default)


def params(target, args, kwargs, *spec):
    """Per (name, default) of ``spec``: the attribute of a module target, or the argument of a
    function target at position 1, 2, ... (after the input) or by keyword."""
    if isinstance(target, nn.Module):
        return [getattr(target, name) for name, _ in spec]
    return [arg(args, kwargs, i + 1, name, default) for i, (name, default) in enumerate(spec)]


def pair(value, n=2):
    return list(value) if isinstance(value, (list, tuple)) else [value] * n


def axis(dim, rank):
    return dim + rank if dim < 0 else dim


# ---------------------------------------------------------------------------------------------
# Elementwise

_UNARY = {
    "Relu": (torch.relu, F.relu, nn.ReLU, method("relu"), method("relu_"), torch.relu_),
    "Sigmoid": (torch.sigmoid, F.sigmoid, nn.Sigmoid, method("sigmoid")),
    "Tanh": (torch.tanh, F.tanh, nn.Tanh, method("tanh")),
    "Exp": (torch.exp, method("exp")),
    "Log": (torch.log, method("log")),
    "Sqrt": (torch.sqrt, method("sqrt")),
    "Abs": (torch.abs, method("abs")),
    "Neg": (torch.neg, operator.neg, method("neg")),
    "Erf": (torch.erf, method("erf")),
    "Reciprocal": (torch.reciprocal, method("reciprocal")),
    "Floor": (torch.floor, method("floor")),
    "Ceil": (torch.ceil, method("ceil")),
    "Sin": (torch.sin, method("sin")),
    "Cos": (torch.cos, method("cos")),
    "HardSwish": (F.hardswish, nn.Hardswish),
    "Softplus": (F.softplus, nn.Softplus),
}


def _unary(op_name):
    def convert(ctx, target, args, kwargs):
        return ctx.op(op_name, [ctx.value(args[0])])

    convert.__name__ = f"convert_{op_name}"
    return convert


for _name, _keys in _UNARY.items():
    converter(*_keys)(_unary(_name))


def _binary(op_name, swap=False):
    def convert(ctx, target, args, kwargs):
        a, b = args[0], arg(args, kwargs, 1, "other")
        if swap:
            a, b = b, a
        like = a if is_value(a) else b
        a, b = ctx.value(a, like), ctx.value(b, like)
        alpha = kwargs.get("alpha", 1)
        if alpha != 1:
            b = ctx.op("Mul", [b, ctx.value(alpha, b)])
        return ctx.op(op_name, [a, b])

    convert.__name__ = f"convert_{op_name}" + ("_reversed" if swap else "")
    return convert


# (FX records `2 + x` as operator.add(2, x): a constant on either side works for every op.)
converter(operator.add, operator.iadd, torch.add, method("add"), method("add_"))(_binary("Add"))
converter(operator.sub, operator.isub, torch.sub, method("sub"), method("sub_"))(_binary("Sub"))
converter(torch.rsub, method("rsub"))(_binary("Sub", swap=True))
converter(operator.mul, operator.imul, torch.mul, method("mul"), method("mul_"))(_binary("Mul"))
converter(operator.truediv, operator.itruediv, torch.div, method("div"), method("div_"),
          torch.true_divide)(_binary("Div"))
converter(operator.pow, torch.pow, method("pow"), method("__pow__"))(_binary("Pow"))
converter(torch.maximum, method("maximum"))(_binary("Max"))
converter(torch.minimum, method("minimum"))(_binary("Min"))


def _clip(ctx, x, low, high):
    x = ctx.value(x)
    low = ctx.value(low, x) if low is not None else None
    high = ctx.value(high, x) if high is not None else None
    return ctx.op("Clip", [x, low, high])


@converter(torch.clamp, torch.clip, method("clamp"), method("clip"), method("clamp_"))
def convert_clamp(ctx, target, args, kwargs):
    return _clip(ctx, args[0], arg(args, kwargs, 1, "min"), arg(args, kwargs, 2, "max"))


@converter(F.relu6, nn.ReLU6)
def convert_relu6(ctx, target, args, kwargs):
    return _clip(ctx, args[0], 0.0, 6.0)


@converter(F.hardtanh, nn.Hardtanh)
def convert_hardtanh(ctx, target, args, kwargs):
    if isinstance(target, nn.Module):
        return _clip(ctx, args[0], target.min_val, target.max_val)
    return _clip(ctx, args[0], arg(args, kwargs, 1, "min_val", -1.0),
                 arg(args, kwargs, 2, "max_val", 1.0))


@converter(F.leaky_relu, nn.LeakyReLU)
def convert_leaky_relu(ctx, target, args, kwargs):
    slope = (target.negative_slope if isinstance(target, nn.Module)
             else arg(args, kwargs, 1, "negative_slope", 0.01))
    return ctx.op("LeakyRelu", [ctx.value(args[0])], alpha=float(slope))


@converter(F.hardsigmoid, nn.Hardsigmoid)
def convert_hardsigmoid(ctx, target, args, kwargs):
    return ctx.op("HardSigmoid", [ctx.value(args[0])], alpha=1.0 / 6, beta=0.5)


@converter(F.gelu, nn.GELU)
def convert_gelu(ctx, target, args, kwargs):
    x = ctx.value(args[0])
    approximate = (target.approximate if isinstance(target, nn.Module)
                   else kwargs.get("approximate", "none"))
    half = ctx.op("Mul", [x, ctx.value(0.5, x)])
    if approximate == "tanh":
        # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
        cube = ctx.op("Mul", [ctx.op("Mul", [x, x]), x])
        inner = ctx.op("Add", [x, ctx.op("Mul", [cube, ctx.value(0.044715, x)])])
        inner = ctx.op("Mul", [inner, ctx.value(math.sqrt(2 / math.pi), x)])
        return ctx.op("Mul", [half, ctx.op("Add", [ctx.op("Tanh", [inner]), ctx.value(1.0, x)])])
    erf = ctx.op("Erf", [ctx.op("Mul", [x, ctx.value(1 / math.sqrt(2), x)])])
    return ctx.op("Mul", [half, ctx.op("Add", [erf, ctx.value(1.0, x)])])


@converter(F.silu, nn.SiLU)
def convert_silu(ctx, target, args, kwargs):
    x = ctx.value(args[0])
    return ctx.op("Mul", [x, ctx.op("Sigmoid", [x])])


def _identity(ctx, target, args, kwargs):
    return args[0]


converter(nn.Identity, nn.Dropout, nn.Dropout2d, F.dropout, method("contiguous"),
          method("detach"), torch.detach)(_identity)


@converter(method("float"), method("half"), method("int"), method("long"), method("to"),
           method("type"))
def convert_cast(ctx, target, args, kwargs):
    x = ctx.value(args[0])
    to = {"float": torch.float32, "half": torch.float16, "int": torch.int32,
          "long": torch.int64}.get(target)
    if to is None:
        candidates = list(args[1:]) + list(kwargs.values())
        to = next((c for c in candidates if isinstance(c, torch.dtype)), None)
        if to is None:
            return x  # .to(device) and friends: kiln decides where it runs
    return ctx.op("Cast", [x], to=KILN_TYPES[to])


def _cast_supported(node, target):
    dtypes = [a for a in list(node.args[1:]) + list(node.kwargs.values())
              if isinstance(a, torch.dtype)]
    return all(d in KILN_TYPES for d in dtypes)


for _key in (method("to"), method("type")):
    SUPPORTS[_key] = _cast_supported


# ---------------------------------------------------------------------------------------------
# Convolution, pooling, normalization


def _conv(ctx, x, weight, bias, stride, padding, dilation, groups):
    x = ctx.value(x)
    w = ctx.value(weight)
    spatial = ctx.rank(w) - 2
    if isinstance(padding, str):
        if padding == "valid":
            pads = [0] * (2 * spatial)
        else:  # "same": stride 1 only (torch's rule), extra padding at the end
            kernel = ctx.lens(w)[2:]
            total = [d * (k - 1) for d, k in zip(pair(dilation, spatial), kernel)]
            pads = [t // 2 for t in total] + [t - t // 2 for t in total]
    else:
        pads = pair(padding, spatial) * 2
    inputs = [x, w] + ([ctx.value(bias)] if bias is not None else [])
    return ctx.op("Conv", inputs, strides=pair(stride, spatial), pads=pads,
                  dilations=pair(dilation, spatial), group=int(groups))


def _conv_module_supported(node, mod):
    return mod.padding_mode == "zeros"


@converter(nn.Conv1d, nn.Conv2d, nn.Conv3d, supports=_conv_module_supported)
def convert_conv_module(ctx, mod, args, kwargs):
    return _conv(ctx, args[0], mod.weight, mod.bias, mod.stride, mod.padding, mod.dilation,
                 mod.groups)


@converter(F.conv1d, F.conv2d, F.conv3d, torch.conv2d, torch.conv1d, torch.conv3d)
def convert_conv(ctx, target, args, kwargs):
    return _conv(ctx, args[0], arg(args, kwargs, 1, "weight"), arg(args, kwargs, 2, "bias"),
                 arg(args, kwargs, 3, "stride", 1), arg(args, kwargs, 4, "padding", 0),
                 arg(args, kwargs, 5, "dilation", 1), arg(args, kwargs, 6, "groups", 1))


def _batch_norm(ctx, x, mean, var, weight, bias, eps):
    x = ctx.value(x)
    channels = ctx.lens(x)[1]
    weight = weight if weight is not None else torch.ones(channels)
    bias = bias if bias is not None else torch.zeros(channels)
    return ctx.op("BatchNormalization",
                  [x, ctx.value(weight), ctx.value(bias), ctx.value(mean), ctx.value(var)],
                  epsilon=float(eps))


def _bn_module_supported(node, mod):
    return mod.track_running_stats and mod.running_mean is not None


@converter(nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, supports=_bn_module_supported)
def convert_batch_norm_module(ctx, mod, args, kwargs):
    return _batch_norm(ctx, args[0], mod.running_mean, mod.running_var, mod.weight, mod.bias,
                       mod.eps)


def _bn_function_supported(node, target):
    training = node.kwargs.get("training", node.args[5] if len(node.args) > 5 else False)
    return training is False


@converter(F.batch_norm, supports=_bn_function_supported)
def convert_batch_norm(ctx, target, args, kwargs):
    return _batch_norm(ctx, args[0], arg(args, kwargs, 1, "running_mean"),
                       arg(args, kwargs, 2, "running_var"), arg(args, kwargs, 3, "weight"),
                       arg(args, kwargs, 4, "bias"), arg(args, kwargs, 7, "eps", 1e-5))


def _layer_norm(ctx, x, shape, weight, bias, eps):
    x = ctx.value(x)
    shape = pair(shape, 1)
    weight = weight if weight is not None else torch.ones(shape)
    bias = bias if bias is not None else torch.zeros(shape)
    return ctx.op("LayerNormalization", [x, ctx.value(weight), ctx.value(bias)],
                  axis=-len(shape), epsilon=float(eps))


@converter(nn.LayerNorm)
def convert_layer_norm_module(ctx, mod, args, kwargs):
    return _layer_norm(ctx, args[0], mod.normalized_shape, mod.weight, mod.bias, mod.eps)


@converter(F.layer_norm)
def convert_layer_norm(ctx, target, args, kwargs):
    return _layer_norm(ctx, args[0], arg(args, kwargs, 1, "normalized_shape"),
                       arg(args, kwargs, 2, "weight"), arg(args, kwargs, 3, "bias"),
                       arg(args, kwargs, 4, "eps", 1e-5))


def _pool(ctx, op_name, x, kernel, stride, padding, ceil_mode, **extra):
    x = ctx.value(x)
    spatial = ctx.rank(x) - 2
    kernel = pair(kernel, spatial)
    stride = pair(stride, spatial) if stride not in (None, [], ()) else kernel
    return ctx.op(op_name, [x], kernel_shape=kernel, strides=stride,
                  pads=pair(padding, spatial) * 2, ceil_mode=int(bool(ceil_mode)), **extra)


def _max_pool_supported(node, target):
    if isinstance(target, nn.Module):
        return not target.return_indices
    return not node.kwargs.get("return_indices", False) and not (
        len(node.args) > 6 and node.args[6])


@converter(nn.MaxPool1d, nn.MaxPool2d, nn.MaxPool3d, F.max_pool1d, F.max_pool2d, F.max_pool3d,
           supports=_max_pool_supported)
def convert_max_pool(ctx, target, args, kwargs):
    k, s, p, d, c = params(target, args, kwargs, ("kernel_size", None), ("stride", None),
                           ("padding", 0), ("dilation", 1), ("ceil_mode", False))
    spatial = ctx.rank(args[0]) - 2
    return _pool(ctx, "MaxPool", args[0], k, s, p, c, dilations=pair(d, spatial))


def _avg_pool_supported(node, target):
    if isinstance(target, nn.Module):
        return target.divisor_override is None
    return arg(node.args, node.kwargs, 6, "divisor_override") is None


@converter(nn.AvgPool1d, nn.AvgPool2d, nn.AvgPool3d, F.avg_pool1d, F.avg_pool2d, F.avg_pool3d,
           supports=_avg_pool_supported)
def convert_avg_pool(ctx, target, args, kwargs):
    k, s, p, c, inc = params(target, args, kwargs, ("kernel_size", None), ("stride", None),
                             ("padding", 0), ("ceil_mode", False), ("count_include_pad", True))
    return _pool(ctx, "AveragePool", args[0], k, s, p, c, count_include_pad=int(bool(inc)))


def _adaptive_output(node, target):
    if isinstance(target, nn.Module):
        return target.output_size
    return arg(node.args, node.kwargs, 1, "output_size")


def _adaptive_supported(node, target):
    meta = node.args[0].meta.get("tensor_meta") if hasattr(node.args[0], "meta") else None
    if meta is None:
        return False
    spatial = list(meta.shape[2:])
    out = pair(_adaptive_output(node, target), len(spatial))
    return all(o is None or (o > 0 and s % o == 0) for s, o in zip(spatial, out))


@converter(nn.AdaptiveAvgPool1d, nn.AdaptiveAvgPool2d, nn.AdaptiveAvgPool3d,
           F.adaptive_avg_pool1d, F.adaptive_avg_pool2d, F.adaptive_avg_pool3d,
           supports=_adaptive_supported)
def convert_adaptive_avg_pool(ctx, target, args, kwargs):
    x = ctx.value(args[0])
    spatial = ctx.lens(x)[2:]
    out = pair(target.output_size if isinstance(target, nn.Module)
               else arg(args, kwargs, 1, "output_size"), len(spatial))
    out = [s if o is None else o for s, o in zip(spatial, out)]
    if all(o == 1 for o in out):
        return ctx.op("GlobalAveragePool", [x])
    kernel = [s // o for s, o in zip(spatial, out)]
    return ctx.op("AveragePool", [x], kernel_shape=kernel, strides=kernel)


# ---------------------------------------------------------------------------------------------
# Linear algebra


def _linear(ctx, x, weight, bias):
    x = ctx.value(x)
    if ctx.rank(x) == 2:
        inputs = [x, ctx.value(weight)] + ([ctx.value(bias)] if bias is not None else [])
        return ctx.op("Gemm", inputs, transB=1)
    if isinstance(weight, torch.Tensor):
        w = ctx.literal(weight.detach().t().contiguous())
    else:
        w = ctx.op("Transpose", [ctx.value(weight)], perm=[1, 0])
    y = ctx.op("MatMul", [x, w])
    return ctx.op("Add", [y, ctx.value(bias)]) if bias is not None else y


@converter(nn.Linear)
def convert_linear_module(ctx, mod, args, kwargs):
    return _linear(ctx, args[0], mod.weight, mod.bias)


@converter(F.linear)
def convert_linear(ctx, target, args, kwargs):
    return _linear(ctx, args[0], arg(args, kwargs, 1, "weight"), arg(args, kwargs, 2, "bias"))


@converter(torch.matmul, operator.matmul, torch.mm, torch.bmm, method("matmul"), method("mm"),
           method("bmm"), method("__matmul__"))
def convert_matmul(ctx, target, args, kwargs):
    a = ctx.value(args[0])
    return ctx.op("MatMul", [a, ctx.value(arg(args, kwargs, 1, "other"), a)])


# ---------------------------------------------------------------------------------------------
# Shapes


def _reshape(ctx, x, shape):
    x = ctx.value(x)
    total = int(np.prod(ctx.lens(x)))
    shape = [int(d) for d in shape]
    if -1 in shape:
        known = int(np.prod([d for d in shape if d != -1]))
        shape[shape.index(-1)] = total // known if known else 0
    return ctx.op("Reshape", [x, ctx.ints(shape)])


def _shape_args(args, kwargs, name="shape"):
    rest = list(args[1:]) or [kwargs.get(name, kwargs.get("size"))]
    if len(rest) == 1 and isinstance(rest[0], (list, tuple, torch.Size)):
        return list(rest[0])
    return rest


@converter(method("view"), method("reshape"), torch.reshape)
def convert_reshape(ctx, target, args, kwargs):
    return _reshape(ctx, args[0], _shape_args(args, kwargs))


def _flatten(ctx, x, start, end):
    x = ctx.value(x)
    lens = ctx.lens(x)
    if not lens:
        return _reshape(ctx, x, [1])
    start, end = axis(start, len(lens)), axis(end, len(lens))
    shape = lens[:start] + [int(np.prod(lens[start:end + 1]))] + lens[end + 1:]
    return _reshape(ctx, x, shape)


@converter(torch.flatten, method("flatten"))
def convert_flatten(ctx, target, args, kwargs):
    return _flatten(ctx, args[0], arg(args, kwargs, 1, "start_dim", 0),
                    arg(args, kwargs, 2, "end_dim", -1))


@converter(nn.Flatten)
def convert_flatten_module(ctx, mod, args, kwargs):
    return _flatten(ctx, args[0], mod.start_dim, mod.end_dim)


@converter(method("permute"), torch.permute)
def convert_permute(ctx, target, args, kwargs):
    dims = _shape_args(args, kwargs, "dims")
    x = ctx.value(args[0])
    return ctx.op("Transpose", [x], perm=[axis(d, ctx.rank(x)) for d in dims])


@converter(method("transpose"), torch.transpose, method("t"), torch.t)
def convert_transpose(ctx, target, args, kwargs):
    x = ctx.value(args[0])
    rank = ctx.rank(x)
    if len(args) < 3 and "dim0" not in kwargs:
        if rank < 2:
            return x
        d0, d1 = 0, 1
    else:
        d0, d1 = axis(arg(args, kwargs, 1, "dim0"), rank), axis(arg(args, kwargs, 2, "dim1"), rank)
    perm = list(range(rank))
    perm[d0], perm[d1] = perm[d1], perm[d0]
    return ctx.op("Transpose", [x], perm=perm)


@converter(method("unsqueeze"), torch.unsqueeze)
def convert_unsqueeze(ctx, target, args, kwargs):
    x = ctx.value(args[0])
    return ctx.op("Unsqueeze", [x, ctx.ints([axis(arg(args, kwargs, 1, "dim"), ctx.rank(x) + 1)])])


@converter(method("squeeze"), torch.squeeze)
def convert_squeeze(ctx, target, args, kwargs):
    x = ctx.value(args[0])
    lens = ctx.lens(x)
    dim = arg(args, kwargs, 1, "dim")
    dims = [i for i, d in enumerate(lens) if d == 1] if dim is None else [axis(dim, len(lens))]
    dims = [d for d in dims if lens[d] == 1]
    return ctx.op("Squeeze", [x, ctx.ints(dims)]) if dims else x


@converter(torch.cat, torch.concat)
def convert_cat(ctx, target, args, kwargs):
    tensors = arg(args, kwargs, 0, "tensors")
    like = next(t for t in tensors if is_value(t))
    values = [ctx.value(t, like) for t in tensors]
    return ctx.op("Concat", values, axis=axis(arg(args, kwargs, 1, "dim", 0), ctx.rank(like)))


@converter(torch.stack)
def convert_stack(ctx, target, args, kwargs):
    tensors = arg(args, kwargs, 0, "tensors")
    like = next(t for t in tensors if is_value(t))
    dim = axis(arg(args, kwargs, 1, "dim", 0), ctx.rank(like) + 1)
    values = [ctx.op("Unsqueeze", [ctx.value(t, like), ctx.ints([dim])]) for t in tensors]
    return ctx.op("Concat", values, axis=dim)


@converter(method("chunk"), torch.chunk)
def convert_chunk(ctx, target, args, kwargs):
    x = ctx.value(args[0])
    chunks, dim = arg(args, kwargs, 1, "chunks"), arg(args, kwargs, 2, "dim", 0)
    size = ctx.lens(x)[axis(dim, ctx.rank(x))]
    step = -(-size // chunks)
    return _split(ctx, x, [min(step, size - i) for i in range(0, size, step)], dim)


@converter(method("split"), torch.split)
def convert_split(ctx, target, args, kwargs):
    x = ctx.value(args[0])
    sizes, dim = arg(args, kwargs, 1, "split_size_or_sections"), arg(args, kwargs, 2, "dim", 0)
    size = ctx.lens(x)[axis(dim, ctx.rank(x))]
    if isinstance(sizes, int):
        sizes = [min(sizes, size - i) for i in range(0, size, sizes)]
    return _split(ctx, x, sizes, dim)


def _split(ctx, x, sizes, dim):
    if len(sizes) == 1:
        return (x,)
    outs = ctx.op("Split", [x, ctx.ints(sizes)], num_outputs=len(sizes),
                  axis=axis(dim, ctx.rank(x)))
    return tuple(outs)


@converter(method("size"))
def convert_size(ctx, target, args, kwargs):
    lens = ctx.lens(ctx.value(args[0]))
    dim = arg(args, kwargs, 1, "dim")
    return torch.Size(lens) if dim is None else lens[dim]


@converter(method("dim"))
def convert_dim(ctx, target, args, kwargs):
    return ctx.rank(ctx.value(args[0]))


@converter(getattr)
def convert_getattr(ctx, target, args, kwargs):
    if args[1] == "shape":
        return torch.Size(ctx.lens(ctx.value(args[0])))
    if args[1] == "ndim":
        return ctx.rank(ctx.value(args[0]))
    raise ctx.error(f"attribute {args[1]!r} of a tensor is not supported")


def _getattr_supported(node, target):
    return len(node.args) > 1 and node.args[1] in ("shape", "ndim")


SUPPORTS[getattr] = _getattr_supported


@converter(operator.getitem)
def convert_getitem(ctx, target, args, kwargs):
    x, index = args
    if isinstance(x, (tuple, list)):
        return x[index]
    x = ctx.value(x)
    index = index if isinstance(index, tuple) else (index,)
    lens = ctx.lens(x)
    if Ellipsis in index:
        at = index.index(Ellipsis)
        used = sum(1 for i in index if i is not None and i is not Ellipsis)
        index = index[:at] + (slice(None),) * (len(lens) - used) + index[at + 1:]
    starts, ends, axes, squeeze, unsqueeze, dim, out_dim = [], [], [], [], [], 0, 0
    for i in index:
        if i is None:
            unsqueeze.append(out_dim)
            out_dim += 1
            continue
        if isinstance(i, int):
            start = i + lens[dim] if i < 0 else i
            starts.append(start), ends.append(start + 1), axes.append(dim), squeeze.append(dim)
        elif isinstance(i, slice):
            start, stop, step = i.indices(lens[dim])
            if step != 1:
                raise ctx.error("slices with a step are not supported")
            if (start, stop) != (0, lens[dim]):
                starts.append(start), ends.append(stop), axes.append(dim)
            out_dim += 1
        else:
            raise ctx.error(f"indexing with {type(i).__name__} is not supported")
        dim += 1
    if axes:
        x = ctx.op("Slice", [x, ctx.ints(starts), ctx.ints(ends), ctx.ints(axes)])
    if squeeze:
        x = ctx.op("Squeeze", [x, ctx.ints(squeeze)])
    if unsqueeze:
        x = ctx.op("Unsqueeze", [x, ctx.ints(unsqueeze)])
    return x


def _getitem_supported(node, target):
    index = node.args[1]
    items = index if isinstance(index, tuple) else (index,)
    source = node.args[0]
    if hasattr(source, "meta") and source.meta.get("type") in (tuple, list):
        return isinstance(index, int)
    return all(i is None or i is Ellipsis or isinstance(i, int) or
               (isinstance(i, slice) and i.step in (None, 1) and
                all(isinstance(b, (int, type(None))) for b in (i.start, i.stop)))
               for i in items)


SUPPORTS[operator.getitem] = _getitem_supported


# ---------------------------------------------------------------------------------------------
# Softmax and reductions


def _softmax(op_name):
    def convert(ctx, target, args, kwargs):
        x = ctx.value(args[0])
        dim = target.dim if isinstance(target, nn.Module) else arg(args, kwargs, 1, "dim")
        if dim is None:
            dim = -1
        return ctx.op(op_name, [x], axis=axis(dim, ctx.rank(x)))

    convert.__name__ = f"convert_{op_name}"
    return convert


converter(F.softmax, torch.softmax, method("softmax"), nn.Softmax)(_softmax("Softmax"))
converter(F.log_softmax, torch.log_softmax, method("log_softmax"), nn.LogSoftmax)(
    _softmax("LogSoftmax"))


def _reduce(op_name):
    def convert(ctx, target, args, kwargs):
        x = ctx.value(args[0])
        dim = arg(args, kwargs, 1, "dim")
        keepdim = arg(args, kwargs, 2, "keepdim", False)
        dims = list(range(ctx.rank(x))) if dim is None else pair(dim, 1)
        return ctx.op(op_name, [x], axes=[axis(d, ctx.rank(x)) for d in dims],
                      keepdims=int(bool(keepdim)))

    convert.__name__ = f"convert_{op_name}"
    return convert


converter(torch.mean, method("mean"))(_reduce("ReduceMean"))
converter(torch.sum, method("sum"))(_reduce("ReduceSum"))
converter(torch.amax, method("amax"))(_reduce("ReduceMax"))


# ---------------------------------------------------------------------------------------------
# Transformer modules (leaf modules of FX: their forward has control flow symbolic tracing
# cannot follow). Inference semantics: no masks, dropout off.


def _attention(ctx, mod, query, key, value):
    """nn.MultiheadAttention without masks; inputs [L, N, E] (or [N, L, E] with batch_first)."""
    q_in, k_in, v_in = ctx.value(query), ctx.value(key), ctx.value(value)
    if not mod.batch_first:
        q_in, k_in, v_in = (ctx.op("Transpose", [t], perm=[1, 0, 2]) for t in (q_in, k_in, v_in))
    n, length, embed = ctx.lens(q_in)
    heads, head_dim = mod.num_heads, embed // mod.num_heads
    w = mod.in_proj_weight.detach()
    b = mod.in_proj_bias.detach() if mod.in_proj_bias is not None else None

    def project(x, i):
        y = _linear(ctx, x, w[i * embed:(i + 1) * embed],
                    b[i * embed:(i + 1) * embed] if b is not None else None)
        y = ctx.op("Reshape", [y, ctx.ints([n, -1, heads, head_dim])])
        return ctx.op("Transpose", [y], perm=[0, 2, 1, 3])  # [N, H, L, D]

    q, k, v = project(q_in, 0), project(k_in, 1), project(v_in, 2)
    q = ctx.op("Mul", [q, ctx.value(1.0 / math.sqrt(head_dim), q)])
    scores = ctx.op("MatMul", [q, ctx.op("Transpose", [k], perm=[0, 1, 3, 2])])
    probs = ctx.op("Softmax", [scores], axis=3)
    out = ctx.op("Transpose", [ctx.op("MatMul", [probs, v])], perm=[0, 2, 1, 3])
    out = ctx.op("Reshape", [out, ctx.ints([n, length, embed])])
    out = _linear(ctx, out, mod.out_proj.weight, mod.out_proj.bias)
    if not mod.batch_first:
        out = ctx.op("Transpose", [out], perm=[1, 0, 2])
    return out


def _mha_supported(node, mod):
    extra = list(node.args[3:]) + [v for k, v in node.kwargs.items()
                                   if k not in ("need_weights",)]
    return (mod._qkv_same_embed_dim and all(e is None or e is False for e in extra)
            and node.kwargs.get("need_weights", True) is False)


@converter(nn.MultiheadAttention, supports=_mha_supported)
def convert_multihead_attention(ctx, mod, args, kwargs):
    return (_attention(ctx, mod, args[0], args[1], args[2]), None)


_ACTIVATIONS = {F.relu: "Relu", F.gelu: "gelu"}


def _encoder_layer(ctx, layer, x):
    act = layer.activation
    activation = _ACTIVATIONS.get(act) if callable(act) and not isinstance(act, nn.Module) else (
        "Relu" if isinstance(act, nn.ReLU) else "gelu" if isinstance(act, nn.GELU) else None)

    def attend(y):
        return _attention(ctx, layer.self_attn, y, y, y)

    def feed_forward(y):
        y = _linear(ctx, y, layer.linear1.weight, layer.linear1.bias)
        y = ctx.op("Relu", [y]) if activation == "Relu" else convert_gelu(ctx, F.gelu, [y], {})
        return _linear(ctx, y, layer.linear2.weight, layer.linear2.bias)

    def norm(y, mod):
        return _layer_norm(ctx, y, mod.normalized_shape, mod.weight, mod.bias, mod.eps)

    if layer.norm_first:
        x = ctx.op("Add", [x, attend(norm(x, layer.norm1))])
        return ctx.op("Add", [x, feed_forward(norm(x, layer.norm2))])
    x = norm(ctx.op("Add", [x, attend(x)]), layer.norm1)
    return norm(ctx.op("Add", [x, feed_forward(x)]), layer.norm2)


def _encoder_layer_supported(node, layer):
    act = layer.activation
    known = act in _ACTIVATIONS or isinstance(act, (nn.ReLU, nn.GELU))
    return (known and layer.self_attn._qkv_same_embed_dim and len(node.args) == 1
            and all(v is None for v in node.kwargs.values()))


@converter(nn.TransformerEncoderLayer, supports=_encoder_layer_supported)
def convert_encoder_layer(ctx, layer, args, kwargs):
    return _encoder_layer(ctx, layer, ctx.value(args[0]))


def _encoder_supported(node, encoder):
    return (all(_encoder_layer_supported(node, layer) for layer in encoder.layers)
            and len(node.args) == 1 and all(v is None for v in node.kwargs.values()))


@converter(nn.TransformerEncoder, supports=_encoder_supported)
def convert_encoder(ctx, encoder, args, kwargs):
    x = ctx.value(args[0])
    for layer in encoder.layers:
        x = _encoder_layer(ctx, layer, x)
    if encoder.norm is not None:
        x = _layer_norm(ctx, x, encoder.norm.normalized_shape, encoder.norm.weight,
                        encoder.norm.bias, encoder.norm.eps)
    return x


# ---------------------------------------------------------------------------------------------
# Quantization (torch.ao FX: convert_to_reference_fx's quantize/dequantize pairs and reference
# modules). Calibrated scales and zero points become kiln QuantizeLinear/DequantizeLinear.

_QTYPES = {torch.quint8: np.uint8, torch.qint8: np.int8, torch.qint32: np.int32}


@converter(torch.quantize_per_tensor)
def convert_quantize_per_tensor(ctx, target, args, kwargs):
    x = ctx.value(args[0])
    scale, zero_point, dtype = (arg(args, kwargs, 1, "scale"), arg(args, kwargs, 2, "zero_point"),
                                arg(args, kwargs, 3, "dtype"))
    scale = float(scale.item() if isinstance(scale, torch.Tensor) else scale)
    zero_point = int(zero_point.item() if isinstance(zero_point, torch.Tensor) else zero_point)
    s = ctx.literal(np.float32(scale))
    z = ctx.literal(np.asarray(zero_point, dtype=_QTYPES[dtype]))
    return QValue(ctx.op("QuantizeLinear", [x, s, z]), s, z)


def _quantize_supported(node, target):
    dtype = arg(node.args, node.kwargs, 3, "dtype")
    return dtype in (torch.quint8, torch.qint8) and all(
        u.op == "call_method" and u.target == "dequantize" for u in node.users)


SUPPORTS[torch.quantize_per_tensor] = _quantize_supported


@converter(method("dequantize"), torch.dequantize)
def convert_dequantize(ctx, target, args, kwargs):
    q = args[0]
    if not isinstance(q, QValue):
        raise ctx.error("dequantize of a tensor that was not quantized in the graph")
    return ctx.op("DequantizeLinear", [q.ins, q.scale, q.zero_point])


def _dequantized_weight(ctx, mod):
    """A reference module's weight as int8 literal -> DequantizeLinear, per tensor or per
    channel, with the scales and zero points of its weight observer."""
    weight = mod.weight.detach()
    scheme, dtype = mod.weight_qscheme, mod.weight_dtype
    scale = mod.weight_scale.detach().float()
    zero_point = mod.weight_zero_point.detach()
    if scheme in (torch.per_channel_affine, torch.per_channel_symmetric):
        ch_axis = int(mod.weight_axis)
        q = torch.quantize_per_channel(weight, scale.double(), zero_point.long(), ch_axis, dtype)
        attrs = {"axis": ch_axis}
    else:
        q = torch.quantize_per_tensor(weight, float(scale), int(zero_point), dtype)
        scale, zero_point, attrs = scale.reshape(()), zero_point.reshape(()), {}
    np_type = _QTYPES[dtype]
    ints = ctx.literal(q.int_repr().numpy())
    s = ctx.literal(scale.numpy().astype(np.float32))
    z = ctx.literal(zero_point.numpy().astype(np_type))
    return ctx.op("DequantizeLinear", [ints, s, z], **attrs)


def _reference_supported(node, mod):
    return mod.weight_qscheme in (torch.per_tensor_affine, torch.per_channel_affine,
                                  torch.per_tensor_symmetric, torch.per_channel_symmetric) and \
        mod.weight_dtype in (torch.qint8, torch.quint8)


_REFERENCE_CONV = []
_REFERENCE_LINEAR = []
try:  # torch.ao.nn.quantized.reference since torch 1.13
    import torch.ao.nn.quantized.reference as _ref

    _REFERENCE_CONV = [_ref.Conv1d, _ref.Conv2d, _ref.Conv3d]
    _REFERENCE_LINEAR = [_ref.Linear]
except ImportError:  # pragma: no cover - depends on the torch version
    pass


def convert_reference_conv(ctx, mod, args, kwargs):
    return _conv(ctx, args[0], _dequantized_weight(ctx, mod), mod.bias, mod.stride, mod.padding,
                 mod.dilation, mod.groups)


def convert_reference_linear(ctx, mod, args, kwargs):
    x = ctx.value(args[0])
    w = ctx.op("Transpose", [_dequantized_weight(ctx, mod)], perm=[1, 0])
    y = ctx.op("MatMul", [x, w])
    return ctx.op("Add", [y, ctx.value(mod.bias)]) if mod.bias is not None else y


for _cls in _REFERENCE_CONV:
    converter(_cls, supports=_reference_supported)(convert_reference_conv)
for _cls in _REFERENCE_LINEAR:
    converter(_cls, supports=_reference_supported)(convert_reference_linear)


# ---------------------------------------------------------------------------------------------
# Spellings Dynamo graphs (PyTorch 2) record for the functional forms above: the builtins that
# torch.nn.functional wraps, where their arguments come in the same order.
_ALIASES = {
    "max_pool1d": convert_max_pool, "max_pool2d": convert_max_pool,
    "max_pool3d": convert_max_pool, "avg_pool1d": convert_avg_pool,
    "avg_pool2d": convert_avg_pool, "avg_pool3d": convert_avg_pool,
    "adaptive_avg_pool1d": convert_adaptive_avg_pool,
    "adaptive_avg_pool2d": convert_adaptive_avg_pool,
    "adaptive_avg_pool3d": convert_adaptive_avg_pool, "layer_norm": convert_layer_norm,
}
for _name, _fn in _ALIASES.items():
    for _owner in (torch, torch._C._nn):
        _builtin = getattr(_owner, _name, None)
        if _builtin is not None and _builtin not in CONVERTERS:
            converter(_builtin, supports=SUPPORTS.get(getattr(F, _name)))(_fn)
