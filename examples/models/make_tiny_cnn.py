#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
# Writes tiny_cnn.onnx (a LeNet-sized image classifier with fixed random weights, seed 0) and
# digit.npy (a 28x28 drawing of a "7") next to this script. Deterministic: rerunning it gives the
# same bytes. Usage: /usr/bin/python3 examples/models/make_tiny_cnn.py
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

here = os.path.dirname(os.path.abspath(__file__))
rng = np.random.RandomState(0)


def weight(name, *shape):
    fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else shape[0]
    return numpy_helper.from_array((rng.randn(*shape) / np.sqrt(fan_in)).astype(np.float32), name)


inits = [
    weight("conv1.w", 8, 1, 3, 3), weight("conv1.b", 8),
    weight("conv2.w", 16, 8, 3, 3), weight("conv2.b", 16),
    weight("fc.w", 10, 16 * 7 * 7), weight("fc.b", 10),
]
nodes = [
    helper.make_node("Conv", ["image", "conv1.w", "conv1.b"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
    helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
    helper.make_node("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
    helper.make_node("Conv", ["p1", "conv2.w", "conv2.b"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
    helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
    helper.make_node("MaxPool", ["r2"], ["p2"], name="pool2", kernel_shape=[2, 2], strides=[2, 2]),
    helper.make_node("Flatten", ["p2"], ["flat"], name="flatten"),
    helper.make_node("Gemm", ["flat", "fc.w", "fc.b"], ["logits"], name="fc", transB=1),
    helper.make_node("Softmax", ["logits"], ["probabilities"], name="softmax", axis=1),
]
graph = helper.make_graph(
    nodes, "tiny_cnn",
    [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["batch", 1, 28, 28])],
    [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["batch", 10])],
    initializer=inits)
model = helper.make_model(graph, producer_name="kiln-examples", opset_imports=[helper.make_opsetid("", 13)])
model.ir_version = 8
onnx.checker.check_model(model)
onnx.save(model, os.path.join(here, "tiny_cnn.onnx"))

digit = np.zeros((1, 1, 28, 28), np.float32)
digit[0, 0, 5:8, 6:22] = 1.0          # the bar of the 7
for row in range(8, 24):               # its diagonal stroke
    col = 21 - (row - 8) * 10 // 16
    digit[0, 0, row, col - 1:col + 2] = 1.0
np.save(os.path.join(here, "digit.npy"), digit)
print("wrote tiny_cnn.onnx and digit.npy")
