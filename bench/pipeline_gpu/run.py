# SPDX-License-Identifier: Apache-2.0
"""The data pipeline on the GPU machine: decode + random resized crop 224 + flip + normalize of an
ImageNet-like JPEG folder, batch 256, through

  kiln gpu (gpu decode)   decoders.image on the GPU's hardware JPEG decoders (nvJPEG), then
                          random_resized_crop and crop_mirror_normalize on the GPU;
  kiln gpu (decode crop)  decoders.image_random_crop on the GPU: the hardware decoders decode
                          whole JPEGs and the windows are cut there, the CPU's share decodes
                          only the window (DCT-scaled); resize and crop_mirror_normalize on the
                          GPU;
  kiln gpu (crop decode)  decoders.image_random_crop on the CPU (only the window, DCT-scaled),
                          resize and crop_mirror_normalize on the GPU, batches left on the GPU;
  kiln gpu (full decode)  decoders.image on the CPU, random_resized_crop and
                          crop_mirror_normalize on the GPU (DALI's layout with a CPU decoder);
  kiln cpu                the same steps on every CPU core (bench/pipeline_vs_torchvision's);
  torchvision gpu         torchvision.io.decode_jpeg(device="cuda") on each batch, then
                          transforms.v2 RandomResizedCrop + RandomHorizontalFlip per image on CUDA
                          tensors, normalize on the stacked batch.

side by side in one run; prints images/s and the ratios, writes JSON. Needs a CUDA PyTorch with
torchvision (the GPU machine's python3) and a kiln built with CUDA:

  python3 bench/pipeline_gpu/run.py --kiln build/ci/tools/kiln
"""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MEAN = [123.675, 116.28, 103.53]
STD = [58.395, 57.12, 57.375]


def ensure_dataset(path, images, jobs):
    """`images` synthetic ImageNet-like JPEGs (bench/pipeline_vs_torchvision/make_dataset.py),
    written by `jobs` processes at once, one class folder each."""
    marker = os.path.join(path, ".complete")
    if os.path.exists(marker) and open(marker).read().strip() == str(images):
        return
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    print(f"writing {images} synthetic JPEGs to {path} with {jobs} processes", file=sys.stderr)
    make = os.path.join(ROOT, "bench", "pipeline_vs_torchvision", "make_dataset.py")
    with tempfile.TemporaryDirectory() as tmp:
        procs = []
        for k in range(jobs):
            n = images // jobs + (1 if k < images % jobs else 0)
            procs.append(subprocess.Popen([sys.executable, make, os.path.join(tmp, str(k)),
                                           "--images", str(n), "--classes", "1",
                                           "--seed", str(2024 + k)],
                                          stderr=subprocess.DEVNULL))
        for p in procs:
            if p.wait() != 0:
                sys.exit("run.py: make_dataset.py failed")
        for k in range(jobs):
            shutil.move(os.path.join(tmp, str(k), "class_00"), os.path.join(path, f"class_{k:02d}"))
    with open(marker, "w") as f:
        f.write(str(images))


def pipeline_json(kind, batch, hw_decoder_load=None):
    crop_decode = [
        {"op": "readers.file", "args": {"random_shuffle": True}},
        {"op": "decoders.image_random_crop",
         "args": {"output_type": "RGB", "min_width": 224, "min_height": 224}},
        {"op": "resize", "args": {"resize_x": 224, "resize_y": 224}},
    ]
    full_decode = [
        {"op": "readers.file", "args": {"random_shuffle": True}},
        {"op": "decoders.image", "args": {"output_type": "RGB"}},
        {"op": "random_resized_crop", "args": {"size": [224, 224]}},
    ]
    ops = full_decode if kind in ("gpu_full_decode", "gpu_decode") else crop_decode
    ops += [
        {"op": "random.coin_flip", "outputs": ["mirror"]},
        {"op": "crop_mirror_normalize", "arg_inputs": {"mirror": "mirror"},
         "args": {"mean": MEAN, "std": STD, "output_layout": "CHW", "dtype": "float32"}},
    ]
    if kind != "cpu":
        for op in ops[1 if kind in ("gpu_decode", "gpu_decode_crop") else 2:]:
            if op["op"] != "random.coin_flip":
                op["device"] = "gpu"
    if kind in ("gpu_decode", "gpu_decode_crop") and hw_decoder_load is not None:
        ops[1]["args"]["hw_decoder_load"] = hw_decoder_load
    return {"batch_size": batch, "prefetch_queue_depth": 2, "seed": 1, "operators": ops,
            "outputs": ["images", "label"]}


def kiln_run(args, kind, tmp):
    spec = os.path.join(tmp, f"{kind}.json")
    with open(spec, "w") as f:
        json.dump(pipeline_json(kind, args.batch, args.hw_decoder_load), f)
    out = os.path.join(tmp, f"{kind}.out.json")
    cmd = [args.kiln, "pipeline", "bench", spec, "--images", args.data, "--threads",
           str(args.threads), "--epochs", str(args.epochs), "--json", out]
    if kind != "cpu":
        cmd.append("--keep-on-gpu")
    proc = subprocess.run(cmd, capture_output=True, text=True)
    print(proc.stdout + proc.stderr, file=sys.stderr)
    if proc.returncode != 0:
        return {"error": (proc.stderr or proc.stdout).strip()[-2000:]}
    with open(out) as f:
        return json.load(f)


def torchvision_run(args):
    import torch
    import torchvision
    from torchvision.io import decode_jpeg, read_file
    from torchvision.transforms import v2

    torch.manual_seed(1)
    files = sorted(glob.glob(os.path.join(args.data, "*", "*.jpg")))
    crop = v2.RandomResizedCrop(224, antialias=True)
    flip = v2.RandomHorizontalFlip()
    mean = torch.tensor(MEAN, device="cuda").view(1, 3, 1, 1)
    inv_std = 1.0 / torch.tensor(STD, device="cuda").view(1, 3, 1, 1)
    epochs = []
    for epoch in range(args.epochs):
        order = torch.randperm(len(files)).tolist()
        torch.cuda.synchronize()
        start = time.perf_counter()
        n = 0
        for b in range(0, len(order), args.batch):
            data = [read_file(files[i]) for i in order[b:b + args.batch]]
            images = decode_jpeg(data, device="cuda")
            crops = torch.stack([flip(crop(img)) for img in images])
            out = (crops.float() - mean) * inv_std
            n += out.shape[0]
        torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        epochs.append({"images": n, "seconds": seconds})
        print(f"torchvision gpu epoch {epoch}: {n} images, {seconds:.3f} s, "
              f"{n / seconds:.1f} images/s", file=sys.stderr)
    warm = sorted(e["images"] / e["seconds"] for e in (epochs[1:] if len(epochs) > 1 else epochs))
    return {"tool": "torchvision decode_jpeg(cuda) + transforms.v2 on CUDA tensors",
            "torch": torch.__version__, "torchvision": torchvision.__version__,
            "images_per_s": warm[len(warm) // 2], "epochs": epochs}


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kiln", default=os.path.join(ROOT, "build", "ci", "tools", "kiln"))
    ap.add_argument("--data", default=os.path.join(ROOT, "build", "bench_data", "imagenet_like_gpu"))
    ap.add_argument("--images", type=int, default=1024, help="images to generate")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--epochs", type=int, default=3, help="epochs per run; the first is warm-up")
    ap.add_argument("--skip-torchvision", action="store_true")
    ap.add_argument("--kinds",
                    default="gpu_decode,gpu_decode_crop,gpu_crop_decode,gpu_full_decode,cpu",
                    help="the kiln pipelines to run, comma-separated")
    ap.add_argument("--hw-decoder-load", type=float,
                    help="the decoder's hw_decoder_load in the gpu_decode and gpu_decode_crop "
                         "pipelines "
                         "(default: the operator's)")
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "bench_results",
                                                  "pipeline_gpu.json"))
    args = ap.parse_args()
    ensure_dataset(args.data, args.images, min(args.threads, 16))
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for kind in args.kinds.split(","):
            results["kiln_" + kind] = kiln_run(args, kind, tmp)
    if not args.skip_torchvision:
        try:
            results["torchvision_gpu"] = torchvision_run(args)
        except Exception as e:  # reported in the table and the JSON, the rest still stands
            results["torchvision_gpu"] = {"error": f"{type(e).__name__}: {e}"}
    rate = {k: v.get("images_per_s") for k, v in results.items()}
    print(f"\n{'pipeline':<26} {'images/s':>10}")
    for k, v in results.items():
        print(f"{k:<26} {rate[k] if rate[k] else float('nan'):>10.1f}"
              + (f"  error: {v['error'][:200]}" if "error" in v else ""))
    best_gpu = max((rate.get(k) for k in ("kiln_gpu_decode", "kiln_gpu_decode_crop",
                                          "kiln_gpu_crop_decode", "kiln_gpu_full_decode")
                    if rate.get(k)), default=None)
    ratios = {}
    if best_gpu and rate.get("torchvision_gpu"):
        ratios["kiln_gpu_over_torchvision_gpu"] = best_gpu / rate["torchvision_gpu"]
    if best_gpu and rate.get("kiln_cpu"):
        ratios["kiln_gpu_over_kiln_cpu"] = best_gpu / rate["kiln_cpu"]
    for k, v in ratios.items():
        print(f"{k}: {v:.2f}x")
    doc = {"bench": "pipeline_gpu", "batch": args.batch, "threads": args.threads,
           "hw_decoder_load": args.hw_decoder_load,
           "images": args.images, "epochs": args.epochs, "ratios": ratios, "results": results}
    try:
        doc["commit"] = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True,
                                       text=True).stdout.strip()
    except OSError:
        pass
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=2)
    print(f"wrote {args.out}")
    return 1 if any("error" in v for v in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
