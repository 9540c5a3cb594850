# SPDX-License-Identifier: Apache-2.0
"""PyTorch iterators over kiln pipelines (DALI's and rocAL's names).

``GenericIterator`` and ``ClassificationIterator`` follow DALI: each step yields a list with, per
pipeline, a dict {output name: torch tensor}. ``ROCALGenericIterator`` and
``ROCALClassificationIterator`` follow rocAL: each step yields (list of image tensors, labels).

Tensors view kiln's batch memory without copying (torch.from_numpy) except where the pipeline's
tensor_layout/tensor_dtype/mean/std ask for a conversion of uint8 HWC image batches; they stay
valid after the next step. A pipeline with output_memory_type=types.DEVICE_MEMORY yields what its
GPU operators make as CUDA tensors (torch.from_dlpack, no copy; those conversions run on the GPU). Under torch.distributed, a pipeline whose reader has no shard
arguments reads the shard of this rank (shard_id=rank, num_shards=world size)."""

import torch

from kiln.pipeline import types
from kiln.pipeline.plugin import _iterator
from kiln.pipeline.types import LastBatchPolicy

__all__ = ["GenericIterator", "ClassificationIterator", "ROCALGenericIterator",
           "ROCALClassificationIterator", "DALIGenericIterator", "DALIClassificationIterator",
           "LastBatchPolicy"]


def _distributed_shard():
    """(rank, world size) when torch.distributed is initialized, else None."""
    dist = getattr(torch, "distributed", None)
    if dist is not None and dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return None


_TORCH_TYPES = {types.FLOAT: torch.float32, types.FLOAT16: torch.float16,
                types.UINT8: torch.uint8}


def _from_gpu(self, pipe, tensor_list):
    """A batch in GPU memory as a CUDA tensor viewing it (ragged batches: copied to the host, a
    tensor per sample); uint8 HWC image batches converted as on the host, on the GPU."""
    if not tensor_list.is_dense_tensor():
        return _iterator.GenericIterator._from_gpu(self, pipe, tensor_list)
    t = torch.from_dlpack(tensor_list)
    if t.dtype != torch.uint8 or t.dim() != 4 or t.shape[-1] not in (1, 3, 4):
        return t
    if pipe.reverse_channels:
        t = t.flip(-1)
    dtype = _TORCH_TYPES.get(pipe.tensor_dtype)
    if dtype is None:
        raise _iterator._error(f"iterator: tensor_dtype {pipe.tensor_dtype!r}: expected FLOAT, "
                               "FLOAT16 or UINT8")
    if dtype != torch.uint8:
        t = t.float()
        if pipe.mean is not None:
            t = t - torch.tensor(pipe.mean, dtype=torch.float32, device=t.device)
        if pipe.std is not None:
            t = t / torch.tensor(pipe.std, dtype=torch.float32, device=t.device)
        t = t.to(dtype)
    if pipe.tensor_layout == types.NCHW:
        t = t.permute(0, 3, 1, 2)
    return t.contiguous()


def _bind(cls):
    return type(cls.__name__, (cls,), {
        "_wrap": staticmethod(torch.from_numpy), "_shard": staticmethod(_distributed_shard),
        "_from_gpu": _from_gpu, "__module__": __name__, "__doc__": cls.__doc__})


GenericIterator = _bind(_iterator.GenericIterator)
ClassificationIterator = _bind(_iterator.ClassificationIterator)
ROCALGenericIterator = _bind(_iterator.ROCALGenericIterator)
ROCALClassificationIterator = _bind(_iterator.ROCALClassificationIterator)
# DALI's names, so `from nvidia.dali.plugin.pytorch import DALIClassificationIterator` ports too.
DALIGenericIterator = GenericIterator
DALIClassificationIterator = ClassificationIterator
