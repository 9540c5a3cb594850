# SPDX-License-Identifier: Apache-2.0
# Runs every examples/torch script the way docs/torch.md shows (small sizes), checking its output.
import os
import re
import sys

from conftest import ROOT, run_checked

EXAMPLES = os.path.join(ROOT, "examples", "torch")


def example(name, *args):
    return run_checked([sys.executable, os.path.join(EXAMPLES, name), *map(str, args)],
                       env=dict(os.environ), timeout=300).stdout


def test_lower_resnet50():
    # (--save is left out: torch.save of the lowered module is tested in test_torch_models.py)
    out = example("lower.py", "--size", 32, "--batch", 2)
    assert "1 kiln island(s)" in out
    error = float(re.search(r"max relative difference to PyTorch ([0-9.e+-]+)", out).group(1))
    assert error <= 1e-4, out
    assert "top-1 agrees: True" in out


def test_quantized_resnet50():
    out = example("quantized.py", "--size", 32, "--calibration", 2)
    counts = re.search(r"(\d+) QuantizeLinear, (\d+) DequantizeLinear, (\d+) Conv", out)
    assert int(counts.group(1)) > 50 and int(counts.group(3)) == 53, out
    errors = re.search(r"fp32 model: kiln ([0-9.]+), PyTorch's reference ([0-9.]+)", out)
    assert float(errors.group(1)) <= 1.1 * float(errors.group(2)), out


def test_compile_backend():
    out = example("compile_backend.py", "--target", "cpu", "--size", 64, "--repeats", 1)
    assert out.startswith("skipped: the kiln torch.compile backend needs PyTorch 2") or \
        "kiln backend (cpu" in out, out
