#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
# A CIFAR-style ResNet trained here on images rendered here, for quantization accuracy on trained
# weights: 32x32 RGB pictures of ten kinds of shape (disk, square, triangle, ring, cross, bars,
# diamond, X, half-disk) in random colours, sizes, places and angles over textured backgrounds
# with grain; a ResNet of three stages (16, 32, 64 channels, one basic block each, batch norm,
# global average pooling), trained with fixed seeds on the CPU in a few minutes (12,000 images, ten
# epochs).
#   bench/quant/shapes_resnet.py [--work build/quant_shapes]
# writes WORK/model.onnx (dynamic batch, opset 13), WORK/calibration/*.npy (256 training images
# in batches of 16) and WORK/test/*.npy with labels.txt (1,000 held-out images), and prints the
# test accuracy. Deterministic; an existing model.onnx is kept (--retrain trains again).
import argparse
import os

import numpy as np

CLASSES = ["disk", "square", "triangle", "ring", "cross", "hbar", "vbar", "diamond", "x", "half"]
SIZE = 32


def render(rng, count):
    """`count` images [n, 3, 32, 32] float32 in [0, 1] and their labels."""
    y, x = np.mgrid[0:SIZE, 0:SIZE].astype(np.float32) + 0.5
    images = np.empty((count, 3, SIZE, SIZE), np.float32)
    labels = rng.randint(0, len(CLASSES), count)
    for n in range(count):
        # Background: a random gradient in one colour plus a coarse texture.
        base = rng.uniform(0, 1, 3).astype(np.float32)
        tilt = rng.uniform(-0.5, 0.5, 2).astype(np.float32) / SIZE
        texture = rng.uniform(-0.15, 0.15, (3, SIZE // 4, SIZE // 4)).astype(np.float32)
        img = base[:, None, None] + (tilt[0] * x + tilt[1] * y)[None] + \
            np.kron(texture, np.ones((4, 4), np.float32))
        # The shape: centre, size and angle, in coordinates rotated about the centre.
        cx, cy = rng.uniform(10, 22, 2)
        r = rng.uniform(5, 10)
        a = rng.uniform(0, np.pi)
        u = ((x - cx) * np.cos(a) + (y - cy) * np.sin(a)) / r
        v = (-(x - cx) * np.sin(a) + (y - cy) * np.cos(a)) / r
        d = np.hypot(x - cx, y - cy) / r
        kind = CLASSES[labels[n]]
        if kind == "disk":
            mask = d < 1
        elif kind == "square":
            mask = (np.abs(u) < 0.8) & (np.abs(v) < 0.8)
        elif kind == "triangle":
            mask = (v < 0.6) & (v > 1.7 * np.abs(u) - 1.0)
        elif kind == "ring":
            mask = (d < 1) & (d > 0.6)
        elif kind == "cross":
            mask = ((np.abs(u) < 0.25) | (np.abs(v) < 0.25)) & (np.abs(u) < 1) & (np.abs(v) < 1)
        elif kind == "hbar":
            mask = (np.abs(x - cx) < r) & (np.abs(y - cy) < r * 0.3)
        elif kind == "vbar":
            mask = (np.abs(y - cy) < r) & (np.abs(x - cx) < r * 0.3)
        elif kind == "diamond":
            mask = np.abs(u) + np.abs(v) < 1
        elif kind == "x":
            mask = ((np.abs(u - v) < 0.35) | (np.abs(u + v) < 0.35)) & (d < 1.1)
        else:  # half
            mask = (d < 1) & (u > 0)
        colour = rng.uniform(0, 1, 3).astype(np.float32)
        # Far enough from the background that the shape shows.
        while np.abs(colour - base).max() < 0.35:
            colour = rng.uniform(0, 1, 3).astype(np.float32)
        img = np.where(mask[None], colour[:, None, None], img)
        img += rng.normal(0, 0.04, img.shape).astype(np.float32)
        images[n] = np.clip(img, 0, 1)
    return images, labels


def build_model():
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.b1 = nn.BatchNorm2d(cout)
            self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.b2 = nn.BatchNorm2d(cout)
            self.skip = None
            if stride != 1 or cin != cout:
                self.skip = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                          nn.BatchNorm2d(cout))

        def forward(self, t):
            out = torch.relu(self.b1(self.c1(t)))
            out = self.b2(self.c2(out))
            return torch.relu(out + (t if self.skip is None else self.skip(t)))

    return nn.Sequential(nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
                         Block(16, 16, 1), Block(16, 32, 2), Block(32, 64, 2),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, len(CLASSES)))


def train(work, epochs, train_count):
    import torch
    torch.manual_seed(0)
    torch.set_num_threads(os.cpu_count() or 1)
    x, y = render(np.random.RandomState(0), train_count)
    model = build_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, 0.1, total_steps=epochs * (train_count // 64))
    xt, yt = torch.from_numpy(x), torch.from_numpy(y).long()
    for epoch in range(epochs):
        model.train()
        order = torch.randperm(train_count)
        total = 0.0
        for i in range(0, train_count - 63, 64):
            idx = order[i:i + 64]
            loss = torch.nn.functional.cross_entropy(model(xt[idx]), yt[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            total += float(loss)
        print(f"epoch {epoch + 1}/{epochs}: loss {total / (train_count // 64):.3f}", flush=True)
    model.eval()
    path = os.path.join(work, "model.onnx")
    torch.onnx.export(model, torch.zeros(1, 3, SIZE, SIZE), path, input_names=["image"],
                      output_names=["logits"], dynamic_axes={"image": {0: "batch"},
                                                             "logits": {0: "batch"}},
                      opset_version=13)
    return model


def write_folders(work, calibration_count=256, test_count=1000, batch=16):
    cal = os.path.join(work, "calibration")
    test = os.path.join(work, "test")
    for d in (cal, test):
        os.makedirs(d, exist_ok=True)
        for f in os.listdir(d):
            os.remove(os.path.join(d, f))
    # Calibration from the training distribution (another seed), test images never seen.
    xc, _ = render(np.random.RandomState(1), calibration_count)
    for i in range(0, calibration_count, batch):
        np.save(os.path.join(cal, f"cal_{i // batch:03d}.npy"), xc[i:i + batch])
    xs, ys = render(np.random.RandomState(2), test_count)
    with open(os.path.join(test, "labels.txt"), "w") as f:
        f.write("# file labels (one per row): rendered shapes, " + ", ".join(CLASSES) + "\n")
        for i in range(0, test_count, batch * 2):
            name = f"test_{i // (batch * 2):03d}.npy"
            np.save(os.path.join(test, name), xs[i:i + batch * 2])
            f.write(name + " " + " ".join(str(int(v)) for v in ys[i:i + batch * 2]) + "\n")
    return cal, test, xs, ys


def prepare(work, retrain=False, epochs=10, train_count=12000):
    """The model and folders in `work`; returns (model path, calibration, test, test count)."""
    os.makedirs(work, exist_ok=True)
    path = os.path.join(work, "model.onnx")
    cal, test, xs, ys = write_folders(work)
    if retrain or not os.path.exists(path):
        import torch
        model = train(work, epochs, train_count)
        with torch.no_grad():
            predicted = model(torch.from_numpy(xs)).argmax(1).numpy()
        print(f"test accuracy {100.0 * float((predicted == ys).mean()):.2f}% "
              f"({len(ys)} held-out images)", flush=True)
    return path, cal, test, len(ys)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    p = argparse.ArgumentParser(description="a CIFAR-style ResNet on rendered shapes")
    p.add_argument("--work", default=os.path.join(root, "build", "quant_shapes"))
    p.add_argument("--retrain", action="store_true")
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--train", type=int, default=12000, help="training images")
    args = p.parse_args()
    path, cal, test, count = prepare(args.work, args.retrain, args.epochs, args.train)
    print(f"wrote {path}, {cal} and {test} ({count} test images)")


if __name__ == "__main__":
    main()
