# SPDX-License-Identifier: Apache-2.0
"""PyTorch iterators over kiln pipelines (DALI's and rocAL's names).

``GenericIterator`` and ``ClassificationIterator`` follow DALI: each step yields a list with, per
pipeline, a dict {output name: torch tensor}. ``ROCALGenericIterator`` and
``ROCALClassificationIterator`` follow rocAL: each step yields (list of image tensors, labels).

Tensors view kiln's batch memory without copying (torch.from_numpy) except where the pipeline's
tensor_layout/tensor_dtype/mean/std ask for a conversion of uint8 HWC image batches; they stay
valid after the next step. Under torch.distributed, a pipeline whose reader has no shard
arguments reads the shard of this rank (shard_id=rank, num_shards=world size)."""

import torch

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


def _bind(cls):
    return type(cls.__name__, (cls,), {
        "_wrap": staticmethod(torch.from_numpy), "_shard": staticmethod(_distributed_shard),
        "__module__": __name__, "__doc__": cls.__doc__})


GenericIterator = _bind(_iterator.GenericIterator)
ClassificationIterator = _bind(_iterator.ClassificationIterator)
ROCALGenericIterator = _bind(_iterator.ROCALGenericIterator)
ROCALClassificationIterator = _bind(_iterator.ROCALClassificationIterator)
# DALI's names, so `from nvidia.dali.plugin.pytorch import DALIClassificationIterator` ports too.
DALIGenericIterator = GenericIterator
DALIClassificationIterator = ClassificationIterator
