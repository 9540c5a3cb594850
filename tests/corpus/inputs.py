# SPDX-License-Identifier: Apache-2.0
"""Valid inputs for the corpus models, built from the manifest's input specs with fixed seeds.

An input spec: {"dtype", "shape", "fill", ...} where fill is one of
  value    every element `value`
  zeros    every element 0
  uniform  uniform in [low, high)
  normal   normal with `mean` and `std`
  audio    16 kHz audio-like samples: three tones (80 Hz to 3 kHz) and noise, peak `amplitude`
  image    a smooth picture: per channel a few low-frequency waves and a gradient, spread over
           [low, high]; `layout` NHWC or NCHW; `constant_channels` {"3": 1.0} fixes channels
"""
import zlib

import numpy as np


def seed_for(base, model_id, input_name):
    """A seed that depends on the manifest's seed, the model and the input only."""
    return (base * 1_000_003 + zlib.crc32(f"{model_id}/{input_name}".encode())) % (1 << 32)


def audio(rng, shape, amplitude, rate=16000):
    n = shape[-1]
    t = np.arange(n) / rate
    rows = []
    for _ in range(int(np.prod(shape[:-1], dtype=np.int64))):
        x = np.zeros(n)
        for _ in range(3):
            f = rng.uniform(80, 3000)
            x += rng.uniform(0.2, 1.0) * np.sin(2 * np.pi * f * t + rng.uniform(0, 2 * np.pi))
        x += 0.05 * rng.standard_normal(n)
        rows.append(amplitude * x / np.max(np.abs(x)))
    return np.stack(rows).reshape(shape)


def image(rng, shape, low, high, layout, constant_channels):
    if layout not in ("NHWC", "NCHW"):
        raise ValueError(f"image layout {layout!r}: expected NHWC or NCHW")
    n, h, w, c = shape if layout == "NHWC" else (shape[0], shape[2], shape[3], shape[1])
    yy, xx = np.meshgrid(np.linspace(0, 1, h), np.linspace(0, 1, w), indexing="ij")
    out = np.zeros((n, h, w, c))
    for b in range(n):
        for ch in range(c):
            p = rng.uniform(-1, 1) * xx + rng.uniform(-1, 1) * yy
            for _ in range(4):
                fx, fy = rng.uniform(0.5, 6, size=2)
                p += rng.uniform(0.2, 1) * np.sin(2 * np.pi * (fx * xx + fy * yy) +
                                                  rng.uniform(0, 2 * np.pi))
            p += 0.05 * rng.standard_normal((h, w))
            p = (p - p.min()) / (p.max() - p.min())
            out[b, :, :, ch] = low + (high - low) * p
        for ch, value in (constant_channels or {}).items():
            out[b, :, :, int(ch)] = value
    return out if layout == "NHWC" else out.transpose(0, 3, 1, 2)


def make_input(spec, seed):
    """The numpy array for one input spec."""
    rng = np.random.default_rng(seed)
    shape = tuple(spec["shape"])
    fill = spec["fill"]
    if fill == "value":
        x = np.full(shape, spec["value"])
    elif fill == "zeros":
        x = np.zeros(shape)
    elif fill == "uniform":
        x = rng.uniform(spec["low"], spec["high"], size=shape)
    elif fill == "normal":
        x = spec.get("mean", 0.0) + spec.get("std", 1.0) * rng.standard_normal(shape)
    elif fill == "audio":
        x = audio(rng, shape, spec["amplitude"])
    elif fill == "image":
        x = image(rng, shape, spec["low"], spec["high"], spec.get("layout", "NCHW"),
                  spec.get("constant_channels"))
    else:
        raise ValueError(f"unknown fill {fill!r}: expected value, zeros, uniform, normal, audio "
                         "or image")
    return np.asarray(x).astype(np.dtype(spec["dtype"]))


def make_inputs(model, base_seed):
    """{input name: array} for a manifest model."""
    return {name: make_input(spec, seed_for(base_seed, model["id"], name))
            for name, spec in model["inputs"].items()}
