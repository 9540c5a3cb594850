# SPDX-License-Identifier: Apache-2.0
"""The iterators of the framework plugins, independent of the framework: each plugin module
(pytorch, generic) binds them to its tensor type (``_wrap``) and its way of finding this process's
shard (``_shard``).

``GenericIterator`` and ``ClassificationIterator`` follow DALI: each step yields a list with, per
pipeline, a dict {output name: tensor}. ``ROCALGenericIterator`` and
``ROCALClassificationIterator`` follow rocAL: each step yields (list of image tensors, labels).

Tensors view kiln's batch memory without copying except where the pipeline's
tensor_layout/tensor_dtype/mean/std ask for a conversion of uint8 HWC image batches; they stay
valid after the next step."""

import math

import numpy as np

from kiln._kiln import KilnError
from kiln.pipeline import types
from kiln.pipeline.types import LastBatchPolicy

_FLOAT_TYPES = {types.FLOAT: np.float32, types.FLOAT16: np.float16, types.UINT8: np.uint8}


def _error(message, code="INVALID_ARGUMENT"):
    error = KilnError(message)
    error.code = code
    return error


class GenericIterator:
    """Iterates over pipelines' batches as tensors (DALI's DALIGenericIterator).

    pipelines: a Pipeline or a list of them (one per device/shard), run in lockstep.
    output_map: a name per pipeline output (the keys of each step's dicts).
    size: accepted for DALI scripts; the epoch ends when the reader's shard is exhausted.
    auto_reset: start the next epoch automatically when one ends (else call reset()).
    last_batch_policy: LastBatchPolicy.FILL (the last batch is filled up with samples from the
        shard's start), DROP, or PARTIAL (returned short); None keeps the reader's own
        last_batch_policy. fill_last_batch=True/False is the older spelling of FILL/PARTIAL.
    last_batch_padded: accepted for DALI scripts (kiln's fill repeats samples from the start).
    shard_by_rank: in a distributed job (torch.distributed for the pytorch plugin), make each
        rank read its own shard (shard_id=rank, num_shards=world size) when the reader has no
        shard arguments.
    """

    @staticmethod
    def _wrap(array):
        """The framework's tensor viewing a numpy array."""
        return array

    @staticmethod
    def _shard():
        """(rank, world size) in a distributed job, else None."""
        return None

    def __init__(self, pipelines, output_map, size=-1, reader_name=None, auto_reset=False,
                 fill_last_batch=None, dynamic_shape=False, last_batch_padded=False,
                 last_batch_policy=None, prepare_first_batch=True, shard_by_rank=True):
        self._pipes = list(pipelines) if isinstance(pipelines, (list, tuple)) else [pipelines]
        if not self._pipes:
            raise _error("iterator: give at least one pipeline")
        self._output_map = list(output_map)
        self._auto_reset = auto_reset
        if last_batch_policy is None and fill_last_batch is not None:
            last_batch_policy = LastBatchPolicy.FILL if fill_last_batch else \
                LastBatchPolicy.PARTIAL
        shard = self._shard() if shard_by_rank else None
        for pipe in self._pipes:
            reader = pipe.reader_args()
            changes = {}
            if last_batch_policy is not None:
                changes["last_batch_policy"] = LastBatchPolicy(last_batch_policy).value
            if shard is not None and reader.get("num_shards", 1) == 1 and len(self._pipes) == 1:
                changes["shard_id"], changes["num_shards"] = shard
            if changes:
                pipe._set_reader_args(**changes)
            pipe.build()
        self._ended = False
        self._consumed = False  # a batch of the current epoch was taken

    def __iter__(self):
        if self._ended and self._auto_reset:
            self.reset()
        return self

    def __len__(self):
        """Batches per epoch."""
        pipe = self._pipes[0]
        samples = pipe.epoch_size()
        if pipe.last_batch_policy == LastBatchPolicy.DROP:
            return samples // pipe.batch_size
        return math.ceil(samples / pipe.batch_size)

    def epoch_size(self):
        """Samples per epoch on the (first) pipeline's shard."""
        return self._pipes[0].epoch_size()

    def _from_gpu(self, pipe, tensor_list):
        """A batch kept in GPU memory as the framework's tensors: here, copied to the host."""
        return self._convert(pipe, tensor_list.as_cpu())

    def _convert(self, pipe, tensor_list):
        if tensor_list.device == "gpu":
            return self._from_gpu(pipe, tensor_list)
        if not tensor_list.is_dense_tensor():
            return [self._wrap(self._convert_array(pipe, tensor_list.at(i)[None])[0])
                    for i in range(len(tensor_list))]
        return self._wrap(self._convert_array(pipe, tensor_list.as_array()))

    @staticmethod
    def _convert_array(pipe, array):
        # Only uint8 HWC image batches are laid out and converted; other outputs (labels,
        # crop_mirror_normalize's float CHW) pass through as they are.
        if array.dtype != np.uint8 or array.ndim != 4 or array.shape[-1] not in (1, 3, 4):
            return array
        if pipe.reverse_channels:
            array = array[..., ::-1]
        dtype = _FLOAT_TYPES.get(pipe.tensor_dtype)
        if dtype is None:
            raise _error(f"iterator: tensor_dtype {pipe.tensor_dtype!r}: expected FLOAT, FLOAT16 "
                         "or UINT8")
        if dtype != np.uint8:
            array = array.astype(np.float32)
            if pipe.mean is not None:
                array -= np.asarray(pipe.mean, np.float32)
            if pipe.std is not None:
                array /= np.asarray(pipe.std, np.float32)
            array = array.astype(dtype, copy=False)
        if pipe.tensor_layout == types.NCHW:
            array = array.transpose(0, 3, 1, 2)
        return np.ascontiguousarray(array)

    def _next_raw(self):
        if self._ended:
            raise StopIteration
        batches = []
        for pipe in self._pipes:
            try:
                batches.append(pipe.run())
                self._consumed = True
            except StopIteration:
                self._ended = True
                if self._auto_reset:
                    self.reset()
                raise
        return batches

    def __next__(self):
        out = []
        for pipe, batch in zip(self._pipes, self._next_raw()):
            if len(batch) != len(self._output_map):
                raise _error(f"iterator: the pipeline has {len(batch)} outputs but output_map "
                             f"names {len(self._output_map)} ({', '.join(self._output_map)})")
            out.append({name: self._convert(pipe, t) for name, t in zip(self._output_map, batch)})
        return out

    next = __next__

    def reset(self):
        """Starts the next epoch (DALI: call it after the iterator raised StopIteration). Before
        the first batch of an epoch was taken it does nothing."""
        if not self._consumed and not self._ended:
            return
        for pipe in self._pipes:
            pipe.reset()
        self._ended = False
        self._consumed = False


class ClassificationIterator(GenericIterator):
    """GenericIterator with output_map ["data", "label"] (DALI's DALIClassificationIterator)."""

    def __init__(self, pipelines, size=-1, reader_name=None, auto_reset=False,
                 fill_last_batch=None, dynamic_shape=False, last_batch_padded=False,
                 last_batch_policy=None, prepare_first_batch=True, shard_by_rank=True):
        super().__init__(pipelines, ["data", "label"], size=size, reader_name=reader_name,
                         auto_reset=auto_reset, fill_last_batch=fill_last_batch,
                         dynamic_shape=dynamic_shape, last_batch_padded=last_batch_padded,
                         last_batch_policy=last_batch_policy,
                         prepare_first_batch=prepare_first_batch, shard_by_rank=shard_by_rank)


class ROCALGenericIterator(GenericIterator):
    """rocAL's iterator: each step yields (list of tensors, labels) — every output but the last
    as the list, the last output (the labels) as a tensor; one output gives (list, None).

    tensor_layout, tensor_dtype, reverse_channels and multiplier/offset override the pipeline's
    (rocAL: value * multiplier + offset per channel)."""

    def __init__(self, pipeline, tensor_layout=None, reverse_channels=None, multiplier=None,
                 offset=None, tensor_dtype=None, device="cpu", device_id=0, display=False,
                 size=-1, auto_reset=False, fill_last_batch=True, last_batch_padded=False,
                 last_batch_policy=None, shard_by_rank=True):
        if device not in ("cpu", None):
            raise _error(f"iterator: device \"{device}\": kiln's pipeline hands over CPU tensors; "
                         "move them with .to(device)")
        pipes = pipeline if isinstance(pipeline, (list, tuple)) else [pipeline]
        for pipe in pipes:
            if tensor_layout is not None:
                pipe.tensor_layout = types.TensorLayout(tensor_layout)
            if tensor_dtype is not None:
                pipe.tensor_dtype = types.DALIDataType(tensor_dtype)
            if reverse_channels is not None:
                pipe.reverse_channels = reverse_channels
            if multiplier is not None:
                # value * multiplier + offset == (value - mean) / std
                std = [1.0 / m for m in multiplier]
                pipe.std = std
                pipe.mean = [-o * s for o, s in zip(offset or [0.0] * len(std), std)]
        n = len(pipes[0]._outputs)
        super().__init__(pipeline, [f"out{i}" for i in range(n)], size=size,
                         auto_reset=auto_reset, fill_last_batch=fill_last_batch,
                         last_batch_padded=last_batch_padded,
                         last_batch_policy=last_batch_policy, shard_by_rank=shard_by_rank)

    def __next__(self):
        step = super().__next__()[0]
        values = list(step.values())
        if len(values) == 1:
            return values, None
        return values[:-1], values[-1]

    next = __next__


class ROCALClassificationIterator(ROCALGenericIterator):
    """rocAL's classification iterator: (list of image tensors, labels) per step."""

    def __init__(self, pipelines, size=0, auto_reset=False, fill_last_batch=True,
                 dynamic_shape=False, last_batch_padded=False, display=False, device="cpu",
                 device_id=0, last_batch_policy=None, shard_by_rank=True):
        super().__init__(pipelines, size=size, auto_reset=auto_reset,
                         fill_last_batch=fill_last_batch, last_batch_padded=last_batch_padded,
                         display=display, device=device, device_id=device_id,
                         last_batch_policy=last_batch_policy, shard_by_rank=shard_by_rank)
