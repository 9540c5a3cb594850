# SPDX-License-Identifier: Apache-2.0
"""KilnModule: a torch.nn.Module that runs one compiled kiln program."""

import numpy as np
import torch
import torch.utils._pytree as pytree

import kiln
from kiln.torch._context import KILN_TYPES
from kiln.torch._interpreter import build_program

# kiln shape type name -> torch dtype.
_TORCH_DTYPES = {name: dtype for dtype, name in KILN_TYPES.items()}


def _to_numpy(t):
    """A numpy view of a tensor's memory (a host copy for device tensors only)."""
    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    if not t.is_contiguous():
        t = t.contiguous()
    return t.numpy()


def _output_specs(program):
    """(shape, torch dtype) of each output of a compiled kiln program."""
    return [(tuple(shape.lens()), _TORCH_DTYPES[shape.type()])
            for shape in program.get_output_shapes()]


def _cuda_index(sample_inputs):
    """The GPU of the first CUDA tensor among ``sample_inputs``, else the current one (None when
    torch has no CUDA: kiln's cuda target then says what it lacks)."""
    if not torch.cuda.is_available():
        return None
    for x in sample_inputs:
        if isinstance(x, torch.Tensor) and x.is_cuda:
            return x.device.index if x.device.index is not None else torch.cuda.current_device()
    return torch.cuda.current_device()


class KilnModule(torch.nn.Module):
    """Runs an FX graph (``graph_module``) as a kiln executable compiled for ``target``.

    On CPU tensors: inputs are handed to kiln as views of their memory; outputs are torch tensors
    viewing kiln's result memory (buffer protocol). On the cuda target with CUDA tensors: inputs
    and outputs stay in GPU memory (DLPack views, ``program.run_device``); the outputs are
    allocated by torch on the inputs' GPU, the only allocation per call.
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
        # The cuda target compiles (constants, tuning) on the current GPU: the sample inputs' one.
        self._cuda_index = _cuda_index(sample_inputs) if self.target == "cuda" else None
        if self._cuda_index is not None:
            with torch.cuda.device(self._cuda_index):
                built.program.compile(kiln.get_target(self.target), threads=self.threads)
        else:
            built.program.compile(kiln.get_target(self.target), threads=self.threads)
        self._set_built(built)

    def _set_built(self, built):
        self._program = built.program
        self._inputs = built.inputs
        self._out_spec = built.out_spec
        self._out_leaves = built.out_leaves
        self._baked = built.baked
        self._output_specs = _output_specs(built.program)

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
        tensors = [(name, args[index]) for index, name in self._inputs]
        if self.target == "cuda" and tensors and all(t.is_cuda for _, t in tensors):
            results = self._run_device(tensors)
            device = None
        else:
            params = {name: _to_numpy(t) for name, t in tensors}
            results = self._program.run(params)
            device = tensors[0][1].device if tensors else torch.device("cpu")
        leaves = []
        for kind, value in self._out_leaves:
            if kind != "output":
                leaves.append(value)
            elif device is None:
                leaves.append(results[value])
            else:
                # A view of kiln's result memory through the buffer protocol (no copy; the same
                # on every PyTorch, whichever DLPack version it speaks).
                t = torch.from_numpy(np.asarray(results[value]))
                leaves.append(t if device.type == "cpu" else t.to(device))
        return pytree.tree_unflatten(leaves, self._out_spec)

    def _run_device(self, tensors):
        """Runs on CUDA tensors in place: no host copies; torch allocates the outputs."""
        device = tensors[0][1].device
        index = device.index if device.index is not None else torch.cuda.current_device()
        if index != self._cuda_index:
            raise kiln.KilnError(
                f"kiln.torch: the inputs are on cuda:{index} but the kiln program was compiled "
                f"on cuda:{self._cuda_index}; move them there, or lower the module again with "
                f"inputs on cuda:{index}")
        params = {name: (t.detach() if t.requires_grad else t).contiguous()
                  for name, t in tensors}
        outputs = [torch.empty(shape, dtype=dtype, device=device)
                   for shape, dtype in self._output_specs]
        # kiln runs on its own stream: what torch queued (the inputs' producers, the earlier users
        # of the outputs' memory in its caching allocator) must be done first. run_device returns
        # once the outputs are written, so torch's later work may read them on any stream.
        torch.cuda.current_stream(device).synchronize()
        if torch.cuda.current_device() == index:
            self._program.run_device(params, outputs)
        else:
            with torch.cuda.device(index):
                self._program.run_device(params, outputs)
        return outputs

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
            self._output_specs = _output_specs(self._program)
            if (self.target == "cuda" and state.get("_cuda_index") is None
                    and torch.cuda.is_available()):
                self._cuda_index = torch.cuda.current_device()  # where load_buffer put it
        except kiln.KilnError:
            # Another machine or kiln version: compile the FX graph again.
            samples = [torch.zeros(shape, dtype=dtype) if shape != "value" else dtype
                       for shape, dtype in self._input_specs]
            self._build(samples)

