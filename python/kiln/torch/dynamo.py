# SPDX-License-Identifier: Apache-2.0
"""The ``torch.compile`` backend "kiln" (PyTorch 2):

    import kiln.torch                                   # registers the backend
    fast = torch.compile(model, backend="kiln", options={"target": "cuda", "fp16": True})

Each graph Dynamo captures goes through ``kiln.torch.lower_graph_module``: the supported parts
run as kiln executables, the rest in PyTorch (fallback per subgraph). Parameters and buffers are
frozen into the kiln programs as constants (inference, like Inductor's freezing). The lowered
graphs are cached by the shapes, dtypes and non-tensor values of the runtime arguments: a new
shape lowers and compiles again (the guard), so ``dynamic=False`` suits it best.
"""

import logging

import torch

import kiln

log = logging.getLogger("kiln.torch")

_OPTIONS = ("target", "fp16", "min_island", "threads")


def backend_available():
    """True when this PyTorch has torch.compile (PyTorch 2 and later)."""
    return hasattr(torch, "compile") and hasattr(torch, "_dynamo")


def _require_pytorch2():
    if not backend_available():
        error = kiln.KilnNotImplementedError(
            f"kiln.torch: the torch.compile backend needs PyTorch 2 or later; this is PyTorch "
            f"{torch.__version__}, which has no torch.compile. Use kiln.torch.lower(module, "
            f"sample_inputs) instead: it lowers through torch.fx and works on this PyTorch.")
        error.code = "UNIMPLEMENTED"
        raise error


def _is_frozen(node, value):
    """Placeholders that Dynamo lifted from the module's parameters and buffers."""
    if isinstance(value, torch.nn.Parameter):
        return True
    name = node.target if isinstance(node.target, str) else node.name
    return "_parameters_" in name or "_buffers_" in name


def _freeze(gm, args):
    """A copy of ``gm`` whose parameter/buffer placeholders are constants (get_attr of ``args``'
    tensors), and the indices of the placeholders that stay runtime inputs."""
    gm = torch.fx.GraphModule(gm, gm.graph.__deepcopy__())
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    keep = []
    for i, (node, value) in enumerate(zip(placeholders, args)):
        if isinstance(value, torch.Tensor) and _is_frozen(node, value):
            name = f"_kiln_frozen_{i}"
            gm.register_buffer(name, value.detach())
            with gm.graph.inserting_after(node):
                attr = gm.graph.get_attr(name)
            node.replace_all_uses_with(attr)
            gm.graph.erase_node(node)
        else:
            keep.append(i)
    gm.graph.lint()
    gm.recompile()
    return gm, keep


def _key(args):
    return tuple((tuple(a.shape), a.dtype, a.device.type) if isinstance(a, torch.Tensor)
                 else ("value", a) for a in args)


def compile_backend(gm, example_inputs, options=None, **kwargs):
    """The "kiln" backend: ``backend(gm, example_inputs, options={...})`` returns the callable
    Dynamo runs in place of ``gm``. Options: "target" ("cpu", "cuda"; default "cuda" when
    CUDA is available, else "cpu"), "fp16" (bool), "min_island" (default 1), "threads"."""
    _require_pytorch2()
    options = dict(options or {})
    unknown = sorted(set(options) - set(_OPTIONS))
    if unknown:
        raise kiln.KilnError(f"kiln backend: unknown option(s) {', '.join(unknown)}; the options "
                             f"are: {', '.join(_OPTIONS)}")
    settings = {
        "target": options.get("target", "cuda" if torch.cuda.is_available() else "cpu"),
        "fp16": bool(options.get("fp16", False)),
        "min_island": int(options.get("min_island", 1)),
        "threads": int(options.get("threads", 0)),
    }
    return ShapeCache(gm, settings)


class ShapeCache:
    """What the backend hands Dynamo: on the first call it freezes the parameters and buffers of
    ``gm`` (from the real arguments), then lowers ``gm`` once per distinct shape, dtype and
    non-tensor values of the remaining arguments and runs the lowered module."""

    def __init__(self, gm, settings):
        self.gm, self.settings = gm, settings
        self.frozen, self.keep, self.cache = None, None, {}

    def __call__(self, *args):
        if self.frozen is None:
            self.frozen, self.keep = _freeze(self.gm, args)
        inputs = [args[i] for i in self.keep]
        key = _key(inputs)
        lowered = self.cache.get(key)
        if lowered is None:
            from kiln.torch.lower import lower_graph_module

            log.info("kiln backend: lowering a graph for inputs %s", key)
            graph = torch.fx.GraphModule(self.frozen, self.frozen.graph.__deepcopy__())
            lowered = lower_graph_module(graph, inputs, **self.settings)
            self.cache[key] = lowered
        if not torch.is_grad_enabled():  # the usual case: inference under torch.no_grad()
            return lowered(*inputs)
        with torch.no_grad():
            return lowered(*inputs)


def register():
    """Registers compile_backend as torch.compile's backend "kiln" (PyTorch 2); a no-op on
    older PyTorch. Called when kiln.torch is imported."""
    if not backend_available():
        return False
    from torch._dynamo import list_backends, register_backend

    if "kiln" not in list_backends(exclude_tags=()):
        register_backend(name="kiln")(compile_backend)
    return True


try:
    register()
except Exception as error:  # noqa: BLE001 - a PyTorch whose Dynamo cannot register backends
    log.warning("kiln.torch: could not register the torch.compile backend: %s", error)
