# SPDX-License-Identifier: Apache-2.0
"""DataNode and graph recording: what an ``fn`` call adds to the pipeline being defined."""

import enum
import threading

from kiln._kiln import KilnError
from kiln.pipeline import _schema

_local = threading.local()


def _error(message, code="INVALID_ARGUMENT"):
    error = KilnError(message)
    error.code = code
    return error


def current_pipeline():
    """The pipeline being defined on this thread (inside ``with pipe:``), or None."""
    stack = getattr(_local, "stack", None)
    return stack[-1] if stack else None


def push_pipeline(pipe):
    if not hasattr(_local, "stack"):
        _local.stack = []
    _local.stack.append(pipe)


def pop_pipeline():
    _local.stack.pop()


class DataNode:
    """One output of an operator in a pipeline being defined (DALI's DataNode). Pass it to other
    ``fn`` calls, as a per-sample argument, or to ``Pipeline.set_outputs``."""

    def __init__(self, pipeline, op_index, name):
        self.pipeline = pipeline
        self.op_index = op_index
        self.name = name

    def gpu(self):
        """Accepted for DALI scripts; kiln's pipeline keeps its data on the CPU."""
        return self

    def __repr__(self):
        return f"DataNode({self.name!r})"


def _plain(value):
    """types constants (str enums) as their plain values; lists and tuples element-wise."""
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def add_operator(schema, inputs, kwargs):
    """Records one operator instance in the current pipeline; returns its output DataNode(s)."""
    op = schema["name"]
    pipe = current_pipeline()
    if pipe is None:
        raise _error(f"fn.{op}: called outside a pipeline; call it inside `with pipe:` or in a "
                     "@pipeline_def function")
    if len(inputs) != len(schema["inputs"]):
        raise _error(f"fn.{op}: expected {len(schema['inputs'])} input(s) "
                     f"({', '.join(schema['inputs']) or 'none'}), got {len(inputs)}")
    for i, node in enumerate(inputs):
        if not isinstance(node, DataNode):
            raise _error(f"fn.{op}: input {schema['inputs'][i]} must be a DataNode (the output of "
                         f"another fn call), got {type(node).__name__}")
        if node.pipeline is not pipe:
            raise _error(f"fn.{op}: input {node.name} belongs to another pipeline")
    specs = {a["name"]: a for a in schema["args"]}
    aliases = _schema.ALIASES.get(op, {})
    args, arg_inputs, reader_args = {}, {}, {}
    device = kwargs.pop("device", None) or "cpu"
    if device not in ("cpu", "gpu", "mixed"):
        raise _error(f"fn.{op}: device \"{device}\": expected \"cpu\", \"gpu\" or \"mixed\"")
    for key, value in kwargs.items():
        name = key[:-1] if key.endswith("_") and key[:-1] in specs else key
        name = aliases.get(name, name)
        if name not in specs:
            if op.startswith("decoders.") and name in _schema.READER_ARGS_ON_DECODERS:
                reader_args[name] = _plain(value)
                continue
            if name in _schema.IGNORED:
                continue
            raise _error(f"fn.{op}: unknown argument \"{key}\"; its arguments are: "
                         f"{', '.join(specs) or 'none'}")
        if isinstance(value, DataNode):
            if not specs[name]["per_sample"]:
                raise _error(f"fn.{op}: argument {name} is not per-sample, so it cannot take a "
                             f"DataNode ({value.name}); give a constant")
            arg_inputs[name] = value.name
            continue
        value = _plain(value)
        mapping = _schema.VALUE_MAPS.get((op, name))
        if mapping and isinstance(value, str):
            value = mapping.get(value, value)
        args[name] = value
    missing = [a["name"] for a in schema["args"] if a["required"] and a["name"] not in args
               and a["name"] not in arg_inputs]
    for name in arg_inputs:
        # The executor validates static values before it feeds per-sample ones, so a required
        # argument fed from a DataNode gets a placeholder that the fed values replace.
        if specs[name]["required"] and name not in args:
            args[name] = 0.0 if specs[name]["type"] == "float" else 0
    if missing:
        raise _error(f"fn.{op}: missing required argument(s): {', '.join(missing)}")
    if reader_args:
        pipe._forward_reader_args(op, inputs, reader_args)
    # "mixed" (DALI's decoder that hands its images to the GPU) stays on the CPU, so DALI scripts
    # run on machines without a GPU; device="gpu" asks for the GPU decoder.
    return pipe._add_op(op, [n.name for n in inputs], args, arg_inputs, schema["outputs"],
                        device == "gpu")
