# SPDX-License-Identifier: Apache-2.0
"""Lowering a module that torch.fx cannot trace as a whole (data-dependent control flow, loops
over tensors: torchvision's detectors, RAFT): its submodules are lowered one by one, each for the
arguments it was called with on the sample inputs, and the module's own forward keeps running in
PyTorch around them."""

import copy
import logging
import os
import traceback

import torch
import torch.utils._pytree as pytree

from kiln.torch.module import KilnModule
from kiln.torch.tracer import mutation_hazard, trace_with_shapes

log = logging.getLogger("kiln.torch")

# Non-tensor arguments a lowered part may be specialized to (compared on every call).
_PLAIN = (type(None), bool, int, float, str, torch.dtype, torch.device)
_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
_KILN_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def where(error):
    """The innermost frame of ``error``'s traceback in the model's code (not torch's, not
    kiln's), as "path/file.py:line in function: `source`", or "" when there is none."""
    frames = [f for f in traceback.extract_tb(error.__traceback__)
              if not os.path.abspath(f.filename).startswith((_TORCH_DIR, _KILN_DIR))
              and not f.filename.startswith("<")]
    if not frames:
        return ""
    f = frames[-1]
    path = os.path.join(*f.filename.split(os.sep)[-3:])
    return f"{path}:{f.lineno} in {f.name}: `{(f.line or '').strip()}`"


def trace_failure(module, error):
    """One line saying why ``module`` could not be traced (by torch.fx, nor with the sample
    shapes) and where."""
    reason = str(error).strip().split("\n")[0]
    at = where(error)
    return (f"{type(module).__name__}.forward cannot be traced "
            f"({type(error).__name__}: {reason}{'; at ' + at if at else ''})")


def signature(args, kwargs):
    """The key of one call: the arguments' structure, each tensor's shape and dtype, and the
    other values themselves; None when an argument is of a kind a lowered part cannot take."""
    leaves, spec = pytree.tree_flatten((args, kwargs))
    key = [str(spec)]
    for leaf in leaves:
        if isinstance(leaf, torch.Tensor):
            key.append(("tensor", tuple(leaf.shape), leaf.dtype))
        elif isinstance(leaf, _PLAIN):
            key.append(("value", type(leaf).__name__, leaf))
        else:
            return None
    return tuple(key)


class _Flat(torch.nn.Module):
    """Calls ``module`` with the arguments of one recorded call, its tensors given flat (one FX
    placeholder each), the other values fixed."""

    def __init__(self, module, args, kwargs):
        super().__init__()
        self.module = module
        leaves, self._spec = pytree.tree_flatten((args, kwargs))
        self._slots = [None if isinstance(x, torch.Tensor) else x for x in leaves]
        self._is_tensor = [isinstance(x, torch.Tensor) for x in leaves]
        self.tensors = tuple(x for x in leaves if isinstance(x, torch.Tensor))

    def forward(self, *tensors):
        it = iter(tensors)
        leaves = [next(it) if t else v for t, v in zip(self._is_tensor, self._slots)]
        args, kwargs = pytree.tree_unflatten(leaves, self._spec)
        return self.module(*args, **kwargs)


def trace_call(module, args, kwargs):
    """``module`` traced for one call (``ShapeTracer``): a GraphModule taking the call's tensors
    in order, and those tensors. Raises what stopped the trace, or ``UntraceableError`` for an
    in-place operation the graph would not carry."""
    flat = _Flat(module, args, kwargs)
    gm = trace_with_shapes(flat, flat.tensors, type(module).__name__)
    hazard = mutation_hazard(gm)
    if hazard:
        raise UntraceableError(hazard)
    return gm, flat.tensors


class UntraceableError(Exception):
    """A traced graph that cannot stand for the module (see ``mutation_hazard``)."""


class LoweredPart(torch.nn.Module):
    """Stands in for a submodule: a call with the signature of a recorded call runs that call's
    lowered GraphModule; any other call runs the original submodule in PyTorch."""

    def __init__(self, original, name):
        super().__init__()
        self.original = original
        self.name = name
        self.lowered = torch.nn.ModuleList()
        self.keys = []
        self._missed = set()

    def add(self, key, lowered):
        self.keys.append(key)
        self.lowered.append(lowered)

    def forward(self, *args, **kwargs):
        key = signature(args, kwargs)
        if key in self.keys:
            tensors = [x for x in pytree.tree_flatten((args, kwargs))[0]
                       if isinstance(x, torch.Tensor)]
            return self.lowered[self.keys.index(key)](*tensors)
        if key not in self._missed:
            self._missed.add(key)
            log.info("kiln.torch: %s called with arguments it was not lowered for (%s); it runs "
                     "in PyTorch", self.name, _describe(key))
        return self.original(*args, **kwargs)

    def __getattr__(self, name):
        # The original's attributes (RAFT reads update_block.hidden_state_size, ...).
        try:
            return super().__getattr__(name)
        except AttributeError:
            original = self.__dict__.get("_modules", {}).get("original")
            if original is None or name.startswith("__"):
                raise
            return getattr(original, name)

    def extra_repr(self):
        return f"name={self.name!r}, lowered for {len(self.keys)} signature(s)"


def _describe(key):
    if key is None:
        return "a non-tensor argument"
    shapes = [list(k[1]) for k in key[1:] if k[0] == "tensor"]
    return "tensors " + ", ".join(str(s) for s in shapes)


def record_calls(module, sample_inputs):
    """Runs ``module`` on ``sample_inputs`` and returns, per submodule name, the distinct calls
    it got: {name: {signature: (args, kwargs)}} (first call of each signature)."""
    calls = {}
    patched = []

    def recorder(name, forward):
        def record(*args, **kwargs):
            key = signature(args, kwargs)
            calls.setdefault(name, {}).setdefault(key, (args, kwargs))
            return forward(*args, **kwargs)
        return record

    for name, sub in module.named_modules():
        if name and "forward" not in sub.__dict__:
            sub.forward = recorder(name, sub.forward)
            patched.append(sub)
    try:
        with torch.no_grad():
            module(*sample_inputs)
    finally:
        for sub in patched:
            del sub.forward
    return calls


def lower_parts(module, sample_inputs, error, lower_graph):
    """``module`` (untraceable: ``error``) with its traceable submodules lowered: a copy of it
    whose lowered submodules are ``LoweredPart``s. ``lower_graph(gm, tensors, name)`` lowers one
    traced call of the submodule ``name``. The children of submodules that cannot be traced, or
    were called with arguments other than tensors and plain values, are searched in turn; parts
    without a kiln island stay as they are."""
    module = copy.deepcopy(module)
    calls = record_calls(module, sample_inputs)
    done, untraced = [], [trace_failure(module, error)]

    def visit(prefix, parent):
        for child_name, child in list(parent.named_children()):
            name = f"{prefix}.{child_name}" if prefix else child_name
            part = _lower_part(name, child, calls.get(name, {}), lower_graph, untraced)
            if part is None:
                visit(name, child)
            elif part is not child:
                setattr(parent, child_name, part)
                done.append(f"{name} ({len(part.keys)} signature(s))")

    visit("", module)
    for line in untraced:
        log.info("kiln.torch: %s", line)
    if not done:
        log.warning("kiln.torch: no part of the model could be lowered; it runs in PyTorch. %s",
                    untraced[0])
    else:
        log.info("kiln.torch: %s; lowered its parts: %s", untraced[0], ", ".join(done))
    return module


def _lower_part(name, child, child_calls, lower_graph, untraced):
    """A LoweredPart for ``child``, ``child`` itself when it is traced but nothing of it goes to
    kiln (or it is too small), or None to search its children."""
    if not child_calls:
        return None  # not called through forward (e.g. only its methods are used)
    if None in child_calls:
        untraced.append(f"{name}: called with an argument other than tensors and plain values")
        return None
    part = LoweredPart(child, name)
    for key, (args, kwargs) in child_calls.items():
        try:
            gm, tensors = trace_call(child, args, kwargs)
        except Exception as e:  # noqa: BLE001 - whatever the forward raises while tracing
            untraced.append(f"{name}: {trace_failure(child, e)}")
            return None
        lowered = lower_graph(gm, tensors, name)
        if not any(isinstance(m, KilnModule) for m in lowered.modules()):
            return child
        part.add(key, lowered)
    return part
