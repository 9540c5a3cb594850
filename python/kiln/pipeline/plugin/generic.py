# SPDX-License-Identifier: Apache-2.0
"""Framework-free iterators over kiln pipelines (rocAL's amd.rocal.plugin.generic): the same as
kiln.pipeline.plugin.pytorch's, with numpy arrays instead of torch tensors and no automatic
sharding by rank."""

from kiln.pipeline.plugin import _iterator
from kiln.pipeline.types import LastBatchPolicy

__all__ = ["GenericIterator", "ClassificationIterator", "ROCALGenericIterator",
           "ROCALClassificationIterator", "DALIGenericIterator", "DALIClassificationIterator",
           "LastBatchPolicy"]


def _bind(cls):
    return type(cls.__name__, (cls,), {"__module__": __name__, "__doc__": cls.__doc__})


GenericIterator = _bind(_iterator.GenericIterator)
ClassificationIterator = _bind(_iterator.ClassificationIterator)
ROCALGenericIterator = _bind(_iterator.ROCALGenericIterator)
ROCALClassificationIterator = _bind(_iterator.ROCALClassificationIterator)
# DALI's names, so `from nvidia.dali.plugin.pytorch import DALIClassificationIterator` ports too.
DALIGenericIterator = GenericIterator
DALIClassificationIterator = ClassificationIterator
