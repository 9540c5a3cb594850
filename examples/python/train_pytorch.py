#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
# A short PyTorch training loop fed by a kiln pipeline: random-crop decode, resize, random mirror
# and normalization on kiln's worker threads, batches handed to torch without copies. Prints the
# mean loss of every epoch; on make_images.py's folder it falls well below its start.
# Usage: /usr/bin/python3 examples/python/train_pytorch.py IMAGE_DIR [--epochs 6]
import argparse

import torch
from torch import nn

import kiln.pipeline.fn as fn
import kiln.pipeline.types as types
from kiln.pipeline import pipeline_def
from kiln.pipeline.plugin.pytorch import ClassificationIterator, LastBatchPolicy

parser = argparse.ArgumentParser()
parser.add_argument("image_dir")
parser.add_argument("--epochs", type=int, default=6)
parser.add_argument("--batch-size", type=int, default=8)
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()
torch.manual_seed(args.seed)


@pipeline_def
def train_pipeline(root, size):
    jpegs, labels = fn.readers.file(file_root=root, random_shuffle=True)
    images = fn.decoders.image_random_crop(jpegs, output_type=types.RGB,
                                           random_area=[0.6, 1.0])
    images = fn.resize(images, resize_x=size, resize_y=size)
    images = fn.crop_mirror_normalize(images, crop=[size, size], mean=[127.5] * 3,
                                      std=[64.0] * 3, mirror=fn.random.coin_flip(),
                                      output_layout=types.NCHW, dtype=types.FLOAT)
    return images, labels


pipe = train_pipeline(args.image_dir, 32, batch_size=args.batch_size, num_threads=2,
                      seed=args.seed)
loader = ClassificationIterator(pipe, last_batch_policy=LastBatchPolicy.DROP, auto_reset=True)

model = nn.Sequential(
    nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
    nn.Flatten(), nn.Linear(32, 3))
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
loss_fn = nn.CrossEntropyLoss()

for epoch in range(args.epochs):
    total, batches, correct, seen = 0.0, 0, 0, 0
    for step in loader:
        images, labels = step[0]["data"], step[0]["label"].long()
        logits = model(images)
        loss = loss_fn(logits, labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item()
        batches += 1
        correct += int((logits.argmax(1) == labels).sum())
        seen += len(labels)
    print(f"epoch {epoch}: loss {total / batches:.4f} accuracy {correct / seen:.3f}", flush=True)
