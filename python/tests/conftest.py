# SPDX-License-Identifier: Apache-2.0
# Shared fixtures of the kiln Python tests: the built tools and real image folders on disk.
import os
import shutil
import subprocess

import numpy as np
import pytest
from PIL import Image

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL = os.path.join(ROOT, "examples", "models", "tiny_cnn.onnx")
DIGIT = os.path.join(ROOT, "examples", "models", "digit.npy")


def _tool(env_name, build_path):
    path = os.environ.get(env_name) or os.path.join(ROOT, "build", "ci", build_path)
    if not os.path.exists(path):
        pytest.fail(f"{env_name}: {path} does not exist; build it (ninja -C build/ci) or set "
                    f"{env_name}")
    return path


@pytest.fixture(scope="session")
def kiln_cli():
    return _tool("KILN_CLI", "tools/kiln")


@pytest.fixture(scope="session")
def cpp_pipeline():
    return _tool("KILN_CPP_PIPELINE", "python/kiln_cpp_pipeline")


def make_image(rng, width, height):
    """A smooth random RGB picture (gradients plus blobs), so JPEG and resizing are exercised on
    realistic content."""
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    channels = []
    for _ in range(3):
        fx, fy, phase = rng.uniform(0.02, 0.2), rng.uniform(0.02, 0.2), rng.uniform(0, 6.3)
        channels.append(127 + 120 * np.sin(fx * x + fy * y + phase))
    return np.clip(np.stack(channels, -1), 0, 255).astype(np.uint8)


def write_dataset(root, classes=3, per_class=(5, 4, 3), seed=0, sizes=None, png_every=3):
    """Class folders of JPEG and PNG images of varying sizes; returns the sorted file list."""
    rng = np.random.default_rng(seed)
    files = []
    for c in range(classes):
        folder = os.path.join(root, f"class_{c}")
        os.makedirs(folder, exist_ok=True)
        for i in range(per_class[c % len(per_class)]):
            w, h = sizes if sizes else (int(rng.integers(40, 90)), int(rng.integers(30, 80)))
            ext = "png" if (i % png_every == png_every - 1) else "jpg"
            path = os.path.join(folder, f"img_{i:03d}.{ext}")
            Image.fromarray(make_image(rng, w, h)).save(path, quality=90)
            files.append(path)
    return sorted(files)


@pytest.fixture()
def dataset(tmp_path):
    """12 images in 3 classes (5, 4, 3), JPEG and PNG, 40-90 x 30-80 pixels."""
    root = tmp_path / "images"
    write_dataset(str(root))
    return str(root)


def run_checked(cmd, **kwargs):
    result = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, cmd))} failed ({result.returncode}):\n"
                             f"{result.stdout}\n{result.stderr}")
    return result


__all__ = ["ROOT", "MODEL", "DIGIT", "write_dataset", "run_checked", "shutil"]
