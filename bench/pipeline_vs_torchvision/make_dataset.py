# SPDX-License-Identifier: Apache-2.0
"""Writes an ImageNet-like JPEG folder: natural-looking synthetic photos in class sub-folders.

Each image has a 1/f^2 power spectrum (the statistics of natural photos) with correlated colour
channels, a few smooth-edged objects and fine grain, at a random size of 375-800 px per side and
JPEG quality 75-95 with 4:2:0 chroma (what ImageNet's files mostly are). Deterministic per seed.
"""
import argparse
import os
import sys

import numpy as np
from PIL import Image


def pink_noise(rng, h, w, alpha):
    fy = np.fft.fftfreq(h)[:, None]
    fx = np.fft.rfftfreq(w)[None, :]
    f = np.sqrt(fx * fx + fy * fy)
    f[0, 0] = 1.0
    spectrum = (rng.standard_normal((h, w // 2 + 1)) + 1j * rng.standard_normal((h, w // 2 + 1)))
    field = np.fft.irfft2(spectrum / f ** alpha, s=(h, w))
    field -= field.mean()
    return field / (field.std() + 1e-9)


def make_image(rng, h, w):
    base = pink_noise(rng, h, w, 1.0)
    detail = pink_noise(rng, h, w, 0.6)
    palette = rng.uniform(40, 220, size=3)
    tint = rng.normal(0, 1, size=(3, 3)) * 0.35 + np.eye(3)
    img = np.empty((h, w, 3))
    for c in range(3):
        img[..., c] = palette[c] + 45 * (tint[c, 0] * base + 0.7 * tint[c, 1] * detail)
    yy, xx = np.mgrid[0:h, 0:w]
    for _ in range(rng.integers(2, 6)):  # objects: soft ellipses with their own colour and texture
        cy, cx = rng.uniform(0, h), rng.uniform(0, w)
        ry, rx = rng.uniform(0.08, 0.35) * h, rng.uniform(0.08, 0.35) * w
        d = ((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2
        mask = np.clip((1.2 - d) * 4, 0, 1)[..., None]
        color = rng.uniform(0, 255, size=3) + 30 * pink_noise(rng, h, w, 1.4)[..., None]
        img = img * (1 - mask) + color * mask
    img += rng.normal(0, 5, size=img.shape)  # sensor grain
    return np.clip(img, 0, 255).astype(np.uint8)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("out", help="folder to write (class sub-folders)")
    ap.add_argument("--images", type=int, default=500)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--seed", type=int, default=2024)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    for i in range(args.images):
        cls = os.path.join(args.out, f"class_{i % args.classes:02d}")
        os.makedirs(cls, exist_ok=True)
        h, w = (int(v) for v in rng.integers(375, 801, size=2))
        quality = int(rng.integers(75, 96))
        Image.fromarray(make_image(rng, h, w)).save(
            os.path.join(cls, f"img_{i:05d}.jpg"), quality=quality, subsampling=2)
        if (i + 1) % 100 == 0:
            print(f"  {i + 1}/{args.images} images", file=sys.stderr)


if __name__ == "__main__":
    main()
