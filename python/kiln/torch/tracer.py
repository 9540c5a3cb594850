# SPDX-License-Identifier: Apache-2.0
"""Tracing for kiln.torch.lower: torch.fx symbolic tracing with the shapes of real sample inputs.

torch.fx's proxies know nothing of shapes, so `n, c, h, w = x.shape`, `if x.dim() == 4:` or
`len(x)` stop symbolic tracing, although a lowered module is specialized to its sample shapes
anyway. ``ShapeTracer`` runs every traced operation on the sample values as it records it, and
answers shape questions (shape, size, dim, len, dtype, device, iterating over a dimension) with
the concrete values; questions about data (`if x.sum() > 0:`) still stop the trace, as do the
shapes of tensors computed by operations whose output shape depends on the data (nonzero, masked
indexing, unique, NMS: the shape is unknown to the trace, and such tensors are marked
``data_dependent_shape`` so kiln leaves them to PyTorch).

``mutation_hazard`` finds the in-place operations whose effect an FX graph does not carry (the
mutated tensor, or a view's base, read after the mutation; a graph input or a weight mutated):
kiln computes out of place, so such graphs are not lowered whole.
"""

import inspect
import operator
import os
import re

import torch
import torch.utils._pytree as pytree
from torch import fx

from kiln.torch._registry import lookup

try:
    import torchvision

    _TORCHVISION_DATA_DEPENDENT = (torchvision.ops.nms, torchvision.ops.batched_nms,
                                   torch.ops.torchvision.nms)
except (ImportError, AttributeError, RuntimeError):  # pragma: no cover - torchvision is optional
    _TORCHVISION_DATA_DEPENDENT = ()

# Operations whose output shape depends on the values of their inputs.
_DATA_DEPENDENT_FUNCTIONS = {
    torch.nonzero, torch.masked_select, torch.unique, torch.unique_consecutive, torch.argwhere,
    torch.bincount, torch.repeat_interleave, *_TORCHVISION_DATA_DEPENDENT}
_DATA_DEPENDENT_METHODS = {"nonzero", "masked_select", "unique", "unique_consecutive",
                           "argwhere", "bincount", "repeat_interleave", "tolist", "item"}
# Tensor methods that return a view of their input (the mutation check follows them to the base).
_VIEW_METHODS = {"view", "view_as", "reshape", "narrow", "select", "permute", "transpose", "t",
                 "expand", "expand_as", "unsqueeze", "squeeze", "flatten", "unflatten",
                 "as_strided", "contiguous", "detach", "unbind", "split", "chunk", "diagonal",
                 "to", "type_as", "float", "__getitem__"}
_VIEW_FUNCTIONS = {operator.getitem, torch.narrow, torch.select, torch.permute, torch.transpose,
                   torch.t, torch.unsqueeze, torch.squeeze, torch.flatten, torch.reshape,
                   torch.unbind, torch.split, torch.chunk, torch.detach, torch.diagonal}
_INPLACE_FUNCTIONS = {operator.setitem, operator.iadd, operator.isub, operator.imul,
                      operator.itruediv, operator.ifloordiv, operator.imod, operator.ipow,
                      operator.iand, operator.ior, operator.ixor, operator.ilshift,
                      operator.irshift}

# Tensor methods that answer from metadata, not data: called on the sample value.
_METADATA_METHODS = {"is_floating_point", "is_complex", "is_contiguous", "is_signed",
                     "element_size", "stride", "storage_offset", "get_device", "ndimension",
                     "nelement", "has_names"}

_NO_VALUE = object()
_KILN_TORCH = os.path.dirname(os.path.abspath(__file__)) + os.sep
_TORCH = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep


def _data_dependent(kind, target, values):
    if kind == "call_function":
        if target in _DATA_DEPENDENT_FUNCTIONS:
            return not (target is torch.repeat_interleave and len(values) > 1
                        and not isinstance(values[1], torch.Tensor))
        if target is torch.where and len(values) == 1:
            return True
        if target is operator.getitem and isinstance(values[0], torch.Tensor):
            index = values[1] if isinstance(values[1], tuple) else (values[1],)
            return any(isinstance(i, torch.Tensor) and i.dtype in (torch.bool, torch.uint8)
                       for i in index)
    if kind == "call_method":
        return target in _DATA_DEPENDENT_METHODS
    return False


def data_dependent_nodes(gm):
    """The nodes of ``gm`` whose output shape depends on the values of the graph's inputs: those
    of the operations above and everything computed from them (ShapeProp's, or ShapeTracer's,
    record of a getitem index's dtype tells masks from integer indices)."""
    found = set()
    for node in gm.graph.nodes:
        if node.meta.get("data_dependent_shape") or any(n in found for n in node.all_input_nodes):
            found.add(node)
            continue
        if node.op not in ("call_function", "call_method"):
            continue
        values = [_meta_value(a) for a in node.args]
        if _data_dependent(node.op, node.target, values):
            found.add(node)
    return found


class _Described:
    """Stands for a node's value where only its dtype matters (a getitem index)."""

    def __init__(self, dtype):
        self.dtype = dtype


def _meta_value(a):
    if isinstance(a, fx.Node):
        meta = a.meta.get("tensor_meta")
        dtype = getattr(meta, "dtype", None)
        return torch.empty(0, dtype=dtype) if dtype is not None else _Described(None)
    if isinstance(a, tuple):
        return tuple(_meta_value(x) for x in a)
    return a


def _has_tensor(value):
    return any(isinstance(leaf, torch.Tensor) for leaf in pytree.tree_flatten(value)[0])


class ShapeProxy(fx.Proxy):
    """A proxy that knows the value its node had on the sample inputs (``_value``)."""

    def _known(self):
        value = self.__dict__.get("_value", _NO_VALUE)
        if value is _NO_VALUE or self.__dict__.get("_dynamic", False):
            return _NO_VALUE
        return value

    def _tensor(self):
        value = self._known()
        return value if isinstance(value, torch.Tensor) else None

    @property
    def shape(self):
        t = self._tensor()
        return t.shape if t is not None else self.tracer.create_proxy(
            "call_function", getattr, (self, "shape"), {})

    def size(self, *dim):
        t = self._tensor()
        if t is None:
            return self.tracer.create_proxy("call_method", "size", (self,) + dim, {})
        return t.size(*dim)

    def dim(self):
        t = self._tensor()
        return t.dim() if t is not None else self.tracer.create_proxy(
            "call_method", "dim", (self,), {})

    def numel(self):
        t = self._tensor()
        return t.numel() if t is not None else self.tracer.create_proxy(
            "call_method", "numel", (self,), {})

    def __len__(self):
        value = self._known()
        if isinstance(value, (torch.Tensor, tuple, list)):
            return len(value)
        return super().__len__()

    def __iter__(self):
        value = self._known()
        if isinstance(value, (torch.Tensor, tuple, list)):
            return iter([self[i] for i in range(len(value))])
        return super().__iter__()

    def __getattr__(self, name):
        value = self._known()
        if value is _NO_VALUE or name.startswith("__"):
            return super().__getattr__(name)
        try:
            attr = getattr(value, name)
        except AttributeError:
            return super().__getattr__(name)
        if name in _METADATA_METHODS and isinstance(value, torch.Tensor):
            return attr  # answers from the shape, dtype, layout or device
        if callable(attr):  # a method: recorded when called
            return super().__getattr__(name)
        if _has_tensor(attr):  # .T, .data, a named tuple's field
            return self.tracer.create_proxy("call_function", getattr, (self, name), {})
        return attr  # metadata: ndim, dtype, device, is_cuda, ...


class ShapeTracer(fx.Tracer):
    """Traces ``root(*samples)`` with one placeholder per sample tensor (see the module's
    docstring). torch.nn modules and modules whose type has a converter stay calls."""

    def __init__(self, samples):
        super().__init__()
        self.samples = list(samples)
        self._running = 0
        self.record_stack_traces = True

    def proxy(self, node):
        return ShapeProxy(node, self)

    def create_args_for_root(self, root_fn, is_module, concrete_args=None):
        # One placeholder per sample, named after the forward's parameters where it has them;
        # parameters after those keep their defaults.
        names = [p.name for p in inspect.signature(root_fn).parameters.values()
                 if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)][1:]
        proxies = []
        for i, sample in enumerate(self.samples):
            proxy = self.create_proxy("placeholder", names[i] if i < len(names) else f"x{i}",
                                      (), {})
            proxy._value = sample.clone()  # the trace may run in-place operations on it
            proxy.node.meta["type"] = type(sample)
            proxies.append(proxy)
        return root_fn, [self.root] + proxies

    def is_leaf_module(self, m, qualname):
        return super().is_leaf_module(m, qualname) or lookup(type(m)) is not None

    def call_module(self, m, forward, args, kwargs):
        if self._running:  # computing a value: the module runs as it is
            return forward(*args, **kwargs)
        return super().call_module(m, forward, args, kwargs)

    def getattr(self, attr, attr_val, parameter_proxy_cache):
        if self._running:
            return attr_val
        return super().getattr(attr, attr_val, parameter_proxy_cache)

    def create_proxy(self, kind, target, args, kwargs, name=None, type_expr=None,
                     proxy_factory_fn=None):
        proxy = super().create_proxy(kind, target, args, kwargs, name, type_expr,
                                     proxy_factory_fn)
        if kind in ("placeholder", "output") or not isinstance(proxy, ShapeProxy):
            return proxy
        inputs = []
        fx.node.map_aggregate((args, kwargs), lambda a: inputs.append(a)
                              if isinstance(a, fx.Proxy) else None)
        values = [a.__dict__.get("_value", _NO_VALUE) if isinstance(a, ShapeProxy) else _NO_VALUE
                  for a in inputs]
        if any(v is _NO_VALUE for v in values):
            return proxy  # an input the trace has no value for: the node stays symbolic
        lookup_value = dict(zip(map(id, inputs), values))
        real_args, real_kwargs = fx.node.map_aggregate(
            (args, kwargs), lambda a: lookup_value[id(a)] if isinstance(a, fx.Proxy) else a)
        self._running += 1
        try:
            with torch.no_grad():
                value = self._compute(kind, target, real_args, real_kwargs)
        finally:
            self._running -= 1
        proxy._value = value
        proxy.node.meta["type"] = type(value)
        dynamic = any(isinstance(a, ShapeProxy) and a.__dict__.get("_dynamic", False)
                      for a in inputs) or _data_dependent(kind, target, real_args)
        if dynamic:
            proxy._dynamic = True
            proxy.node.meta["data_dependent_shape"] = True
        return proxy

    def _compute(self, kind, target, args, kwargs):
        if kind == "call_function":
            return target(*args, **kwargs)
        if kind == "call_method":
            return getattr(args[0], target)(*args[1:], **kwargs)
        if kind == "call_module":
            return self.root.get_submodule(target)(*args, **kwargs)
        if kind == "get_attr":
            value = self.root
            for part in target.split("."):
                value = getattr(value, part)
            return value
        raise AssertionError(f"unexpected node kind {kind}")


def trace_with_shapes(root, samples, name=None):
    """``root`` traced by ShapeTracer on ``samples`` (tensors: one placeholder each, given to
    ``root``'s forward in order)."""
    graph = ShapeTracer(samples).trace(root)
    graph._tracer_cls = None  # unpickling re-traces the generated code: fx's default tracer
    return fx.GraphModule(root, graph, name or type(root).__name__)


def _is_tensor(node):
    kind = node.meta.get("type")
    return kind is None or (isinstance(kind, type) and issubclass(kind, torch.Tensor))


def _mutated(node, gm):
    """The node whose value ``node`` mutates in place, or None."""
    if node.op == "call_method" and node.target.endswith("_") and not node.target.endswith("__"):
        return node.args[0] if node.args else None
    if node.op == "call_function":
        if node.target in _INPLACE_FUNCTIONS or node.kwargs.get("inplace") is True:
            return node.args[0] if node.args else None
        name = getattr(node.target, "__name__", "")
        if name.endswith("_") and not name.endswith("__") and node.args:
            return node.args[0]
    if node.op == "call_module" and getattr(gm.get_submodule(node.target), "inplace", False):
        return node.args[0] if node.args else None
    return None


def _is_view(node):
    return ((node.op == "call_method" and node.target in _VIEW_METHODS)
            or (node.op == "call_function" and node.target in _VIEW_FUNCTIONS))


def mutation_hazard(gm):
    """A description of the first in-place operation of ``gm`` whose effect the graph does not
    carry to later readers, or None. Such an operation mutates a tensor (or the base of a view)
    that another node reads after it, or a graph input, weight or buffer."""
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    for node in gm.graph.nodes:
        target = _mutated(node, gm)
        if not isinstance(target, fx.Node) or not _is_tensor(target):
            continue
        aliases = [target]
        while _is_view(aliases[-1]) and isinstance(aliases[-1].args[0], fx.Node):
            aliases.append(aliases[-1].args[0])
        what = f"{node.op} {getattr(node.target, '__name__', node.target)} ({node.name})"
        base = aliases[-1]
        if base.op in ("placeholder", "get_attr"):
            kind = "an input" if base.op == "placeholder" else "a weight or buffer"
            return f"{what} updates {kind} ({base.name}) in place{_where(node)}"
        later = [u for a in aliases for u in a.users
                 if u is not node and u not in aliases and order[u] > order[node]]
        if later:
            view = f" (a view of {base.name})" if base is not target else ""
            return (f"{what} updates {target.name}{view} in place, which {later[0].name} reads "
                    f"afterwards: a graph would lose the update{_where(node)}")
    return None


def _where(node):
    """ " at path/file.py:line in function: `source`" of the model's code that made ``node``
    (recorded by ShapeTracer), or ""."""
    trace = node.meta.get("stack_trace") or getattr(node, "stack_trace", None) or ""
    lines = trace.split("\n")
    for i, line in enumerate(lines):  # innermost frame first
        m = re.match(r'\s*File "(.+)", line (\d+), in (\S+)', line)
        if m and not os.path.abspath(m.group(1)).startswith((_KILN_TORCH, _TORCH)):
            path = os.path.join(*m.group(1).split(os.sep)[-3:])
            source = lines[i + 1].strip() if i + 1 < len(lines) else ""
            return f"; at {path}:{m.group(2)} in {m.group(3)}: `{source}`"
    return ""
