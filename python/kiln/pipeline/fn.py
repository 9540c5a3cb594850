# SPDX-License-Identifier: Apache-2.0
"""The pipeline operators as functions (``import kiln.pipeline.fn as fn``), generated when this
module is imported from the operator schemas the C++ pipeline declares, so every operator it has
appears here with its arguments and docs: ``fn.readers.file``, ``fn.decoders.image``,
``fn.resize``, ``fn.random.coin_flip``, ... Call them inside ``with pipe:`` or a
``@pipeline_def`` function; each returns DataNode(s) naming the operator's outputs."""

import sys
import types as _pytypes

from kiln.pipeline import _schema
from kiln.pipeline.node import DataNode, add_operator


def _make(schema):
    sig = _schema.signature(schema)

    def op(*inputs, **kwargs):
        return add_operator(schema, inputs, kwargs)

    op.__name__ = schema["name"].rsplit(".", 1)[-1]
    op.__qualname__ = "fn." + schema["name"]
    op.__module__ = __name__
    op.__doc__ = _schema.docstring(schema)
    op.__signature__ = sig
    op.schema = schema
    return op


def _install():
    module = sys.modules[__name__]
    names = []
    for schema in _schema.schemas():
        *space, leaf = schema["name"].split(".")
        target = module
        path = __name__
        for part in space:
            path += "." + part
            child = getattr(target, part, None)
            if child is None:
                child = _pytypes.ModuleType(path, f"kiln.pipeline.fn.{part}: operators {part}.*")
                setattr(target, part, child)
                sys.modules[path] = child
            target = child
        setattr(target, leaf, _make(schema))
        names.append(schema["name"])
    return names


OPERATORS = _install()
__all__ = sorted({n.split(".")[0] for n in OPERATORS}) + ["DataNode"]
