# SPDX-License-Identifier: Apache-2.0
"""FX lowering: trace a module, split it into kiln islands and PyTorch islands, and compile each
kiln island into a KilnModule."""

import logging

import torch
from torch import fx
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase
from torch.fx.passes.shape_prop import ShapeProp

from kiln.torch._context import KILN_TYPES, ConversionError
from kiln.torch._registry import SUPPORTS, lookup, node_key
from kiln.torch.module import KilnModule
from kiln.torch.parts import UntraceableError, lower_parts, trace_failure
from kiln.torch.tracer import data_dependent_nodes, mutation_hazard, trace_with_shapes

log = logging.getLogger("kiln.torch")

_QUANTIZED = (torch.quint8, torch.qint8, torch.qint32)


def trace(module, num_inputs=1):
    """``module`` as an FX GraphModule (symbolic tracing; torch.nn modules are leaves). A module
    whose own type has a converter (nn.TransformerEncoder, ...) becomes one call of it, since
    tracing its forward would meet control flow."""
    if isinstance(module, fx.GraphModule):  # a copy: splitting rewrites the graph
        return fx.GraphModule(module, module.graph.__deepcopy__())
    if lookup(type(module)) is None:
        return fx.symbolic_trace(module)
    root = torch.nn.Module()
    root.module = module
    graph = fx.Graph()
    args = tuple(graph.placeholder(f"x{i}") for i in range(num_inputs))
    graph.output(graph.call_module("module", args))
    return fx.GraphModule(root, graph)


def _is_tensor_node(node):
    meta = node.meta.get("type")
    return isinstance(meta, type) and issubclass(meta, torch.Tensor)


class KilnSupport(OperatorSupportBase):
    """Which nodes kiln takes: a converter exists, it accepts this node, every tensor involved
    has a kiln dtype (quantized ones only between quantize and dequantize), and no non-tensor
    input comes from a node PyTorch runs."""

    def __init__(self, gm):
        self.gm = gm
        self.supported = {}
        self.reasons = {}
        self.data_dependent = data_dependent_nodes(gm)
        for node in gm.graph.nodes:
            ok, reason = self._check(node)
            self.supported[node] = ok
            if not ok and reason:
                self.reasons[node] = reason

    def _check(self, node):
        if node.op == "get_attr":
            return True, None
        if node.op not in ("call_function", "call_method", "call_module"):
            return False, None
        key = node_key(node, self.gm)
        if lookup(key) is None:
            return False, "no converter"
        target = self.gm.get_submodule(node.target) if node.op == "call_module" else node.target
        supports = SUPPORTS.get(key)
        if supports is None and isinstance(key, type):
            supports = next((SUPPORTS[b] for b in key.__mro__ if b in SUPPORTS), None)
        if supports is not None and not supports(node, target):
            return False, "its arguments are not supported"
        if node in self.data_dependent:
            return False, "its shape depends on the data (after nonzero, a mask, unique, NMS)"
        for n in node.all_input_nodes + [node]:
            meta = n.meta.get("tensor_meta")
            if meta is not None and hasattr(meta, "dtype") and meta.dtype not in KILN_TYPES:
                if meta.dtype not in _QUANTIZED:
                    return False, f"dtype {meta.dtype}"
        for n in node.all_input_nodes:
            if not _is_tensor_node(n) and n.op != "get_attr" and not self.supported.get(n, False):
                return False, "a non-tensor input computed by PyTorch"
        return True, None

    def is_node_supported(self, submodules, node):
        return self.supported.get(node, False)


def _island_size(gm, nodes):
    """The operations of an island; a module call counts its modules (an nn.TransformerEncoder is
    one FX node but many operations)."""
    size = 0
    for n in nodes:
        if n.op == "call_module":
            size += sum(1 for _ in gm.get_submodule(n.target).modules())
        elif n.op in ("call_function", "call_method"):
            size += 1
    return size


def split(gm, sample_inputs, min_island=1):
    """Fuses the kiln-supported parts of ``gm`` into submodules ``fused_<i>`` (islands with fewer
    than ``min_island`` compute nodes stay in PyTorch). Returns the split GraphModule, the names
    of the kiln submodules and the support table (for reporting)."""
    ShapeProp(gm).propagate(*sample_inputs)
    support = KilnSupport(gm)
    partitioner = CapabilityBasedPartitioner(gm, support, allows_single_node_partition=True)
    partitions = [p for p in partitioner.propose_partitions()
                  if _island_size(gm, p.nodes) >= max(min_island, 1)]
    for node, reason in support.reasons.items():
        log.info("kiln.torch: %s %s stays in PyTorch: %s", node.op, node.target, reason)
    if not partitions:
        return gm, [], support
    fused = partitioner.fuse_partitions(partitions)
    names = [n.target for n in fused.graph.nodes
             if n.op == "call_module" and n.target.startswith("fused_")]
    return fused, names, support


def _capture_inputs(gm, names, sample_inputs):
    """The arguments each submodule in ``names`` gets when ``gm`` runs ``sample_inputs``."""
    captured, hooks = {}, []
    for name in names:
        def hook(module, args, name=name):
            captured.setdefault(name, args)
        hooks.append(gm.get_submodule(name).register_forward_pre_hook(hook))
    try:
        with torch.no_grad():
            gm(*sample_inputs)
    finally:
        for h in hooks:
            h.remove()
    return captured


def lower(module, sample_inputs, target="cpu", fp16=False, min_island=5, threads=0,
          parts=True):
    """Lowers ``module`` to kiln: returns a torch.nn.Module (an FX GraphModule) that runs the
    supported parts of the model as kiln executables compiled for ``target`` ("cpu", "cuda",
    "ref") and leaves the rest to PyTorch.

    ``sample_inputs`` (a tensor or a tuple of them) fix the shapes: the lowered module runs those
    shapes (lower again for others). ``fp16`` converts the kiln programs to half precision
    (``kiln.quantize_fp16``). Supported islands with fewer than ``min_island`` operations stay
    in PyTorch (a kiln call costs more than a few small torch ops). ``threads``: intra-op
    threads of the kiln executables (0: the physical cores).

    The module is traced by torch.fx, or where that fails by ``kiln.torch.tracer.ShapeTracer``,
    which answers shape questions (``n, c, h, w = x.shape``, ``if x.dim() == 4``) with the
    sample inputs' shapes. A module neither can trace (control flow on tensor values, in-place
    updates the graph would lose) is lowered by parts when ``parts`` is true: a copy of it whose
    traceable submodules are lowered, each for the arguments it got on ``sample_inputs`` (other
    arguments run it in PyTorch), while its own forward runs in PyTorch (``kiln.torch.parts``).
    With ``parts=False`` such a module raises a ``ConversionError`` naming what stopped the
    trace and where.
    """
    if isinstance(sample_inputs, torch.Tensor):
        sample_inputs = (sample_inputs,)
    sample_inputs = tuple(sample_inputs)
    module = module.eval()
    gm, error = _trace_whole(module, sample_inputs)
    if gm is not None:
        return lower_graph_module(gm, sample_inputs, target=target, fp16=fp16,
                                  min_island=min_island, threads=threads)
    if not parts:
        raise ConversionError(
            f"kiln.torch.lower: {trace_failure(module, error)}; lower with parts=True to lower "
            f"its traceable submodules and run the rest in PyTorch, or lower a traceable "
            f"submodule yourself") from error

    def lower_graph(gm, tensors, name):
        return lower_graph_module(gm, tensors, target=target, fp16=fp16, min_island=min_island,
                                  threads=threads, part=name)

    return lower_parts(module, sample_inputs, error, lower_graph)


def _trace_whole(module, sample_inputs):
    """``(graph module, None)``: ``module`` traced by torch.fx, else by ``ShapeTracer`` on
    ``sample_inputs``; ``(None, error)`` when neither gives a graph that stands for it."""
    try:
        gm = trace(module, len(sample_inputs))
        if mutation_hazard(gm) is None:
            return gm, None
    except Exception:  # noqa: BLE001, S110 - tracing runs the model's own code; try with shapes
        pass
    if not all(isinstance(x, torch.Tensor) for x in sample_inputs):
        return None, UntraceableError(
            "torch.fx cannot trace it, and tracing with shapes needs tensor sample inputs")
    try:
        gm = trace_with_shapes(module, sample_inputs)
    except Exception as error:  # noqa: BLE001 - whatever the model's forward raises
        return None, error
    hazard = mutation_hazard(gm)
    return (gm, None) if hazard is None else (None, UntraceableError(hazard))


def lower_graph_module(gm, sample_inputs, target="cpu", fp16=False, min_island=5, threads=0,
                       part=None):
    """``lower`` for a GraphModule that is already traced (the torch.compile backend's).
    ``part``: the submodule's name when lowering by parts (its messages are INFO then)."""
    gm.graph.eliminate_dead_code()  # e.g. the unused aten.empty of make_fx's batch norms
    gm.recompile()
    split_gm, names, support = split(gm, sample_inputs, min_island)
    if not names:
        calls = [n for n in gm.graph.nodes if n.op.startswith("call_")]
        if any(support.supported.get(n) for n in calls):
            why = (f"its kiln-supported operations form islands of fewer than min_island="
                   f"{min_island} operations")
        else:
            why = "none of its operations is supported by kiln"
        log.log(logging.INFO if part else logging.WARNING, "kiln.torch: %s: %s; it runs in "
                "PyTorch", part or "the model", why)
        return split_gm
    captured = _capture_inputs(split_gm, names, sample_inputs)
    for name in names:
        sub = split_gm.get_submodule(name)
        setattr(split_gm, name, KilnModule(sub, captured[name], target=target, fp16=fp16,
                                           threads=threads))
    log.info("kiln.torch: %d kiln island(s): %s", len(names), ", ".join(names))
    return split_gm


def kiln_islands(module):
    """The KilnModules of a lowered module."""
    return [m for m in module.modules() if isinstance(m, KilnModule)]
