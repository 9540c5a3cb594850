#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# A/B of kiln builds or settings (and ONNX Runtime) on one model: each variant runs in a fresh
# process, alternately, round after round; prints the median CPU time per run of each, and its
# ratio to the first. CPU time moves far less than latency when other work loads the machine.
#   bench/cpu_vs_ort/ab.py MODEL.onnx --batch 1 --rounds 6 --iterations 20 \
#       old=/tmp/kiln-old "blocked=KILN_CPU_CONV_LAYOUT=blocked16 build/ci/tools/kiln" ort=ort
# A variant is LABEL=[ENV=VALUE ...] KILN_BINARY [extra kiln perf options], or LABEL=ort (ORT from
# KILN_BENCH_CACHE, default build/cpu_vs_ort, as installed by bench/cpu_vs_ort/run).
import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def command(spec, args):
    common = ["--iterations", str(args.iterations)]
    common += ["--batch", str(args.batch)] if not args.input else []
    common += [w for f in args.input for w in ("--input", os.path.abspath(f) if "=" not in f
                                               else f.split("=", 1)[0] + "=" +
                                               os.path.abspath(f.split("=", 1)[1]))]
    if spec == "ort":
        cache = os.environ.get("KILN_BENCH_CACHE", os.path.join(HERE, "../../build/cpu_vs_ort"))
        return {}, ["node", os.path.join(HERE, "ort_bench.js"), os.path.join(cache, "ort"),
                    args.model, "--warmup", "2", "--spinning", "0", "--threads",
                    str(args.threads)] + common
    words = shlex.split(spec)
    env = dict(w.split("=", 1) for w in words if "=" in w and not w.startswith("-"))
    words = [w for w in words if not ("=" in w and not w.startswith("-"))]
    if not words:
        sys.exit(f"ab.py: variant '{spec}' names no kiln binary")
    return env, [words[0], "perf", args.model, "--target", "cpu", "--json", "--threads",
                 str(args.threads)] + common + words[1:]


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("model", help="the ONNX model (absolute path for ORT)")
    p.add_argument("variants", nargs="+", help="LABEL=SPEC, the first is the baseline")
    p.add_argument("--batch", type=int, default=1, help="the batch (without --input)")
    p.add_argument("--input", action="append", default=[],
                   help="NAME=FILE.npy, for kiln and ORT alike (a corpus model's inputs)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--iterations", type=int, default=20)
    args = p.parse_args()
    args.model = os.path.abspath(args.model)
    base_env = dict(os.environ, OMP_WAIT_POLICY=os.environ.get("OMP_WAIT_POLICY", "PASSIVE"))
    variants = [v.split("=", 1) for v in args.variants]
    cpu = {label: [] for label, _ in variants}
    latency = {label: [] for label, _ in variants}
    for _ in range(args.rounds):
        for label, spec in variants:
            env, cmd = command(spec, args)
            out = subprocess.run(cmd, capture_output=True, text=True, env=dict(base_env, **env))
            lines = [l for l in out.stdout.splitlines() if l.startswith("{")]
            if out.returncode != 0 or not lines:
                sys.exit(f"ab.py: {label} failed: {' '.join(cmd)}\n{out.stderr[-2000:]}")
            result = json.loads(lines[-1])
            cpu[label].append(result["cpu_ms_per_run"])
            latency[label].append(statistics.median(result["times_ms"]))
    base = statistics.median(cpu[variants[0][0]])
    print(f"{'variant':<12} {'cpu ms/run':>10} {'ratio':>6} {'latency ms':>10}  cpu ms of each round")
    for label, _ in variants:
        median = statistics.median(cpu[label])
        rounds = " ".join(f"{c:.2f}" for c in cpu[label])
        print(f"{label:<12} {median:10.3f} {median / base:6.3f} "
              f"{statistics.median(latency[label]):10.3f}  {rounds}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
