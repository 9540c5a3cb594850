#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
# The Python pipeline against the C++ side: the same classification pipeline (readers.file ->
# decoders.image -> resize [-> crop_mirror_normalize]) over the same folder of JPEGs, through
# kiln.pipeline and through `kiln pipeline bench` (or, in builds without that subcommand, the
# executor driven from C++), run alternately; images/s (median of warm epochs) of each and their
# ratio. Prints a table and writes JSON.
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


def warm_median(rates):
    """The median images/s of the warm epochs (the first warms the page cache), as
    `kiln pipeline bench` reports it."""
    warm = sorted(rates[1:] if len(rates) > 1 else rates)
    return warm[len(warm) // 2]


def run_python(folder, a):
    import kiln.pipeline.fn as fn
    from kiln.pipeline import Pipeline

    pipe = Pipeline(batch_size=a.batch_size, num_threads=a.threads, seed=1,
                    prefetch_queue_depth=2)
    with pipe:
        jpegs, labels = fn.readers.file(file_root=folder)
        images = fn.resize(fn.decoders.image(jpegs), resize_x=224, resize_y=224)
        if a.normalize:
            images = fn.crop_mirror_normalize(images, crop=[224, 224], mean=[128.0] * 3,
                                              std=[64.0] * 3, mirror=fn.random.coin_flip())
        pipe.set_outputs(images, labels)
    pipe.build()
    rates = []
    for epoch in range(a.epochs):
        if epoch:
            pipe.reset()
        n = 0
        start = time.perf_counter()
        while True:
            try:
                images, labels = pipe.run()
            except StopIteration:
                break
            images.as_array()  # what a training loop takes
            n += len(images) - pipe.get_last_batch_padded_size()
        rates.append(n / (time.perf_counter() - start))
    return warm_median(rates)


def handover_us(folder, a, repeats=10):
    """What Python adds per batch: the time run() takes to hand over a batch that is already
    prefetched (C++ dequeue + Python objects + as_array()), median over fresh pipelines."""
    import kiln.pipeline.fn as fn
    from kiln.pipeline import Pipeline

    times = []
    for _ in range(repeats):
        pipe = Pipeline(batch_size=a.batch_size, num_threads=a.threads, seed=1,
                        prefetch_queue_depth=2)
        with pipe:
            jpegs, labels = fn.readers.file(file_root=folder)
            pipe.set_outputs(fn.resize(fn.decoders.image(jpegs), resize_x=224, resize_y=224),
                             labels)
        pipe.build()
        while len(pipe.timing_info()) == 0 or pipe.timing_info()[-1]["calls"] < 2:
            time.sleep(0.05)  # until two batches are assembled
        time.sleep(0.2)
        start = time.perf_counter()
        images, labels = pipe.run()
        images.as_array()
        labels.as_array()
        times.append((time.perf_counter() - start) * 1e6)
    return statistics.median(times)


def pipeline_json(a):
    """The same pipeline in kiln's JSON form, for `kiln pipeline bench`."""
    ops = [{"op": "readers.file", "args": {}},
           {"op": "decoders.image", "args": {}},
           {"op": "resize", "args": {"resize_x": 224, "resize_y": 224}}]
    if a.normalize:
        ops += [{"op": "random.coin_flip", "outputs": ["mirror"]},
                {"op": "crop_mirror_normalize", "arg_inputs": {"mirror": "mirror"},
                 "args": {"crop": [224, 224], "mean": [128.0] * 3, "std": [64.0] * 3}}]
    return {"batch_size": a.batch_size, "prefetch_queue_depth": 2, "seed": 1,
            "operators": ops, "outputs": ["images", "label"]}


def run_cpp(folder, a, scratch):
    if a.cli:
        spec = os.path.join(scratch, "pipeline.json")
        with open(spec, "w") as f:
            json.dump(pipeline_json(a), f)
        out = os.path.join(scratch, "cli.json")
        subprocess.run([a.cli, "pipeline", "bench", spec, "--images", folder, "--batch",
                        str(a.batch_size), "--threads", str(a.threads), "--epochs", str(a.epochs),
                        "--json", out], check=True, capture_output=True, text=True)
        with open(out) as f:
            return json.load(f)["images_per_s"]
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
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--normalize", action="store_true",
                   help="add crop_mirror_normalize with a random mirror")
    p.add_argument("--json", default="bench-python-pipeline.json")
    a = p.parse_args()
    a.cpp = os.path.join(a.build, "python", "kiln_cpp_pipeline")
    # The C++ side: the `kiln pipeline bench` CLI where this build has it, else the executor
    # driven straight from C++ (kiln_cpp_pipeline).
    cli = os.path.join(a.build, "tools", "kiln")
    a.cli = cli if subprocess.run([cli, "pipeline", "ops"], capture_output=True).returncode == 0 \
        else None
    sys.path.insert(0, os.path.join(a.build, "python"))
    with tempfile.TemporaryDirectory() as scratch:
        folder = os.path.join(scratch, "images")
        make_images(folder, a.images)
        py, cpp = [], []
        for _ in range(a.repeats):
            cpp.append(run_cpp(folder, a, scratch))
            py.append(run_python(folder, a))
        handover = handover_us(folder, a)
    py_med, cpp_med = statistics.median(py), statistics.median(cpp)
    ratio = py_med / cpp_med
    print(f"{'side':<8}{'images/s (median)':>20}{'runs':>40}")
    print(f"C++ side: {a.cli + ' pipeline bench' if a.cli else a.cpp}")
    print(f"{'C++':<8}{cpp_med:>20.1f}   {', '.join(f'{v:.1f}' for v in cpp)}")
    print(f"{'Python':<8}{py_med:>20.1f}   {', '.join(f'{v:.1f}' for v in py)}")
    print(f"Python / C++ = {ratio:.3f}")
    print(f"Python's handover of a prefetched batch of {a.batch_size}: {handover:.0f} us "
          f"({handover * 1e-6 * cpp_med / a.batch_size:.3%} of a batch's time at the C++ rate)")
    commit = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    record = {"benchmark": "python_pipeline", "commit": commit, "cpp_side": a.cli or a.cpp,
              "device": {"cpu": platform.processor() or platform.machine(),
                         "cores": os.cpu_count()},
              "options": {k: v for k, v in vars(a).items() if k not in ("json",)},
              "images_per_second": {"cpp": cpp, "python": py},
              "median": {"cpp": cpp_med, "python": py_med}, "ratio_python_to_cpp": ratio,
              "python_handover_us_per_batch": handover,
              "load_average": os.getloadavg()}
    with open(a.json, "w") as f:
        json.dump(record, f, indent=2)
    print(f"wrote {a.json}")


if __name__ == "__main__":
    main()
