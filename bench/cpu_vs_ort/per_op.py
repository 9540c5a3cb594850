# SPDX-License-Identifier: Apache-2.0
# Where the time goes in kiln and in ONNX Runtime, op by op, on one model: alternates `kiln perf
# --profile-runs N --json` (each step's median) and ort_profile.js (each node's median kernel time
# under ORT's profiler, which adds its own cost to every node) for --rounds rounds, then prints
# both lists (medians over rounds, slowest first) and writes them as JSON. ORT's fused nodes are
# named by their last op (a Conv with its Relu is ".../relu/Relu_output_0_nchwc").
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def last_json(cmd):
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"per_op: {' '.join(cmd[:3])} failed: "
                 f"{(proc.stderr.strip() or proc.stdout.strip()).splitlines()[-1:]}")
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    sys.exit(f"per_op: no JSON line from {cmd[0]}")


def main():
    p = argparse.ArgumentParser(description="kiln's steps and ORT's nodes, timed alternately")
    p.add_argument("--kiln", required=True, help="the kiln binary")
    p.add_argument("--ort-dir", required=True, help="directory with node_modules/onnxruntime-node")
    p.add_argument("--model", required=True, help="the .onnx model")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--runs", type=int, default=30, help="profiled runs per round and runtime")
    p.add_argument("--top", type=int, default=40, help="rows of each list")
    p.add_argument("--json", default="per_op.json", help="where to write the medians")
    args = p.parse_args()
    kiln, ort = {}, {}
    kiln_sums, ort_sums = [], []
    for _ in range(args.rounds):
        k = last_json([args.kiln, "perf", args.model, "--target", "cpu", "--batch", str(args.batch),
                       "--threads", str(args.threads), "--iterations", "5", "--profile-runs",
                       str(args.runs), "--json"])
        for s in k["steps"]:
            kiln.setdefault((s["node"], s["kind"]), []).append(s["ms"])
        kiln_sums.append(sum(s["ms"] for s in k["steps"]))
        o = last_json(["node", os.path.join(HERE, "ort_profile.js"), args.ort_dir, args.model,
                       "--batch", str(args.batch), "--threads", str(args.threads), "--runs",
                       str(args.runs + 5), "--skip", "5"])
        for n in o["nodes"]:
            ort.setdefault((n["node"], n["op"]), []).append(n["ms"])
        ort_sums.append(sum(n["ms"] for n in o["nodes"]))
    rows = {name: sorted(((statistics.median(v), key) for key, v in d.items()), reverse=True)
            for name, d in (("kiln", kiln), ("ort", ort))}
    print(f"kiln steps add up to {statistics.median(kiln_sums):.3f} ms, ORT's nodes to "
          f"{statistics.median(ort_sums):.3f} ms (medians over {args.rounds} rounds)")
    for name in ("kiln", "ort"):
        print(f"\n{name}: slowest {min(args.top, len(rows[name]))} of {len(rows[name])}")
        for ms, (node, kind) in rows[name][:args.top]:
            print(f"{ms:9.3f}  {kind:<28} {node}")
    with open(args.json, "w") as f:
        json.dump({"model": args.model, "batch": args.batch, "threads": args.threads,
                   "rounds": args.rounds, "kiln_sum_ms": statistics.median(kiln_sums),
                   "ort_sum_ms": statistics.median(ort_sums),
                   **{name: [{"node": n, "kind": k, "ms": ms} for ms, (n, k) in rows[name]]
                      for name in rows}}, f, indent=1)
    print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
