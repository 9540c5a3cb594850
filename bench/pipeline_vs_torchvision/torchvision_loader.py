# SPDX-License-Identifier: Apache-2.0
"""torchvision's side of the benchmark: ImageFolder + DataLoader with PIL, the standard ImageNet
training transform, `--workers` worker processes. Writes images/s per epoch as JSON."""
import argparse
import json
import time

import psutil

import torch
import torchvision.transforms as T
from torch.utils.data import DataLoader
from torchvision.datasets import ImageFolder


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("data")
    ap.add_argument("--workers", type=int, required=True)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--json", required=True)
    args = ap.parse_args()
    torch.manual_seed(1)
    transform = T.Compose([
        T.RandomResizedCrop(224),
        T.RandomHorizontalFlip(),
        T.ToTensor(),
        T.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
    ])
    dataset = ImageFolder(args.data, transform=transform)
    loader = DataLoader(dataset, batch_size=args.batch, shuffle=True, num_workers=args.workers,
                        persistent_workers=True, prefetch_factor=2)
    me = psutil.Process()

    def cpu_seconds():
        """User + system CPU time of this process and its live workers."""
        total = 0.0
        for p in [me] + me.children(recursive=True):
            try:
                t = p.cpu_times()
                total += t.user + t.system
            except psutil.NoSuchProcess:
                pass
        return total

    epochs = []
    for epoch in range(args.epochs):
        start, cpu_start = time.perf_counter(), cpu_seconds()
        n = 0
        for images, labels in loader:
            assert images.shape[1:] == (3, 224, 224) and images.dtype == torch.float32
            n += images.shape[0]
        seconds = time.perf_counter() - start
        epochs.append({"images": n, "seconds": seconds, "cpu_seconds": cpu_seconds() - cpu_start})
        print(f"epoch {epoch}: {n} images, {seconds:.3f} s, {n / seconds:.1f} images/s"
              + (" (warm-up)" if epoch == 0 and args.epochs > 1 else ""))
    warm = sorted(e["images"] / e["seconds"] for e in (epochs[1:] if len(epochs) > 1 else epochs))
    result = {"tool": "torchvision DataLoader", "torch": torch.__version__,
              "workers": args.workers, "batch_size": args.batch,
              "images_per_s": warm[len(warm) // 2], "epochs": epochs}
    with open(args.json, "w") as f:
        json.dump(result, f, indent=2)
    print(f"torchvision: {result['images_per_s']:.1f} images/s (median of warm epochs)")


if __name__ == "__main__":
    main()
