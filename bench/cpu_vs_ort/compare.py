# SPDX-License-Identifier: Apache-2.0
# Runs kiln (`kiln perf --json --turns`) and ONNX Runtime (ort_bench.js --turns 1) on the same
# ONNX files, same thread count, both processes alive, turn by turn; prints a table, writes JSON.
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

HERE = os.path.dirname(os.path.abspath(__file__))


class Turns:
    """A runtime's benchmark process timing runs in turns (a count per line on its stdin, a line
    of JSON with their times back); its stderr goes to a file, so that nothing blocks on it."""

    def __init__(self, cmd, env):
        self.err = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.err, text=True, env=env)
        self.error = None

    def turn(self, runs):
        """The times and CPU time per run of `runs` runs, or None (then self.error says why)."""
        if self.error:
            return None
        try:
            self.proc.stdin.write(f"{runs}\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        except BrokenPipeError:
            line = ""
        if not line.startswith("{"):
            self.proc.wait()
            self.err.seek(0)
            last = (self.err.read().strip() or line.strip() or "it exited").splitlines()[-1:]
            self.error = " ".join(last)
            return None
        return json.loads(line)

    def finish(self):
        """The final report (peak RSS, ...) once the input ends, or None."""
        if self.error:
            return None
        out, _ = self.proc.communicate()
        for line in reversed(out.splitlines()):
            if line.startswith("{"):
                return json.loads(line)
        self.error = "no JSON line at the end"
        return None


def git_commit():
    try:
        return subprocess.run(["git", "-C", HERE, "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True).stdout.strip()
    except OSError:
        return "unknown"


def main():
    p = argparse.ArgumentParser(description="kiln vs ONNX Runtime on the CPU")
    p.add_argument("--kiln", required=True, help="the kiln binary")
    p.add_argument("--ort-dir", required=True, help="directory with node_modules/onnxruntime-node")
    p.add_argument("--models-dir", required=True)
    p.add_argument("--models", default="resnet50,mobilenet_v2,squeezenet1_1,efficientnet_b0,"
                   "densenet121,bert_base_seq128")
    p.add_argument("--batches", default="1,16")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=10,
                   help="turns per runtime: both processes stay up and take turns, kiln, ORT, "
                   "kiln, ..., so that a machine whose speed drifts slows both alike")
    p.add_argument("--iterations", type=int, default=0,
                   help="timed runs per turn (0: 10 at batch 1, 3 above)")
    p.add_argument("--pause", type=float, default=0.1,
                   help="seconds between turns, in which the last runtime's threads stop "
                   "spinning (libgomp's and ORT's spin-wait before they sleep)")
    p.add_argument("--ort-spinning", type=int, default=1, choices=(0, 1),
                   help="ORT's session.intra_op.allow_spinning (1, its default: threads spin "
                   "between ops, and kiln runs with its default OpenMP wait policy too; 0: they "
                   "block, and kiln runs with OMP_WAIT_POLICY=PASSIVE)")
    p.add_argument("--json", default="cpu_vs_ort.json", help="where to write the figures")
    p.add_argument("--realtime", action="store_true",
                   help="run both runtimes at real-time priority (SCHED_FIFO 10; needs root or "
                   "CAP_SYS_NICE): on a machine busy with other work they are not preempted by "
                   "it, which comes close to a quiet machine (the other work waits meanwhile)")
    args = p.parse_args()
    if args.realtime:
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))  # children inherit it
        except PermissionError:
            sys.exit("cpu_vs_ort: --realtime needs root or CAP_SYS_NICE (SCHED_FIFO was refused)")

    # Each runtime waits between ops as it does by default (ORT's threads spin, GNU OpenMP's spin
    # a few ms, then sleep), or, with --ort-spinning 0, both block. OMP_WAIT_POLICY overrides.
    env = dict(os.environ)
    if args.ort_spinning == 0:
        env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    rows = []
    for model in args.models.split(","):
        path = os.path.join(args.models_dir, model + ".onnx")
        for batch in (int(b) for b in args.batches.split(",")):
            iters = args.iterations or (10 if batch == 1 else 3)
            common = ["--batch", str(batch), "--threads", str(args.threads)]
            cmds = {
                "kiln": [args.kiln, "perf", path, "--target", "cpu", "--json", "--turns",
                         "--profile-runs", "0"] + common,
                "ort": ["node", os.path.join(HERE, "ort_bench.js"), args.ort_dir, path,
                        "--warmup", "2", "--spinning", str(args.ort_spinning), "--turns", "1"] +
                       common,
            }
            times = {"kiln": [], "ort": []}
            cpu = {"kiln": [], "ort": []}
            rss = {"kiln": 0, "ort": 0}
            pairs = []
            errors = {}
            # One at a time up: each warms up and answers an untimed first turn before the next
            # starts, so that no start-up overlaps a timed run.
            procs = {}
            for name in ("kiln", "ort"):
                procs[name] = Turns(cmds[name], env)
                procs[name].turn(1)
            for _ in range(args.rounds):
                medians = {}
                for name in ("kiln", "ort"):
                    time.sleep(args.pause)
                    result = procs[name].turn(iters)
                    if result is None:
                        continue
                    times[name] += result["turn_times_ms"]
                    cpu[name].append(result["cpu_ms_per_run"])
                    medians[name] = statistics.median(result["turn_times_ms"])
                if len(medians) == 2:
                    pairs.append(medians["kiln"] / medians["ort"])
            for name in ("kiln", "ort"):
                final = procs[name].finish()
                if final is not None:
                    rss[name] = final["peak_rss_bytes"]
                if procs[name].error:
                    errors[name] = [procs[name].error]
            row = {"model": model, "batch": batch, "threads": args.threads}
            for name in ("kiln", "ort"):
                row[name + "_median_ms"] = statistics.median(times[name]) if times[name] else None
                row[name + "_peak_rss_mb"] = rss[name] / 2**20 if times[name] else None
                # CPU time per run (median over rounds): robust to other load when both block.
                row[name + "_cpu_ms"] = statistics.median(cpu[name]) if cpu[name] else None
                if name in errors:
                    row[name + "_error"] = " ".join(errors[name])
            if row["kiln_median_ms"] and row["ort_median_ms"]:
                row["ratio"] = row["kiln_median_ms"] / row["ort_median_ms"]
                row["rss_ratio"] = row["kiln_peak_rss_mb"] / row["ort_peak_rss_mb"]
                row["cpu_ratio"] = row["kiln_cpu_ms"] / row["ort_cpu_ms"]
                # The median over turns of kiln's median in a turn over ORT's in the next.
                row["pair_ratio"] = statistics.median(pairs) if pairs else None
            rows.append(row)
            print_row(row, header=len(rows) == 1)

    doc = {
        "benchmark": "cpu_vs_ort",
        "date": datetime.datetime.utcnow().isoformat() + "Z",
        "commit": git_commit(),
        "device": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "options": {"threads": args.threads, "turns": args.rounds, "iterations": args.iterations,
                    "pause_s": args.pause,
                    "ort_spinning": args.ort_spinning, "realtime": args.realtime,
                    "omp_wait_policy": env.get("OMP_WAIT_POLICY", "default")},
        "load_average": os.getloadavg(),
        "results": rows,
    }
    with open(args.json, "w") as f:
        json.dump(doc, f, indent=2)
    print(f"wrote {args.json}")
    failed = [r for r in rows if "kiln_error" in r or "ort_error" in r]
    return 1 if failed else 0


def fmt(v, spec):
    return format(v, spec) if v is not None else "-"


def print_row(row, header):
    if header:
        print(f"{'model':<18} {'batch':>5} {'kiln ms':>9} {'ort ms':>9} {'kiln/ort':>8} "
              f"{'per turn':>8} {'kiln MiB':>9} {'ort MiB':>8} {'rss ratio':>9} {'cpu ratio':>9}")
    print(f"{row['model']:<18} {row['batch']:>5} {fmt(row['kiln_median_ms'], '9.2f')} "
          f"{fmt(row['ort_median_ms'], '9.2f')} {fmt(row.get('ratio'), '8.2f')} "
          f"{fmt(row.get('pair_ratio'), '8.2f')} "
          f"{fmt(row['kiln_peak_rss_mb'], '9.0f')} {fmt(row['ort_peak_rss_mb'], '8.0f')} "
          f"{fmt(row.get('rss_ratio'), '9.2f')} {fmt(row.get('cpu_ratio'), '9.2f')}", flush=True)
    for name in ("kiln", "ort"):
        if name + "_error" in row:
            print(f"  {name} failed: {row[name + '_error']}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
