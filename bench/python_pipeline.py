#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
# The Python pipeline against the C++ executor it drives: the same classification pipeline
# (readers.file -> decoders.image -> resize [-> crop_mirror_normalize]) over the same folder of
# JPEGs, run alternately, images/s of each and their ratio. Prints a table and writes JSON.
# Usage: /usr/bin/python3 bench/python_pipeline.py [--build build/release] [--images 512]
#        [--threads 2] [--batch-size 32] [--repeats 5] [--json bench-python-pipeline.json]
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
from PIL import Image

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(here)


def make_images(folder, count, seed=0):
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:375, 0:500].astype(np.float32)
    for i in range(count):
        cls = os.path.join(folder, f"class_{i % 4}")
        os.makedirs(cls, exist_ok=True)
        chans = [127 + 120 * np.sin(rng.uniform(0.01, 0.1) * x + rng.uniform(0.01, 0.1) * y +
                                    rng.uniform(0, 6)) for _ in range(3)]
        noise = rng.normal(0, 12, (375, 500, 3))
        img = np.clip(np.stack(chans, -1) + noise, 0, 255).astype(np.uint8)
        Image.fromarray(img).save(os.path.join(cls, f"{i:05d}.jpg"), quality=90)


def run_python(folder, a):
    import kiln.pipeline.fn as fn
    from kiln.pipeline import Pipeline

    pipe = Pipeline(batch_size=a.batch_size, num_threads=a.threads, seed=1)
    with pipe:
        jpegs, labels = fn.readers.file(file_root=folder)
        images = fn.resize(fn.decoders.image(jpegs), resize_x=224, resize_y=224)
        if a.normalize:
            images = fn.crop_mirror_normalize(images, crop=[224, 224], mean=[128.0] * 3,
                                              std=[64.0] * 3, mirror=fn.random.coin_flip())
        pipe.set_outputs(images, labels)
    pipe.build()
    n = 0
    start = time.perf_counter()
    for epoch in range(a.epochs):
        if epoch:
            pipe.reset()
        while True:
            try:
                images, labels = pipe.run()
            except StopIteration:
                break
            images.as_array()  # what a training loop takes
            n += len(images)
    return n / (time.perf_counter() - start)


def run_cpp(folder, a):
    cmd = [a.cpp, "--file-root", folder, "--batch-size", str(a.batch_size), "--threads",
           str(a.threads), "--resize", "224x224", "--seed", "1", "--epochs", str(a.epochs)]
    if a.normalize:
        cmd += ["--crop", "224"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)["images_per_second"]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default=os.path.join(root, "build", "release"))
    p.add_argument("--images", type=int, default=512)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--normalize", action="store_true",
                   help="add crop_mirror_normalize with a random mirror")
    p.add_argument("--json", default="bench-python-pipeline.json")
    a = p.parse_args()
    a.cpp = os.path.join(a.build, "python", "kiln_cpp_pipeline")
    sys.path.insert(0, os.path.join(a.build, "python"))
    with tempfile.TemporaryDirectory() as folder:
        make_images(folder, a.images)
        run_python(folder, a)  # warm the page cache and the allocator
        py, cpp = [], []
        for _ in range(a.repeats):
            cpp.append(run_cpp(folder, a))
            py.append(run_python(folder, a))
    py_med, cpp_med = statistics.median(py), statistics.median(cpp)
    ratio = py_med / cpp_med
    print(f"{'side':<8}{'images/s (median)':>20}{'runs':>40}")
    print(f"{'C++':<8}{cpp_med:>20.1f}   {', '.join(f'{v:.1f}' for v in cpp)}")
    print(f"{'Python':<8}{py_med:>20.1f}   {', '.join(f'{v:.1f}' for v in py)}")
    print(f"Python / C++ = {ratio:.3f}")
    commit = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    record = {"benchmark": "python_pipeline", "commit": commit,
              "device": {"cpu": platform.processor() or platform.machine(),
                         "cores": os.cpu_count()},
              "options": {k: v for k, v in vars(a).items() if k not in ("json",)},
              "images_per_second": {"cpp": cpp, "python": py},
              "median": {"cpp": cpp_med, "python": py_med}, "ratio_python_to_cpp": ratio}
    with open(a.json, "w") as f:
        json.dump(record, f, indent=2)
    print(f"wrote {a.json}")


if __name__ == "__main__":
    main()
