# SPDX-License-Identifier: Apache-2.0
# Runs every examples/python script the way the docs show, and checks what it prints or writes.
import json
import os
import re
import sys

import numpy as np
from PIL import Image

import kiln.pipeline.fn as fn
from conftest import DIGIT, MODEL, ROOT, run_checked

EXAMPLES = os.path.join(ROOT, "examples", "python")


def example(name, *args):
    return run_checked([sys.executable, os.path.join(EXAMPLES, name), *map(str, args)],
                       env=dict(os.environ), timeout=600)


def images(tmp_path, per_class=8):
    root = tmp_path / "images"
    example("make_images.py", root, "--per-class", per_class)
    return root


def test_compile_and_run_matches_the_cli(kiln_cli, tmp_path):
    out = example("compile_and_run.py", MODEL, DIGIT, "--target", "ref").stdout
    argmax = int(re.search(r"argmax: (\d+)", out).group(1))
    run_checked([kiln_cli, "run", MODEL, "--input", f"image={DIGIT}", "--output-dir",
                 str(tmp_path / "cli")])
    listing = json.loads((tmp_path / "cli" / "outputs.json").read_text())
    cli = np.load(tmp_path / "cli" / listing["outputs"][0]["file"])
    assert argmax == int(np.argmax(cli))
    assert "parameters: {'image': [1, 1, 28, 28]}" in out


def test_rocal_create_pipeline(tmp_path):
    root = images(tmp_path, per_class=3)  # 9 images: batches of 4 with the fill policy -> 3
    out = example("rocal_create_pipeline.py", root, "--batch-size", 4).stdout
    lines = [l for l in out.splitlines() if l.startswith("epoch")]
    assert len(lines) == 6
    assert all("images (4, 3, 300, 300) torch.float32" in l for l in lines)
    assert out.strip().endswith("done")


def test_augment_grid(tmp_path):
    root = images(tmp_path, per_class=2)
    target = tmp_path / "grid.png"
    example("augment_grid.py", root, target, "--rows", 3, "--size", 40)
    grid = np.asarray(Image.open(target))
    columns = 6 if hasattr(fn, "rotate") else 5
    assert grid.shape == (3 * 40, columns * 40, 3)
    first = grid[:40, :40]
    np.testing.assert_array_equal(grid[:40, 40:80], first[:, ::-1])
    np.testing.assert_array_equal(grid[:40, 80:120], first[::-1, :])


def test_training_loss_goes_down(tmp_path):
    root = images(tmp_path, per_class=16)
    out = example("train_pytorch.py", root, "--epochs", 6).stdout
    losses = [float(m) for m in re.findall(r"loss ([0-9.]+)", out)]
    accuracy = [float(m) for m in re.findall(r"accuracy ([0-9.]+)", out)]
    assert len(losses) == 6
    assert losses[-1] < 0.6 * losses[0], out
    assert accuracy[-1] > 0.8, out
