# SPDX-License-Identifier: Apache-2.0
"""Run by wheel_test.sh with an installed kiln (a venv's python, from a folder outside kiln's
tree): checks that `kiln` is the installed package, classifies the held-out digits with the
compiler API and checks at least 90% are right, and imports the pipeline and client modules.
Usage: python check_wheel.py PREFIX EXAMPLES  (PREFIX: the venv kiln must come from)"""

import os
import sys

import numpy as np

prefix, examples = os.path.realpath(sys.argv[1]), sys.argv[2]

import kiln  # noqa: E402
import kiln.client  # noqa: E402,F401
import kiln.pipeline.fn  # noqa: E402,F401

where = os.path.realpath(kiln.__file__)
if not where.startswith(prefix + os.sep):
    sys.exit(f"FAIL: kiln was imported from {where}, not from {prefix}")
if not os.path.exists(os.path.join(os.path.dirname(where), "pipeline", "fn.pyi")):
    sys.exit("FAIL: the installed package has no pipeline/fn.pyi")


def read_pgm(path):
    """A binary PGM (P5) as grey level / maxval, [1, 1, h, w]: the pixels are its last w*h bytes."""
    with open(path, "rb") as f:
        data = f.read()
    magic, width, height, maxval = data.split(maxsplit=4)[:4]
    if magic != b"P5":
        sys.exit(f"FAIL: {path} is not a binary PGM")
    width, height = int(width), int(height)
    pixels = np.frombuffer(data[len(data) - width * height:], dtype=np.uint8)
    return (pixels.astype(np.float32) / int(maxval)).reshape(1, 1, height, width)


program = kiln.parse_onnx(os.path.join(examples, "repository", "digits", "1", "model.onnx"),
                          map_input_dims={"image": [1, 1, 8, 8]})
program.compile(kiln.get_target("cpu" if "cpu" in kiln.target_names() else "ref"))
right = total = 0
for line in open(os.path.join(examples, "digit_images", "labels.txt")):
    if not line.strip() or line.startswith("#"):
        continue
    name, label = line.split()
    scores = np.array(program.run({"image": read_pgm(os.path.join(examples, "digit_images", name))})[0])
    right += int(np.argmax(scores)) == int(label)
    total += 1
print(f"kiln {kiln.__version__} from {where}: {right}/{total} digits right")
if total == 0 or right * 10 < total * 9:
    sys.exit("FAIL: fewer than 90% of the digits are right")
