# SPDX-License-Identifier: Apache-2.0
"""Pipeline and @pipeline_def with rocAL's and DALI's constructor arguments and methods."""

import functools
import inspect
import os

from kiln import _kiln
from kiln.pipeline import types
from kiln.pipeline.node import DataNode, _error, pop_pipeline, push_pipeline


class Pipeline:
    """A data pipeline: a reader, then per-sample operators, run on worker threads into batches
    with prefetching (the C++ executor; run() releases the GIL).

    Define it with ``with pipe:`` + ``fn`` calls + ``pipe.set_outputs(...)`` (or @pipeline_def),
    then ``build()`` and ``run()``. Arguments are rocAL's and DALI's:

    batch_size: samples per batch (required).
    num_threads: decode/augment worker threads (0 or -1: one per core).
    device_id: accepted for rocAL/DALI scripts; operators given device="gpu" run on the current
        GPU (CUDA_VISIBLE_DEVICES picks it).
    seed: the seed of every random choice (shuffling, random operators); -1 picks one at random.
        The same seed gives the same batches whatever num_threads is.
    prefetch_queue_depth: batches prepared ahead of run().
    output_memory_type: rocAL's types.HOST_MEMORY (default: what GPU operators make is copied to
        the host, run() gives host batches) or types.DEVICE_MEMORY (it stays in GPU memory: those
        TensorLists have device "gpu", torch.from_dlpack takes them as CUDA tensors without a
        copy, as_cpu() copies them to the host, and the PyTorch iterators yield CUDA tensors).
    rocal_cpu, exec_pipelined, exec_async, bytes_per_sample, max_streams,
    default_cuda_stream_priority: accepted for rocAL/DALI scripts.
    tensor_layout, tensor_dtype, mean, std, reverse_channels: how the PyTorch iterators hand over
        uint8 HWC image batches: NCHW or NHWC, FLOAT/FLOAT16/UINT8, (x - mean) / std per channel,
        RGB<->BGR swap.
    bad_data: "skip" (an unreadable image is logged, listed in bad_samples() and replaced by the
        next sample) or "error" (run() raises).
    """

    def __init__(self, batch_size=-1, num_threads=0, device_id=0, seed=-1, exec_pipelined=True,
                 prefetch_queue_depth=2, exec_async=True, bytes_per_sample=0, rocal_cpu=True,
                 max_streams=-1, default_cuda_stream_priority=0, tensor_layout=types.NCHW,
                 reverse_channels=False, mean=None, std=None, tensor_dtype=types.FLOAT,
                 output_memory_type=None, bad_data="skip"):
        self.batch_size = batch_size
        self.num_threads = num_threads
        self.device_id = device_id
        self.seed = int.from_bytes(os.urandom(7), "little") if seed is None or seed < 0 else seed
        self.prefetch_queue_depth = prefetch_queue_depth
        self.rocal_cpu = rocal_cpu
        self.tensor_layout = types.TensorLayout(tensor_layout)
        self.tensor_dtype = types.DALIDataType(tensor_dtype)
        self.reverse_channels = reverse_channels
        self.mean = mean
        self.std = std
        self.bad_data = bad_data
        if output_memory_type is None:
            output_memory_type = types.HOST_MEMORY
        try:
            self.output_memory_type = types.MemoryType(output_memory_type)
        except ValueError:
            raise _error(f"pipeline: output_memory_type {output_memory_type!r}: expected "
                         "types.HOST_MEMORY or types.DEVICE_MEMORY") from None
        self._ops = []  # dicts: op, args, inputs, outputs, arg_inputs
        self._outputs = []
        self._core = None
        self._last = None  # (paths, num_padded, epoch) of the last batch

    # Definition -------------------------------------------------------------------------------
    def __enter__(self):
        push_pipeline(self)
        return self

    def __exit__(self, *exc):
        pop_pipeline()
        return False

    def _add_op(self, op, inputs, args, arg_inputs, output_names, gpu=False):
        if self._core is not None:
            raise _error(f"fn.{op}: the pipeline is already built; define every operator before "
                         "build()", "FAILED_PRECONDITION")
        index = len(self._ops)
        prefix = f"{op}#{index}"
        outputs = [f"{prefix}:{name}" for name in output_names]
        self._ops.append({"op": op, "args": dict(args), "inputs": list(inputs),
                          "outputs": outputs, "arg_inputs": dict(arg_inputs), "gpu": gpu})
        nodes = tuple(DataNode(self, index, name) for name in outputs)
        return nodes[0] if len(nodes) == 1 else nodes

    def _forward_reader_args(self, op, inputs, reader_args):
        producer = self._ops[inputs[0].op_index] if inputs else None
        if producer is None or producer["op"] != "readers.file":
            raise _error(f"fn.{op}: {', '.join(reader_args)} are reader arguments; give them to "
                         "fn.readers.file (the decoder's input does not come from it)")
        for name, value in reader_args.items():
            producer["args"].setdefault(name, value)

    def set_outputs(self, *outputs):
        """The DataNodes each batch returns, in this order."""
        for out in outputs:
            if not isinstance(out, DataNode) or out.pipeline is not self:
                raise _error(f"set_outputs: expected DataNodes of this pipeline, got {out!r}")
        self._outputs = [o.name for o in outputs]

    def define_graph(self):
        """Override in a subclass to define the graph (the legacy DALI/rocAL style); return the
        outputs."""
        return None

    @classmethod
    def current(cls):
        from kiln.pipeline.node import current_pipeline

        return current_pipeline()

    # Execution --------------------------------------------------------------------------------
    def _reader(self):
        for spec in self._ops:
            if spec["op"].startswith("readers."):
                return spec
        raise _error("pipeline: it has no reader; start it with fn.readers.file(file_root=...)")

    def build(self):
        """Validates the graph and starts the executor (prefetching the first batches)."""
        if self._core is not None:
            return
        if not self._ops:
            with self:
                outputs = self.define_graph()
            if outputs is not None:
                self.set_outputs(*(outputs if isinstance(outputs, (tuple, list)) else [outputs]))
        if self.batch_size is None or self.batch_size < 1:
            raise _error(f"pipeline: batch_size {self.batch_size}: give a positive batch_size to "
                         "Pipeline(...)")
        if not self._outputs:
            raise _error("pipeline: no outputs; call set_outputs(...) inside `with pipe:`")
        reader = self._reader()
        ops = [reader] + [s for s in self._ops if s is not reader]
        self._core = _kiln.PipelineCore(
            batch_size=self.batch_size, num_threads=max(self.num_threads or 0, 0),
            prefetch_queue_depth=self.prefetch_queue_depth, seed=self.seed,
            bad_data=self.bad_data, outputs=self._outputs, ops=ops,
            gpu_outputs_on_device=self.output_memory_type == types.DEVICE_MEMORY)

    def _rebuild(self):
        if self._core is not None:
            self._core = None
            self.build()

    def run(self):
        """The next batch: a tuple with a TensorList per output (``as_array()`` gives the batch as
        one numpy array without copying, ``at(i)`` a sample). Raises StopIteration at the end of
        the epoch; reset() starts the next one."""
        if self._core is None:
            self.build()
        batch = self._core.run()
        if batch is None:
            raise StopIteration
        outputs, paths, num_padded, epoch = batch
        self._last = (paths, num_padded, epoch)
        return tuple(outputs)

    def reset(self):
        """Starts the next epoch (with its own shuffle), dropping what is left of this one."""
        if self._core is not None:
            self._core.reset()

    def epoch_size(self, name=None):
        """Samples per epoch that the reader yields on this pipeline's shard (before the last-batch
        policy)."""
        return _kiln.reader_shard_size(self._reader()["args"], self.seed)

    def reader_args(self):
        """The readers.file arguments as given (a copy)."""
        return dict(self._reader()["args"])

    def _set_reader_args(self, **args):
        """Changes readers.file arguments (the iterators set the last-batch policy and the shard);
        a built pipeline is rebuilt and starts again at epoch 0."""
        reader = self._reader()
        changed = {k: v for k, v in args.items() if reader["args"].get(k) != v}
        if changed:
            reader["args"].update(changed)
            self._rebuild()

    @property
    def last_batch_policy(self):
        return types.LastBatchPolicy(self._reader()["args"].get("last_batch_policy", "partial"))

    def get_last_batch_padded_size(self):
        """Samples of the last returned batch that repeat others to fill it (the fill policy)."""
        return self._last[1] if self._last else 0

    def get_image_names(self):
        """The source files of the last returned batch's samples."""
        return list(self._last[0]) if self._last else []

    def epoch(self):
        return self._core.epoch() if self._core is not None else 0

    def bad_samples(self):
        """Samples skipped so far: dicts with epoch, path and reason."""
        return self._core.bad_samples() if self._core is not None else []

    def timing_info(self):
        """Per-stage calls and seconds (summed over threads)."""
        return self._core.stage_timings() if self._core is not None else []

    def __repr__(self):
        ops = ", ".join(s["op"] for s in self._ops)
        return f"Pipeline(batch_size={self.batch_size}, ops=[{ops}])"


_PIPELINE_ARGS = set(inspect.signature(Pipeline.__init__).parameters) - {"self"}


def pipeline_def(fn=None, **pipeline_kwargs):
    """Turns a graph-definition function into a Pipeline factory (DALI's and rocAL's decorator).

    Calling the decorated function with Pipeline arguments (batch_size=..., num_threads=...) and
    its own arguments returns a Pipeline whose outputs are what the function returns."""

    def decorate(func):
        params = inspect.signature(func).parameters
        if any(p.kind == inspect.Parameter.VAR_KEYWORD for p in params.values()):
            raise _error(f"pipeline_def: {func.__name__} takes **kwargs, so pipeline arguments "
                         "cannot be told apart from its own; name its arguments")

        @functools.wraps(func)
        def create(*args, **kwargs):
            is_ctor = {k: k in _PIPELINE_ARGS and k not in params for k in kwargs}
            ctor = dict(pipeline_kwargs)
            ctor.update({k: v for k, v in kwargs.items() if is_ctor[k]})
            own = {k: v for k, v in kwargs.items() if not is_ctor[k]}
            pipe = Pipeline(**ctor)
            with pipe:
                outputs = func(*args, **own)
                if outputs is None:
                    raise _error(f"pipeline_def: {func.__name__} returned nothing; return the "
                                 "DataNodes the pipeline outputs")
                pipe.set_outputs(*(outputs if isinstance(outputs, (tuple, list)) else [outputs]))
            return pipe

        return create

    return decorate(fn) if fn is not None else decorate
