# SPDX-License-Identifier: Apache-2.0
"""kiln's data pipeline vs torchvision's DataLoader on the same JPEG folder and the same cores.

The work, for both: decode, RandomResizedCrop(224) (scale 0.08-1, ratio 3/4-4/3), random
horizontal flip, normalize with ImageNet's mean/std, NCHW float32, batch 32, shuffled. Plus the
ceiling: every image decoded at full scale by libjpeg-turbo on all threads, nothing else.

Prints a table and writes results.json (device, commit, options, figures) into --out.
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))


def process_tree_rss(pid):
    """Resident bytes of a process and all its descendants (for DataLoader's worker processes)."""
    import psutil
    try:
        proc = psutil.Process(pid)
        procs = [proc] + proc.children(recursive=True)
    except psutil.NoSuchProcess:
        return 0
    total = 0
    for p in procs:
        try:
            total += p.memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return total


def run_measured(cmd, env=None):
    """Runs cmd, sampling the RSS of its whole process tree every 50 ms.

    Returns (stdout, peak RSS bytes, CPU seconds): the CPU time (user + system) of the process
    and every descendant it waited for (DataLoader's workers included)."""
    before = os.times()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    peak = [0]
    done = threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], process_tree_rss(proc.pid))
            time.sleep(0.05)

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    out, err = proc.communicate()
    done.set()
    t.join()
    if proc.returncode != 0:
        sys.exit(f"run.py: {' '.join(cmd)} failed ({proc.returncode}):\n{err}")
    after = os.times()
    cpu = (after.children_user - before.children_user) + (after.children_system -
                                                           before.children_system)
    return out, peak[0], cpu


def ensure_dataset(path, images):
    marker = os.path.join(path, ".complete")
    if os.path.exists(marker):
        with open(marker) as f:
            if f.read().strip() == str(images):
                return
    print(f"writing {images} synthetic ImageNet-like JPEGs to {path} (once)", file=sys.stderr)
    subprocess.run([sys.executable, os.path.join(HERE, "make_dataset.py"), path, "--images",
                    str(images)], check=True)
    with open(marker, "w") as f:
        f.write(str(images))


def dataset_stats(path):
    from PIL import Image
    sizes, nbytes = [], 0
    for dirpath, _, files in os.walk(path):
        for name in files:
            if name.endswith(".jpg"):
                full = os.path.join(dirpath, name)
                nbytes += os.path.getsize(full)
                with Image.open(full) as im:
                    sizes.append(im.size)
    n = len(sizes)
    return {"images": n, "mean_width": sum(s[0] for s in sizes) / n,
            "mean_height": sum(s[1] for s in sizes) / n, "mean_bytes": nbytes / n}


def kiln_bench(kiln, args, extra, json_path):
    cmd = [kiln, "pipeline", "bench"] + extra + ["--images", args.data, "--threads",
                                                 str(args.threads), "--epochs", str(args.epochs),
                                                 "--json", json_path]
    out, peak, cpu = run_measured(cmd)
    print(out, file=sys.stderr)
    with open(json_path) as f:
        result = json.load(f)
    result["peak_rss_bytes_sampled"] = peak
    result["process_cpu_seconds"] = cpu
    add_cpu_figures(result)
    return result


def add_cpu_figures(result):
    """Images per CPU-second over the warm epochs (CPU time of every thread and worker process):
    the fair figure when other work shares the cores, since wall-clock images/s then depend on
    how many threads each side runs."""
    warm = result["epochs"][1:] if len(result["epochs"]) > 1 else result["epochs"]
    images = sum(e["images"] for e in warm)
    cpu = sum(e["cpu_seconds"] for e in warm)
    result["images_per_cpu_s"] = images / cpu if cpu > 0 else 0.0


def run_round(args, pipeline_json):
    """One kiln run, one decode-ceiling run and one torchvision run: (kiln, ceiling, torch)."""
    kiln = kiln_bench(args.kiln, args, [pipeline_json, "--batch", str(args.batch),
                                        "--prefetch", "2"],
                      os.path.join(args.out, "kiln.json"))
    ceiling = kiln_bench(args.kiln, args, ["--decode-only"],
                         os.path.join(args.out, "decode_ceiling.json"))
    torch = None
    if not args.skip_torchvision:
        tv_json = os.path.join(args.out, "torchvision.json")
        out, peak, cpu = run_measured([
            sys.executable, os.path.join(HERE, "torchvision_loader.py"), args.data, "--workers",
            str(args.threads), "--batch", str(args.batch), "--epochs", str(args.epochs), "--json",
            tv_json])
        print(out, file=sys.stderr)
        with open(tv_json) as f:
            torch = json.load(f)
        torch["peak_rss_bytes_sampled"] = peak
        torch["process_cpu_seconds"] = cpu
        add_cpu_figures(torch)
    return kiln, ceiling, torch


def median_result(results):
    """The round with the median images/s, with the median images per CPU-second, the largest
    peak RSS, and every round's figures."""
    if results[0] is None:
        return None
    ordered = sorted(results, key=lambda r: r["images_per_s"])
    median = dict(ordered[len(ordered) // 2])
    median["images_per_cpu_s"] = sorted(r["images_per_cpu_s"] for r in results)[len(results) // 2]
    median["peak_rss_bytes_sampled"] = max(r["peak_rss_bytes_sampled"] for r in results)
    median["rounds"] = [{"images_per_s": r["images_per_s"],
                         "images_per_cpu_s": r["images_per_cpu_s"],
                         "peak_rss_bytes_sampled": r["peak_rss_bytes_sampled"]} for r in results]
    return median


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kiln", default=os.path.join(ROOT, "build", "ci", "tools", "kiln"),
                    help="the kiln binary (default: build/ci/tools/kiln)")
    ap.add_argument("--data", default=os.path.join(ROOT, "build", "bench_data", "imagenet_like"),
                    help="JPEG folder to use, generated there when missing")
    ap.add_argument("--images", type=int, default=500, help="images to generate")
    ap.add_argument("--threads", type=int, default=os.cpu_count(),
                    help="kiln threads and torchvision workers (default: every core)")
    ap.add_argument("--epochs", type=int, default=3, help="epochs per run; the first is warm-up")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "bench_results",
                                                  "pipeline_vs_torchvision"))
    ap.add_argument("--rounds", type=int, default=1,
                    help="repeat the three runs this many times, interleaved; the table shows the "
                         "median of each figure and ratio (use 3+ on a shared machine)")
    ap.add_argument("--skip-torchvision", action="store_true")
    args = ap.parse_args()
    if not os.path.exists(args.kiln):
        sys.exit(f"run.py: no kiln binary at {args.kiln}: build it first "
                 "(cmake --preset ci && ninja -C build/ci kiln) or pass --kiln")
    os.makedirs(args.out, exist_ok=True)
    ensure_dataset(args.data, args.images)
    stats = dataset_stats(args.data)

    pipeline_json = os.path.join(HERE, "rrc_flip_normalize.json")
    rounds = []
    for r in range(args.rounds):
        if args.rounds > 1:
            print(f"round {r + 1}/{args.rounds}", file=sys.stderr)
        rounds.append(run_round(args, pipeline_json))
    kiln, ceiling, torch = (median_result([rd[i] for rd in rounds]) for i in range(3))
    rows = [("kiln pipeline", kiln)]
    if torch:
        rows.append(("torchvision DataLoader (PIL)", torch))
    rows.append(("decode-only ceiling (libjpeg-turbo)", ceiling))
    print(f"\n{stats['images']} JPEGs, mean {stats['mean_width']:.0f}x{stats['mean_height']:.0f} px, "
          f"{stats['mean_bytes'] / 1e3:.0f} KB; batch {args.batch}, {args.threads} threads, "
          f"{args.epochs} epochs (first = warm-up), median of {args.rounds} round(s)")
    print(f"{'run':<38} {'images/s':>10} {'img/CPU-s':>10} {'peak RSS MB':>12}")
    for name, r in rows:
        print(f"{name:<38} {r['images_per_s']:>10.1f} {r['images_per_cpu_s']:>10.1f} "
              f"{r['peak_rss_bytes_sampled'] / 1e6:>12.1f}")
    ratios = {}
    for key in ("images_per_s", "images_per_cpu_s"):
        per_round = {"decode_ceiling": [], "torchvision": []}
        for k, c, t in rounds:
            per_round["decode_ceiling"].append(k[key] / c[key])
            if t:
                per_round["torchvision"].append(k[key] / t[key])
        for peer, values in per_round.items():
            if values:
                ratios[f"kiln_over_{peer}_{key}"] = sorted(values)[len(values) // 2]
    for k, v in ratios.items():
        print(f"{k:<50} {v:>6.2f}x")
    load = os.getloadavg()[0]
    if load > args.threads + 0.5:
        print(f"note: load average {load:.1f} on {os.cpu_count()} cores: other work shared the "
              "cores, so compare the img/CPU-s ratios")

    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    result = {
        "bench": "pipeline_vs_torchvision",
        "device": {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count()},
        "commit": commit,
        "options": {"threads": args.threads, "batch": args.batch, "epochs": args.epochs,
                    "rounds": args.rounds,
                    "prefetch_queue_depth": 2, "pipeline": pipeline_json},
        "dataset": dict(stats, path=args.data),
        "kiln": kiln,
        "torchvision": torch,
        "decode_ceiling": ceiling,
        "ratios": ratios,
    }
    path = os.path.join(args.out, "results.json")
    with open(path, "w") as f:
        json.dump(result, f, indent=2)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
