# SPDX-License-Identifier: Apache-2.0
"""Converters for what vision models call beyond ``converters.py``: F.interpolate and
nn.Upsample (Resize), F.grid_sample (GridSample), instance and group normalization, and
torchvision's stochastic depth (the identity in inference). Semantics are PyTorch's; the Resize
attributes are those torch.onnx's exporter writes for each mode."""

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from kiln.torch._registry import converter
from kiln.torch.converters import _batch_norm, arg, pair

aten = torch.ops.aten

# interpolate mode -> (Resize mode, coordinate_transformation_mode when align_corners is false).
_RESIZE_MODES = {
    "nearest": ("nearest", "asymmetric"),
    "nearest-exact": ("nearest", "half_pixel"),
    "linear": ("linear", "half_pixel"),
    "bilinear": ("linear", "half_pixel"),
    "trilinear": ("linear", "half_pixel"),
    "bicubic": ("cubic", "half_pixel"),
}


def _interpolate_args(target, args, kwargs):
    """(size, scale_factor, mode, align_corners, recompute_scale_factor, antialias) of an
    F.interpolate call or an nn.Upsample module."""
    if isinstance(target, nn.Module):
        return (target.size, target.scale_factor, target.mode, target.align_corners,
                getattr(target, "recompute_scale_factor", None), False)
    return (arg(args, kwargs, 1, "size"), arg(args, kwargs, 2, "scale_factor"),
            arg(args, kwargs, 3, "mode", "nearest"), arg(args, kwargs, 4, "align_corners"),
            arg(args, kwargs, 5, "recompute_scale_factor"), arg(args, kwargs, 6, "antialias",
                                                                   False))


def _resize(ctx, x, size, scale_factor, mode, align_corners, recompute_scale_factor):
    x = ctx.value(x)
    lens = ctx.lens(x)
    spatial = len(lens) - 2
    kiln_mode, transform = _RESIZE_MODES[mode]
    if align_corners and kiln_mode != "nearest":
        transform = "align_corners"
    attrs = {"mode": kiln_mode, "coordinate_transformation_mode": transform,
             "nearest_mode": "round_prefer_ceil" if mode == "nearest-exact" else "floor",
             "cubic_coeff_a": -0.75}
    if size is not None:
        sizes = [int(s) for s in pair(list(size) if isinstance(size, torch.Size) else size,
                                      spatial)]
        return ctx.op("Resize", [x, None, None, ctx.ints(lens[:2] + sizes)], **attrs)
    scales = [float(s) for s in pair(scale_factor, spatial)]
    if recompute_scale_factor or transform == "align_corners":
        # PyTorch maps coordinates with the sizes' ratio then, whatever the scale factor.
        sizes = [int(math.floor(n * s)) for n, s in zip(lens[2:], scales)]
        return ctx.op("Resize", [x, None, None, ctx.ints(lens[:2] + sizes)], **attrs)
    scales = ctx.literal(np.asarray([1.0, 1.0] + scales, dtype=np.float32))
    return ctx.op("Resize", [x, None, scales], **attrs)


def _rank(node):
    source = node.args[0] if node.args else None
    meta = source.meta.get("tensor_meta") if hasattr(source, "meta") else None
    return len(meta.shape) if meta is not None and hasattr(meta, "shape") else None


def _interpolate_supported(node, target):
    size, scale, mode, _, _, antialias = _interpolate_args(target, node.args, node.kwargs)
    rank = _rank(node)
    return (mode in _RESIZE_MODES and not antialias and rank is not None and rank >= 3
            and (size is not None or scale is not None))


@converter(F.interpolate, nn.Upsample, supports=_interpolate_supported)
def convert_interpolate(ctx, target, args, kwargs):
    size, scale, mode, align_corners, recompute, _ = _interpolate_args(target, args, kwargs)
    return _resize(ctx, args[0], size, scale, mode, align_corners, recompute)


def convert_upsample_vec(mode):
    """aten.upsample_nearest2d.vec(x, output_size, scale_factors) and
    aten.upsample_bilinear2d.vec(x, output_size, align_corners, scale_factors)."""

    def convert(ctx, target, args, kwargs):
        align = args[2] if mode == "bilinear" else None
        scales = args[3] if mode == "bilinear" else args[2]
        return _resize(ctx, args[0], args[1], scales, mode, align, None)

    convert.__name__ = f"convert_upsample_{mode}2d_vec"
    return convert


for _name, _mode in (("upsample_nearest2d", "nearest"), ("upsample_bilinear2d", "bilinear")):
    _op = getattr(getattr(aten, _name, None), "vec", None)
    if _op is not None:
        converter(_op)(convert_upsample_vec(_mode))


def _grid_sample_supported(node, target):
    mode = arg(node.args, node.kwargs, 2, "mode", "bilinear")
    padding = arg(node.args, node.kwargs, 3, "padding_mode", "zeros")
    return (_rank(node) == 4 and mode in ("bilinear", "nearest", "bicubic")
            and padding in ("zeros", "border", "reflection"))


@converter(F.grid_sample, supports=_grid_sample_supported)
def convert_grid_sample(ctx, target, args, kwargs):
    x = ctx.value(args[0])
    grid = ctx.value(arg(args, kwargs, 1, "grid"), x)
    return ctx.op("GridSample", [x, grid], mode=arg(args, kwargs, 2, "mode", "bilinear"),
                  padding_mode=arg(args, kwargs, 3, "padding_mode", "zeros"),
                  align_corners=int(bool(arg(args, kwargs, 4, "align_corners", False))))


def _instance_norm(ctx, x, mean, var, weight, bias, use_input_stats, eps):
    x = ctx.value(x)
    if not use_input_stats:  # running statistics: a batch normalization
        return _batch_norm(ctx, x, mean, var, weight, bias, eps)
    channels = ctx.lens(x)[1]
    weight = weight if weight is not None else torch.ones(channels)
    bias = bias if bias is not None else torch.zeros(channels)
    return ctx.op("InstanceNormalization", [x, ctx.value(weight, x), ctx.value(bias, x)],
                  epsilon=float(eps))


@converter(nn.InstanceNorm1d, nn.InstanceNorm2d, nn.InstanceNorm3d)
def convert_instance_norm_module(ctx, mod, args, kwargs):
    use_input_stats = mod.training or not mod.track_running_stats
    return _instance_norm(ctx, args[0], mod.running_mean, mod.running_var, mod.weight, mod.bias,
                          use_input_stats, mod.eps)


def _instance_norm_supported(node, target):
    return arg(node.args, node.kwargs, 5, "use_input_stats", True) or (
        arg(node.args, node.kwargs, 1, "running_mean") is not None)


@converter(F.instance_norm, supports=_instance_norm_supported)
def convert_instance_norm(ctx, target, args, kwargs):
    return _instance_norm(ctx, args[0], arg(args, kwargs, 1, "running_mean"),
                          arg(args, kwargs, 2, "running_var"), arg(args, kwargs, 3, "weight"),
                          arg(args, kwargs, 4, "bias"),
                          arg(args, kwargs, 5, "use_input_stats", True),
                          arg(args, kwargs, 7, "eps", 1e-5))


def _group_norm(ctx, x, groups, weight, bias, eps):
    x = ctx.value(x)
    channels = ctx.lens(x)[1]
    weight = weight if weight is not None else torch.ones(channels)
    bias = bias if bias is not None else torch.zeros(channels)
    return ctx.op("GroupNormalization", [x, ctx.value(weight, x), ctx.value(bias, x)],
                  num_groups=int(groups), epsilon=float(eps))


@converter(nn.GroupNorm)
def convert_group_norm_module(ctx, mod, args, kwargs):
    return _group_norm(ctx, args[0], mod.num_groups, mod.weight, mod.bias, mod.eps)


@converter(F.group_norm)
def convert_group_norm(ctx, target, args, kwargs):
    return _group_norm(ctx, args[0], arg(args, kwargs, 1, "num_groups"),
                       arg(args, kwargs, 2, "weight"), arg(args, kwargs, 3, "bias"),
                       arg(args, kwargs, 4, "eps", 1e-5))


try:  # torchvision's stochastic depth (EfficientNet, ConvNeXt, Swin): the identity in inference
    import torchvision.ops as _tv_ops

    def _stochastic_depth_off(node, target):
        if isinstance(target, nn.Module):
            return not target.training or target.p == 0
        return (arg(node.args, node.kwargs, 3, "training", True) is False
                or arg(node.args, node.kwargs, 1, "p") == 0)

    @converter(_tv_ops.stochastic_depth, _tv_ops.StochasticDepth, supports=_stochastic_depth_off)
    def convert_stochastic_depth(ctx, target, args, kwargs):
        return ctx.value(args[0])
except ImportError:  # pragma: no cover - torchvision is optional
    pass
