# SPDX-License-Identifier: Apache-2.0
"""The one converter table of the PyTorch bridge.

Keys are what an FX node calls: a function (``torch.relu``, ``operator.add``), a Tensor method
name as ``("method", "relu")``, or an ``nn.Module`` class (for ``call_module`` nodes). A converter
is ``fn(ctx, target, args, kwargs)`` where ``target`` is the function, the method name or the
module instance, and ``args``/``kwargs`` hold kiln ``instruction_ref``s for tensors computed in
the graph and Python values (ints, torch constants, ...) for everything else. It returns an
``instruction_ref``, a Python value, or a tuple/list of them.
"""

CONVERTERS = {}
# key -> predicate(node, target) saying whether the converter handles this particular node
# (static shapes, arguments); absent means always.
SUPPORTS = {}


def method(name):
    """The table key of the Tensor method ``name``."""
    return ("method", name)


def converter(*keys, supports=None):
    """Registers the decorated function as the converter of every key."""

    def register(fn):
        for key in keys:
            CONVERTERS[key] = fn
            if supports is not None:
                SUPPORTS[key] = supports
        return fn

    return register


def node_key(node, root):
    """The table key of an FX node, or None for nodes that are not calls."""
    if node.op == "call_function":
        return node.target
    if node.op == "call_method":
        return method(node.target)
    if node.op == "call_module":
        return type(root.get_submodule(node.target))
    return None


def lookup(key):
    """The converter for ``key``: registered ones, then a module class's registered base."""
    if key in CONVERTERS:
        return CONVERTERS[key]
    if isinstance(key, type):
        for base in key.__mro__[1:]:
            if base in CONVERTERS:
                return CONVERTERS[base]
    return None


def supported_keys():
    """Every key of the table, as readable names (for docs and error messages)."""
    names = []
    for key in CONVERTERS:
        if isinstance(key, tuple):
            names.append(f"Tensor.{key[1]}")
        elif isinstance(key, type):
            names.append(f"{key.__module__}.{key.__qualname__}")
        else:
            names.append(f"{getattr(key, '__module__', None) or 'builtins'}."
                         f"{getattr(key, '__name__', repr(key))}")
    return sorted(set(names))
