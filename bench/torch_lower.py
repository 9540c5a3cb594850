#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""kiln.torch.lower(model) against PyTorch eager on the same threads: median latency per batch,
ratio eager/kiln (> 1: kiln is faster), written as JSON.

    /usr/bin/python3 bench/torch_lower.py --models resnet50 --batches 1,16 --threads 2
"""
import argparse
import datetime
import json
import os
import statistics
import subprocess
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # both runtimes: no spinning on a shared box

import torch  # noqa: E402
import torchvision  # noqa: E402

import kiln.torch  # noqa: E402


def timed(fn, x, warmup, repeats):
    with torch.no_grad():
        for _ in range(warmup):
            fn(x)
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            fn(x)
            times.append((time.perf_counter() - start) * 1000)
    return times


def commit():
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="resnet50")
    parser.add_argument("--batches", default="1,16")
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds of each")
    parser.add_argument("--output", default="bench-torch-lower.json")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    rows = []
    for name in args.models.split(","):
        torch.manual_seed(0)
        model = getattr(torchvision.models, name)().eval()
        for batch in map(int, args.batches.split(",")):
            x = torch.randn(batch, 3, args.size, args.size)
            lowered = kiln.torch.lower(model, (x,), threads=args.threads)
            with torch.no_grad():
                error = ((lowered(x) - model(x)).abs().max() / model(x).abs().max()).item()
            repeats = max(2, args.repeats // batch) if batch > 4 else args.repeats
            kiln_ms, torch_ms = [], []
            for _ in range(args.rounds):  # alternate, so both see the same machine load
                torch_ms += timed(model, x, 1, repeats)
                kiln_ms += timed(lowered, x, 1, repeats)
            row = {"model": name, "batch": batch, "size": args.size,
                   "torch_eager_ms": statistics.median(torch_ms),
                   "kiln_lower_ms": statistics.median(kiln_ms),
                   "max_rel_error": error}
            row["speedup"] = row["torch_eager_ms"] / row["kiln_lower_ms"]
            rows.append(row)
            print(f"{name:14s} batch {batch:3d}: torch eager {row['torch_eager_ms']:9.2f} ms  "
                  f"kiln.torch.lower {row['kiln_lower_ms']:9.2f} ms  speedup "
                  f"{row['speedup']:.2f}x  (rel err {error:.1e})", flush=True)
    report = {"date": datetime.datetime.now().isoformat(timespec="seconds"), "commit": commit(),
              "torch": torch.__version__, "threads": args.threads,
              "load_average": os.getloadavg(), "results": rows}
    with open(args.output, "w") as f:
        json.dump(report, f, indent=2)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
