#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
# A MIGraphX script run by kiln: parse an ONNX model, compile it, run it, take the argmax. The
# only change from MIGraphX is the import line (`import migraphx`).
# Usage: /usr/bin/python3 examples/python/compile_and_run.py [MODEL.onnx] [INPUT.npy] [--target cpu]
import argparse
import os

import numpy as np

import kiln as migraphx

here = os.path.dirname(os.path.abspath(__file__))
parser = argparse.ArgumentParser()
parser.add_argument("model", nargs="?", default=os.path.join(here, "..", "models", "tiny_cnn.onnx"))
parser.add_argument("input", nargs="?", default=os.path.join(here, "..", "models", "digit.npy"))
parser.add_argument("--target", default="cpu")
args = parser.parse_args()

data = np.load(args.input)
model = migraphx.parse_onnx(args.model, map_input_dims={"image": list(data.shape)})
print("parameters:", {name: shape.lens() for name, shape in model.get_parameter_shapes().items()})
model.compile(migraphx.get_target(args.target))
print("output shapes:", [s.lens() for s in model.get_output_shapes()])

results = model.run({"image": data})
probabilities = np.array(results[0])
print("probabilities:", [round(float(p), 4) for p in probabilities[0]])
print("argmax:", int(np.argmax(results[0])))
