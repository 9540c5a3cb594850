# SPDX-License-Identifier: Apache-2.0
"""kiln's data pipeline with rocAL's and DALI's Python API.

rocAL scripts port by changing their imports::

    from kiln.pipeline import Pipeline            # from amd.rocal.pipeline import Pipeline
    import kiln.pipeline.fn as fn                 # import amd.rocal.fn as fn
    import kiln.pipeline.types as types           # import amd.rocal.types as types
    from kiln.pipeline.plugin.pytorch import ROCALClassificationIterator

and DALI scripts with ``from kiln.pipeline import pipeline_def, fn, types``.
"""

from kiln.pipeline import types
from kiln.pipeline.node import DataNode
from kiln.pipeline.pipeline import Pipeline, pipeline_def
from kiln.pipeline import fn
from kiln._kiln import TensorList

__all__ = ["Pipeline", "pipeline_def", "fn", "types", "DataNode", "TensorList"]
