# SPDX-License-Identifier: Apache-2.0
# Runs kiln (`kiln perf --json --turns`) and ONNX Runtime (ort_bench.js --turns 1) on the same
# ONNX files and inputs, same thread count, both processes alive, turn by turn: the torchvision
# set and (--corpus) the real models of tests/corpus. Prints a table with where kiln's time goes
# per model, the geometric mean and the worst model per set and thread count; writes JSON.
import argparse
import datetime
import json
import math
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


def where_summary(kiln):
    """Where kiln's time goes, from its final report: what runs the steps (oneDNN primitives,
    reorders, kiln's own kernels, ref kernels, ...) with their share, and what is between the
    steps; or why no step ran (the interpreter ran the graph)."""
    if kiln is None:
        return None
    if kiln.get("interpreted"):
        return {"interpreted": kiln["interpreted"], "text": "interpreter: " + kiln["interpreted"]}
    steps = kiln.get("steps") or []
    if not steps:
        return None
    latency = kiln["median_ms"]
    step_ms = kiln.get("step_ms", sum(s["ms"] for s in steps))
    between = max(0.0, latency - step_ms)
    # Each kind of step's share of the steps' time (profiled runs, which wait after each step),
    # and the share of the latency outside the steps.
    parts = []
    for w in kiln.get("where", []):
        part = f"{w['runs_on']} {100 * w['ms'] / step_ms:.0f}%" if step_ms else w["runs_on"]
        if w["runs_on"] in ("ref", "node", "reorder") and w["kinds"]:
            part += " (" + ", ".join(w["kinds"].split(", ")[:3]) + ")"
        parts.append(part)
    text = f"{len(steps)} steps: " + ", ".join(parts)
    if latency:
        text += f"; between steps {100 * between / latency:.0f}% of the latency"
    return {"steps": len(steps), "step_ms": step_ms, "between_ms": between,
            "between_us_per_step": 1000 * between / len(steps),
            "where": kiln.get("where", []), "text": text}


def turn_runs(args, kiln_first, ort_first, batch):
    """Timed runs per turn: --iterations, else enough for about --turn-ms of the slower runtime
    (at least 3; tiny models run hundreds a turn, so that a turn is not one timer tick)."""
    if args.iterations:
        return args.iterations
    slowest = max(t for t in (kiln_first, ort_first, 0.001) if t is not None)
    return max(3, min(2000, int(args.turn_ms / slowest)))


def measure(case, threads, args, env):
    """One model at one thread count: kiln and ORT alive side by side, turn by turn."""
    name, path, batch, feeds, group = case
    common = ["--threads", str(threads)] + (["--batch", str(batch)] if batch else [])
    inputs = [w for f in feeds for w in ("--input", f)]
    cmds = {
        "kiln": [args.kiln, "perf", path, "--target", "cpu", "--json", "--turns",
                 "--profile-runs", str(args.profile_runs)] + common + inputs,
        "ort": ["node", os.path.join(HERE, "ort_bench.js"), args.ort_dir, path,
                "--warmup", "2", "--spinning", str(args.ort_spinning), "--turns", "1"] +
               common + inputs,
    }
    times = {"kiln": [], "ort": []}
    cpu = {"kiln": [], "ort": []}
    pairs = []
    errors = {}
    # One at a time up: each warms up and answers an untimed first turn before the next starts,
    # so that no start-up overlaps a timed run.
    procs = {}
    first = {}
    for side in ("kiln", "ort"):
        procs[side] = Turns(cmds[side], env)
        result = procs[side].turn(1)
        first[side] = result["turn_times_ms"][0] if result else None
    runs = turn_runs(args, first["kiln"], first["ort"], batch)
    for _ in range(args.rounds):
        medians = {}
        for side in ("kiln", "ort"):
            time.sleep(args.pause)
            result = procs[side].turn(runs)
            if result is None:
                continue
            times[side] += result["turn_times_ms"]
            cpu[side].append(result["cpu_ms_per_run"])
            medians[side] = statistics.median(result["turn_times_ms"])
        if len(medians) == 2:
            pairs.append(medians["kiln"] / medians["ort"])
    finals = {}
    for side in ("kiln", "ort"):
        finals[side] = procs[side].finish()
        if procs[side].error:
            errors[side] = procs[side].error
    row = {"model": name, "set": group, "batch": batch or 1, "threads": threads,
           "runs_per_turn": runs}
    for side in ("kiln", "ort"):
        final = finals[side]
        row[side + "_median_ms"] = statistics.median(times[side]) if times[side] else None
        row[side + "_peak_rss_mb"] = final["peak_rss_bytes"] / 2**20 if final else None
        # CPU time per run (median over rounds): robust to other load when both block.
        row[side + "_cpu_ms"] = statistics.median(cpu[side]) if cpu[side] else None
        if side in errors:
            row[side + "_error"] = errors[side]
    kiln, ort = finals["kiln"], finals["ort"]
    if kiln:
        # The first run as a user meets it: compile, then one inference.
        row["kiln_compile_ms"] = kiln.get("compile_ms", kiln.get("load_ms"))
        row["kiln_first_run_ms"] = kiln.get("first_run_ms")
        row["where"] = where_summary(kiln)
    if ort:
        row["ort_create_ms"] = ort.get("create_ms")
        row["ort_first_run_ms"] = ort.get("first_run_ms")
    if row["kiln_median_ms"] and row["ort_median_ms"]:
        row["ratio"] = row["kiln_median_ms"] / row["ort_median_ms"]
        if row["kiln_peak_rss_mb"] and row["ort_peak_rss_mb"]:
            row["rss_ratio"] = row["kiln_peak_rss_mb"] / row["ort_peak_rss_mb"]
        if row["kiln_cpu_ms"] and row["ort_cpu_ms"]:
            row["cpu_ratio"] = row["kiln_cpu_ms"] / row["ort_cpu_ms"]
        # The median over turns of kiln's median in a turn over ORT's in the next.
        row["pair_ratio"] = statistics.median(pairs) if pairs else None
    return row


def geomean(values):
    values = [v for v in values if v]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def summarize(rows):
    """Per set of models and thread count: the geometric mean of kiln/ORT and the worst model."""
    out = []
    for group in sorted({r["set"] for r in rows}):
        for threads in sorted({r["threads"] for r in rows}):
            picked = [r for r in rows
                      if r["set"] == group and r["threads"] == threads and r.get("ratio")]
            if not picked:
                continue
            worst = max(picked, key=lambda r: r["ratio"])
            out.append({"set": group, "threads": threads, "models": len(picked),
                        "geomean_ratio": geomean([r["ratio"] for r in picked]),
                        "geomean_cpu_ratio": geomean([r.get("cpu_ratio") for r in picked]),
                        "worst": f"{worst['model']} (batch {worst['batch']})",
                        "worst_ratio": worst["ratio"],
                        "at_most_1": sum(1 for r in picked if r["ratio"] <= 1.0)})
    return out


def main():
    p = argparse.ArgumentParser(description="kiln vs ONNX Runtime on the CPU")
    p.add_argument("--kiln", required=True, help="the kiln binary")
    p.add_argument("--ort-dir", required=True, help="directory with node_modules/onnxruntime-node")
    p.add_argument("--models-dir", default="", help="where the torchvision set's .onnx files are")
    p.add_argument("--models", default="resnet50,mobilenet_v2,squeezenet1_1,efficientnet_b0,"
                   "densenet121,bert_base_seq128",
                   help="the torchvision set (files MODEL.onnx in --models-dir); '' for none")
    p.add_argument("--opset", type=int, default=17,
                   help="the opset the torchvision set was exported at (export_models.py --opset:"
                   " files MODEL_opN.onnx other than at 17)")
    p.add_argument("--batches", default="1,16", help="batches of the torchvision set")
    p.add_argument("--corpus", default="",
                   help="real models of tests/corpus too: 'default' (every kind once), 'all', "
                   "'ci', or ids; each at the batch and with the inputs of its manifest")
    p.add_argument("--corpus-cache", default=None,
                   help="the corpus cache (default: tests/corpus/setup.py's)")
    p.add_argument("--threads", default="2", help="thread counts, e.g. 1,2")
    p.add_argument("--rounds", type=int, default=10,
                   help="turns per runtime: both processes stay up and take turns, kiln, ORT, "
                   "kiln, ..., so that a machine whose speed drifts slows both alike")
    p.add_argument("--iterations", type=int, default=0,
                   help="timed runs per turn (0: about --turn-ms of the slower runtime, at least "
                   "3)")
    p.add_argument("--turn-ms", type=float, default=60.0,
                   help="the time a turn takes without --iterations")
    p.add_argument("--profile-runs", type=int, default=10,
                   help="kiln's runs timed step by step at the end, for where its time goes")
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
    cases = []
    for model in (m for m in args.models.split(",") if m):
        if not args.models_dir:
            sys.exit("cpu_vs_ort: --models names torchvision models; give --models-dir too")
        suffix = "" if args.opset == 17 else f"_op{args.opset}"
        path = os.path.join(args.models_dir, model + suffix + ".onnx")
        for batch in (int(b) for b in args.batches.split(",")):
            cases.append((model + suffix, path, batch, [], "torchvision"))
    if args.corpus:
        import corpus  # numpy and tests/corpus, only when asked for
        cache = args.corpus_cache or corpus.default_cache()
        for name, path, feeds in corpus.cases(args.corpus, cache):
            cases.append((name, path, 0, feeds, "corpus"))
    thread_counts = [int(t) for t in args.threads.split(",")]
    load_before = os.getloadavg()
    rows = []
    for case in cases:
        for threads in thread_counts:
            row = measure(case, threads, args, env)
            rows.append(row)
            print_row(row, header=len(rows) == 1)
    summary = summarize(rows)
    print_summary(summary)

    doc = {
        "benchmark": "cpu_vs_ort",
        "date": datetime.datetime.utcnow().isoformat() + "Z",
        "commit": git_commit(),
        "device": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "options": {"threads": thread_counts, "turns": args.rounds,
                    "iterations": args.iterations, "turn_ms": args.turn_ms,
                    "pause_s": args.pause, "corpus": args.corpus,
                    "ort_spinning": args.ort_spinning, "realtime": args.realtime,
                    "omp_wait_policy": env.get("OMP_WAIT_POLICY", "default")},
        # The machine's load before and after (other work slows both runtimes alike, turn by turn).
        "load_average": {"before": load_before, "after": os.getloadavg()},
        "summary": summary,
        "results": rows,
    }
    with open(args.json, "w") as f:
        json.dump(doc, f, indent=2)
    print(f"load average before {load_before[0]:.2f}, after {os.getloadavg()[0]:.2f}; "
          f"wrote {args.json}")
    failed = [r for r in rows if "kiln_error" in r or "ort_error" in r]
    return 1 if failed else 0


def fmt(v, spec):
    return format(v, spec) if v is not None else "-"


def print_row(row, header):
    if header:
        print(f"{'model':<26} {'batch':>5} {'thr':>3} {'kiln ms':>9} {'ort ms':>9} "
              f"{'kiln/ort':>8} {'per turn':>8} {'cpu ratio':>9} {'kiln MiB':>8} "
              f"{'ort MiB':>7} {'first ms':>9}  where kiln's time goes")
    first = None
    if row.get("kiln_compile_ms") is not None and row.get("kiln_first_run_ms") is not None:
        first = row["kiln_compile_ms"] + row["kiln_first_run_ms"]
    where = (row.get("where") or {}).get("text", "")
    print(f"{row['model']:<26} {row['batch']:>5} {row['threads']:>3} "
          f"{fmt(row['kiln_median_ms'], '9.3f')} {fmt(row['ort_median_ms'], '9.3f')} "
          f"{fmt(row.get('ratio'), '8.2f')} {fmt(row.get('pair_ratio'), '8.2f')} "
          f"{fmt(row.get('cpu_ratio'), '9.2f')} {fmt(row['kiln_peak_rss_mb'], '8.0f')} "
          f"{fmt(row['ort_peak_rss_mb'], '7.0f')} {fmt(first, '9.1f')}  {where}", flush=True)
    for name in ("kiln", "ort"):
        if name + "_error" in row:
            print(f"  {name} failed: {row[name + '_error']}", flush=True)


def print_summary(summary):
    print()
    for s in summary:
        print(f"{s['set']}, {s['threads']} thread{'s' if s['threads'] > 1 else ''}: "
              f"{s['models']} runs, kiln/ORT geometric mean {fmt(s['geomean_ratio'], '.3f')} "
              f"(CPU time {fmt(s['geomean_cpu_ratio'], '.3f')}), {s['at_most_1']} at most 1.0, "
              f"worst {s['worst']} {s['worst_ratio']:.2f}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
