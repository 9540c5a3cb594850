# SPDX-License-Identifier: Apache-2.0
"""The operator schemas the C++ pipeline declares, and how the ``fn`` functions derive from them:
their Python signatures, docstrings, and the rocAL/DALI argument names kiln accepts for them."""

import inspect
import keyword

from kiln import _kiln

# rocAL's and DALI's names of kiln arguments, per operator.
ALIASES = {
    "resize": {"resize_width": "resize_x", "resize_height": "resize_y",
               "interpolation_type": "interp_type"},
    "crop_mirror_normalize": {"output_dtype": "dtype"},
    "rotate": {"interpolation_type": "interp_type"},
}
# Argument values spelled the rocAL/DALI way, per (operator, argument).
VALUE_MAPS = {
    ("crop_mirror_normalize", "output_layout"): {"NCHW": "CHW", "NHWC": "HWC"},
}
# rocAL fuses reading and decoding, so its decoders take the reader's arguments; kiln moves them
# to the readers.file node the decoder reads from.
READER_ARGS_ON_DECODERS = ("file_root", "file_list", "shard_id", "num_shards", "random_shuffle")
# Arguments every rocAL/DALI operator takes that do not change what kiln's operators compute
# (`device` is read before these: "gpu" runs an operator's GPU form), DALI's `name` (kiln has one reader per pipeline, so
# reader_name is not needed to find it), and rocAL's per-op output_layout/output_dtype where the
# operator has no such argument (its output stays HWC uint8; the iterators lay out and convert the
# batch per the pipeline's tensor_layout and tensor_dtype).
IGNORED = ("device", "name", "output_layout", "output_dtype", "preserve", "bytes_per_sample_hint")

_PY_TYPES = {"int": "int", "float": "float", "bool": "bool", "string": "str",
             "int list": "Sequence[int]", "float list": "Sequence[float]"}


def schemas():
    """Every operator schema (a dict per operator), in the C++ registry's order."""
    return _kiln.operator_schemas()


def python_name(name):
    """A schema argument or input name as a valid Python identifier."""
    return name + "_" if keyword.iskeyword(name) else name


def signature(schema):
    """The Python signature of fn.<schema name>: the schema's inputs (positional), then its
    arguments (keyword-only, with the schema's defaults), then ``device`` and rocAL/DALI names."""
    params = [inspect.Parameter(python_name(i), inspect.Parameter.POSITIONAL_ONLY)
              for i in schema["inputs"]]
    for arg in schema["args"]:
        default = inspect.Parameter.empty if arg["required"] else arg["default"]
        params.append(inspect.Parameter(python_name(arg["name"]), inspect.Parameter.KEYWORD_ONLY,
                                        default=default, annotation=_PY_TYPES.get(arg["type"], "Any")))
    params.append(inspect.Parameter("device", inspect.Parameter.KEYWORD_ONLY, default=None))
    params.append(inspect.Parameter("compat", inspect.Parameter.VAR_KEYWORD))
    return inspect.Signature(params)


def docstring(schema):
    """The docstring of fn.<schema name>, from the schema's one-line docs."""
    lines = [schema["doc"][:1].upper() + schema["doc"][1:] + ".", ""]
    if schema["inputs"]:
        lines.append("Inputs: " + ", ".join(schema["inputs"]) + ".")
    outputs = schema["outputs"]
    lines.append(("Returns " + ("a tuple (" + ", ".join(outputs) + ")" if len(outputs) > 1
                                else outputs[0]) + " (DataNode).") if outputs else "")
    lines += ["", "Args:"]
    for arg in schema["args"]:
        default = "required" if arg["required"] else f"default {arg['default']!r}"
        sample = "; per-sample: may be a DataNode such as fn.random.uniform()" \
            if arg["per_sample"] else ""
        lines.append(f"    {arg['name']} ({arg['type']}, {default}): {arg['doc']}{sample}")
    lines.append("    device: \"gpu\" runs the operator on the GPU where it has a GPU form "
                 "(`kiln pipeline ops`); \"cpu\" (default) or \"mixed\" on the CPU")
    aliases = ALIASES.get(schema["name"], {})
    if aliases:
        lines.append("")
        lines.append("rocAL/DALI names accepted: " +
                     ", ".join(f"{k} -> {v}" for k, v in sorted(aliases.items())) + ".")
    return "\n".join(lines).rstrip() + "\n"
