# SPDX-License-Identifier: Apache-2.0
"""kiln for PyTorch users: lower a torch.nn.Module to kiln (FX), or compile it with
``torch.compile(model, backend="kiln")`` on PyTorch 2.

    import kiln.torch
    fast = kiln.torch.lower(model, (example,), target="cpu")   # a torch.nn.Module
    out = fast(example)

Unsupported operations stay in PyTorch (a splitter cuts the graph into kiln and PyTorch
islands; a module torch.fx cannot trace is lowered by parts); PyTorch FX-quantized models
(``convert_to_reference_fx``) keep their calibration as kiln QuantizeLinear/DequantizeLinear
ops. See docs/torch.md.
"""

from kiln.torch._context import ConversionError
from kiln.torch._registry import CONVERTERS, converter, method, supported_keys
from kiln.torch.dynamo import backend_available, compile_backend
from kiln.torch.lower import kiln_islands, lower, lower_graph_module, split, trace
from kiln.torch.module import KilnModule
from kiln.torch.parts import LoweredPart

__all__ = [
    "lower", "lower_graph_module", "split", "trace", "kiln_islands", "KilnModule", "LoweredPart",
    "ConversionError", "CONVERTERS", "converter", "method", "supported_keys", "compile_backend",
    "backend_available",
]
