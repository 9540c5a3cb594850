#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Quantizes an fp32 ONNX model the way ONNX Runtime's quantize_static does by default (QDQ
format, MinMax calibration, per-channel weights), for ORT to run as its own int8 model.

onnxruntime's Python package (which holds quantize_static) is not installable here, so this
writes the same format from its documented defaults:
- activations: QUInt8, asymmetric over [min(0, min), max(0, max)]: scale = range / 255, zero point
  round(-rmin / scale); one QuantizeLinear -> DequantizeLinear pair per tensor, shared by its
  readers; every float input and output of a quantized node gets one, graph outputs included;
- weights of Conv, Gemm and MatMul: QInt8, symmetric per output channel, scale = max|w| / 127.5
  (ORT's (rmax - rmin) / (qmax - qmin) with rmin = -rmax over [-128, 127]), zero point 0;
- biases: int32 with scale x_scale * w_scale[c];
- Relu and Clip right after a quantized node are removed, their output quantized instead (ORT's
  removable activations); MaxPool, Flatten, Reshape, Transpose, Squeeze and Unsqueeze outputs
  take their input's parameters (ORT's 8-bit direct ops).
Calibration runs the fp32 model with every such tensor as an extra output through `kiln run`.

    ort_qdq.py --kiln build/ci/tools/kiln MODEL_fp32.onnx CALIBRATION_DIR OUT.onnx
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import helper, numpy_helper, shape_inference

QUANTIZED = {"Conv", "Gemm", "MatMul", "Add", "Mul", "MaxPool", "AveragePool",
             "GlobalAveragePool", "Flatten", "Reshape", "Transpose", "Squeeze", "Unsqueeze",
             "Concat"}
DIRECT_8BIT = {"MaxPool", "Flatten", "Reshape", "Transpose", "Squeeze", "Unsqueeze"}
REMOVABLE = {"Relu", "Clip"}
WEIGHTED = {"Conv": 1, "Gemm": 1, "MatMul": 1}


def weight_axis(node, weight):
    if node.op_type == "Conv":
        return 0
    if node.op_type == "Gemm":
        trans_b = next((a.i for a in node.attribute if a.name == "transB"), 0)
        return 0 if trans_b else 1
    return weight.ndim - 1  # MatMul: the output column


def remove_activations(graph, initializers):
    """Drops a Relu or Clip whose input is a quantized node's only output use, as ORT does: the
    node then writes the activation's output, whose calibrated range (min 0) clamps the same."""
    uses = {}
    for n in graph.node:
        for i in n.input:
            uses.setdefault(i, []).append(n)
    producers = {o: n for n in graph.node for o in n.output}
    outputs = {o.name for o in graph.output}
    keep = []
    for n in graph.node:
        src = producers.get(n.input[0]) if n.input else None
        if (n.op_type in REMOVABLE and src is not None and src.op_type in QUANTIZED and
                len(uses.get(n.input[0], [])) == 1 and n.input[0] not in outputs and
                all(i in initializers or i == "" for i in n.input[1:])):
            src.output[list(src.output).index(n.input[0])] = n.output[0]
            continue
        keep.append(n)
    del graph.node[:]
    graph.node.extend(keep)


def calibrate(kiln, model, tensors, calibration_dir):
    """min and max of each tensor over the calibration inputs, running the fp32 model with the
    tensors as extra outputs through kiln."""
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    inferred = shape_inference.infer_shapes(probe)
    infos = {v.name: v for v in list(inferred.graph.value_info) + list(inferred.graph.output)}
    have = {o.name for o in probe.graph.output}
    for t in tensors:
        if t not in have and t in infos:
            probe.graph.output.append(infos[t])
    input_name = model.graph.input[0].name
    ranges = {}
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "probe.onnx")
        onnx.save(probe, path)
        for k, npy in enumerate(sorted(glob.glob(os.path.join(calibration_dir, "*.npy")))):
            out = os.path.join(tmp, str(k))
            subprocess.run([kiln, "run", path, "--target", "cpu", "--input",
                            f"{input_name}={npy}", "--output-dir", out], check=True,
                           capture_output=True)
            with open(os.path.join(out, "outputs.json")) as f:
                files = {o["name"]: o["file"] for o in json.load(f)["outputs"]}
            values = {input_name: np.load(npy)}
            for name, file in files.items():
                values[name] = np.load(os.path.join(out, file))
            for t in tensors:
                if t not in values:
                    continue
                lo, hi = float(values[t].min()), float(values[t].max())
                old = ranges.get(t, (lo, hi))
                ranges[t] = (min(old[0], lo), max(old[1], hi))
    return ranges


def activation_params(lo, hi):
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    scale = (hi - lo) / 255.0 if hi > lo else 1.0
    zero = int(np.clip(round(-lo / scale), 0, 255))
    return np.float32(scale), np.uint8(zero)


def quantize(model, ranges):
    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    producers = {o: n for n in graph.node for o in n.output}
    new_inits = []
    params = {}

    def params_of(t):
        if t in params:
            return params[t]
        src = producers.get(t)
        if src is not None and src.op_type in DIRECT_8BIT and src.input[0] in ranges:
            params[t] = params_of(src.input[0])
        else:
            params[t] = activation_params(*ranges[t])
        return params[t]

    float_tensors = [t for n in graph.node if n.op_type in QUANTIZED
                     for t in list(n.input[:1] if n.op_type in WEIGHTED else n.input) + list(n.output)
                     if t and t not in inits and t in ranges]
    pairs = {}  # tensor -> its DequantizeLinear output
    source_of = {}  # and back
    nodes = []
    graph_outputs = {o.name for o in graph.output}

    def add_pair(t, before):
        scale, zero = params_of(t)
        s, z = t + "_scale", t + "_zero_point"
        new_inits.append(numpy_helper.from_array(np.array(scale, np.float32), s))
        new_inits.append(numpy_helper.from_array(np.array(zero, np.uint8), z))
        q, dq = t + "_QuantizeLinear", t + "_DequantizeLinear"
        before.append(helper.make_node("QuantizeLinear", [t, s, z], [q], q))
        before.append(helper.make_node("DequantizeLinear", [q, s, z], [dq], dq))
        pairs[t] = dq
        source_of[dq] = t

    for inp in graph.input:
        if inp.name in float_tensors:
            add_pair(inp.name, nodes)
    for n in graph.node:
        if n.op_type in QUANTIZED:
            for i, t in enumerate(n.input):
                if t in pairs:
                    n.input[i] = pairs[t]
            if n.op_type in WEIGHTED and len(n.input) > 1 and n.input[1] in inits:
                w = numpy_helper.to_array(inits[n.input[1]]).astype(np.float32)
                axis = weight_axis(n, w)
                moved = np.moveaxis(w, axis, 0)
                absmax = np.abs(moved.reshape(moved.shape[0], -1)).max(1)
                w_scale = np.where(absmax > 0, absmax / 127.5, 1.0).astype(np.float32)
                shape = [1] * w.ndim
                shape[axis] = -1
                qw = np.clip(np.rint(w / w_scale.reshape(shape)), -128, 127).astype(np.int8)
                name = n.input[1]
                new_inits += [numpy_helper.from_array(qw, name + "_quantized"),
                              numpy_helper.from_array(w_scale, name + "_scale"),
                              numpy_helper.from_array(np.zeros(len(w_scale), np.int8),
                                                      name + "_zero_point")]
                nodes.append(helper.make_node(
                    "DequantizeLinear", [name + "_quantized", name + "_scale", name + "_zero_point"],
                    [name + "_DequantizeLinear"], name + "_DequantizeLinear", axis=axis))
                x_scale = params_of(source_of[n.input[0]])[0] if n.input[0] in source_of else None
                if len(n.input) > 2 and n.input[2] in inits and x_scale is not None:
                    b = numpy_helper.to_array(inits[n.input[2]]).astype(np.float64)
                    b_scale = (np.float64(x_scale) * w_scale.astype(np.float64))
                    qb = np.rint(b / b_scale).astype(np.int32)
                    bname = n.input[2]
                    new_inits += [numpy_helper.from_array(qb, bname + "_quantized"),
                                  numpy_helper.from_array(b_scale.astype(np.float32),
                                                          bname + "_scale"),
                                  numpy_helper.from_array(np.zeros_like(qb), bname + "_zero_point")]
                    nodes.append(helper.make_node(
                        "DequantizeLinear",
                        [bname + "_quantized", bname + "_scale", bname + "_zero_point"],
                        [bname + "_DequantizeLinear"], bname + "_DequantizeLinear", axis=0))
                    n.input[2] = bname + "_DequantizeLinear"
                n.input[1] = name + "_DequantizeLinear"
            nodes.append(n)
            for t in n.output:
                if t in float_tensors and t not in pairs:
                    if t in graph_outputs:  # the graph keeps its output name, after the DQ
                        inner = t + "_float"
                        n.output[list(n.output).index(t)] = inner
                        ranges[inner] = ranges[t]
                        params[inner] = params_of(t)
                        add_pair(inner, nodes)
                        nodes[-1].output[0] = t
                        pairs[t] = t
                    else:
                        add_pair(t, nodes)
        else:
            for i, t in enumerate(n.input):
                if t in pairs:
                    n.input[i] = pairs[t]
            nodes.append(n)
    del graph.node[:]
    graph.node.extend(nodes)
    used = {i for n in graph.node for i in n.input}
    keep = [t for t in graph.initializer if t.name in used]
    del graph.initializer[:]
    graph.initializer.extend(keep + [t for t in new_inits if t.name in used])


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kiln", required=True, help="the kiln binary (runs the calibration)")
    p.add_argument("model")
    p.add_argument("calibration", help="a folder of .npy inputs")
    p.add_argument("out")
    args = p.parse_args()
    model = onnx.load(args.model)
    original = onnx.ModelProto()
    original.CopyFrom(model)
    inits = {t.name for t in model.graph.initializer}
    remove_activations(model.graph, inits)
    tensors = sorted({t for n in model.graph.node if n.op_type in QUANTIZED
                      for t in list(n.input) + list(n.output) if t and t not in inits})
    # The ranges are the original model's: a removed Relu's output is never negative.
    ranges = calibrate(args.kiln, original, tensors, args.calibration)
    quantize(model, ranges)
    onnx.checker.check_model(model)
    onnx.save(model, args.out)
    print(f"wrote {args.out}: {sum(n.op_type == 'QuantizeLinear' for n in model.graph.node)} "
          f"QDQ pairs", flush=True)


if __name__ == "__main__":
    sys.exit(main())
