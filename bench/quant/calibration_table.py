#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
# Accuracy of kiln's post-training quantization on trained models with real inputs, by
# `kiln verify --json`, for every calibration method (and fp16/bf16):
#   digits  the digit classifier examples/repository/train_digits.py trains, calibrated on 128 of
#           its training digits, compared on the 450 held-out test digits;
#   shapes  the CIFAR-style ResNet bench/quant/shapes_resnet.py trains on rendered 32x32 images
#           (trained on first use, ~3 min), calibrated on 256 images, compared on 1,000 held out.
# Prints a Markdown table per model (docs/quantization.md holds them) and writes JSON.
#   bench/quant/calibration_table.py [--kiln build/ci/tools/kiln] [--target cpu]
#                                    [--dataset digits|shapes|all]
# On a machine without the digits (the GPU machine; bench/quant/gpu/pack.sh does this): write the
# folders here with --data-only, then run there with --reuse-data --target cuda.
import argparse
import json
import os
import subprocess
import sys

import numpy as np

import bench_json
import shapes_resnet
from bench_json import ROOT

sys.path.insert(0, os.path.join(ROOT, "examples", "repository"))
import digits_data  # noqa: E402

CONFIGS = [
    ("fp16", ["--fp16"]),
    ("bf16", ["--bf16"]),
    ("int8 max", ["--int8", "--calibration-method", "max"]),
    ("int8 percentile 99.99", ["--int8", "--calibration-method", "percentile",
                               "--percentile", "99.99"]),
    ("int8 percentile 99.9", ["--int8", "--calibration-method", "percentile",
                              "--percentile", "99.9"]),
    ("int8 entropy", ["--int8", "--calibration-method", "entropy"]),
]


def to_input(x):
    """The model's input: [n, 1, 8, 8] float32 in [0, 1] (grey level / 16), as in training."""
    return (x[:, None, :, :] / 16.0).astype(np.float32)


def write_data(folder, calibration_count, batch):
    """Calibration batches from the training digits; the test digits with labels.txt."""
    (x_train, _), (x_test, y_test) = digits_data.train_test_split()
    cal = os.path.join(folder, "calibration")
    test = os.path.join(folder, "test")
    for d in (cal, test):
        os.makedirs(d, exist_ok=True)
        for f in os.listdir(d):
            os.remove(os.path.join(d, f))
    rng = np.random.RandomState(1)
    chosen = rng.permutation(len(x_train))[:calibration_count]
    for i in range(0, calibration_count, batch):
        np.save(os.path.join(cal, f"cal_{i // batch:03d}.npy"), to_input(x_train[chosen[i:i + batch]]))
    with open(os.path.join(test, "labels.txt"), "w") as f:
        f.write("# file labels (one per row): held-out digits of scikit-learn's load_digits\n")
        for i in range(0, len(x_test), batch):
            name = f"test_{i // batch:03d}.npy"
            np.save(os.path.join(test, name), to_input(x_test[i:i + batch]))
            f.write(name + " " + " ".join(str(int(v)) for v in y_test[i:i + batch]) + "\n")
    return cal, test, len(x_test)


def table(args, title, model, cal, test, count, calibration_count):
    """Runs every configuration on one model; prints its table, returns its rows."""
    rows = []
    for name, flags in CONFIGS:
        cmd = [args.kiln, "verify", model, "--target", args.target, *flags,
               "--inputs", test, "--labels", os.path.join(test, "labels.txt"), "--json"]
        if "--int8" in flags:
            cmd += ["--calibration", cal]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            # One configuration the target lacks does not stop the others.
            print(f"calibration_table: {' '.join(cmd)} failed:\n{proc.stderr}", file=sys.stderr)
            continue
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        out = result["outputs"][0]
        rows.append({"config": name, "command": " ".join(cmd), **out})
    print(f"{title}, {count} held-out inputs, {calibration_count} calibration inputs, "
          f"target {args.target}\n")
    print("| precision | cosine | max abs err | top-1 agreement | fp32 accuracy | accuracy | drop |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        drop = r["accuracy_fp32"] - r["accuracy_quantized"]
        print(f"| {r['config']} | {r['cosine']:.6f} | {r['max_abs_err']:.4f} | "
              f"{r['top1_agreement']:.2f}% | {r['accuracy_fp32']:.2f}% | "
              f"{r['accuracy_quantized']:.2f}% | {drop:+.2f} pt |")
    print()
    return rows


def main():
    p = argparse.ArgumentParser(description="kiln quantization accuracy on trained models")
    p.add_argument("--kiln", default=bench_json.default_kiln(), help="the kiln binary")
    p.add_argument("--model", default=os.path.join(ROOT, "examples", "repository", "digits", "1",
                                                   "model.onnx"))
    p.add_argument("--target", default="cpu")
    p.add_argument("--calibration", type=int, default=128, help="calibration digits")
    p.add_argument("--work", default=os.path.join(ROOT, "build", "quant_digits"))
    p.add_argument("--json", default=None, help="where to write the figures (default: in --work)")
    p.add_argument("--data-only", action="store_true",
                   help="write the calibration and test folders into --work and stop")
    p.add_argument("--reuse-data", action="store_true",
                   help="use the folders an earlier --data-only wrote into --work")
    p.add_argument("--dataset", choices=["digits", "shapes", "all"], default="digits",
                   help="which trained model (all: both)")
    p.add_argument("--shapes-work", default=os.path.join(ROOT, "build", "quant_shapes"),
                   help="where shapes_resnet.py keeps its model and folders")
    args = p.parse_args()
    if args.dataset == "shapes":
        return shapes(args, [])
    
    if args.reuse_data:
        cal, test = os.path.join(args.work, "calibration"), os.path.join(args.work, "test")
        with open(os.path.join(test, "labels.txt")) as f:
            count = sum(len(line.split()) - 1 for line in f if not line.startswith("#"))
    else:
        cal, test, count = write_data(args.work, args.calibration, 16)
    if args.data_only:
        print(f"wrote {cal} and {test} ({count} test digits)")
        return
    if args.kiln is None:
        sys.exit("calibration_table: no kiln binary; build one or pass --kiln")
    rows = table(args, "digit classifier", args.model, cal, test, count, args.calibration)
    bench_json.write_record(args.json or os.path.join(args.work, "calibration_table.json"),
                            model=args.model, target=args.target, test_digits=count,
                            calibration_digits=args.calibration, rows=rows)
    if args.dataset == "all":
        shapes(args, rows)


def shapes(args, digit_rows):
    """The shapes ResNet's table (training it first when its work folder has no model)."""
    if args.kiln is None:
        sys.exit("calibration_table: no kiln binary; build one or pass --kiln")
    model, cal, test, count = shapes_resnet.prepare(args.shapes_work)
    rows = table(args, "CIFAR-style ResNet on rendered shapes", model, cal, test, count, 256)
    bench_json.write_record(os.path.join(args.shapes_work, "calibration_table.json"),
                            model=model, target=args.target, test_images=count,
                            calibration_images=256, rows=rows)


if __name__ == "__main__":
    main()
