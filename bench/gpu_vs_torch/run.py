# SPDX-License-Identifier: Apache-2.0
"""kiln's cuda target against PyTorch on the same GPU, in the same run, on the same models.

For each model (torchvision-style, random weights, seed 0) and batch: PyTorch eager (fp16 or bf16,
channels_last, cudnn.benchmark), torch.compile (default, and max-autotune when asked), and
`kiln perf --target cuda --json` on the model exported to ONNX (opset 17, TorchScript exporter,
dynamic batch). Prints a table with ratios and writes JSON.

  python3 bench/gpu_vs_torch/run.py --kiln ".devpack/run kiln"            # on the GPU machine
  python3 bench/gpu_vs_torch/run.py --kiln build/ci/tools/kiln --dry-run   # smoke test, CPU only

Times are medians of CUDA-event-timed runs after warm-up (PyTorch, input on the device) and of
`kiln perf`'s runs (`--device-io`: inputs and outputs in GPU memory too; `--kiln-host-io` times
kiln with host tensors copied in and out instead). GPU memory is
the device's used memory sampled by nvidia-smi while a runtime runs, less what was used before it
started: the process's CUDA context, libraries and tensors, counted the same way for both.
"""
import argparse
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import threading
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "cpu_vs_ort"))
import export_models  # noqa: E402  (the shared model definitions and ONNX export)


class SmokeCnn(torch.nn.Module):
    """A small residual CNN for the smoke test: conv, BN, ReLU, pooling, residual Add, Linear."""

    def __init__(self):
        super().__init__()
        self.stem = torch.nn.Sequential(
            torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU(),
            torch.nn.MaxPool2d(2))
        self.body = torch.nn.Sequential(
            torch.nn.Conv2d(16, 16, 3, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU(),
            torch.nn.Conv2d(16, 16, 3, padding=1), torch.nn.BatchNorm2d(16))
        self.head = torch.nn.Linear(16, 10)

    def forward(self, x):
        x = self.stem(x)
        x = torch.relu(x + self.body(x))
        return self.head(torch.flatten(torch.nn.functional.adaptive_avg_pool2d(x, 1), 1))


MODELS = dict(export_models.MODELS)
MODELS["smoke_cnn"] = (SmokeCnn, [3, 32, 32])
DEFAULT_MODELS = ["resnet50", "mobilenet_v2", "efficientnet_b0", "vit_b_16", "bert_base_seq128"]
DEFAULT_BATCHES = [1, 64, 256]
MAX_BATCH = {"bert_base_seq128": 64}  # the set: BERT at batch 1 and 64
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# ---- GPU memory ---------------------------------------------------------------------------------


def gpu_memory_used_mib(index):
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used",
                              "--format=csv,noheader,nounits", "-i", str(index)],
                             capture_output=True, text=True, timeout=20)
        return float(out.stdout.strip().splitlines()[0])
    except (OSError, ValueError, IndexError, subprocess.SubprocessError):
        return None


class MemorySampler:
    """The most device memory used while it runs (nvidia-smi every 50 ms), less a baseline."""

    def __init__(self, index, baseline_mib):
        self.index, self.baseline, self.peak = index, baseline_mib, None
        self.proc = None

    def __enter__(self):
        if self.baseline is None:
            return self
        self.proc = subprocess.Popen(["nvidia-smi", "--query-gpu=memory.used",
                                      "--format=csv,noheader,nounits", "-i", str(self.index),
                                      "-lms", "50"], stdout=subprocess.PIPE, text=True)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()
        return self

    def _read(self):
        for line in self.proc.stdout:
            try:
                v = float(line.strip())
            except ValueError:
                continue
            self.peak = v if self.peak is None else max(self.peak, v)

    def __exit__(self, *exc):
        if self.proc is not None:
            time.sleep(0.1)
            self.proc.terminate()
            self.proc.wait()
            self.thread.join(timeout=5)

    def bytes(self):
        if self.peak is None or self.baseline is None:
            return None
        return int(max(0.0, self.peak - self.baseline) * 2**20)


# ---- PyTorch ------------------------------------------------------------------------------------


def torch_model(name, precision, device):
    model, sample = export_models.make_model(name, MODELS)
    model = model.to(device=device, dtype=DTYPES[precision])
    image = len(sample) == 3
    if image and device == "cuda":
        model = model.to(memory_format=torch.channels_last)
    return model, sample, image


def torch_input(sample, batch, precision, device, image):
    gen = torch.Generator().manual_seed(1)
    x = torch.rand([batch] + sample, generator=gen).to(device=device, dtype=DTYPES[precision])
    if image and device == "cuda":
        x = x.contiguous(memory_format=torch.channels_last)
    return x


def time_runs(fn, x, device, warmup, iterations):
    """Median milliseconds of `iterations` calls after `warmup`; CUDA events on the GPU."""
    with torch.no_grad():
        for _ in range(warmup):
            fn(x)
        times = []
        if device == "cuda":
            torch.cuda.synchronize()
            for _ in range(iterations):
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                start.record()
                fn(x)
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end))
        else:
            for _ in range(iterations):
                t = time.perf_counter()
                fn(x)
                times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def run_torch(name, mode, batches, args, memory_baseline=None, on_row=None):
    """Times PyTorch `mode` (eager, default, max-autotune) on `name` at each batch: dict rows, each
    also handed to `on_row` as soon as it is measured."""
    device = args.device
    if device == "cuda":
        torch.backends.cudnn.benchmark = True
        tf32 = args.precision == "fp32" and args.tf32
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
    model, sample, image = torch_model(name, args.precision, device)
    rows = []
    for batch in batches:
        x = torch_input(sample, batch, args.precision, device, image)
        fn = model
        compile_s = None
        if mode != "eager":
            torch._dynamo.reset()
            fn = torch.compile(model, mode=mode, dynamic=False)
            t = time.perf_counter()
            with torch.no_grad():
                fn(x)
            if device == "cuda":
                torch.cuda.synchronize()
            compile_s = time.perf_counter() - t
        if device == "cuda":
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        with MemorySampler(args.gpu, memory_baseline) as sampler:
            ms = time_runs(fn, x, device, args.warmup, args.iterations)
        row = {"model": name, "batch": batch, "runtime": "torch", "mode": mode,
               "precision": args.precision, "median_ms": ms, "throughput_per_s": 1e3 * batch / ms,
               "compile_s": compile_s}
        if device == "cuda":
            row["torch_max_allocated_bytes"] = torch.cuda.max_memory_allocated()
            row["gpu_memory_bytes"] = sampler.bytes()
        rows.append(row)
        if on_row:
            on_row(row)
        log(f"  torch {mode:<12} {name} batch {batch}: {ms:.3f} ms")
        del x
    return rows


def run_torch_subprocess(name, mode, batches, args, timeout):
    """torch.compile in its own process, so a slow or failing compile stops at `timeout` seconds.
    The largest batch (the issue's throughput target) compiles first; the batches measured before
    a timeout keep their rows."""
    if timeout < 15:
        log(f"  torch {mode} {name}: skipped, the time budget is spent")
        return [{"model": name, "batch": b, "runtime": "torch", "mode": mode,
                 "precision": args.precision, "error": "no time left"} for b in batches]
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--models", name, "--modes", mode,
           "--batches", ",".join(map(str, sorted(batches, reverse=True))),
           "--precision", args.precision, "--device", args.device, "--gpu", str(args.gpu),
           "--warmup", str(args.warmup), "--iterations", str(args.iterations)] + (
               ["--tf32"] if args.tf32 else [])
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        stdout, why = out.stdout, f"exit {out.returncode}"
        sys.stderr.write(out.stderr[-4000:] if out.returncode else "")
    except subprocess.TimeoutExpired as e:
        log(f"  torch {mode} {name}: stopped after {timeout:.0f} s")
        stdout = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        why = f"timeout {timeout:.0f} s"
    rows = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    done = {r["batch"] for r in rows}
    for b in batches:
        if b not in done:
            rows.append({"model": name, "batch": b, "runtime": "torch", "mode": mode,
                         "precision": args.precision, "error": why})
    for r in rows:
        if "median_ms" in r:
            log(f"  torch {mode:<12} {name} batch {r['batch']}: {r['median_ms']:.3f} ms "
                f"(compile {r['compile_s']:.1f} s)")
    return rows


# ---- kiln ---------------------------------------------------------------------------------------


def kiln_flags(kiln, command):
    """The options `kiln COMMAND --help` lists."""
    out = subprocess.run(kiln + [command, "--help"], capture_output=True, text=True)
    return set(w.strip(",") for w in out.stdout.split() if w.startswith("--"))


def kiln_precision_flag(flags, precision):
    """The `kiln perf` flag for `precision`, or None when this kiln has none (then it runs fp32)."""
    if precision == "fp32":
        return ""
    flag = "--" + precision
    return flag if flag in flags else None


def run_kiln(name, path, batch, args, flag, memory_baseline):
    cmd = args.kiln_cmd + ["perf", path, "--target", args.kiln_target, "--batch", str(batch),
                           "--iterations", str(args.iterations), "--warmup", str(args.warmup),
                           "--json"] + ([flag] if flag else []) + (
                               ["--device-io"] if args.kiln_device_io else [])
    row = {"model": name, "batch": batch, "runtime": "kiln", "mode": args.kiln_target,
           "precision": args.precision if flag is not None else "fp32", "command": shlex.join(cmd)}
    with MemorySampler(args.gpu, memory_baseline) as sampler:
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=args.kiln_timeout)
        except subprocess.TimeoutExpired:
            row["error"] = f"timeout {args.kiln_timeout} s"
            return row
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if out.returncode != 0 or not lines:
        row["error"] = (out.stderr.strip() or out.stdout.strip())[-500:] or f"exit {out.returncode}"
        log(f"  kiln {name} batch {batch}: failed: {row['error']}")
        return row
    perf = json.loads(lines[-1])
    row.update({"median_ms": perf["median_ms"], "throughput_per_s": perf["throughput_per_s"],
                "compile_s": perf["compile_ms"] / 1e3, "device": perf.get("device"),
                "device_io": perf.get("device_io", False),
                "gpu_memory_bytes": sampler.bytes()})
    log(f"  kiln  {args.kiln_target:<12} {name} batch {batch}: {row['median_ms']:.3f} ms "
        f"(compile {row['compile_s']:.1f} s)")
    return row


def run_kiln_artifact(name, path, batch, args, flag):
    """`kiln compile` to an artifact (tuning included), then `kiln run` on it: compile, load s."""
    sample = MODELS[name][1]
    shape = "x".join(str(d) for d in [batch] + sample)
    artifact = os.path.join(args.models_dir, f"{name}.b{batch}.{args.kiln_target}.kiln")
    flag = flag if flag in args.compile_flags else None  # kiln compile's precision flag, if any
    row = {"model": name, "batch": batch, "runtime": "kiln", "mode": "artifact",
           "precision": flag[2:] if flag else "fp32"}
    compile_cmd = args.kiln_cmd + ["compile", path, "--target", args.kiln_target, "--input-shape",
                                   f"input={shape}", "-o", artifact] + ([flag] if flag else [])
    run_cmd = args.kiln_cmd + ["run", artifact]
    try:
        made = subprocess.run(compile_cmd, capture_output=True, text=True,
                              timeout=args.kiln_timeout)
        ran = subprocess.run(run_cmd, capture_output=True, text=True, timeout=args.kiln_timeout)
    except subprocess.TimeoutExpired:
        row["error"] = f"timeout {args.kiln_timeout} s"
        return row
    compiled = re.search(r"compiled in ([0-9.]+) ms", made.stdout)
    loaded = re.search(r"loaded the artifact in ([0-9.]+) ms", ran.stdout + ran.stderr)
    if made.returncode != 0 or ran.returncode != 0 or not compiled or not loaded:
        why = (made.stderr + ran.stderr).strip() or f"exit {made.returncode}/{ran.returncode}"
        row["error"] = why[-500:]
        log(f"  kiln artifact {name} batch {batch}: failed: {row['error']}")
        return row
    row.update({"compile_s": float(compiled.group(1)) / 1e3, "load_s": float(loaded.group(1)) / 1e3,
                "command": shlex.join(compile_cmd) + " && " + shlex.join(run_cmd)})
    log(f"  kiln artifact {name} batch {batch}: compiled in {row['compile_s']:.1f} s, loaded in "
        f"{row['load_s']:.2f} s")
    return row


# ---- report -------------------------------------------------------------------------------------


def table(rows, modes):
    def find(model, batch, runtime, mode):
        for r in rows:
            if (r["model"], r["batch"], r["runtime"], r["mode"]) == (model, batch, runtime, mode):
                return r
        return None

    def rate(r):
        return r["throughput_per_s"] if r and "throughput_per_s" in r else None

    def fmt_rate(r):
        if r is None:
            return "-"
        return f"{r['throughput_per_s']:,.0f}" if "throughput_per_s" in r else r["error"][:14]

    def mib(v):
        return f"{v / 2**20:,.0f}" if v is not None else "-"

    kiln_mode = next((r["mode"] for r in rows if r["runtime"] == "kiln"), "cuda")
    head = ["model", "batch"] + [f"{m} /s" for m in modes] + [
        "kiln /s", "kiln ms", "kiln/eager", "kiln/compile", "kiln compile s", "artifact load s",
        "MiB eager", "MiB kiln"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    keys = sorted({(r["model"], r["batch"]) for r in rows},
                  key=lambda k: (list(MODELS).index(k[0]) if k[0] in MODELS else 99, k[1]))
    for model, batch in keys:
        torch_rows = {m: find(model, batch, "torch", m) for m in modes}
        k = find(model, batch, "kiln", kiln_mode)
        art = find(model, batch, "kiln", "artifact")
        eager, compiled = rate(torch_rows.get("eager")), rate(torch_rows.get("default"))
        kr = rate(k)
        cells = [model, str(batch)] + [fmt_rate(torch_rows[m]) for m in modes] + [
            fmt_rate(k), f"{k['median_ms']:.3f}" if k and "median_ms" in k else "-",
            f"{kr / eager:.2f}x" if kr and eager else "-",
            f"{kr / compiled:.2f}x" if kr and compiled else "-",
            f"{k['compile_s']:.1f}" if k and "compile_s" in k else "-",
            f"{art['load_s']:.2f}" if art and "load_s" in art else "-",
            mib(torch_rows["eager"].get("gpu_memory_bytes")) if torch_rows.get("eager") else "-",
            mib(k.get("gpu_memory_bytes")) if k else "-"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def parse_list(text, kind=str):
    return [kind(v) for v in text.split(",") if v]


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kiln", default=None,
                   help='the kiln command, e.g. ".devpack/run kiln" or build/ci/tools/kiln')
    p.add_argument("--models", default=None, help=f"comma list; default {','.join(DEFAULT_MODELS)}")
    p.add_argument("--batches", default=None, help="comma list; default 1,64,256 (BERT: up to 64)")
    p.add_argument("--precision", choices=list(DTYPES), default="fp16",
                   help="PyTorch's precision, and kiln's when it has the flag (else fp32)")
    p.add_argument("--tf32", action="store_true", help="fp32: let PyTorch use TF32 (default off)")
    p.add_argument("--modes", default=None,
                   help="PyTorch modes: eager, default (torch.compile), max-autotune; "
                        "default eager,default")
    p.add_argument("--max-autotune", action="store_true", help="add torch.compile max-autotune")
    p.add_argument("--no-kiln", action="store_true", help="PyTorch only")
    p.add_argument("--no-artifact", action="store_true",
                   help="skip timing `kiln compile` to an artifact and loading it (largest batch)")
    p.add_argument("--kiln-host-io", action="store_true",
                   help="time kiln with host inputs and outputs (copies inside the timing); by "
                        "default they stay in GPU memory, as PyTorch's do, where kiln perf has "
                        "--device-io")
    p.add_argument("--compile-timeout", type=float, default=240,
                   help="seconds for one model's torch.compile mode over all its batches")
    p.add_argument("--kiln-timeout", type=float, default=300, help="seconds for one kiln perf")
    p.add_argument("--time-budget", type=float, default=None,
                   help="seconds for the whole run: eager and kiln run first for every model, then "
                        "torch.compile modes in the time left (each capped by --compile-timeout)")
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--iterations", type=int, default=30)
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--gpu", type=int, default=0, help="GPU index for nvidia-smi's memory samples")
    p.add_argument("--dry-run", action="store_true",
                   help="CPU smoke test: smoke_cnn, batches 1 and 2, eager, kiln --target cpu")
    p.add_argument("--models-dir", default="build/gpu_vs_torch/models", help="ONNX cache")
    p.add_argument("--json", default="build/gpu_vs_torch/gpu_vs_torch.json", help="results file")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()

    if args.dry_run:
        args.device = "cpu"
        args.models = args.models or "smoke_cnn"
        args.batches = args.batches or "1,2"
        args.modes = args.modes or "eager"
        args.warmup, args.iterations = min(args.warmup, 1), min(args.iterations, 2)
    if args.device == "cpu" and args.precision != "fp32":
        log(f"gpu_vs_torch: --device cpu runs fp32 (not {args.precision})")
        args.precision = "fp32"
    models = parse_list(args.models) if args.models else DEFAULT_MODELS
    batches = parse_list(args.batches, int) if args.batches else DEFAULT_BATCHES
    modes = parse_list(args.modes) if args.modes else ["eager", "default"]
    if args.max_autotune and "max-autotune" not in modes:
        modes.append("max-autotune")
    for m in models:
        if m not in MODELS:
            sys.exit(f"gpu_vs_torch: unknown model \"{m}\"; known: {', '.join(MODELS)}")
    for m in modes:
        if m not in ("eager", "default", "max-autotune", "reduce-overhead"):
            sys.exit(f"gpu_vs_torch: unknown mode \"{m}\"; use eager, default or max-autotune")
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("gpu_vs_torch: PyTorch sees no GPU; run on the GPU machine, or use --device cpu")

    if args.worker:  # one torch.compile mode of one model, rows as JSON lines on stdout, each as
        # soon as it is measured (a timeout keeps the ones before it)
        run_torch(models[0], modes[0], batches, args,
                  on_row=lambda row: print(json.dumps(row), flush=True))
        return

    if not args.no_kiln and not args.kiln:
        sys.exit("gpu_vs_torch: give the kiln command with --kiln (or --no-kiln)")
    args.kiln_cmd = shlex.split(args.kiln) if args.kiln else None
    args.kiln_target = "cuda" if args.device == "cuda" else "cpu"
    os.makedirs(args.models_dir, exist_ok=True)
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    # Before anything here makes a CUDA context: the device's own baseline.
    baseline = gpu_memory_used_mib(args.gpu) if args.device == "cuda" else None
    flags = set() if args.no_kiln else kiln_flags(args.kiln_cmd, "perf")
    args.compile_flags = set() if args.no_kiln else kiln_flags(args.kiln_cmd, "compile")
    flag = None if args.no_kiln else kiln_precision_flag(flags, args.precision)
    args.kiln_device_io = (args.device == "cuda" and not args.kiln_host_io and
                           "--device-io" in flags)
    if not args.no_kiln and flag is None:
        log(f"gpu_vs_torch: this kiln has no --{args.precision}: kiln runs fp32")

    started = time.perf_counter()
    rows = []
    model_batches = {}
    for name in models:  # first pass: export, eager and kiln
        mb = sorted({min(b, MAX_BATCH.get(name, b)) for b in batches})
        log(f"{name}: batches {mb}")
        try:
            export_models.make_model(name, MODELS)  # fails early when torchvision is missing
        except RuntimeError as e:
            log(f"  skipped: {e}")
            rows += [{"model": name, "batch": b, "runtime": "torch", "mode": "eager",
                      "error": str(e)} for b in mb]
            continue
        t = time.perf_counter()
        path = export_models.export(name, args.models_dir, MODELS)
        log(f"  exported {path} ({time.perf_counter() - t:.1f} s)")
        model_batches[name] = mb
        if "eager" in modes:
            rows += run_torch(name, "eager", mb, args, baseline)
            if args.device == "cuda":
                torch.cuda.empty_cache()
        if not args.no_kiln:
            before = gpu_memory_used_mib(args.gpu) if args.device == "cuda" else None
            for batch in mb:
                rows.append(run_kiln(name, path, batch, args, flag, before))
            if not args.no_artifact:  # compile to an artifact and load it, at the largest batch
                rows.append(run_kiln_artifact(name, path, mb[-1], args, flag))
    # Second pass: torch.compile, in the time left, shared evenly by the (mode, model) runs still to
    # come, so that a slow compile does not leave the later models without a figure.
    compiles = [(mode, name, mb) for mode in modes if mode != "eager"
                for name, mb in model_batches.items()]
    for i, (mode, name, mb) in enumerate(compiles):
        left = (args.time_budget - (time.perf_counter() - started)
                if args.time_budget is not None else float("inf"))
        share = left / (len(compiles) - i)
        rows += run_torch_subprocess(name, mode, mb, args, min(args.compile_timeout, share))

    device = torch.cuda.get_device_name(args.gpu) if args.device == "cuda" else "cpu"
    result = {"benchmark": "gpu_vs_torch", "device": device, "torch": torch.__version__,
              "precision": args.precision, "kiln_precision_flag": flag, "kiln": args.kiln,
              "kiln_device_io": args.kiln_device_io,
              "modes": modes, "warmup": args.warmup, "iterations": args.iterations,
              "seconds": time.perf_counter() - started, "results": rows}
    with open(args.json, "w") as f:
        json.dump(result, f, indent=1)
    kiln_runs = ("no kiln" if args.no_kiln else f"kiln {args.precision}" if flag is not None
                 else f"kiln fp32: it has no --{args.precision}")
    if not args.no_kiln:
        kiln_runs += (", inputs/outputs in GPU memory" if args.kiln_device_io
                      else ", host inputs/outputs copied inside kiln's timing")
    print(f"gpu_vs_torch on {device}, torch {torch.__version__}, {args.precision} ({kiln_runs}); "
          f"img/s (sequences/s for BERT); {time.perf_counter() - started:.0f} s; JSON: {args.json}")
    print(table(rows, modes))
    failed = [r for r in rows if r["runtime"] == "kiln" and "error" in r]
    if failed:
        sys.exit(f"gpu_vs_torch: {len(failed)} kiln run(s) failed")


if __name__ == "__main__":
    main()
