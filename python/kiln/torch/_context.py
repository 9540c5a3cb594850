# SPDX-License-Identifier: Apache-2.0
"""What converters build with: a kiln program's main module plus helpers for literals, shapes
and dtypes. Also the torch <-> kiln dtype tables."""

import numpy as np
import torch

import kiln

# torch dtype -> kiln shape type name.
KILN_TYPES = {
    torch.float32: "float_type",
    torch.float16: "half_type",
    torch.bfloat16: "bf16_type",
    torch.float64: "double_type",
    torch.int8: "int8_type",
    torch.uint8: "uint8_type",
    torch.int16: "int16_type",
    torch.int32: "int32_type",
    torch.int64: "int64_type",
    torch.bool: "bool_type",
}
# numpy dtype name -> torch dtype (for the types numpy has).
TORCH_TYPES = {
    "float32": torch.float32, "float16": torch.float16, "float64": torch.float64,
    "int8": torch.int8, "uint8": torch.uint8, "int16": torch.int16, "int32": torch.int32,
    "int64": torch.int64, "bool": torch.bool,
}


class ConversionError(kiln.KilnError):
    """A node that a converter cannot express in kiln (its message names the node)."""


class QValue:
    """A quantized tensor (torch.quantize_per_tensor's result): the integer instruction and its
    scale and zero-point literals. Only ``dequantize`` consumes it."""

    def __init__(self, ins, scale, zero_point, axis=None):
        self.ins, self.scale, self.zero_point, self.axis = ins, scale, zero_point, axis


def is_value(x):
    """True for what a converter computed in the graph (as opposed to Python constants)."""
    return isinstance(x, (kiln.instruction_ref, QValue))


class Context:
    """The module being built, with helpers that keep converters short."""

    def __init__(self, program):
        self.program = program
        self.m = program.get_main_module()
        self._literals = {}  # id(torch tensor) -> (tensor, instruction)
        self.node = None  # the FX node being converted, for error messages

    def error(self, message):
        where = f"{self.node.op} {self.node.target} ({self.node.name})" if self.node else "?"
        return ConversionError(f"kiln.torch: {where}: {message}")

    def op(self, name, inputs, num_outputs=1, **attrs):
        return self.m.add_instruction(kiln.op(name, **attrs), list(inputs), num_outputs)

    def literal(self, value, dtype=None):
        """A literal from a torch tensor (cached: a weight used twice is one literal), a numpy
        array or a Python scalar/list."""
        if isinstance(value, torch.Tensor):
            cached = self._literals.get(id(value))
            if cached is not None and cached[0] is value and dtype is None:
                return cached[1]
            array = value.detach().cpu()
            if array.dtype == torch.bfloat16:
                array = array.float()
            ins = self.m.add_literal(np.ascontiguousarray(array.numpy()).astype(
                dtype if dtype is not None else array.numpy().dtype, copy=False))
            if dtype is None:
                self._literals[id(value)] = (value, ins)
            return ins
        return self.m.add_literal(np.asarray(value, dtype=dtype))

    def ints(self, values):
        """An int64 1-D literal (shapes, axes, starts/ends)."""
        return self.m.add_literal(np.asarray(list(values), dtype=np.int64).reshape(-1))

    def value(self, x, like=None):
        """``x`` as an instruction: instructions pass, torch tensors and numbers become literals
        (numbers in ``like``'s dtype, else float32)."""
        if isinstance(x, kiln.instruction_ref):
            return x
        if isinstance(x, QValue):
            raise self.error("a quantized tensor is used by an op other than dequantize")
        if isinstance(x, torch.Tensor):
            if like is not None and x.dim() == 0:
                return self.literal(x.item(), dtype=self.dtype(like))
            return self.literal(x)
        dtype = self.dtype(like) if like is not None else (
            np.int64 if isinstance(x, (bool, int)) and not isinstance(x, float) else np.float32)
        return self.literal(x, dtype=dtype)

    @staticmethod
    def lens(ins):
        return list(ins.shape().lens())

    @staticmethod
    def rank(ins):
        return len(ins.shape().lens())

    @staticmethod
    def dtype(ins):
        return ins.shape().dtype()
