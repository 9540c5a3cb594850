#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
# An augmentation pipeline that saves a picture grid: each row is one image, its columns the
# decoded original, a horizontal flip, a vertical flip, a random-crop decode, a centre crop and,
# where the pipeline has the rotate operator, a random rotation (rocAL's rotate example).
# Usage: /usr/bin/python3 examples/python/augment_grid.py IMAGE_DIR OUT.png [--rows 4]
import argparse

import numpy as np
from PIL import Image

import kiln.pipeline.fn as fn
import kiln.pipeline.types as types
from kiln.pipeline import Pipeline

parser = argparse.ArgumentParser()
parser.add_argument("image_dir")
parser.add_argument("out")
parser.add_argument("--rows", type=int, default=4)
parser.add_argument("--size", type=int, default=96)
args = parser.parse_args()

s = args.size
pipe = Pipeline(batch_size=args.rows, num_threads=2, seed=7)
with pipe:
    jpegs, labels = fn.readers.file(file_root=args.image_dir, random_shuffle=True)
    original = fn.resize(fn.decoders.image(jpegs, output_type=types.RGB), resize_x=s, resize_y=s)
    mirrored = fn.flip(original, horizontal=1)
    upside_down = fn.flip(original, horizontal=0, vertical=1)
    cropped = fn.resize(fn.decoders.image_random_crop(jpegs, random_area=[0.2, 0.5]),
                        resize_x=s, resize_y=s)
    centre = fn.resize(fn.crop(original, crop=[s // 2, s // 2]), resize_x=s, resize_y=s)
    outputs = [original, mirrored, upside_down, cropped, centre]
    if hasattr(fn, "rotate"):
        outputs.append(fn.rotate(original, angle=fn.random.uniform(range=[-45.0, 45.0]),
                                 keep_size=True, fill_value=255))
    pipe.set_outputs(*outputs)
pipe.build()

columns = [out.as_array() for out in pipe.run()]          # each [rows, s, s, 3] uint8
grid = np.concatenate([np.concatenate(list(c), axis=0) for c in columns], axis=1)
Image.fromarray(grid).save(args.out)
print(f"wrote a {grid.shape[1]}x{grid.shape[0]} grid of {args.rows} images x "
      f"{len(columns)} augmentations to {args.out}")
