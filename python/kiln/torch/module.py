# SPDX-License-Identifier: Apache-2.0
"""KilnModule: a torch.nn.Module that runs one compiled kiln program."""

import numpy as np
import torch
import torch.utils._pytree as pytree

import kiln
from kiln.torch._interpreter import build_program


def _to_numpy(t):
    """A numpy view of a tensor's memory (a host copy for device tensors only)."""
    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    if not t.is_contiguous():
        t = t.contiguous()
    return t.numpy()


class KilnModule(torch.nn.Module):
    """Runs an FX graph (``graph_module``) as a kiln executable compiled for ``target``.

    Inputs are torch tensors, handed to kiln as views of their memory; outputs are torch tensors
    viewing kiln's result memory (buffer protocol), moved to the inputs' device when that is not
    the CPU.
    Pickling stores the compiled artifact (``kiln.save_buffer``) and the FX graph: unpickling
    loads the artifact, or compiles the graph again when the artifact does not fit this machine.
    """

    def __init__(self, graph_module, sample_inputs, target="cpu", fp16=False, threads=0):
        super().__init__()
        self.target, self.fp16, self.threads = target, fp16, threads
        # Kept outside the module tree (a list): the lowered module's parameters are kiln's.
        self._graph = [graph_module]
        self._input_specs = [
            (tuple(x.shape), x.dtype) if isinstance(x, torch.Tensor) else ("value", x)
            for x in sample_inputs
        ]
        self._build(sample_inputs)

    def _build(self, sample_inputs):
        built = build_program(self._graph[0], sample_inputs)
        # The graph as converted, before kiln's passes (they fold constant weight dequantizes).
        self.converted_graph = str(built.program)
        if self.fp16:
            try:
                kiln.quantize_fp16(built.program)
            except kiln.KilnNotImplementedError as error:
                message = (f"kiln.torch: fp16=True converts each kiln program with "
                           f"kiln.quantize_fp16, which this kiln build does not have yet "
                           f"({error}); lower with fp16=False")
                raise kiln.KilnNotImplementedError(message) from error
        built.program.compile(kiln.get_target(self.target), threads=self.threads)
        self._set_built(built)

    def _set_built(self, built):
        self._program = built.program
        self._inputs = built.inputs
        self._out_spec = built.out_spec
        self._out_leaves = built.out_leaves
        self._baked = built.baked

    @property
    def program(self):
        """The compiled kiln program."""
        return self._program

    def forward(self, *args):
        for index, value in self._baked.items():
            if args[index] != value:
                raise kiln.KilnError(
                    f"kiln.torch: argument {index} is {args[index]!r} but the kiln program was "
                    f"built for {value!r}; lower the module again for the new value")
        params = {name: _to_numpy(args[index]) for index, name in self._inputs}
        results = self._program.run(params)
        device = next((args[i].device for i, _ in self._inputs), torch.device("cpu"))
        leaves = []
        for kind, value in self._out_leaves:
            if kind == "output":
                # A view of kiln's result memory through the buffer protocol (no copy; the same
                # on every PyTorch, whichever DLPack version it speaks).
                t = torch.from_numpy(np.asarray(results[value]))
                leaves.append(t if device.type == "cpu" else t.to(device))
            else:
                leaves.append(value)
        return pytree.tree_unflatten(leaves, self._out_spec)

    def extra_repr(self):
        return f"target={self.target!r}, fp16={self.fp16}, inputs={len(self._inputs)}"

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_program"] = kiln.save_buffer(self._program)
        return state

    def __setstate__(self, state):
        artifact = state.pop("_program")
        self.__dict__.update(state)
        try:
            self._program = kiln.load_buffer(artifact)
        except kiln.KilnError:
            # Another machine or kiln version: compile the FX graph again.
            samples = [torch.zeros(shape, dtype=dtype) if shape != "value" else dtype
                       for shape, dtype in self._input_specs]
            self._build(samples)

