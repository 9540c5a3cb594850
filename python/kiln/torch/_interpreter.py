# SPDX-License-Identifier: Apache-2.0
"""Builds a kiln program from an FX GraphModule whose every call node has a converter."""

import torch
import torch.utils._pytree as pytree

import kiln
from kiln.torch import aten, converters, vision  # noqa: F401  (register the converters)
from kiln.torch._context import KILN_TYPES, Context, QValue, is_value
from kiln.torch._registry import converter, lookup, node_key

try:
    from torch.ao.nn.intrinsic import _FusedModule
except ImportError:  # pragma: no cover - depends on the torch version
    _FusedModule = None


def _convert_fused(ctx, mod, args, kwargs):
    """torch.ao.nn.intrinsic fused modules (ConvReLU2d, LinearReLU, ...): their children in
    order."""
    out = args[0]
    for child in mod.children():
        convert = lookup(type(child))
        if convert is None:
            raise ctx.error(f"{type(child).__name__} inside {type(mod).__name__} has no converter")
        out = convert(ctx, child, (out,), {})
    return out


def _fused_supported(node, mod):
    return all(lookup(type(child)) is not None for child in mod.children())


if _FusedModule is not None:
    converter(_FusedModule, supports=_fused_supported)(_convert_fused)


def _contains_value(x):
    return any(is_value(leaf) for leaf in pytree.tree_flatten(x)[0])


class Built:
    """A program built from a graph: the kiln parameters (by graph placeholder index), the
    outputs' structure (a pytree spec whose leaves are output indices or constants) and the
    non-tensor placeholders' values it was specialized for."""

    def __init__(self, program, inputs, out_spec, out_leaves, baked):
        self.program, self.inputs, self.out_spec = program, inputs, out_spec
        self.out_leaves, self.baked = out_leaves, baked


def build_program(gm, sample_inputs):
    """Converts ``gm`` (called with ``sample_inputs``) into a kiln program, not yet compiled."""
    ctx = Context(kiln.program())
    env = {}
    inputs = []  # (placeholder index, kiln name)
    baked = {}  # placeholder index -> the non-tensor value the program assumes
    index = 0
    for node in gm.graph.nodes:
        ctx.node = node
        if node.op == "placeholder":
            sample = sample_inputs[index]
            if isinstance(sample, torch.Tensor):
                if sample.dtype not in KILN_TYPES:
                    raise ctx.error(f"input of dtype {sample.dtype} is not supported")
                name = f"x{len(inputs)}"
                env[node] = ctx.m.add_parameter(
                    name, kiln.shape(KILN_TYPES[sample.dtype], list(sample.shape)))
                inputs.append((index, name))
            else:
                env[node] = sample
                baked[index] = sample
            index += 1
        elif node.op == "get_attr":
            target = gm
            for part in node.target.split("."):
                target = getattr(target, part)
            env[node] = target
        elif node.op in ("call_function", "call_method", "call_module"):
            args = torch.fx.node.map_arg(node.args, lambda n: env[n])
            kwargs = torch.fx.node.map_arg(node.kwargs, lambda n: env[n])
            target = gm.get_submodule(node.target) if node.op == "call_module" else node.target
            if not _contains_value((args, kwargs)):
                # Only constants: compute it now, with torch (constant folding).
                if node.op == "call_method":
                    env[node] = getattr(args[0], target)(*args[1:], **kwargs)
                else:
                    env[node] = target(*args, **kwargs)
                continue
            convert = lookup(node_key(node, gm))
            if convert is None:
                raise ctx.error("has no converter")
            env[node] = convert(ctx, target, args, kwargs)
        elif node.op == "output":
            leaves, spec = pytree.tree_flatten(torch.fx.node.map_arg(node.args[0],
                                                                     lambda n: env[n]))
            outputs, out_leaves = [], []
            for leaf in leaves:
                if isinstance(leaf, QValue):
                    raise ctx.error("a quantized tensor cannot leave the kiln graph")
                if isinstance(leaf, kiln.instruction_ref):
                    out_leaves.append(("output", len(outputs)))
                    outputs.append(leaf)
                else:
                    out_leaves.append(("constant", leaf))
            ctx.m.add_return(outputs)
            return Built(ctx.program, inputs, spec, out_leaves, baked)
    raise ctx.error("the graph has no output node")
