# SPDX-License-Identifier: Apache-2.0
"""Models the corpus derives from its npm models, the way users' tools rewrite models:

  fp16      float16 conversion as onnxconverter-common's convert_float_to_float16 does it with
            keep_io_types=True: f32 initializers, Constants and value types become f16; Casts
            between the f32 graph inputs/outputs and the f16 graph are appended at the END of
            the node list (so the graph is out of topological order); ops that converter keeps in
            f32 (Resize, Max, Min, TopK, ...) get f16<->f32 Casts, also appended at the end.
  external  every initializer of 1 KiB or more moved to one external data file next to the
            model (onnx.save_model with save_as_external_data), each at its own offset.

Needs Debian's python3-onnx.
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper, shape_inference

# The ops onnxconverter-common's float16 conversion leaves in float32 by default.
KEEP_F32_OPS = {
    "ArrayFeatureExtractor", "Binarizer", "CastMap", "CategoryMapper", "DictVectorizer",
    "FeatureVectorizer", "Imputer", "LabelEncoder", "LinearClassifier", "LinearRegressor",
    "Normalizer", "OneHotEncoder", "SVMClassifier", "SVMRegressor", "Scaler",
    "TreeEnsembleClassifier", "TreeEnsembleRegressor", "ZipMap", "NonMaxSuppression", "TopK",
    "RoiAlign", "Resize", "Range", "CumSum", "Min", "Max", "Upsample",
}


def to_f16_array(x, smallest=1e-7, largest=1e4):
    """f32 values as f16, keeping sign and finiteness: tiny values become +-smallest, huge finite
    ones +-largest (the converter's clamping)."""
    x = np.asarray(x, dtype=np.float32)
    tiny = (np.abs(x) < smallest) & (x != 0)
    huge = np.isfinite(x) & (np.abs(x) > largest)
    x = np.where(tiny, np.sign(x) * smallest, x)
    x = np.where(huge, np.sign(x) * largest, x)
    return x.astype(np.float16)


def f16_tensor(t):
    if t.data_type != TensorProto.FLOAT:
        return t
    out = numpy_helper.from_array(to_f16_array(numpy_helper.to_array(t)), t.name)
    t.CopyFrom(out)
    return t


def fp16(model):
    """The model converted to float16 with f32 inputs and outputs (see the module doc)."""
    model = shape_inference.infer_shapes(model)
    g = model.graph
    rename = {}
    appended = []
    for i, v in enumerate(g.input):
        if v.type.tensor_type.elem_type == TensorProto.FLOAT:
            rename[v.name] = f"graph_input_cast_{i}"
            appended.append(helper.make_node("Cast", [v.name], [rename[v.name]],
                                             to=TensorProto.FLOAT16, name=f"graph_input_cast{i}"))
    for i, v in enumerate(g.output):
        if v.type.tensor_type.elem_type == TensorProto.FLOAT:
            rename[v.name] = f"graph_output_cast_{i}"
            appended.append(helper.make_node("Cast", [rename[v.name]], [v.name],
                                             to=TensorProto.FLOAT, name=f"graph_output_cast{i}"))
    io_names = {v.name for v in list(g.input) + list(g.output)}
    f16_values = set()
    kept = []

    def convert_graph(graph, top):
        for t in graph.initializer:
            if t.data_type == TensorProto.FLOAT:
                f16_values.add(t.name)
            f16_tensor(t)
        for v in list(graph.input) + list(graph.output) + list(graph.value_info):
            if v.type.tensor_type.elem_type == TensorProto.FLOAT and not (top and
                                                                          v.name in io_names):
                v.type.tensor_type.elem_type = TensorProto.FLOAT16
                f16_values.add(v.name)
        for n in graph.node:
            for k, name in enumerate(n.input):
                n.input[k] = rename.get(name, name)
            for k, name in enumerate(n.output):
                n.output[k] = rename.get(name, name)
            if n.op_type in KEEP_F32_OPS:
                kept.append(n)
                continue
            for a in n.attribute:
                if n.op_type == "Cast" and a.name == "to" and a.i == TensorProto.FLOAT:
                    a.i = TensorProto.FLOAT16
                if a.type == onnx.AttributeProto.TENSOR:
                    f16_tensor(a.t)
                if a.type == onnx.AttributeProto.GRAPH:
                    convert_graph(a.g, False)

    convert_graph(g, True)
    for v in list(g.output) + list(g.value_info):
        if v.name in rename.values():
            v.type.tensor_type.elem_type = TensorProto.FLOAT16
    for n in kept:
        for k, name in enumerate(n.input):
            if name in f16_values:
                cast_out = f"{n.name}_input_cast_{k}"
                appended.append(helper.make_node("Cast", [name], [cast_out], to=TensorProto.FLOAT,
                                                 name=f"{n.name}_input_cast{k}"))
                n.input[k] = cast_out
        for k, name in enumerate(n.output):
            if name in f16_values:
                cast_in = f"{n.name}_output_cast_{k}"
                appended.append(helper.make_node("Cast", [cast_in], [name],
                                                 to=TensorProto.FLOAT16,
                                                 name=f"{n.name}_output_cast{k}"))
                n.output[k] = cast_in
    g.node.extend(appended)
    return model


def external(model, out_path):
    """Saves `model` at out_path with its weights in out_path's name + '.data'."""
    location = os.path.basename(out_path) + ".data"
    if os.path.exists(os.path.join(os.path.dirname(out_path), location)):
        os.remove(os.path.join(os.path.dirname(out_path), location))
    onnx.save_model(model, out_path, save_as_external_data=True, all_tensors_to_one_file=True,
                    location=location, size_threshold=1024)


def derive(source_path, how, out_path):
    """Writes the derived model (see the module doc) of source_path to out_path."""
    model = onnx.load(source_path)
    if how == "fp16":
        onnx.save(fp16(model), out_path)
    elif how == "external":
        external(model, out_path)
    else:
        raise ValueError(f"unknown derivation {how!r}: expected fp16 or external")
