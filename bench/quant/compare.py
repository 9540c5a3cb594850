# SPDX-License-Identifier: Apache-2.0
# On the CPU, same thread count, interleaved round by round: kiln fp32; kiln's own int8 flow (the
# fp32 model through `kiln compile --int8 --calibration`); the FX-quantized QDQ model on kiln and
# on ONNX Runtime; and ORT on the model quantized in ORT's own QDQ format (ort_qdq.py, ORT's
# quantize_static defaults). Plus int8-vs-fp32 agreement of kiln's outputs on the same inputs.
# Prints a table and writes JSON.
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "cpu_vs_ort"))
from compare import git_commit  # noqa: E402

SHAPES = {"resnet50": [3, 224, 224], "mobilenet_v2": [3, 224, 224], "bert_encoder": [128, 768]}


def run_json(cmd, env):
    """The last JSON line `cmd` prints, or None and the error's last line."""
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        return None, (proc.stderr.strip() or proc.stdout.strip()).splitlines()[-1:]
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line), None
    return None, ["no JSON line in the output"]


def own_int8(kiln, fp32, calibration, out, env):
    """kiln's own int8 flow: the fp32 model calibrated on `calibration` and compiled to `out`
    (a dynamic batch, so one artifact serves every batch). Returns the compile's seconds."""
    start = time.monotonic()
    subprocess.run([kiln, "compile", fp32, "--target", "cpu", "--int8", "--calibration",
                    calibration, "-o", out], check=True, capture_output=True, env=env)
    return time.monotonic() - start


def accuracy(kiln, fp32, int8, shape, batch, env):
    """Cosine similarity and argmax agreement of kiln's int8 outputs against its fp32 ones."""
    with tempfile.TemporaryDirectory() as tmp:
        x = np.random.default_rng(0).standard_normal([batch] + shape).astype(np.float32)
        np.save(os.path.join(tmp, "x.npy"), x)
        outs = []
        for i, model in enumerate((fp32, int8)):
            out_dir = os.path.join(tmp, str(i))
            subprocess.run([kiln, "run", model, "--target", "cpu", "--input",
                            "input=" + os.path.join(tmp, "x.npy"), "--output-dir", out_dir],
                           check=True, capture_output=True, env=env)
            outs.append(np.load(os.path.join(out_dir, "output.npy")).astype(np.float64))
    a, b = (o.reshape(batch, -1) for o in outs)
    cos = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    agree = (outs[0].argmax(-1) == outs[1].argmax(-1)).mean()
    return {"cosine_min": float(cos.min()), "cosine_mean": float(cos.mean()),
            "argmax_agreement": float(agree), "max_abs_error": float(np.abs(a - b).max()),
            "samples": batch}


def main():
    p = argparse.ArgumentParser(description="kiln fp32 vs kiln int8 vs ONNX Runtime int8")
    p.add_argument("--kiln", required=True)
    p.add_argument("--ort-dir", required=True, help="directory with node_modules/onnxruntime-node")
    p.add_argument("--models-dir", required=True)
    p.add_argument("--models", default="resnet50,mobilenet_v2,bert_encoder")
    p.add_argument("--batches", default="1,16")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--iterations", type=int, default=0,
                   help="timed runs per round (0: 10 at batch 1, 3 above)")
    p.add_argument("--accuracy-batch", type=int, default=8)
    p.add_argument("--json", default="quant.json")
    p.add_argument("--ort-spinning", type=int, default=1, choices=(0, 1),
                   help="ORT's session.intra_op.allow_spinning (1, its default) and with it "
                        "libgomp's spin-wait for kiln; 0: both block between steps")
    args = p.parse_args()

    # Both runtimes spin-wait between steps (their defaults), or both block: one blocking while
    # the other spins charges it a thread wake-up per step (77 steps of ResNet-50 int8 at batch
    # 1: 3.4 ms of 10.4 on a VM whose wake-ups take 23 us). OMP_WAIT_POLICY overrides.
    env = dict(os.environ)
    if args.ort_spinning == 0:
        env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    rows = []
    accuracies = {}
    compile_seconds = {}
    for model in args.models.split(","):
        fp32 = os.path.join(args.models_dir, model + "_fp32.onnx")
        int8 = os.path.join(args.models_dir, model + "_int8.onnx")
        ort_qdq = os.path.join(args.models_dir, model + "_ortqdq.onnx")
        calibration = os.path.join(args.models_dir, model + "_calibration")
        own = os.path.join(args.models_dir, model + "_own_int8.kiln")
        if os.path.isdir(calibration):
            compile_seconds[model] = own_int8(args.kiln, fp32, calibration, own, env)
        if args.accuracy_batch > 0:
            accuracies[model] = accuracy(args.kiln, fp32, int8, SHAPES[model],
                                         args.accuracy_batch, env)
            if os.path.exists(own):
                accuracies[model + " (own int8)"] = accuracy(args.kiln, fp32, own, SHAPES[model],
                                                             args.accuracy_batch, env)
        for batch in (int(b) for b in args.batches.split(",")):
            iters = args.iterations or (10 if batch == 1 else 3)
            common = ["--batch", str(batch), "--threads", str(args.threads), "--iterations",
                      str(iters)]
            ort = ["node", os.path.join(HERE, "..", "cpu_vs_ort", "ort_bench.js"), args.ort_dir]
            common_ort = common + ["--spinning", str(args.ort_spinning)]
            cmds = {
                "kiln_fp32": [args.kiln, "perf", fp32, "--target", "cpu", "--json"] + common,
                "kiln_int8": [args.kiln, "perf", int8, "--target", "cpu", "--json"] + common,
                "ort_int8": ort + [int8, "--warmup", "2"] + common_ort,
            }
            if os.path.exists(own):
                cmds["kiln_own_int8"] = [args.kiln, "perf", own, "--json"] + common
            if os.path.exists(ort_qdq):
                cmds["ort_ortqdq_int8"] = ort + [ort_qdq, "--warmup", "2"] + common_ort
            times = {k: [] for k in cmds}
            errors = {}
            for _ in range(args.rounds):
                for name, cmd in cmds.items():
                    if name in errors:
                        continue
                    result, err = run_json(cmd, env)
                    if result is None:
                        errors[name] = " ".join(err)
                        continue
                    times[name] += result["times_ms"]
            row = {"model": model, "batch": batch, "threads": args.threads}
            for name in cmds:
                row[name + "_median_ms"] = statistics.median(times[name]) if times[name] else None
                if name in errors:
                    row[name + "_error"] = errors[name]
            if row["kiln_int8_median_ms"]:
                for other in ("kiln_fp32", "ort_int8"):
                    if row[other + "_median_ms"]:
                        row["speedup_vs_" + other] = (row[other + "_median_ms"] /
                                                      row["kiln_int8_median_ms"])
            # kiln's own flow against fp32 and against ORT's own int8 (the issue's two ratios).
            if row.get("kiln_own_int8_median_ms"):
                for other in ("kiln_fp32", "ort_ortqdq_int8"):
                    if row.get(other + "_median_ms"):
                        row["own_speedup_vs_" + other] = (row[other + "_median_ms"] /
                                                          row["kiln_own_int8_median_ms"])
            rows.append(row)
            print_row(row, header=len(rows) == 1)
    for model, acc in accuracies.items():
        print(f"{model:<14} int8 vs fp32 over {acc['samples']} random inputs: cosine min "
              f"{acc['cosine_min']:.4f} mean {acc['cosine_mean']:.4f}, argmax agreement "
              f"{acc['argmax_agreement']:.3f}, max |error| {acc['max_abs_error']:.4f}")
    doc = {
        "benchmark": "quant",
        "date": datetime.datetime.utcnow().isoformat() + "Z",
        "commit": git_commit(),
        "device": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "options": {"threads": args.threads, "rounds": args.rounds, "iterations": args.iterations,
                    "omp_wait_policy": env.get("OMP_WAIT_POLICY", "default"),
                    "ort_spinning": args.ort_spinning},
        "load_average": os.getloadavg(),
        "results": rows,
        "accuracy": accuracies,
        "own_int8_compile_seconds": compile_seconds,
    }
    with open(args.json, "w") as f:
        json.dump(doc, f, indent=2)
    print(f"wrote {args.json}")
    return 1 if any(k.endswith("_error") for r in rows for k in r) else 0


def fmt(v, spec):
    return format(v, spec) if v is not None else "-"


def print_row(row, header):
    if header:
        print(f"{'model':<14} {'batch':>5} {'kiln fp32':>10} {'kiln FX':>8} {'ORT FX':>7} "
              f"{'FX x fp32':>9} {'FX x ORT':>8} {'kiln own':>9} {'ORT own':>8} "
              f"{'own x fp32':>10} {'own x ORT':>9}   (ms, medians)")
    print(f"{row['model']:<14} {row['batch']:>5} {fmt(row['kiln_fp32_median_ms'], '10.2f')} "
          f"{fmt(row['kiln_int8_median_ms'], '8.2f')} {fmt(row['ort_int8_median_ms'], '7.2f')} "
          f"{fmt(row.get('speedup_vs_kiln_fp32'), '9.2f')} "
          f"{fmt(row.get('speedup_vs_ort_int8'), '8.2f')} "
          f"{fmt(row.get('kiln_own_int8_median_ms'), '9.2f')} "
          f"{fmt(row.get('ort_ortqdq_int8_median_ms'), '8.2f')} "
          f"{fmt(row.get('own_speedup_vs_kiln_fp32'), '10.2f')} "
          f"{fmt(row.get('own_speedup_vs_ort_ortqdq_int8'), '9.2f')}", flush=True)
    for name in ("kiln_fp32", "kiln_int8", "ort_int8", "kiln_own_int8", "ort_ortqdq_int8"):
        if name + "_error" in row:
            print(f"  {name} failed: {row[name + '_error']}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
