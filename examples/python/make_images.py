#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
# Writes a small image-classification folder for the pipeline examples: DIR/<class>/<n>.jpg, three
# classes a network can tell apart (a red disc, a green square, a blue bar, on noisy backgrounds
# at random places and sizes). Deterministic for a given --seed.
# Usage: /usr/bin/python3 examples/python/make_images.py DIR [--per-class 24] [--seed 0]
import argparse
import os

import numpy as np
from PIL import Image, ImageDraw

CLASSES = ["disc", "square", "bar"]
COLORS = [(220, 40, 40), (40, 200, 60), (50, 70, 230)]


def make(root, per_class=24, seed=0, size=(64, 48)):
    rng = np.random.default_rng(seed)
    for c, name in enumerate(CLASSES):
        os.makedirs(os.path.join(root, name), exist_ok=True)
        for i in range(per_class):
            w, h = size[0] + int(rng.integers(-8, 9)), size[1] + int(rng.integers(-6, 7))
            noise = rng.integers(60, 160, (h, w, 3)).astype(np.uint8)
            img = Image.fromarray(noise)
            draw = ImageDraw.Draw(img)
            s = int(rng.integers(12, 20))
            x, y = int(rng.integers(0, w - s)), int(rng.integers(0, h - s))
            if c == 0:
                draw.ellipse([x, y, x + s, y + s], fill=COLORS[c])
            elif c == 1:
                draw.rectangle([x, y, x + s, y + s], fill=COLORS[c])
            else:
                draw.rectangle([0, y, w, y + s // 3], fill=COLORS[c])
            img.save(os.path.join(root, name, f"{i:03d}.jpg"), quality=92)
    return root


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("dir")
    parser.add_argument("--per-class", type=int, default=24)
    parser.add_argument("--seed", type=int, default=0)
    a = parser.parse_args()
    make(a.dir, a.per_class, a.seed)
    print(f"wrote {a.per_class * len(CLASSES)} images in {len(CLASSES)} classes to {a.dir}")
