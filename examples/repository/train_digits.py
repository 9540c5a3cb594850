#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
# Trains the served example model: a small CNN on scikit-learn's 8x8 handwritten digits (fixed
# seeds, 75/25 train/test split, a few seconds of CPU), prints its test accuracy, exports it to
# digits/1/model.onnx with a dynamic batch dim, and writes 16 held-out test digits as PGM images
# (examples/digit_images/NN_labelL.pgm, grey levels 0..16 as in the data set; the same as .png for
# the served chain, which takes encoded images) with labels.txt
# there (outside the repository: every folder in it is a model).
# Deterministic: rerunning it gives the same files.
# The digits and the split come from digits_data.py (scikit-learn's own data file).
# Usage: /usr/bin/python3 examples/repository/train_digits.py
import os
import struct
import sys
import zlib

import numpy as np
import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import digits_data  # noqa: E402

here = os.path.dirname(os.path.abspath(__file__))


def png_gray(pixels):
    """An 8-bit greyscale PNG of a 2-D uint8 array (what the served chain decodes)."""
    h, w = pixels.shape
    raw = b"".join(b"\x00" + pixels[y].tobytes() for y in range(h))

    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data +
                struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))
torch.manual_seed(0)
torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)

(x_train, y_train), (x_test, y_test) = digits_data.train_test_split()


def to_input(x):
    # The model's input: [n, 1, 8, 8] float32 in [0, 1] (grey level / 16).
    return torch.from_numpy(x[:, None, :, :] / 16.0)


model = nn.Sequential(
    nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(),
    nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(),
    nn.MaxPool2d(2),
    nn.Flatten(),
    nn.Linear(16 * 4 * 4, 32), nn.ReLU(),
    nn.Linear(32, 10))

xt, yt = to_input(x_train), torch.from_numpy(y_train)
optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
generator = torch.Generator().manual_seed(0)
for epoch in range(15):
    model.train()
    order = torch.randperm(len(xt), generator=generator)
    for i in range(0, len(xt), 32):
        idx = order[i:i + 32]
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(xt[idx]), yt[idx])
        loss.backward()
        optimizer.step()

model.eval()
with torch.no_grad():
    predicted = model(to_input(x_test)).argmax(1).numpy()
accuracy = float((predicted == y_test).mean())
print(f"test accuracy: {accuracy * 100:.2f}% on {len(y_test)} held-out digits "
      f"({len(y_train)} trained on)")

os.makedirs(os.path.join(here, "digits", "1"), exist_ok=True)
onnx_path = os.path.join(here, "digits", "1", "model.onnx")
torch.onnx.export(model, to_input(x_test[:1]), onnx_path, input_names=["image"],
                  output_names=["logits"], dynamic_axes={"image": {0: "batch"}, "logits": {0: "batch"}},
                  opset_version=13, do_constant_folding=True)
print(f"wrote {os.path.relpath(onnx_path)} ({os.path.getsize(onnx_path)} bytes)")

# 16 held-out digits, the first of each class 0..9 and then the next ones in test order.
image_dir = os.path.join(here, "..", "digit_images")
os.makedirs(image_dir, exist_ok=True)
chosen = [int(np.flatnonzero(y_test == c)[0]) for c in range(10)]
chosen += [i for i in range(len(y_test)) if i not in chosen][:16 - len(chosen)]
with open(os.path.join(image_dir, "labels.txt"), "w") as f:
    f.write("# file true_label (held-out test digits of scikit-learn's load_digits)\n")
    for n, i in enumerate(chosen):
        name = f"{n:02d}_label{y_test[i]}.pgm"
        pixels = x_test[i].astype(np.uint8)
        with open(os.path.join(image_dir, name), "wb") as img:
            img.write(b"P5\n8 8\n16\n" + pixels.tobytes())
        # The same digit PNG-encoded (grey levels 0..16 too), for the served chain.
        with open(os.path.join(image_dir, name.replace(".pgm", ".png")), "wb") as img:
            img.write(png_gray(pixels.reshape(8, 8)))
        f.write(f"{name} {y_test[i]}\n")
print(f"wrote {len(chosen)} held-out images and labels.txt to {os.path.relpath(image_dir)}")
