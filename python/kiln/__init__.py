# SPDX-License-Identifier: Apache-2.0
"""kiln: compile neural networks, prepare their inputs and serve them.

The compiler API keeps MIGraphX's Python names, so a MIGraphX script ports by changing its import
(``import kiln as migraphx``)::

    import kiln
    prog = kiln.parse_onnx("model.onnx")
    prog.compile(kiln.get_target("cpu"))
    outputs = prog.run({"image": array})      # a list of kiln.argument, numpy-compatible

The data pipeline (rocAL/DALI names) lives in :mod:`kiln.pipeline`.
"""

from kiln._kiln import (
    KilnError,
    KilnNotImplementedError,
    argument,
    get_onnx_operators,
    instruction_ref,
    module,
    op,
    parse_onnx,
    parse_onnx_buffer,
    program,
    shape,
    target,
    target_names,
)
from kiln import _kiln
from kiln._kiln import get_target as _get_target

__version__ = "0.1.0"

Program = program
Shape = shape
Argument = argument
Target = target

__all__ = [
    "KilnError", "KilnNotImplementedError", "argument", "shape", "program", "target", "op",
    "module", "instruction_ref",
    "parse_onnx", "parse_onnx_buffer", "compile_onnx", "get_onnx_operators", "get_target", "target_names", "save", "load",
    "save_buffer", "load_buffer", "quantize_fp16", "quantize_bf16", "quantize_int8",
    "generate_argument", "fill_argument", "__version__",
]


def _error(cls, message, code):
    error = cls(message)
    error.code = code
    return error


def get_target(name):
    """The compilation target called ``name``: "ref", "cpu", or "cuda" (MIGraphX's "gpu") when
    this build has it. Raises KilnError listing the targets this build has otherwise."""
    return _get_target("cuda" if name == "gpu" else name)


def compile_onnx(filename, target="cpu", map_input_dims=None, default_dim_value=0, cache=True,
                 cache_dir=None, seed=0, threads=0):
    """``parse_onnx`` and ``compile`` in one call, through kiln's compile cache: the first call
    compiles ``filename`` for ``target`` and stores the artifact in ``cache_dir`` (default:
    $KILN_CACHE_DIR/artifacts, else ~/.cache/kiln/artifacts; never beside the model); later calls
    with the same model bytes, shapes, seed and machine load it instead. ``cache=False`` compiles
    without reading or writing it. Returns a compiled program, ready to run()."""
    return _kiln._compile_onnx(str(filename), "cuda" if target == "gpu" else str(target),
                               dict(map_input_dims or {}), int(default_dim_value), bool(cache),
                               str(cache_dir or ""), int(seed), int(threads))


def save(p, filename, format="kiln"):
    """Writes the compiled program ``p`` to ``filename`` as a .kiln artifact (MIGraphX's
    ``save``; ``format`` is accepted for MIGraphX scripts). Builds without artifacts raise
    KilnNotImplementedError."""
    _kiln.save(p, str(filename))


def load(filename, format="kiln"):
    """Reads a .kiln artifact as a compiled program, ready to run(); a file compiled for another
    machine or kiln version is a KilnError saying what differs and how to recompile it."""
    return _kiln.load(str(filename))


def save_buffer(p, format="kiln"):
    """The compiled program ``p`` as artifact bytes."""
    return _kiln.save_buffer(p)


def load_buffer(buffer, format="kiln"):
    """A compiled program from artifact bytes (see load)."""
    return _kiln.load_buffer(bytes(buffer))


def _names(ins_names):
    return [ins_names] if isinstance(ins_names, str) else [str(n) for n in ins_names]


def quantize_fp16(prog, ins_names=("all",)):
    """Converts the parsed (not yet compiled) program ``prog`` to fp16 in place, as MIGraphX's
    ``quantize_fp16``: ``ins_names`` are ONNX op names ("Conv", "MatMul", ...), MIGraphX's
    ("convolution", "dot"), or "all" for every compute op. Numerically sensitive ops (Softmax,
    normalizations, reductions, Exp, Log) stay fp32 unless named; inputs and outputs stay fp32.
    On the cpu target fp16 ops compute through fp32 kernels; bf16 runs natively there."""
    _kiln._quantize_float(prog, "fp16", _names(ins_names))


def quantize_bf16(prog, ins_names=("all",)):
    """Converts ``prog`` to bf16 in place (see quantize_fp16). On the cpu target, bf16
    convolutions and matrix products run on oneDNN's bf16 kernels (AVX-512 BF16 / AMX)."""
    _kiln._quantize_float(prog, "bf16", _names(ins_names))


def quantize_int8(prog, t, calibration=(), ins_names=("dot", "convolution"), method="max",
                  percentile=99.99, progress=False, exclude=()):
    """Post-training int8 quantization of the parsed program ``prog`` in place (MIGraphX's
    ``quantize_int8``): runs ``prog`` on target ``t`` over ``calibration`` (a list of
    ``{input name: array}`` dicts), picks each activation's range with ``method`` ("max",
    "percentile" with ``percentile``, or "entropy"), and rewrites the graph into ONNX QDQ form:
    the ``ins_names`` ops ("dot": MatMul and Gemm, "convolution": Conv) with symmetric
    per-channel int8 weights, and per-tensor u8/s8 activations wherever an int8 op reads one
    (residual Adds, pools and reshapes between them included). ``exclude`` lists node names or op
    names to keep in float. ``progress`` draws a bar on stderr. Compile afterwards."""
    _kiln._quantize_int8(prog, t, list(calibration), _names(ins_names), method, float(percentile),
                         bool(progress), [str(e) for e in exclude])


def generate_argument(s, seed=0):
    """A kiln.argument of shape ``s`` filled with seeded uniform random values in [0, 1)
    (integers in [0, 10))."""
    import numpy as np

    if s.dynamic():
        raise _error(KilnError, f"generate_argument: shape {s} has dynamic dims; give every dim",
                     "INVALID_ARGUMENT")
    rng = np.random.default_rng(seed)
    dtype = s.dtype()
    if np.issubdtype(dtype, np.floating):
        values = rng.random(s.lens()).astype(dtype)
    elif dtype == np.bool_:
        values = rng.integers(0, 2, s.lens()).astype(dtype)
    else:
        values = rng.integers(0, 10, s.lens()).astype(dtype)
    return argument(values)


def fill_argument(s, value):
    """A kiln.argument of shape ``s`` with every element equal to ``value``."""
    import numpy as np

    if s.dynamic():
        raise _error(KilnError, f"fill_argument: shape {s} has dynamic dims; give every dim",
                     "INVALID_ARGUMENT")
    return argument(np.full(s.lens(), value, dtype=s.dtype()))
